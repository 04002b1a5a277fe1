// Quantized weight formats: llama.cpp's GGML block formats, byte for byte as GGUF files store them
// (layouts: ggml/src/ggml-common.h; value formulas: the dequantize_row_* functions of
// ggml/src/ggml-quants.c). A row of k weights is k / block_size consecutive blocks. All multi-byte
// fields are little-endian; f16 is IEEE binary16. The GEMM (kernels/quant_gemm.h) multiplies all.
//
//   Q8_0  32 values, 34 bytes: f16 d; int8 qs[32].                       w_i = d·qs[i]
//   Q4_0  32 values, 18 bytes: f16 d; uint8 qs[16].                      w_i = d·(q_i − 8)
//         q_i = qs[i] & 15 for i < 16, qs[i − 16] >> 4 for i ≥ 16.
//   Q4_1  32 values, 20 bytes: f16 d; f16 m; uint8 qs[16].               w_i = d·q_i + m   (q_i as Q4_0)
//   Q5_0  32 values, 22 bytes: f16 d; uint8 qh[4]; uint8 qs[16].         w_i = d·(q_i − 16)
//         q_i = (nibble i as Q4_0) | (bit i of qh, read as a little-endian u32) << 4, 0..31.
//   Q5_1  32 values, 24 bytes: f16 d; f16 m; uint8 qh[4]; uint8 qs[16].  w_i = d·q_i + m   (q_i as Q5_0)
//   IQ4_NL 32 values, 18 bytes: f16 d; uint8 qs[16].                     w_i = d·kvalues_iq4nl[q_i]
//         (q_i as Q4_0: a 4-bit index into the non-uniform table kIq4nlValues below)
//   Q4_K  256 values, 144 bytes: f16 d; f16 dmin; uint8 scales[12]; uint8 qs[128].
//         8 sub-blocks j of 32 values with 6-bit scale sc_j and min m_j (scale_min_k4 below);
//         bytes qs[32c .. 32c+31] hold sub-block 2c in their low nibbles and 2c+1 in their high
//         nibbles.                                                        w_i = d·sc_j·q_i − dmin·m_j
//   Q5_K  256 values, 176 bytes: f16 d; f16 dmin; uint8 scales[12]; uint8 qh[32]; uint8 qs[128].
//         Q4_K's scales, mins and nibbles, plus a fifth bit: value 32j + l takes bit j of qh[l] as
//         its bit 4 (q_i 0..31).                                          w_i = d·sc_j·q_i − dmin·m_j
//   Q6_K  256 values, 210 bytes: uint8 ql[128]; uint8 qh[64]; int8 scales[16]; f16 d.
//         Two halves h of 128 values; in half h, for l < 32: value 128h + 32t + l takes its low 4
//         bits from ql[64h + l + 32·(t & 1)] (low nibble for t < 2, high nibble for t ≥ 2) and its
//         high 2 bits from bits 2t, 2t+1 of qh[32h + l].                 w_i = d·scales[i / 16]·(q_i − 32)
//   Q3_K  256 values, 110 bytes: uint8 hmask[32]; uint8 qs[64]; uint8 scales[12]; f16 d.
//         Value i = 128h + 32t + l (l < 32) takes its low 2 bits from bits 2t, 2t+1 of qs[32h + l]
//         and its bit 2 from bit i / 32 of hmask[l] (q_i 0..7); 16 sub-blocks of 16 values with a
//         6-bit scale sc_j (q3_k_scale below).                            w_i = d·(sc_{i/16} − 32)·(q_i − 4)
//   Q2_K  256 values, 84 bytes: uint8 scales[16]; uint8 qs[64]; f16 d; f16 dmin.
//         q_i (0..3) at Q3_K's low-2-bit position; 16 sub-blocks j of 16 values, scales[j] holding
//         the scale sc_j in its low nibble and the min m_j in its high one.
//                                                                         w_i = d·sc_{i/16}·q_i − dmin·m_{i/16}
//   IQ4_XS 256 values, 136 bytes: f16 d; uint16 scales_h; uint8 scales_l[4]; uint8 qs[128].
//         8 sub-blocks j of 32 values: 6-bit scale ls_j = ((scales_l[j / 2] >> 4·(j % 2)) & 15) |
//         ((scales_h >> 2j) & 3) << 4; bytes qs[16j .. 16j+15] hold value 32j + l in their low
//         nibbles (l < 16) and 32j + 16 + l in their high ones.          w_i = d·(ls_{i/32} − 32)·kvalues_iq4nl[q_i]
#pragma once

#include <cstdint>
#include <string_view>

namespace ditto {

// Enumerator values are stable (tables and tests index by them): new types are appended.
enum class QuantType { kNone, kQ8_0, kQ4_0, kQ4_1, kQ4_K, kQ6_K, kQ5_0, kQ5_1, kQ5_K, kQ3_K, kQ2_K, kIQ4_NL, kIQ4_XS };

// ggml's kvalues_iq4nl (ggml-common.h): the 16 levels an IQ4_NL / IQ4_XS index selects, ascending.
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

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

// The 6-bit scale (0..63, before the − 32) of sub-block j (0..15) of a Q3_K block from its 12 packed
// bytes: the low 4 bits from s[j] (j < 8, low nibble) or s[j − 8] (j ≥ 8, high nibble), the top 2
// bits from bits 2·(j / 4), +1 of s[8 + j % 4]. (ggml's dequantize_row_q3_K unpacks the same way.)
inline int q3_k_scale(const uint8_t* s, int j) {
  const int low = j < 8 ? s[j] & 0x0f : s[j - 8] >> 4;
  return low | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4);
}

// One block's fields as integers, as the formulas above use them (unpacked from GGML's bit layout).
// The stored integers, before any offset (the formulas above subtract 8, 16, 32, 4 themselves).
struct QuantBlockFields {
  uint16_t d = 0;         // f16 bits of d
  uint16_t m = 0;         // f16 bits of m (Q4_1, Q5_1) or dmin (Q4_K, Q5_K, Q2_K); 0 otherwise
  int16_t q[256] = {};    // [block_size] Q8_0 −128..127; Q4_*, IQ4_* 0..15 (IQ4: a table index);
                          // Q5_* 0..31; Q6_K 0..63; Q3_K 0..7; Q2_K 0..3
  int16_t sc[16] = {};    // Q4_K, Q5_K, IQ4_XS [8] sub-block scales 0..63; Q6_K [16] −128..127;
                          // Q3_K [16] 0..63; Q2_K [16] 0..15
  int16_t mins[16] = {};  // Q4_K, Q5_K [8] sub-block mins 0..63; Q2_K [16] 0..15
};

// Unpacks one block (block_bytes at `block`, possibly unaligned). type must not be kNone.
void unpack_block(QuantType type, const uint8_t* block, QuantBlockFields* out);

// Packs one block's fields into its GGML bytes (block_bytes at `block`): unpack_block's inverse, so
// pack_block(unpack_block(b)) gives back b byte for byte (every bit of every format is a field).
// Fields out of their type's range keep only the bits the format stores. type must not be kNone.
void pack_block(QuantType type, const QuantBlockFields& fields, uint8_t* block);

// Dequantizes one row: blocks → out[k] float64, exactly (every value of every format is a float64
// number: a product has at most 11 + 8 + 6 significant bits, and the two terms of Q4_1, Q5_1 and the
// K-quants with mins are multiples of 2^-24 (the f16 quantum) below 2^28). blocks may be unaligned.
// Throws as quant_row_bytes. The reference for tests and for the float64 model reference.
void dequantize_row_f64(QuantType type, const void* blocks, int64_t k, double* out);

// Dequantizes one row to float32, the semantics of PackedMatrix::at / row_to_f32 and so of the
// embedding lookup. d, dmin, m are converted exactly from f16; (float) of an integer is exact here.
// Every format without a min is exact, because each product is of an 11-bit f16 significand and
// integers of at most 13 significant bits together, within float32's 24 (and far from overflow or
// subnormals: |d| ≥ 2^-24, |w| < 2^16·2^13):
//   Q8_0  d·(float)q;  Q4_0  d·(float)(q − 8);  Q5_0  d·(float)(q − 16)
//   Q6_K  (d·(float)sc)·(float)(q − 32)       (|sc| ≤ 128: 8 bits, then |q − 32| ≤ 32: 5; 24 bits)
//   Q3_K  (d·(float)(sc − 32))·(float)(q − 4)  (6 bits, then 3: 20 bits)
//   IQ4_NL d·(float)kv[q]                     (|kv| ≤ 127: 7 bits)
//   IQ4_XS (d·(float)(ls − 32))·(float)kv[q]  (6 bits, then 7: 24 bits — exact, just)
// Q6_K, Q3_K and IQ4_XS multiply in ggml's order (sub-block scale first): the value is the same in
// any order, and this one also gives a zero ggml's sign (d·(sc − 32) = +0 for sc = 32 and d > 0,
// times a negative q: −0, where d·(float)((sc − 32)·(q − 4)) would give +0).
// The formats with a min round once, so they are correctly rounded (both terms are exact products):
//   Q4_1, Q5_1  fma(d, (float)q, m)
//   Q4_K, Q5_K  fma(d, (float)(sc·q), −(dmin·(float)m))   (sc·q ≤ 63·31: 11 bits)
//   Q2_K        fma(d, (float)(sc·q), −(dmin·(float)m))   (sc·q ≤ 45, m ≤ 15)
// which is also what ggml's `d·q + m` / `(d·sc)·q − dmin·m` in float32 gives, bit for bit (each
// product exact, one rounding). Throws as quant_row_bytes.
void dequantize_row_f32(QuantType type, const void* blocks, int64_t k, float* out);

// Quantizes one row x[k] float32 into GGML blocks (k / block_size blocks of block_bytes), plain
// round-to-nearest with scales chosen from each block's extremes (no error-minimising search);
// v is the value of largest magnitude (the first one on a tie) of the block or sub-block named:
//   Q8_0  d = f16(amax / 127), q = rne(x / d)
//   Q4_0  d = f16(v / −8), q = clamp(rne(x / d) + 8, 0, 15)
//   Q5_0  d = f16(v / −16), q = clamp(rne(x / d) + 16, 0, 31)
//   Q4_1  d = f16((max − min) / 15), m = f16(min), q = clamp(rne((x − m) / d), 0, 15)
//   Q5_1  d = f16((max − min) / 31), m = f16(min), q = clamp(rne((x − m) / d), 0, 31)
//   Q4_K  per sub-block: min_j = min(0, min x), scale_j = (max_j − min_j) / 15; d = f16(max scale_j / 63),
//         dmin = f16(max(−min_j) / 63), sc_j = rne(scale_j / d), m_j = rne(−min_j / dmin) (both ≤ 63);
//         q = clamp(rne((x + dmin·m_j) / (d·sc_j)), 0, 15)
//   Q5_K  Q4_K with scale_j = (max_j − min_j) / 31 and q = clamp(…, 0, 31)
//   Q2_K  Q4_K on sub-blocks of 16 with scale_j = (max_j − min_j) / 3, d = f16(max scale_j / 15),
//         dmin = f16(max(−min_j) / 15) (sc_j, m_j ≤ 15) and q = clamp(…, 0, 3)
//   Q6_K  per sub-block of 16: scale_j = amax_j / 31; d = f16(max scale_j / 127), sc_j = rne(scale_j / d);
//         q = clamp(rne(x / (d·sc_j)), −32, 31) + 32
//   Q3_K  per sub-block of 16: s_j = v_j / −4; d = f16(s / −32) for the s_j of largest magnitude,
//         sc_j = clamp(rne(s_j / d), −32, 31) + 32; q = clamp(rne(x / (d·(sc_j − 32))), −4, 3) + 4
//   IQ4_NL d = f16(v / −127) (v lands on the table's −127 end); q = the index of the table value
//         nearest x / d (the lower index on a tie)
//   IQ4_XS per sub-block of 32: s_j = v_j / −127; d = f16(s / −32) for the s_j of largest magnitude,
//         ls_j = clamp(rne(s_j / d), −32, 31) + 32; q as IQ4_NL against the step d·(ls_j − 32)
// A zero step (all-zero block, scale 0) stores the index of value 0 (IQ4: index 8, kv = 1, times 0).
// The divisions use the stored (f16-rounded) scales and run in float64, so a Q8_0 value is off by at
// most d/2. Throws Error(kInvalidArgument) as quant_row_bytes, or if a value is not finite or so
// large that a block scale overflows f16 (naming the element).
void quantize_row(QuantType type, const float* x, int64_t k, void* blocks);

}  // namespace ditto
