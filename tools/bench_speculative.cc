#include "bench_speculative.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/machine_limits.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/llm_engine.h"
#include "engine/speculative.h"
#include "model/causal_lm.h"

namespace ditto {
namespace {

// Prompt lookup, 6 guesses from suffixes of 2 to 4 tokens: the best of the settings tried on
// SmolLM2-135M (k 4, 6, 8, 12; suffixes 1-3, 2-4, 3-5; docs/SPECULATIVE.md).
constexpr const char* kDefaultConfig =
    R"({"method": "ngram", "num_speculative_tokens": 6, "prompt_lookup_min": 2, "prompt_lookup_max": 4})";

struct Workload {
  const char* name;
  std::vector<std::string> prompts;  // user messages
};

// Copying: the answer repeats much of the prompt (a corrected paragraph, edited code, a quoted
// passage). Not copying: the answer is new text.
std::vector<Workload> workloads() {
  return {
      {"copying",
       {"Correct the spelling mistakes in this paragraph and return the whole corrected paragraph:\n\n"
        "The lighthouse stood on the edge of the cliff for more than a hundred years. Every nigth its lamp turned "
        "slowly, sending a beam of light across the dark water so that ships could find their way home. The "
        "keeper, an old man named Thomas, climbed the stairs each evening to light the lamp and clean the glass. "
        "He knew every storm by its sound and every ship by its silhouete.",
        "Rename the function total_price to compute_total everywhere in this code and return the whole code:\n\n"
        "def total_price(items, tax_rate):\n"
        "    subtotal = 0\n"
        "    for item in items:\n"
        "        subtotal += item.price * item.quantity\n"
        "    tax = subtotal * tax_rate\n"
        "    return subtotal + tax\n\n"
        "def print_receipt(items, tax_rate):\n"
        "    for item in items:\n"
        "        print(item.name, item.price, item.quantity)\n"
        "    print(\"Total:\", total_price(items, tax_rate))\n",
        "Here is a document:\n\n\"The Riverside Bridge opened on 4 May 1931 after three years of construction. It "
        "is 420 metres long and carries two lanes of traffic and a footpath. The bridge was designed by the "
        "engineer Margaret Hale, who also designed the nearby railway station. In 1987 the bridge was repainted "
        "green, the colour it keeps today.\"\n\nQuote the sentences of the document that say when the bridge "
        "opened, who designed it and what colour it is."}},
      {"not copying",
       {"Write a short poem about autumn leaves.", "Explain in simple words how a refrigerator keeps food cold.",
        "Give three tips for someone learning to cook."}},
  };
}

struct Run {
  std::vector<std::vector<int32_t>> tokens;  // per prompt
  int64_t decode_tokens = 0;                 // after each prompt's first token
  double decode_seconds = 0;
  SpeculationStats speculation;
};

// Each prompt alone (batch 1), one after another through `engine` (kept across passes, so its KV
// pages are touched once, as a server's are); decode time runs from the step that gave a prompt's
// first token to its last.
Run run_workload(const LLMEngine& llm, Engine& engine, const Workload& w, const SamplingParams& params) {
  Run run;
  const SpeculationStats before = engine.speculation_stats();
  for (const std::string& text : w.prompts) {
    PromptInput prompt;
    prompt.messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", text}}}).dump();
    EngineRequest r = llm.input_processor().process(prompt, params, MaxTokensRule::kClipToContext);
    r.request_id = "0";
    engine.add(std::move(r));
    std::chrono::steady_clock::time_point first;
    bool started = false;
    RequestOutput out;
    while (engine.has_unfinished()) {
      for (RequestOutput& o : engine.step()) out = std::move(o);
      if (!started && !engine.last_step_tokens().empty()) {
        first = std::chrono::steady_clock::now();
        started = true;
      }
    }
    run.decode_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - first).count();
    const std::vector<int32_t>& ids = out.outputs.at(0).token_ids;
    run.decode_tokens += static_cast<int64_t>(ids.size()) - 1;
    run.tokens.push_back(ids);
  }
  const SpeculationStats& s = engine.speculation_stats();
  run.speculation.num_drafts = s.num_drafts - before.num_drafts;
  run.speculation.num_draft_tokens = s.num_draft_tokens - before.num_draft_tokens;
  run.speculation.num_accepted_tokens = s.num_accepted_tokens - before.num_accepted_tokens;
  return run;
}

// One row of the report: `repeat` rounds of `w` with speculation off (engines[0]) and on
// (engines[1]), alternating so both see the same machine, keeping each mode's best decode rate.
// Throws if speculation changed a token. Raises `bandwidth` to the best pass of `meter` between runs.
nlohmann::ordered_json bench_workload(const LLMEngine& llm, Engine* const (&engines)[2], const Workload& w,
                                      const SamplingParams& params, int repeat, int64_t weight_bytes,
                                      ReadBandwidthMeter& meter, double& bandwidth) {
  double best[2] = {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()};
  Run last[2];
  for (int r = 0; r < repeat; ++r) {
    for (int mode = 0; mode < 2; ++mode) {  // off, on: alternating, so both see the same machine
      Run run = run_workload(llm, *engines[mode], w, params);
      best[mode] = std::min(best[mode], run.decode_seconds / static_cast<double>(run.decode_tokens));
      last[mode] = std::move(run);
      bandwidth = std::max(bandwidth, meter.pass());
    }
    if (last[0].tokens != last[1].tokens)
      throw_error(ErrorCode::kInternal, std::string("speculative decoding changed the output of workload '") + w.name +
                                            "': the invariance contract is broken");
  }
  const double off_tps = 1.0 / best[0];
  const double on_tps = 1.0 / best[1];
  const SpeculationStats& s = last[1].speculation;
  return {{"workload", w.name},
          {"prompts", w.prompts.size()},
          {"decode_tokens", last[0].decode_tokens},
          {"decode_tokens_per_s_off", off_tps},
          {"decode_tokens_per_s_on", on_tps},
          {"speedup", on_tps / off_tps},
          {"spec_decode_num_drafts", s.num_drafts},
          {"spec_decode_num_draft_tokens", s.num_draft_tokens},
          {"spec_decode_num_accepted_tokens", s.num_accepted_tokens},
          {"acceptance_rate", s.acceptance_rate()},
          {"effective_bytes_per_s_on", on_tps * static_cast<double>(weight_bytes)}};
}

void print_json(const SpeculativeBenchOptions& o, const std::string& model_dir, int64_t weight_bytes, double bandwidth,
                const nlohmann::ordered_json& rows) {
  const nlohmann::ordered_json j = {
      {"scenario", "speculative"},
      {"model", model_dir},
      {"isa", std::string(isa_name(active_isa()))},
      {"speculative_config", o.speculative_config.empty() ? kDefaultConfig : o.speculative_config},
      {"temperature", o.temperature},
      {"max_tokens", o.max_tokens},
      {"decode_weight_bytes", weight_bytes},
      {"read_bandwidth_gbps", bandwidth / 1e9},
      {"workloads", rows}};
  std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

void print_table(const SpeculativeBenchOptions& o, const std::string& model_dir, int64_t weight_bytes, double bandwidth,
                 const nlohmann::ordered_json& rows) {
  std::printf("model            %s (%.1f MB of weights per decode step)\n", model_dir.c_str(), weight_bytes / 1e6);
  std::printf("speculation      %s\n", o.speculative_config.empty() ? kDefaultConfig : o.speculative_config.c_str());
  std::printf("read bandwidth   %10.2f GB/s\n", bandwidth / 1e9);
  std::printf("%-12s %8s %10s %10s %8s %16s %16s\n", "workload", "tokens", "off tok/s", "on tok/s", "on/off",
              "accepted", "on bytes/s / bw");
  for (const auto& row : rows) {
    const std::string accepted = std::to_string(row["spec_decode_num_accepted_tokens"].get<int64_t>()) + "/" +
                                 std::to_string(row["spec_decode_num_draft_tokens"].get<int64_t>());
    std::printf("%-12s %8lld %10.2f %10.2f %8.3f %16s %16.3f\n", row["workload"].get<std::string>().c_str(),
                static_cast<long long>(row["decode_tokens"].get<int64_t>()),
                row["decode_tokens_per_s_off"].get<double>(), row["decode_tokens_per_s_on"].get<double>(),
                row["speedup"].get<double>(), accepted.c_str(),
                row["effective_bytes_per_s_on_over_read_bandwidth"].get<double>());
  }
}

}  // namespace

void run_speculative_bench(const SpeculativeBenchOptions& o) {
  if (o.repeat < 1 || o.repeat > 100) throw_invalid_argument("--repeat must be in [1, 100]");
  if (o.max_tokens < 2) throw_invalid_argument("--output-tokens must be at least 2 for the speculative scenario");
  EngineArgs args = o.model.engine;
  args.kv_cache_memory = int64_t{256} << 20;
  const SpeculativeConfig on =
      parse_speculative_config(o.speculative_config.empty() ? kDefaultConfig : o.speculative_config);
  if (!on.enabled()) throw_invalid_argument("--speculative-config: the scenario needs speculation on");
  LLMEngine llm(args);
  if (!llm.has_tokenizer()) throw_invalid_argument(llm.model_dir() + ": the speculative scenario needs a tokenizer");
  EngineArgs with = args;
  with.speculative_config = on;
  const std::unique_ptr<Engine> plain = llm.make_engine();
  llm.set_engine_args(with);  // loads a draft model now, not inside a timed run
  const std::unique_ptr<Engine> speculative = llm.make_engine();
  Engine* const engines[2] = {plain.get(), speculative.get()};
  SamplingParams params;
  params.temperature = o.temperature;
  params.seed = 0;
  params.max_tokens = o.max_tokens;
  ThreadPool pool(args.threads > 0 ? args.threads : default_num_threads());
  ReadBandwidthMeter meter(&pool);
  double bandwidth = meter.measure();
  const int64_t weight_bytes = llm.model().decode_weight_bytes();

  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const Workload& w : workloads())
    rows.push_back(bench_workload(llm, engines, w, params, o.repeat, weight_bytes, meter, bandwidth));
  bandwidth = std::max(bandwidth, meter.measure());
  for (auto& row : rows)
    row["effective_bytes_per_s_on_over_read_bandwidth"] = row["effective_bytes_per_s_on"].get<double>() / bandwidth;
  if (o.json) {
    print_json(o, llm.model_dir(), weight_bytes, bandwidth, rows);
  } else {
    print_table(o, llm.model_dir(), weight_bytes, bandwidth, rows);
  }
}

}  // namespace ditto
