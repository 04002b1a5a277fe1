// `ditto check-invariance`: runs every contract row the engine covers, in one process, on a set
// of prompts, and compares each request's output bit for bit with the same request run alone
// (the rows: src/engine/invariance_check.h). Prints: row, cases, tokens compared, mismatches. Exit
// status 1 on any mismatch.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/error.h"
#include "engine/invariance_check.h"
#include "model_options.h"

namespace ditto {
namespace {

struct CheckOptions {
  ModelOptions model;
  std::string prompts_file;  // optional JSONL of prompts ("prompt" / "prompt_token_ids" lines)
  InvarianceCheckOptions check;
  bool json = false;
  std::string inject_fault;  // "" or "batch-size": a deliberately batch-dependent test double
};

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
  if (!o.prompts_file.empty()) o.check.prompts = read_prompts(o.prompts_file);
  const int64_t total = print_rows(check_invariance(o.model.engine, o.check), o.json);
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
  cmd->callback([o] { run_check(*o); });
}

}  // namespace ditto
