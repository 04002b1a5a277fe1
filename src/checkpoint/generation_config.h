// The parts of generation_config.json the engine uses.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "architecture/config.h"

namespace ditto {

// End-of-sequence token ids: generation_config.json's eos_token_id (an int or a list) when the
// file exists, else config.json's. Throws Error(kInvalidArgument) naming the file and key if
// generation_config.json exists but is malformed.
std::vector<int64_t> eos_token_ids(const std::string& model_dir, const ModelConfig& config);

}  // namespace ditto
