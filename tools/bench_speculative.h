// `ditto bench --scenario speculative`: batch-1 decode with speculative decoding ÷ without, on a
// workload that invites copying (correcting, editing or quoting a given text) and on one that does
// not, measured in the same run, with the outputs of both compared token for token.
#pragma once

#include <cstdint>
#include <string>

#include "model_options.h"

namespace ditto {

struct SpeculativeBenchOptions {
  ModelOptions model;
  std::string speculative_config;  // vLLM's JSON; "" : the default ngram config (bench_speculative.cc)
  int64_t max_tokens = 160;        // per prompt
  float temperature = 0.0f;        // with seed 0 when > 0
  int repeat = 3;                  // timed passes per mode (the fastest reported)
  bool json = false;
};

// Prints, per workload: decode tokens/s off and on, their ratio, the guesses accepted, and the
// effective weight bytes/s (decode tokens/s × decode_weight_bytes) against the read bandwidth
// measured in the same run. Throws Error(kInvalidArgument) for a model without a tokenizer and
// chat template, a bad config, or outputs that differ between the modes (a broken contract).
void run_speculative_bench(const SpeculativeBenchOptions& options);

}  // namespace ditto
