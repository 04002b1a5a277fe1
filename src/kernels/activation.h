// SwiGLU activation (Shazeer 2020; Hugging Face `act_fn(gate_proj(x)) * up_proj(x)`):
// out[t, i] = silu(gate[t, i]) · up[t, i], silu(g) = g / (1 + exp_f32(−g)).
// No reduction: elementwise, so trivially independent of batch and threads.
#pragma once

#include <cstdint>

namespace ditto {

// gate_up: [rows, 2·n] f32, row stride ld (gate in columns [0, n), up in [n, 2n)).
// out: [rows, n] f32, row stride ldo.
void silu_mul(const float* gate_up, int64_t rows, int64_t n, int64_t ld, float* out, int64_t ldo);

}  // namespace ditto
