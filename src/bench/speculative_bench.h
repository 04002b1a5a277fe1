// `ditto bench --scenario speculative` measured: batch-1 decode with speculative decoding and
// without, on a workload that invites copying (correcting, editing or quoting a given text) and on
// one that does not, in the same run, with the outputs of both compared token for token.
//
// Method: each workload's prompts run one at a time (batch 1) as chat messages through two engines
// of one LLMEngine, speculation off and on, kept across passes (so their KV pages are touched
// once, as a server's are). `repeat` rounds alternate off and on, so both modes see the same
// machine, and each mode's fastest pass is reported. Decode time runs from the step that gave a
// prompt's first token to its last. The read bandwidth is the best of a measurement before the
// workloads, one pass after each pass of a mode and a measurement after them all.
// Thread-safety: none; one call at a time (it loads its own model and thread pool).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ditto/engine_args.h"
#include "engine/speculative.h"

namespace ditto {

// Prompt lookup, 6 guesses from suffixes of 2 to 4 tokens: the best of the settings tried on
// SmolLM2-135M (k 4, 6, 8, 12; suffixes 1-3, 2-4, 3-5; docs/SPECULATIVE.md).
inline constexpr const char* kDefaultSpeculativeBenchConfig =
    R"({"method": "ngram", "num_speculative_tokens": 6, "prompt_lookup_min": 2, "prompt_lookup_max": 4})";

// What to compare; `ditto bench`'s --speculative-config, --output-tokens, --temperature, --repeat.
struct SpeculativeBenchOptions {
  std::string speculative_config;  // vLLM's JSON; "": kDefaultSpeculativeBenchConfig
  int64_t max_tokens = 160;        // per prompt, at least 2 (one decode step after the first token)
  float temperature = 0.0f;        // sampled with seed 0 when > 0
  int repeat = 3;                  // timed passes per mode, in [1, 100] (the fastest reported)
};

// One workload's numbers.
struct SpeculativeWorkloadResult {
  std::string workload;                // "copying" or "not copying"
  int64_t prompts = 0;                 // run one after another in each pass
  int64_t decode_tokens = 0;           // per pass: the tokens after each prompt's first, summed
  double decode_tokens_per_s_off = 0;  // the fastest pass without speculation
  double decode_tokens_per_s_on = 0;   // the fastest pass with it
  SpeculationStats speculation;        // guesses made and accepted in the last pass with it
  // Weight bytes/s the speculative decode reads in effect: decode_tokens_per_s_on ×
  // decode_weight_bytes (each step of plain decode reads every weight once).
  double effective_bytes_per_s_on = 0;
};

// What measure_speculative_speed measured.
struct SpeculativeBenchResult {
  std::string model_dir;                             // the model as loaded (resolved from args.model)
  std::string speculative_config;                    // the JSON compared with plain decoding (the default for "")
  int64_t decode_weight_bytes = 0;                   // bytes read per decode step at batch 1 (CausalLM)
  double read_bandwidth = 0;                         // bytes/s, measured around the workloads
  std::vector<SpeculativeWorkloadResult> workloads;  // copying, then not copying
};

// Loads the model of `args` (with a 256 MiB KV cache, whatever args says: three prompts at batch
// 1 need far less) and measures both workloads. Throws Error(kInvalidArgument) naming
// `ditto bench`'s flag for options out of range, a speculative_config that does not parse or
// turns speculation off, and a model without a tokenizer (after loading it); Error(kInternal) if
// speculation changed a token of a workload's output (a broken invariance contract); and what
// LLMEngine's constructor throws.
SpeculativeBenchResult measure_speculative_speed(const EngineArgs& args, const SpeculativeBenchOptions& options);

}  // namespace ditto
