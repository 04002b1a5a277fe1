// Rotary inverse frequencies θ_i of a model, in float64, with its rope_scaling applied.
#pragma once

#include <vector>

#include "model/config.h"

namespace ditto {

// [head_dim / 2] float64: θ_i = rope_theta^(−2i / head_dim) (RoFormer), then for rope_type
// "llama3" the piecewise rescaling of transformers' modeling_rope_utils._compute_llama3_parameters:
// wavelengths longer than original_max_position_embeddings / low_freq_factor are divided by
// `factor`, shorter than .../high_freq_factor kept, and the band between interpolated smoothly.
std::vector<double> rope_inv_freq(const ModelConfig& config);

}  // namespace ditto
