#include "bench/speculative_bench.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/machine_limits.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/llm_engine.h"
#include "model/causal_lm.h"

namespace ditto {
namespace {

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
    r.request_id = std::string("0");  // not = "0": GCC 12's false -Wrestrict (its bug 105329) here
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

// One workload: `repeat` rounds of `w` with speculation off (engines[0]) and on (engines[1]),
// alternating so both see the same machine, keeping each mode's best decode rate. Throws if
// speculation changed a token. Raises `bandwidth` to the best pass of `meter` between runs.
SpeculativeWorkloadResult bench_workload(const LLMEngine& llm, Engine* const (&engines)[2], const Workload& w,
                                         const SamplingParams& params, int repeat, ReadBandwidthMeter& meter,
                                         double& bandwidth) {
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
  const double on_tps = 1.0 / best[1];
  return {.workload = w.name,
          .prompts = static_cast<int64_t>(w.prompts.size()),
          .decode_tokens = last[0].decode_tokens,
          .decode_tokens_per_s_off = 1.0 / best[0],
          .decode_tokens_per_s_on = on_tps,
          .speculation = last[1].speculation,
          .effective_bytes_per_s_on = on_tps * static_cast<double>(llm.model().decode_weight_bytes())};
}

}  // namespace

SpeculativeBenchResult measure_speculative_speed(const EngineArgs& engine_args, const SpeculativeBenchOptions& o) {
  if (o.repeat < 1 || o.repeat > 100) throw_invalid_argument("--repeat must be in [1, 100]");
  if (o.max_tokens < 2) throw_invalid_argument("--output-tokens must be at least 2 for the speculative scenario");
  SpeculativeBenchResult result;
  result.speculative_config = o.speculative_config.empty() ? kDefaultSpeculativeBenchConfig : o.speculative_config;
  EngineArgs args = engine_args;
  args.kv_cache_memory = int64_t{256} << 20;
  const SpeculativeConfig on = parse_speculative_config(result.speculative_config);
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
  result.read_bandwidth = meter.measure();
  for (const Workload& w : workloads())
    result.workloads.push_back(bench_workload(llm, engines, w, params, o.repeat, meter, result.read_bandwidth));
  result.read_bandwidth = std::max(result.read_bandwidth, meter.measure());
  result.model_dir = llm.model_dir();
  result.decode_weight_bytes = llm.model().decode_weight_bytes();
  return result;
}

}  // namespace ditto
