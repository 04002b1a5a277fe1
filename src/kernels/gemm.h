// GEMM against a packed weight: y[m, n] = Σ_k x[m, k]·W[n, k].
//
// Reduction order, f16 and f32 weights: each output is one float32 fma chain over k in increasing
// order starting from +0.0 (acc = fma(x[m,k], W[n,k], acc)), with W's element converted exactly
// to float32.
// bf16 weights: x is rounded to bf16 (round to nearest even) and each output is one chain over the
// pairs (k, k + 1), k = 0, 2, 4, …, of the VDPBF16PS step (kernels/bf16_dot.h): from +0.0,
// acc = F(fma(x[k+1], W[k+1], acc)) then acc = F(fma(x[k], W[k], acc)), F flushing subnormal
// inputs and results to zero; an odd k's missing last element is 0·0. A NaN output is stored as
// 0x7FC00000. Every path (VDPBF16PS, its AVX-512 and AVX2 FMA emulation, portable) computes it.
// Work is split over m and n only, so every output is the same bits whatever the batch, thread or
// ISA.
// A quantized weight (w.quant != kNone) runs kernels/quant_gemm.h instead: blocks of x quantized to
// int8 per row, exact int32 block sums, one float32 fma chain over blocks in ascending order.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"
#include "kernels/packed_matrix.h"

namespace ditto {

// x: [m, w.k] f32, row stride ldx (elements). y: [m, w.n] f32, row stride ldy. x and y must not
// overlap. pool may be null (single-threaded).
void gemm(const float* x, int64_t m, int64_t ldx, const PackedMatrix& w, float* y, int64_t ldy, ThreadPool* pool);

}  // namespace ditto
