// Rotary inverse frequencies θ_i of a model, in float64, with its rope_scaling applied.
#pragma once

#include <vector>

#include "architecture/config.h"

namespace ditto {

// [head_dim / 2] float64: θ_i = rope_theta^(−2i / head_dim) (RoFormer), then for rope_type
// "llama3" the piecewise rescaling of transformers' modeling_rope_utils._compute_llama3_parameters:
// wavelengths longer than original_max_position_embeddings / low_freq_factor are divided by
// `factor`, shorter than .../high_freq_factor kept, and the band between interpolated smoothly.
// With config.rope_freq_divisors (a GGUF file's rope_freqs.weight), θ_i / divisor_i instead, as
// llama.cpp applies them: the llama3 rule with the divisors rounded to float32.
std::vector<double> rope_inv_freq(const ModelConfig& config);

// [head_dim / 2] float64: the sliding-window layers' frequencies, rope_local_base_freq^(−2i / head_dim),
// never scaled (transformers' Gemma 3 rotary_emb_local; llama.cpp's rope_freq_base_train_swa).
// Requires config.rope_local_base_freq > 0.
std::vector<double> rope_local_inv_freq(const ModelConfig& config);

// [head_dim / 2] float32: the divisor llama3 scaling applies to each θ_i, as llama.cpp's
// rope_freqs.weight holds it (convert_hf_to_gguf.py LlamaModel.generate_extra_tensors): 1 for the
// short wavelengths, `factor` for the long, 1 / ((1 − smooth) / factor + smooth) between.
// Requires config.rope_scaling (llama3).
std::vector<float> llama3_rope_freq_divisors(const ModelConfig& config);

}  // namespace ditto
