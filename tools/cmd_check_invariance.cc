// `ditto check-invariance`: runs every contract row the engine covers, in one process, on a set
// of prompts, and compares each request's output bit for bit with the same request run alone
// (the rows: src/engine/invariance_check.h). Prints: row, cases, tokens compared, mismatches. Exit
// status 1 on any mismatch. On a terminal (and without --quiet) a progress bar and, once the first
// cases are timed, the estimated length of the whole run go to stderr; --html writes a report page.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/progress.h"
#include "engine/invariance_check.h"
#include "engine/invariance_report.h"
#include "model_options.h"

namespace ditto {
namespace {

struct CheckOptions {
  ModelOptions model;
  std::string prompts_file;  // optional JSONL of prompts ("prompt" / "prompt_token_ids" lines)
  InvarianceCheckOptions check;
  bool json = false;
  std::string inject_fault;  // "" or "batch-size": a deliberately batch-dependent test double
  bool quick = false;        // --quick: kQuick's prompts and tokens where not given
  std::string html;          // --html: the report page's path
  bool quiet = false;
};

// --quick: one prompt of each of the seven sampling kinds (so every row has cases), short prompts
// and few tokens — every row still runs.
constexpr int64_t kQuickNumPrompts = 7;
constexpr int64_t kQuickMaxPromptTokens = 64;
constexpr int64_t kQuickMaxTokens = 8;

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

// The report's options line: what decided the run's work.
std::vector<std::pair<std::string, std::string>> report_options(const CheckOptions& o) {
  std::vector<std::pair<std::string, std::string>> v;
  if (o.quick) v.emplace_back("--quick", "");
  if (!o.prompts_file.empty()) {
    v.emplace_back("--prompts", o.prompts_file);
  } else {
    v.emplace_back("--num-prompts", std::to_string(o.check.num_prompts));
    v.emplace_back("--min-prompt-tokens", std::to_string(o.check.min_prompt_tokens));
    v.emplace_back("--max-prompt-tokens", std::to_string(o.check.max_prompt_tokens));
  }
  v.emplace_back("--max-tokens", std::to_string(o.check.max_tokens));
  v.emplace_back("--seed", std::to_string(o.check.seed));
  if (o.model.engine.threads > 0) v.emplace_back("--threads", std::to_string(o.model.engine.threads));
  if (o.model.engine.tensor_parallel_size > 1)
    v.emplace_back("--tensor-parallel-size", std::to_string(o.model.engine.tensor_parallel_size));
  if (!o.check.draft_model.empty()) v.emplace_back("--draft-model", o.check.draft_model);
  if (o.check.pooling_only) v.emplace_back("--pooling-only", "");
  if (!o.inject_fault.empty()) v.emplace_back("--inject-fault", o.inject_fault);
  return v;
}

// --prompts: one {"prompt": text} or {"prompt_token_ids": [...]} per line.
std::vector<PromptInput> read_prompts(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw_invalid_argument("--prompts: cannot open '" + path + "'");
  std::vector<PromptInput> prompts;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    PromptInput p;
    if (j.is_object() && j.contains("prompt") && j["prompt"].is_string()) {
      p.text = j["prompt"].get<std::string>();
    } else if (j.is_object() && j.contains("prompt_token_ids") && j["prompt_token_ids"].is_array()) {
      p.token_ids = j["prompt_token_ids"].get<std::vector<int32_t>>();
    } else {
      throw_invalid_argument("--prompts line " + std::to_string(number) +
                             ": expected {\"prompt\": ...} or {\"prompt_token_ids\": [...]}");
    }
    prompts.push_back(p);
  }
  if (prompts.empty()) throw_invalid_argument("--prompts: no prompts in '" + path + "'");
  return prompts;
}

// The rows as one JSON object or a table; returns the mismatches summed.
int64_t print_rows(const std::vector<InvarianceRow>& rows, bool json) {
  int64_t total = 0;
  for (const InvarianceRow& r : rows) total += r.mismatches;
  if (json) {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const InvarianceRow& r : rows) {
      j.push_back({{"row", r.name},
                   {"cases", r.cases},
                   {"tokens_compared", r.tokens},
                   {"mismatches", r.mismatches},
                   {"note", r.note}});
      if (r.spec_decode_num_draft_tokens > 0) {
        j.back()["spec_decode_num_draft_tokens"] = r.spec_decode_num_draft_tokens;
        j.back()["spec_decode_num_accepted_tokens"] = r.spec_decode_num_accepted_tokens;
      }
    }
    std::printf("%s\n", nlohmann::ordered_json({{"rows", j}, {"mismatches", total}}).dump().c_str());
    return total;
  }
  std::printf("%-46s %6s %10s %11s  %s\n", "row", "cases", "tokens", "mismatches", "note");
  for (const InvarianceRow& r : rows)
    std::printf("%-46s %6lld %10lld %11lld  %s\n", r.name.c_str(), static_cast<long long>(r.cases),
                static_cast<long long>(r.tokens), static_cast<long long>(r.mismatches), r.note.c_str());
  std::printf("%s: %lld mismatches\n", total == 0 ? "PASS" : "FAIL", static_cast<long long>(total));
  return total;
}

void run_check(CheckOptions o) {
  if (serve_as_tensor_parallel_rank(o.model.engine.tensor_parallel_size)) return;  // ranks 1…N-1 end here
  if (!o.inject_fault.empty() && o.inject_fault != "batch-size")
    throw_invalid_argument("--inject-fault: the only fault is 'batch-size', got '" + o.inject_fault + "'");
  o.check.inject_batch_size_fault = !o.inject_fault.empty();
  enable_progress_bars(!o.quiet);  // the model's loading bar
  if (!o.prompts_file.empty()) o.check.prompts = read_prompts(o.prompts_file);
  if (!o.html.empty() && !std::ofstream(o.html, std::ios::app))  // before the run, not after it
    throw_invalid_argument("--html: cannot write '" + o.html + "'");
  const std::string date = utc_now();
  const auto start = std::chrono::steady_clock::now();
  double estimate = -1.0;
  std::vector<InvarianceRow> rows;
  {
    ProgressBar bar("check-invariance", 0, "rows", stderr_progress_sink(o.quiet));
    o.check.on_progress = [&](const InvarianceProgress& p) {
      if (p.calibrated) {
        estimate = p.estimated_seconds;
        bar.note("check-invariance: the full run (" + std::to_string(p.rows_total) + " rows) will take about " +
                 format_duration(p.estimated_seconds) + ", estimated from the first cases timed alone and together");
      }
      std::string detail = p.phase;
      if (p.cases_total > 0)
        detail += " (" + std::to_string(p.cases_done) + "/" + std::to_string(p.cases_total) + " requests)";
      bar.set_total(p.rows_total);
      bar.update(p.rows_done, detail, p.fraction);
    };
    rows = check_invariance(o.model.engine, o.check);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int64_t total = print_rows(rows, o.json);
  if (!o.html.empty()) {
    InvarianceReportInfo info{.model = o.model.engine.model,
                              .cpu = cpu_model_name(),
                              .date = date,
                              .options = report_options(o),
                              .estimated_seconds = estimate,
                              .seconds = seconds};
    std::ofstream out(o.html, std::ios::trunc);
    out << invariance_report_html(rows, info);
    if (!out) throw_invalid_argument("--html: cannot write '" + o.html + "'");
  }
  if (total > 0) throw_error(ErrorCode::kInternal, "check-invariance: " + std::to_string(total) + " mismatches");
}

}  // namespace

void add_check_invariance_command(CLI::App& app) {
  auto o = std::make_shared<CheckOptions>();
  CLI::App* cmd =
      app.add_subcommand("check-invariance",
                         "Run every contract row the engine covers (batch 1 vs N, order, co-running traffic, chunked "
                         "prefill budgets, prefix cache, preemption, speculative decoding, threads, tensor-parallel "
                         "size, decode vs re-scored logprobs; on a pooling model, its embeddings or scores too) and "
                         "compare "
                         "outputs bit for bit; exit 1 on any mismatch");
  add_model_options(cmd, o->model);
  add_engine_flags(cmd, o->model.engine, {"runner", "task", "hf_overrides", "pooler_config", "chat_template"});
  cmd->add_option("--prompts", o->prompts_file,
                  "JSON lines of {\"prompt\"} or {\"prompt_token_ids\"} (default: random token ids)");
  cmd->add_option("--num-prompts", o->check.num_prompts, "Random prompts to generate")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
      ->capture_default_str();
  cmd->add_option("--min-prompt-tokens", o->check.min_prompt_tokens, "Shortest random prompt")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
      ->capture_default_str();
  cmd->add_option("--max-prompt-tokens", o->check.max_prompt_tokens, "Longest random prompt")->capture_default_str();
  cmd->add_option("--max-tokens", o->check.max_tokens, "Tokens generated per choice")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16))
      ->capture_default_str();
  cmd->add_option("--seed", o->check.seed, "Seed of the random prompts")->capture_default_str();
  cmd->add_flag("--json", o->json, "One JSON object instead of the table");
  cmd->add_option("--draft-model", o->check.draft_model,
                  "Draft model of the speculative-decoding row (same vocabulary; default: the model itself)");
  cmd->add_flag("--pooling-only", o->check.pooling_only,
                "On a pooling model (--runner pooling, --task embed|score): only the pooling rows (embeddings or "
                "scores alone vs batched, beside generation, chunked, cached, preempted, threads)");
  cmd->add_option("--inject-fault", o->inject_fault,
                  "Negative control: 'batch-size' nudges logits by the step's batch size, which the "
                  "harness must report as mismatches");
  cmd->add_flag("--quick", o->quick,
                "Every row on a few short prompts: --num-prompts " + std::to_string(kQuickNumPrompts) +
                    " --max-prompt-tokens " + std::to_string(kQuickMaxPromptTokens) + " --max-tokens " +
                    std::to_string(kQuickMaxTokens) + " unless given");
  cmd->add_option("--html", o->html,
                  "Also write a self-contained HTML report (rows, counts, verdicts, a plot of where failing rows "
                  "diverge) to this file");
  cmd->add_flag("--quiet", o->quiet, "No progress bar or estimate on stderr (they appear only on a terminal)");
  cmd->callback([o, cmd] {
    if (o->quick) {
      if (cmd->get_option("--num-prompts")->count() == 0) o->check.num_prompts = kQuickNumPrompts;
      if (cmd->get_option("--max-prompt-tokens")->count() == 0) o->check.max_prompt_tokens = kQuickMaxPromptTokens;
      if (cmd->get_option("--max-tokens")->count() == 0) o->check.max_tokens = kQuickMaxTokens;
    }
    run_check(*o);
  });
}

}  // namespace ditto
