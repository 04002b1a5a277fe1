// Gated MLP activations. SwiGLU (Shazeer 2020; Hugging Face `act_fn(gate_proj(x)) * up_proj(x)`):
// out[t, i] = silu(gate[t, i]) · up[t, i], silu(g) = g / (1 + exp_f32(−g)).
// No reduction: elementwise, so trivially independent of batch and threads.
#pragma once

#include <cstdint>

namespace ditto {

// gate_up: [rows, 2·n] f32, row stride ld (gate in columns [0, n), up in [n, 2n)).
// out: [rows, n] f32, row stride ldo.
void silu_mul(const float* gate_up, int64_t rows, int64_t n, int64_t ld, float* out, int64_t ldo);

// GeGLU with the tanh GELU (Gemma's MLP, Hugging Face `gelu_pytorch_tanh(gate_proj(x)) * up_proj(x)`):
// out[t, i] = gelu_tanh_f32(gate[t, i]) · up[t, i] (kernels/math.h: g / (1 + exp_f32(−u)),
// u = g·(kGeluC0 + kGeluC1·g²)). Elementwise, same layout as silu_mul.
void gelu_tanh_mul(const float* gate_up, int64_t rows, int64_t n, int64_t ld, float* out, int64_t ldo);

}  // namespace ditto
