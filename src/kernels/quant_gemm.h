// GEMM against a quantized packed weight (GGML block formats, kernels/quant.h):
// y[m, n] = Σ_blocks (weight block of row n) · (activation block of row m), with exact integer block
// dot products combined by float32 fmas — the canonical numerics of docs/NUMERICS.md, "Quantized
// weights". gemm() (kernels/gemm.h) calls quant_gemm when the weight's quant is not kNone.
//
// Reduction order: each row of x alone is quantized to int8 in blocks (32 values for the 32-value
// formats, 256 for the K-quants and IQ4_XS; scale d = amax/127); each output is one float32 fma chain over the weight
// blocks in ascending order from +0.0, each step consuming one exact int32 block sum; work is split
// over n only, so every output is the same bits whatever the batch, row order, thread count or ISA.
//
// Packed layout (PackedMatrix::data, quant != kNone): panels of 16 output rows (lanes); a panel is
// k / block_size "panel blocks" in ascending k, each holding the 16 rows' GGML blocks regrouped so
// that a 64-byte vector holds 4 consecutive values of each of the 16 rows (lane L = bytes 4L..4L+3):
//   Q8_0  544 B: f16 d[16]; u8 w[8][16][4] = q + 128 (values 4g..4g+3 in group g)
//   Q4_0  288 B: f16 d[16]; nibbles[4][16][4]: byte (o, L, j) = q(8o + j) | q(8o + 4 + j) << 4
//   Q4_1  320 B: f16 d[16]; f16 m[16]; nibbles[4][16][4] as Q4_0
//   Q4_K 2304 B: f16 d[16]; f16 dmin[16]; u8 scales[12][16] (GGML's 12 bytes, transposed);
//                nibbles[32][16][4] as Q4_0 (octet o covers values 8o..8o+7, sub-block o / 4)
//   Q6_K 3360 B: f16 d[16]; i8 scales[16][16]; per sub-block s of 16 values: nibbles[2][16][4] of
//                the low 4 bits (as Q4_0, values 16s + 8o ...), then hi[16][4] whose bits 2g, 2g+1
//                are the top 2 bits of value 16s + 4g + j
//   Q5_0   352 B: f16 d[16]; nibbles[4][16][4] as Q4_0; hbits[16][4]: the fifth bits, value
//                8o + j's at bit 2o and 8o + 4 + j's at bit 2o + 1 of byte j (the byte of the nibble)
//   Q5_1   384 B: f16 d[16]; f16 m[16]; nibbles and hbits as Q5_0
//   IQ4_NL 288 B: as Q4_0, the nibbles being table indices
//   Q5_K  2816 B: Q4_K's layout, then hbits[8][16][4]: sub-block j's fifth bits as Q5_0's
// — the same bytes as the GGML blocks (weight_bytes() == data.size()). Three formats hold their
// scales as whole bytes, a little more:
//   IQ4_XS 2208 B (GGML 2176): f16 d[16]; i8 scales[8][16] (ls − 32); nibbles[32][16][4] as Q4_K
//   Q3_K   1824 B (GGML 1760): f16 d[16]; i8 scales[16][16] (sc − 32); crumbs[16][16][4]: sub-block
//                s's 2-bit fields, value 16s + 4c + j at bits 2c, 2c + 1 of byte j; hbits[8][16][4]:
//                bit 2 of value 32u + 4b + j at bit b of byte j
//   Q2_K   1600 B (GGML 1344): f16 d[16]; f16 dmin[16]; u8 scales[16][16]; u8 mins[16][16];
//                crumbs[16][16][4] as Q3_K
// Rows past n are zero.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"
#include "kernels/packed_matrix.h"
#include "kernels/quant.h"

namespace ditto {

// Whether the GEMM (and so pack_matrix) takes weights of `type`: every format of kernels/quant.h.
bool quant_gemm_supported(QuantType type);

// Bytes of one panel block (16 rows × one GGML block): 16 · block_bytes for the formats kept as
// stored, the wider layout's size (above) for the others.
int64_t quant_panel_block_bytes(QuantType type);

// Repacks one panel block: lane L's GGML block from src[L] (nullptr: a row past n, left as zero
// bytes in dst). dst must be zero-filled beforehand.
void pack_quant_panel_block(QuantType type, const uint8_t* const src[kPanelWidth], uint8_t* dst);

// The GGML block of lane `lane` of a panel block, byte for byte as it was packed (block_bytes).
void unpack_quant_panel_block(QuantType type, const uint8_t* panel_block, int lane, uint8_t* block);

// x: [m, w.k] f32, row stride ldx. y: [m, w.n] f32, row stride ldy; must not overlap x. A row of x
// holding a non-finite value gives the canonical quiet NaN (0x7FC00000) in all its outputs, and so
// does any output whose chain yields NaN (e.g. an inf weight scale). pool may be null. Uses a
// per-thread scratch of about m·(k + 16·k/32) bytes for the quantized activations.
void quant_gemm(const float* x, int64_t m, int64_t ldx, const PackedMatrix& w, float* y, int64_t ldy, ThreadPool* pool);

}  // namespace ditto
