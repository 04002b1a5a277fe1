// The default sampling parameters a model ships (generation_config.json), applied at the front
// door so that a field a request leaves out means the same from every front end.
#pragma once

#include <string>

#include "ditto/sampling_params.h"

namespace ditto {

// The defaults of `model_path` (a directory or GGUF file) under vLLM's --generation-config
// `choice`: "auto" (the directory's generation_config.json if it has one; a GGUF file carries
// none), "vllm" (none: vLLM's own defaults), or a folder holding a generation_config.json. Throws
// Error(kInvalidArgument) naming the file and key for a value of the wrong type or out of range
// (SamplingParams::validate's rules), or naming generation_config for a folder without the file.
GenerationDefaults model_generation_defaults(const std::string& model_path, const std::string& choice);

}  // namespace ditto
