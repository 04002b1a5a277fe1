// Rotary position embedding, rotate-half convention (Su et al. 2021, "RoFormer"; Hugging Face
// `rotate_half` / `apply_rotary_pos_emb`): for i < d/2, with c = cos(p·θ_i), s = sin(p·θ_i):
//   y[i] = x[i]·c − x[i + d/2]·s,   y[i + d/2] = x[i + d/2]·c + x[i]·s.
// No reduction: each output is two float32 products and one add (no fma). The angle p·θ_i and its
// cos/sin are computed in double and rounded to float32 once, so they depend on p only.
#pragma once

#include <cstdint>
#include <vector>

namespace ditto {

// cos_sin: [num_tokens, 2, d/2] f32 — per token, cos(positions[t]·inv_freq[i]) then sin(...).
// inv_freq: [d/2] float64 rotary frequencies (model-specific, e.g. llama3 scaling applied).
void rope_cos_sin(const int32_t* positions, int64_t num_tokens, const std::vector<double>& inv_freq, float* cos_sin);

// Rotates `num_heads` heads of size head_dim stored contiguously at x (in place) with the
// cos/sin row of one token (cos_sin + t·head_dim).
void rope_apply(float* x, int64_t num_heads, int64_t head_dim, const float* cos_sin_row);

}  // namespace ditto
