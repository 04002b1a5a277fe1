// The default sampling parameters a model ships (generation_config.json), applied at the front
// door so that a field a request leaves out means the same from every front end.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ditto/sampling_params.h"

namespace ditto {

// generation_config.json's sampling defaults, the keys vLLM's generation_config="auto" reads:
// temperature, top_p, top_k, min_p, repetition_penalty and max_new_tokens. Unset: the key is absent.
struct GenerationDefaults {
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int64_t> top_k;
  std::optional<float> min_p;
  std::optional<float> repetition_penalty;
  std::optional<int64_t> max_new_tokens;  // the default max_tokens; also caps a chat's default
  std::string source;                     // the file they came from; "" for none

  // `p` with every key present set (max_new_tokens as max_tokens).
  void apply(SamplingParams& p) const;
  // "temperature=0.6, top_p=0.95, top_k=20" (the keys present, SamplingParams' names); "" for none.
  std::string describe() const;
};

// The defaults of `model_path` (a directory or GGUF file) under vLLM's --generation-config
// `choice`: "auto" (the directory's generation_config.json if it has one; a GGUF file carries
// none), "vllm" (none: vLLM's own defaults), or a folder holding a generation_config.json. Throws
// Error(kInvalidArgument) naming the file and key for a value of the wrong type or out of range
// (SamplingParams::validate's rules), or naming generation_config for a folder without the file.
GenerationDefaults model_generation_defaults(const std::string& model_path, const std::string& choice);

}  // namespace ditto
