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
inline constexpr int kQ50Nib = 32;        // Q5_0: nibbles[4][16][4] as Q4_0
inline constexpr int kQ50H = 288;         // Q5_0: fifth bits hbits[16][4] (fifth_bit_at)
inline constexpr int kQ51M = 32;          // Q5_1: f16 m[16]
inline constexpr int kQ51Nib = 64;        // Q5_1: nibbles[4][16][4] as Q4_0
inline constexpr int kQ51H = 320;         // Q5_1: fifth bits hbits[16][4]
inline constexpr int kQ5KH = 2304;        // Q5_K: Q4_K's layout, then fifth bits hbits[8][16][4]
inline constexpr int kIQ4XSScales = 32;   // IQ4_XS: i8 scales[8][16] (ls − 32)
inline constexpr int kIQ4XSNib = 160;     // IQ4_XS: nibbles[32][16][4] as Q4_K (table indices)
inline constexpr int kIQ4XSBytes = 2208;
inline constexpr int kQ3KScales = 32;   // Q3_K: i8 scales[16][16] (sc − 32)
inline constexpr int kQ3KCrumbs = 288;  // Q3_K: crumbs[16][16][4], the low 2 bits (crumb_byte)
inline constexpr int kQ3KH = 1312;      // Q3_K: hbits[8][16][4], bit 2 (third_bit_byte)
inline constexpr int kQ3KBytes = 1824;
inline constexpr int kQ2KDmin = 32;     // Q2_K: f16 dmin[16]
inline constexpr int kQ2KScales = 64;   // Q2_K: u8 scales[16][16]
inline constexpr int kQ2KMins = 320;    // Q2_K: u8 mins[16][16]
inline constexpr int kQ2KCrumbs = 576;  // Q2_K: crumbs[16][16][4]
inline constexpr int kQ2KBytes = 1600;

// The fifth bit of value i (Q5_0, Q5_1: i < 32; Q5_K: i < 256) of lane L: in the hbits vector
// i / 32, byte 4L + i % 4, bit 2·((i / 8) % 4) + (i % 8) / 4 — so that octet o's low-nibble values
// (8o + j) have theirs at bit 2·(o % 4) and its high-nibble values (8o + 4 + j) at the next bit, of
// the byte their nibble is in.
inline int fifth_bit_byte(int i, int lane) { return 64 * (i / 32) + 4 * lane + i % 4; }
inline int fifth_bit_shift(int i) { return 2 * ((i / 8) % 4) + (i % 8) / 4; }

// The 2-bit field of value i (Q3_K, Q2_K; i < 256) of lane L: in the crumbs vector i / 16 (its
// sub-block), byte 4L + i % 4, bits 2·((i % 16) / 4) and the next; Q3_K's bit 2 in the hbits vector
// i / 32, byte 4L + i % 4, bit (i % 32) / 4. So a vector's byte j holds values 4c + j (c = 0..3) of
// one sub-block (two sub-blocks for the hbits), one shift and mask apart.
inline int crumb_byte(int i, int lane) { return 64 * (i / 16) + 4 * lane + i % 4; }
inline int crumb_shift(int i) { return 2 * ((i % 16) / 4); }
inline int third_bit_byte(int i, int lane) { return 64 * (i / 32) + 4 * lane + i % 4; }
inline int third_bit_shift(int i) { return (i % 32) / 4; }

// kvalues_iq4nl + 128 (1..241): IQ4_NL's and IQ4_XS's table as the unsigned bytes the kernels
// multiply (the offset is subtracted as −128·Σq).
inline constexpr uint8_t kIq4nlBiased[16] = {1, 24, 45, 63, 79, 93, 106, 118, 129, 141, 153, 166, 181, 197, 217, 241};
}  // namespace quant_layout

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
