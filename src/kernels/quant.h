// Quantized weight formats: llama.cpp's GGML block formats Q8_0, Q4_0, Q4_1, Q4_K and Q6_K, byte
// for byte as GGUF files store them (layouts: ggml/src/ggml-common.h; value formulas: the
// dequantize_row_* functions of ggml/src/ggml-quants.c). A row of k weights is k / block_size
// consecutive blocks. All multi-byte fields are little-endian; f16 is IEEE binary16.
//
//   Q8_0  32 values, 34 bytes: f16 d; int8 qs[32].                       w_i = d·qs[i]
//   Q4_0  32 values, 18 bytes: f16 d; uint8 qs[16].                      w_i = d·(q_i − 8)
//         q_i = qs[i] & 15 for i < 16, qs[i − 16] >> 4 for i ≥ 16.
//   Q4_1  32 values, 20 bytes: f16 d; f16 m; uint8 qs[16].               w_i = d·q_i + m   (q_i as Q4_0)
//   Q4_K  256 values, 144 bytes: f16 d; f16 dmin; uint8 scales[12]; uint8 qs[128].
//         8 sub-blocks j of 32 values with 6-bit scale sc_j and min m_j (scale_min_k4 below);
//         bytes qs[32c .. 32c+31] hold sub-block 2c in their low nibbles and 2c+1 in their high
//         nibbles.                                                        w_i = d·sc_j·q_i − dmin·m_j
//   Q6_K  256 values, 210 bytes: uint8 ql[128]; uint8 qh[64]; int8 scales[16]; f16 d.
//         Two halves h of 128 values; in half h, for l < 32: value 128h + 32t + l takes its low 4
//         bits from ql[64h + l + 32·(t & 1)] (low nibble for t < 2, high nibble for t ≥ 2) and its
//         high 2 bits from bits 2t, 2t+1 of qh[32h + l].                 w_i = d·scales[i / 16]·(q_i − 32)
#pragma once

#include <cstdint>
#include <string_view>

namespace ditto {

enum class QuantType { kNone, kQ8_0, kQ4_0, kQ4_1, kQ4_K, kQ6_K };

struct QuantFormat {
  int64_t block_size;     // values per block
  int64_t block_bytes;    // bytes per block
  std::string_view name;  // as GGUF/ggml name the type: "Q8_0", ...; "none" for kNone
};

// The format of `type`. kNone has block_size 1 and block_bytes 0.
const QuantFormat& quant_format(QuantType type);

// Bytes of one row of k values. Throws Error(kInvalidArgument) if type is kNone, k < 0, or k is not
// a multiple of the block size (the message names the type, k and the block size).
int64_t quant_row_bytes(QuantType type, int64_t k);

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K block from its 12 packed bytes: for j < 4
// sc = s[j] & 63, m = s[j+4] & 63; for j ≥ 4 the low 4 bits come from s[j+4] (sc: low nibble, m: high
// nibble) and the top 2 bits from the top bits of s[j−4] (sc) and s[j] (m). (ggml's get_scale_min_k4.)
inline void q4_k_scale_min(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// One block's fields as integers, as the formulas above use them (unpacked from GGML's bit layout).
struct QuantBlockFields {
  uint16_t d = 0;        // f16 bits of d
  uint16_t m = 0;        // f16 bits of m (Q4_1) or dmin (Q4_K); 0 otherwise
  int16_t q[256] = {};   // [block_size] the stored integers: Q8_0 −128..127, Q4_* 0..15, Q6_K 0..63
  int16_t sc[16] = {};   // Q4_K [8] sub-block scales 0..63; Q6_K [16] scales −128..127
  int16_t mins[8] = {};  // Q4_K [8] sub-block mins 0..63
};

// Unpacks one block (block_bytes at `block`, possibly unaligned). type must not be kNone.
void unpack_block(QuantType type, const uint8_t* block, QuantBlockFields* out);

// Dequantizes one row: blocks → out[k] float64, exactly (every value of every format is a float64
// number: at most 11 + 8 + 6 significant bits, exponents within ±40). blocks may be unaligned.
// Throws as quant_row_bytes. The reference for tests and for the float64 model reference.
void dequantize_row_f64(QuantType type, const void* blocks, int64_t k, double* out);

// Dequantizes one row to float32, the semantics of PackedMatrix::at / row_to_f32 and so of the
// embedding lookup. Every format but Q4_1 is exact (the product of an 11-bit f16 significand and an
// integer of at most 13 bits fits float32's 24):
//   Q8_0  d·(float)q;  Q4_0  d·(float)(q − 8);  Q6_K  d·(float)(sc·(q − 32))   (exact)
//   Q4_K  fma(d, (float)(sc·q), −(dmin·(float)m))   (d·sc·q and dmin·m exact: one rounding of the
//         exact value, i.e. correctly rounded)
//   Q4_1  fma(d, (float)q, m)   (one rounding of the exact value: correctly rounded)
// with d, dmin, m converted exactly from f16. Throws as quant_row_bytes.
void dequantize_row_f32(QuantType type, const void* blocks, int64_t k, float* out);

// Quantizes one row x[k] float32 into GGML blocks (k / block_size blocks of block_bytes), plain
// round-to-nearest with scales chosen from each block's extremes (no error-minimising search):
//   Q8_0  d = f16(amax / 127), q = rne(x / d)
//   Q4_0  d = f16(v / −8) where v is the value of largest magnitude, q = clamp(rne(x / d) + 8, 0, 15)
//   Q4_1  d = f16((max − min) / 15), m = f16(min), q = clamp(rne((x − m) / d), 0, 15)
//   Q4_K  per sub-block: min_j = min(0, min x), scale_j = (max_j − min_j) / 15; d = f16(max scale_j / 63),
//         dmin = f16(max(−min_j) / 63), sc_j = rne(scale_j / d), m_j = rne(−min_j / dmin) (both ≤ 63);
//         q = clamp(rne((x + dmin·m_j) / (d·sc_j)), 0, 15)
//   Q6_K  per sub-block of 16: scale_j = amax_j / 31; d = f16(max scale_j / 127), sc_j = rne(scale_j / d);
//         q = clamp(rne(x / (d·sc_j)), −32, 31) + 32
// The divisions use the stored (f16-rounded) scales and run in float64, so a Q8_0 value is off by at
// most d/2. Throws Error(kInvalidArgument) as quant_row_bytes, or if a value is not finite or so
// large that a block scale overflows f16 (naming the element).
void quantize_row(QuantType type, const float* x, int64_t k, void* blocks);

}  // namespace ditto
