// Internals shared by the quantized GEMM's portable path (quant_gemm.cc) and its x86 paths
// (quant_gemm_x86.cc): byte offsets of the panel-block layout (quant_gemm.h), the per-row
// quantized-activation scratch, and the x86 entry point. Not part of the kernel API.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"
#include "kernels/packed_matrix.h"
#include "kernels/quant.h"

namespace ditto {

// Offsets (bytes) inside one panel block; every f16 array is [16] lanes at offset 0 (d) unless named.
namespace quant_layout {
inline constexpr int kQ8W = 32;           // Q8_0: u8 w[8][16][4] (q + 128)
inline constexpr int kQ40Nib = 32;        // Q4_0: nibbles[4][16][4]
inline constexpr int kQ41M = 32;          // Q4_1: f16 m[16]
inline constexpr int kQ41Nib = 64;        // Q4_1: nibbles[4][16][4]
inline constexpr int kQ4KDmin = 32;       // Q4_K: f16 dmin[16]
inline constexpr int kQ4KScales = 64;     // Q4_K: u8 scales[12][16]
inline constexpr int kQ4KNib = 256;       // Q4_K: nibbles[32][16][4]
inline constexpr int kQ6KScales = 32;     // Q6_K: i8 scales[16][16]
inline constexpr int kQ6KSub = 288;       // Q6_K: first of 16 sub-blocks
inline constexpr int kQ6KSubBytes = 192;  // Q6_K: nibbles[2][16][4], then hi[16][4]
inline constexpr int kQ6KHi = 128;        // Q6_K: hi plane inside a sub-block
inline constexpr int kQ51M = 32;          // Q5_1: f16 m[16]
inline constexpr int kQ51W = 64;          // Q5_1: u8 w[8][16][4] (q, 0..31)
inline constexpr int kK8Dmin = 32;        // K8 (Q5_K, Q2_K, IQ4_XS): f16 dmin[16] (zero for IQ4_XS)
inline constexpr int kK8Scales = 64;      // K8: i8 scales[16][16], one per 16 values
inline constexpr int kK8Mins = 320;       // K8: u8 mins[16][16], one per 16 values
inline constexpr int kK8W = 576;          // K8: u8 w[64][16][4] (v + 128, v the signed integer value)
inline constexpr int kK8Bytes = 4672;
}  // namespace quant_layout

// The panel layout (and so the kernel) a type is multiplied with: its own, or — for a type whose
// values another layout holds exactly — that one's: Q5_0 and IQ4_NL as Q8_0 (v = q − 16, or
// kvalues_iq4nl[q], are int8 values under one f16 scale), Q3_K as Q6_K (sc − 32 is an int8 scale,
// q − 4 a 6-bit value less 32), Q2_K as Q5_K (both "K8": int8 values, 16 scales and mins).
QuantType quant_kernel_type(QuantType type);

// One quantized activation row in the scratch: int8 q[k]; f32 d[nb]; f32 s[nb] (d·Σq of the block;
// 32-blocks only); int32 sums[nb] (Σq of each 32-block) or [nb][16] (Σq of each 16 values of a
// 256-block). Rows are row_bytes apart (a multiple of 64).
struct ActLayout {
  bool k_blocks = false;  // 256-value blocks (the K-quants' and IQ4_XS's weights) rather than 32
  int64_t block = 32;
  int64_t nb = 0;  // blocks per row
  int64_t k = 0;
  int64_t d_offset = 0, s_offset = 0, sum_offset = 0, row_bytes = 0;
};

ActLayout act_layout(QuantType weight, int64_t k);

// Quantizes x[k] into `row` (ActLayout) by the canonical rule; false (and a zeroed row) if x holds
// a non-finite value.
bool quantize_activation_row(const ActLayout& a, const float* x, uint8_t* row);

#if defined(__x86_64__)
// quantize_activation_row with AVX-512 (identical bytes); only when active_isa() is kAvx512.
bool quantize_activation_row_avx512(const ActLayout& a, const float* x, uint8_t* row);

// Runs the active ISA's kernel (avx2, avx512 with or without VNNI) over all panels; false if the
// active ISA is the portable one. Outputs NaN as the canonical NaN, like the portable path.
bool quant_gemm_simd(const ActLayout& a, const uint8_t* act, int64_t m, const PackedMatrix& w, float* y, int64_t ldy,
                     ThreadPool* pool);
#endif

}  // namespace ditto
