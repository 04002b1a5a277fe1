// New weights for a running engine, vLLM's weight-transfer API (docs/RL.md): a trainer calls
// start_weight_update(), then update_weights() any number of times with chunks of tensors by
// Hugging Face name, then finish_weight_update(version). Nothing changes before the finish, which
// packs every tensor sent into the engine's layout exactly as loading a checkpoint holding them
// would: generation then equals, bit for bit, an engine started from such a checkpoint.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ditto {

// One tensor of an update, as a trainer names it (vLLM's update_info: names, dtype_names, shapes).
struct WeightTensor {
  std::string name;            // Hugging Face's: "model.layers.0.self_attn.q_proj.weight"
  std::string dtype;           // "bfloat16", "float16" or "float32" (also "torch.bfloat16", "BF16", ...)
  std::vector<int64_t> shape;  // Hugging Face's: [out_features, in_features] or [n]
  const void* data = nullptr;  // [shape] dtype, row-major, little-endian; borrowed until the update finishes
  size_t nbytes = 0;           // product(shape) · the dtype's size
};

}  // namespace ditto
