// RMSNorm (Zhang & Sennrich 2019; Hugging Face Qwen3RMSNorm / LlamaRMSNorm):
// y[i] = (x[i] · r) · weight[i], r = 1 / sqrt(Σ x² / n + eps).
//
// Reduction order: Σ x² is the canonical 16-lane reduction (kernels/reduce.h: lane chains of
// fma(x, x, acc) in ascending i, then the fixed pairwise tree); sqrt and the divisions are IEEE.
#pragma once

#include <cstdint>

namespace ditto {

// x, y: [n] f32 (may alias); weight: [n] f32.
void rms_norm_row(const float* x, int64_t n, const float* weight, float eps, float* y);

// rows × [n], row strides ldx / ldy (elements); y may alias x when ldx == ldy.
void rms_norm(const float* x, int64_t rows, int64_t n, int64_t ldx, const float* weight, float eps, float* y,
              int64_t ldy);

}  // namespace ditto
