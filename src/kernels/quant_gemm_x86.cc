// The quantized GEMM's x86 paths: AVX-512 with VNNI (vpdpbusd), AVX-512 without it (vpmaddwd), and
// AVX2 (vpmaddwd on 8-lane halves). One generic micro-kernel (qkernel, quant_gemm_x86_qkernel.inc) is
// written once over an "Ops" class per path and compiled once per instruction set; a kernel function
// with the path's target attribute and `flatten` inlines the whole body, so each path's code is
// compiled for its own instruction set only (no VNNI instruction
// outside the VNNI kernels: vpdpbusd is emitted by inline asm there, never by the compiler).
//
// Lanes are outputs: a 512-bit integer register holds 16 int32 block sums, one per row of a panel;
// each 32-bit lane's 4 bytes are 4 consecutive weights of that row (the panel layout of
// quant_gemm.h), multiplied by the same 4 activation bytes broadcast to every lane. Every sum is
// exact in int32 whatever instruction forms it (bounds in docs/NUMERICS.md), so every path yields
// the integers of the portable path, and the float32 steps per block are the same IEEE operations
// lane by lane: the bits are the portable path's.
//
// Signed weights with the unsigned×signed vpdpbusd: a Q8_0 weight is stored as w + 128 (u8), a Q4_0
// nibble is q (= w + 8), a Q6_K value is q (= w + 32); the offset times Σq of the activations is
// subtracted exactly by starting the block's sum at −offset·Σq. vpmaddwd multiplies the zero-extended
// u8 weights by the sign-extended int8 activations as int16 pairs: |255·127·2| < 2^31, no overflow,
// and neither instruction saturates (vpdpbusds, which does, is never used). vpmaddubsw, which
// saturates too, is used on AVX2 only where it cannot: weights under 64 (Avx2Ops::dot_small).
#include <algorithm>
#include <cfloat>
#include <climits>
#include <cstring>

#include "core/cpu_features.h"
#include "kernels/kernel_tuning.h"
#include "kernels/quant_gemm.h"
#include "kernels/quant_gemm_internal.h"
#include "kernels/simd.h"

#if defined(__x86_64__)

namespace ditto {
namespace {

#define DITTO_AVX512_OPS DITTO_AVX512 static inline
#define DITTO_AVX2_OPS DITTO_AVX2 static inline

// ---- AVX-512: 16 lanes in one register ----------------------------------------------------------

template <bool kVnni>
struct Avx512Ops {
  using I = __m512i;  // 16 int32 lanes (or 64 bytes of weights)
  using F = __m512;   // 16 float32 lanes
  struct X {          // 4 activation bytes broadcast (VNNI), or as two int16 pairs (vpmaddwd)
    __m512i a, b;
  };

  DITTO_AVX512_OPS I zero() { return _mm512_setzero_si512(); }
  DITTO_AVX512_OPS I set1(int32_t v) { return _mm512_set1_epi32(v); }
  DITTO_AVX512_OPS I load(const uint8_t* p) { return _mm512_loadu_si512(p); }
  DITTO_AVX512_OPS I and_(I a, I b) { return _mm512_and_si512(a, b); }
  DITTO_AVX512_OPS I or_(I a, I b) { return _mm512_or_si512(a, b); }
  DITTO_AVX512_OPS I add(I a, I b) { return _mm512_add_epi32(a, b); }
  DITTO_AVX512_OPS I mullo(I a, I b) { return _mm512_mullo_epi32(a, b); }
  DITTO_AVX512_OPS I madd16(I a, I b) { return _mm512_madd_epi16(a, b); }
  DITTO_AVX512_OPS I bytes(uint8_t v) { return _mm512_set1_epi8(static_cast<char>(v)); }
  template <int N>
  DITTO_AVX512_OPS I srli16(I a) {
    return _mm512_srli_epi16(a, N);
  }
  template <int N>
  DITTO_AVX512_OPS I srai32(I a) {
    return _mm512_srai_epi32(a, N);
  }
  template <int N>
  DITTO_AVX512_OPS I slli16(I a) {
    return _mm512_slli_epi16(a, N);
  }
  DITTO_AVX512_OPS I u8_to_i32(__m128i s) { return _mm512_cvtepu8_epi32(s); }
  // A 16-byte table in every 16-byte group, and its lookup by the low 4 bits of each byte (< 16).
  DITTO_AVX512_OPS I table16(const uint8_t* t) {
    return _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t)));
  }
  DITTO_AVX512_OPS I lookup(I table, I idx) { return _mm512_shuffle_epi8(table, idx); }
  DITTO_AVX512_OPS I i8_to_i32(__m128i s) { return _mm512_cvtepi8_epi32(s); }
  // Lane L: int16 pair (a[L], b[L]) zero-extended from two rows of 16 bytes.
  DITTO_AVX512_OPS I u8_pairs(__m128i a, __m128i b) {
    const __m256i ab = _mm256_set_m128i(_mm_unpackhi_epi8(a, b), _mm_unpacklo_epi8(a, b));
    return _mm512_cvtepu8_epi16(ab);
  }

  DITTO_AVX512_OPS X xop(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    const __m512i bc = _mm512_set1_epi32(v);
    if constexpr (kVnni) return {bc, bc};
    return {_mm512_srai_epi16(_mm512_slli_epi16(bc, 8), 8), _mm512_srai_epi16(bc, 8)};
  }
  // acc + Σ_{j<4} w.byte[4L+j] (u8) · x.byte[j] (s8) per lane L, exactly.
  DITTO_AVX512_OPS I dot(I acc, I w, const X& x) {
    if constexpr (kVnni) {
      asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(w), "v"(x.a));
      return acc;
    } else {
      const I even = _mm512_and_si512(w, _mm512_set1_epi16(0x00ff));
      const I odd = _mm512_srli_epi16(w, 8);
      return _mm512_add_epi32(acc, _mm512_add_epi32(_mm512_madd_epi16(even, x.a), _mm512_madd_epi16(odd, x.b)));
    }
  }
  // Weights under 64: the same instructions (the 4-bit high nibbles stay in place, ×16).
  static constexpr bool kSmallDot = false;
  static constexpr bool kInt16Sums = false;
  static constexpr bool kSpreadPrefetch = false;  // not measured on AVX-512 machines yet
  DITTO_AVX512_OPS I dot_small(I acc, I w, const X& x) { return dot(acc, w, x); }

  DITTO_AVX512_OPS F f16(const uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  DITTO_AVX512_OPS F fzero() { return _mm512_setzero_ps(); }
  DITTO_AVX512_OPS F fset1(float v) { return _mm512_set1_ps(v); }
  DITTO_AVX512_OPS F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  DITTO_AVX512_OPS F neg(F a) {
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(INT32_MIN)));
  }
  DITTO_AVX512_OPS F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  DITTO_AVX512_OPS F to_float(I a) { return _mm512_cvtepi32_ps(a); }
  // The first `lanes` lanes of v to y, NaN as the canonical quiet NaN.
  DITTO_AVX512_OPS void store(float* y, F v, int64_t lanes) {
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    v = _mm512_mask_blend_ps(nan, v, _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000)));
    _mm512_mask_storeu_ps(y, simd::first_lanes_x16(lanes), v);
  }
};

// ---- AVX2: 16 lanes as two 8-lane registers (lanes 0–7, 8–15) ------------------------------------

struct Avx2Ops {
  struct I {
    __m256i lo, hi;
  };
  struct F {
    __m256 lo, hi;
  };
  struct X {
    __m256i a, b;  // the 4 activation bytes as int16 pairs: bytes 0 and 2, bytes 1 and 3 of each lane
    __m256i raw;   // the 4 bytes themselves in every lane (dot_small)
  };

  DITTO_AVX2_OPS I zero() { return {_mm256_setzero_si256(), _mm256_setzero_si256()}; }
  DITTO_AVX2_OPS I set1(int32_t v) { return {_mm256_set1_epi32(v), _mm256_set1_epi32(v)}; }
  DITTO_AVX2_OPS I load(const uint8_t* p) {
    const auto* q = reinterpret_cast<const __m256i*>(p);
    return {_mm256_loadu_si256(q), _mm256_loadu_si256(q + 1)};
  }
  DITTO_AVX2_OPS I and_(I a, I b) { return {_mm256_and_si256(a.lo, b.lo), _mm256_and_si256(a.hi, b.hi)}; }
  DITTO_AVX2_OPS I or_(I a, I b) { return {_mm256_or_si256(a.lo, b.lo), _mm256_or_si256(a.hi, b.hi)}; }
  DITTO_AVX2_OPS I add(I a, I b) { return {_mm256_add_epi32(a.lo, b.lo), _mm256_add_epi32(a.hi, b.hi)}; }
  DITTO_AVX2_OPS I mullo(I a, I b) { return {_mm256_mullo_epi32(a.lo, b.lo), _mm256_mullo_epi32(a.hi, b.hi)}; }
  DITTO_AVX2_OPS I madd16(I a, I b) { return {_mm256_madd_epi16(a.lo, b.lo), _mm256_madd_epi16(a.hi, b.hi)}; }
  DITTO_AVX2_OPS I bytes(uint8_t v) { return set1(static_cast<int32_t>(0x01010101u * v)); }
  template <int N>
  DITTO_AVX2_OPS I srli16(I a) {
    return {_mm256_srli_epi16(a.lo, N), _mm256_srli_epi16(a.hi, N)};
  }
  template <int N>
  DITTO_AVX2_OPS I srai32(I a) {
    return {_mm256_srai_epi32(a.lo, N), _mm256_srai_epi32(a.hi, N)};
  }
  template <int N>
  DITTO_AVX2_OPS I slli16(I a) {
    return {_mm256_slli_epi16(a.lo, N), _mm256_slli_epi16(a.hi, N)};
  }
  DITTO_AVX2_OPS I table16(const uint8_t* t) {
    const __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t)));
    return {b, b};
  }
  DITTO_AVX2_OPS I lookup(I table, I idx) {
    return {_mm256_shuffle_epi8(table.lo, idx.lo), _mm256_shuffle_epi8(table.hi, idx.hi)};
  }
  DITTO_AVX2_OPS I u8_to_i32(__m128i s) {
    return {_mm256_cvtepu8_epi32(s), _mm256_cvtepu8_epi32(_mm_srli_si128(s, 8))};
  }
  DITTO_AVX2_OPS I i8_to_i32(__m128i s) {
    return {_mm256_cvtepi8_epi32(s), _mm256_cvtepi8_epi32(_mm_srli_si128(s, 8))};
  }
  DITTO_AVX2_OPS I u8_pairs(__m128i a, __m128i b) {
    return {_mm256_cvtepu8_epi16(_mm_unpacklo_epi8(a, b)), _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(a, b))};
  }

  DITTO_AVX2_OPS X xop(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    const __m256i bc = _mm256_set1_epi32(v);
    return {_mm256_srai_epi16(_mm256_slli_epi16(bc, 8), 8), _mm256_srai_epi16(bc, 8), bc};
  }
  DITTO_AVX2_OPS __m256i dot8(__m256i acc, __m256i w, const X& x) {
    const __m256i even = _mm256_and_si256(w, _mm256_set1_epi16(0x00ff));
    const __m256i odd = _mm256_srli_epi16(w, 8);
    return _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_madd_epi16(even, x.a), _mm256_madd_epi16(odd, x.b)));
  }
  DITTO_AVX2_OPS I dot(I acc, I w, const X& x) { return {dot8(acc.lo, w.lo, x), dot8(acc.hi, w.hi, x)}; }
  // dot for weights under 64 (4-bit values, Q6_K's 6-bit ones): vpmaddubsw multiplies the u8 weights
  // by the s8 activation bytes into int16 pair sums, which cannot saturate (|pair| ≤ 2·63·127 =
  // 16,002 < 2^15; activations are in [−127, 127]), and vpmaddwd by ones adds each lane's two pairs:
  // the same int32 as dot, in three operations instead of six.
  static constexpr bool kSmallDot = true;
  DITTO_AVX2_OPS __m256i dot8_small(__m256i acc, __m256i w, const X& x) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(w, x.raw), _mm256_set1_epi16(1)));
  }
  DITTO_AVX2_OPS I dot_small(I acc, I w, const X& x) {
    return {dot8_small(acc.lo, w.lo, x), dot8_small(acc.hi, w.hi, x)};
  }
  // The int16 half of dot_small alone: lane L's two int16 pair sums w.byte[4L+2i]·x.byte[2i] +
  // w.byte[4L+2i+1]·x.byte[2i+1] (i = 0, 1), for weights under 64. The kernel adds several of these
  // in int16 (add16) while the bound in qkernel keeps every sum exact, then widens them once with
  // madd16 — by ones, or by the sub-block's scale, which takes the place of a vpmulld.
  static constexpr bool kInt16Sums = true;
  static constexpr bool kSpreadPrefetch = true;  // measured on a Zen 3 (qkernel)
  DITTO_AVX2_OPS I maddubs(I w, const X& x) {
    return {_mm256_maddubs_epi16(w.lo, x.raw), _mm256_maddubs_epi16(w.hi, x.raw)};
  }
  DITTO_AVX2_OPS I add16(I a, I b) { return {_mm256_add_epi16(a.lo, b.lo), _mm256_add_epi16(a.hi, b.hi)}; }
  DITTO_AVX2_OPS I i8_pairs(__m128i a, __m128i b) {
    return {_mm256_cvtepi8_epi16(_mm_unpacklo_epi8(a, b)), _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(a, b))};
  }
  DITTO_AVX2_OPS I set1_16(int16_t v) { return {_mm256_set1_epi16(v), _mm256_set1_epi16(v)}; }

  DITTO_AVX2_OPS F f16(const uint8_t* p) {
    const auto* q = reinterpret_cast<const __m128i*>(p);
    return {_mm256_cvtph_ps(_mm_loadu_si128(q)), _mm256_cvtph_ps(_mm_loadu_si128(q + 1))};
  }
  DITTO_AVX2_OPS F fzero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  DITTO_AVX2_OPS F fset1(float v) { return {_mm256_set1_ps(v), _mm256_set1_ps(v)}; }
  DITTO_AVX2_OPS F mul(F a, F b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
  DITTO_AVX2_OPS F neg(F a) {
    const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN));
    return {_mm256_xor_ps(a.lo, sign), _mm256_xor_ps(a.hi, sign)};
  }
  DITTO_AVX2_OPS F fma(F a, F b, F c) { return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)}; }
  DITTO_AVX2_OPS F to_float(I a) { return {_mm256_cvtepi32_ps(a.lo), _mm256_cvtepi32_ps(a.hi)}; }
  DITTO_AVX2_OPS __m256 canonical8(__m256 v) {
    return _mm256_blendv_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
  DITTO_AVX2_OPS void store(float* y, F v, int64_t lanes) {
    alignas(32) float buf[16];
    _mm256_store_ps(buf, canonical8(v.lo));
    _mm256_store_ps(buf + 8, canonical8(v.hi));
    std::memcpy(y, buf, sizeof(float) * static_cast<size_t>(lanes));
  }
};

// ---- The micro-kernel ---------------------------------------------------------------------------

// Arguments of one micro-kernel call: MR rows of quantized activations × NP consecutive panels.
struct QTile {
  const ActLayout* a;
  const uint8_t* act;    // first of MR rows, a->row_bytes apart
  const uint8_t* panel;  // first of NP panels, panel_bytes apart
  int64_t panel_bytes;
  int64_t pb_bytes;  // one panel block
  float* y;          // [MR, NP·16], row stride ldy
  int64_t ldy;
  int64_t valid;     // outputs of these panels that exist
  int64_t prefetch;  // with one row: bytes ahead of each panel block to prefetch; 0: none
};

// Loads 16 bytes (one per lane) at p.
inline __m128i lane_bytes(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }

// Q4_K: the 6-bit scale and min of sub-block j for the 16 lanes, from the transposed 12 scale bytes
// s[12][16] (q4_k_scale_min lane-wise; 16-bit shifts whose bits crossing into the neighbouring byte
// are masked off). Decoded where used, from L1, rather than kept in 16 registers per panel.
inline __m128i q4k_scale(const uint8_t* s, int j) {
  if (j < 4) return _mm_and_si128(lane_bytes(s + 16 * j), _mm_set1_epi8(63));
  return _mm_or_si128(_mm_and_si128(lane_bytes(s + 16 * (j + 4)), _mm_set1_epi8(15)),
                      _mm_and_si128(_mm_srli_epi16(lane_bytes(s + 16 * (j - 4)), 2), _mm_set1_epi8(0x30)));
}
inline __m128i q4k_min(const uint8_t* s, int j) {
  if (j < 4) return _mm_and_si128(lane_bytes(s + 16 * (j + 4)), _mm_set1_epi8(63));
  return _mm_or_si128(_mm_and_si128(_mm_srli_epi16(lane_bytes(s + 16 * (j + 4)), 4), _mm_set1_epi8(15)),
                      _mm_and_si128(_mm_srli_epi16(lane_bytes(s + 16 * j), 2), _mm_set1_epi8(0x30)));
}

// Decode reads each weight once from memory, and the arithmetic per byte (4-bit unpacking, scales)
// is enough that the hardware prefetcher alone may leave loads and arithmetic poorly overlapped:
// with one row, each panel block may first ask for the lines t.prefetch bytes ahead (measured on
// Sapphire Rapids: +15% on Q4_K from DRAM at 1024 bytes). How far ahead, if at all, is measured at
// start per CPU (kernels/kernel_tuning.h). Prefetching past the end of the matrix is harmless.
inline void prefetch(const uint8_t* p, int64_t ahead) {
  _mm_prefetch(reinterpret_cast<const char*>(p + ahead), _MM_HINT_T0);
}

// One copy of the micro-kernel per instruction set (quant_gemm_x86_qkernel.inc).
namespace avx512_body {
#define DITTO_QKERNEL_TARGET DITTO_AVX512
#include "kernels/quant_gemm_x86_qkernel.inc"
#undef DITTO_QKERNEL_TARGET
}  // namespace avx512_body
namespace avx2_body {
#define DITTO_QKERNEL_TARGET DITTO_AVX2
#include "kernels/quant_gemm_x86_qkernel.inc"
#undef DITTO_QKERNEL_TARGET
}  // namespace avx2_body

// The kernels proper: one per path, each with its instruction set, the generic body flattened in.
template <QuantType T, int MR, int NP>
DITTO_AVX512 __attribute__((flatten)) void kernel_avx512_vnni(const QTile& t) {
  avx512_body::qkernel<Avx512Ops<true>, T, MR, NP>(t);
}
template <QuantType T, int MR, int NP>
DITTO_AVX512 __attribute__((flatten)) void kernel_avx512(const QTile& t) {
  avx512_body::qkernel<Avx512Ops<false>, T, MR, NP>(t);
}
template <QuantType T, int MR, int NP>
DITTO_AVX2 __attribute__((flatten)) void kernel_avx2(const QTile& t) {
  avx2_body::qkernel<Avx2Ops, T, MR, NP>(t);
}

using KernelFn = void (*)(const QTile&);

// Tile shapes of a path: rows × panels for one row (decode) and for several (prefill); the last
// partial panel group runs one panel at a time, the last rows with fewer rows.
constexpr int kMaxRows = 4;
struct Shapes {
  int rows;            // prefill rows per tile
  int panels;          // prefill panels per tile
  int panels_one_row;  // decode panels per tile
};
constexpr Shapes kAvx512Shapes{4, 2, 2};
// AVX2 decodes one panel at a time: a panel's 16 lanes take two of the 16 ymm registers per
// accumulator, and two panels spilled to the stack (Q4_K 0.39–0.58 of the read bandwidth with two
// panels, 0.61–0.71 with one, on a Zen 3: kernels_bench --kernels qgemv).
constexpr Shapes kAvx2Shapes{2, 1, 1};

enum class Path { kAvx512Vnni, kAvx512, kAvx2 };

template <Path P, QuantType T, int MR, int NP>
constexpr KernelFn kernel_fn() {
  if constexpr (P == Path::kAvx512Vnni) return &kernel_avx512_vnni<T, MR, NP>;
  if constexpr (P == Path::kAvx512) return &kernel_avx512<T, MR, NP>;
  return &kernel_avx2<T, MR, NP>;
}

// Kernels of one path and type: [rows − 1] for `panels` panels, and for one panel.
struct KernelSet {
  KernelFn group[kMaxRows];
  KernelFn single[kMaxRows];
  KernelFn decode_group;  // 1 row × panels_one_row
};

template <Path P, QuantType T, int NP, int NP1>
constexpr KernelSet make_set() {
  KernelSet s{};
  s.group[0] = kernel_fn<P, T, 1, NP>();
  s.single[0] = kernel_fn<P, T, 1, 1>();
  s.group[1] = kernel_fn<P, T, 2, NP>();
  s.single[1] = kernel_fn<P, T, 2, 1>();
  if constexpr (P != Path::kAvx2) {
    s.group[2] = kernel_fn<P, T, 3, NP>();
    s.group[3] = kernel_fn<P, T, 4, NP>();
    s.single[2] = kernel_fn<P, T, 3, 1>();
    s.single[3] = kernel_fn<P, T, 4, 1>();
  }
  s.decode_group = kernel_fn<P, T, 1, NP1>();
  return s;
}

template <Path P>
const KernelSet& kernel_set(QuantType t) {
  constexpr int NP = P == Path::kAvx2 ? kAvx2Shapes.panels : kAvx512Shapes.panels;
  constexpr int NP1 = P == Path::kAvx2 ? kAvx2Shapes.panels_one_row : kAvx512Shapes.panels_one_row;
  static constexpr KernelSet kQ8_0 = make_set<P, QuantType::kQ8_0, NP, NP1>();
  static constexpr KernelSet kQ4_0 = make_set<P, QuantType::kQ4_0, NP, NP1>();
  static constexpr KernelSet kQ4_1 = make_set<P, QuantType::kQ4_1, NP, NP1>();
  static constexpr KernelSet kQ4_K = make_set<P, QuantType::kQ4_K, NP, NP1>();
  static constexpr KernelSet kQ6_K = make_set<P, QuantType::kQ6_K, NP, NP1>();
  static constexpr KernelSet kQ5_0 = make_set<P, QuantType::kQ5_0, NP, NP1>();
  static constexpr KernelSet kQ5_1 = make_set<P, QuantType::kQ5_1, NP, NP1>();
  static constexpr KernelSet kIQ4_NL = make_set<P, QuantType::kIQ4_NL, NP, NP1>();
  static constexpr KernelSet kQ5_K = make_set<P, QuantType::kQ5_K, NP, NP1>();
  static constexpr KernelSet kIQ4_XS = make_set<P, QuantType::kIQ4_XS, NP, NP1>();
  static constexpr KernelSet kQ2_K = make_set<P, QuantType::kQ2_K, NP, NP1>();
  static constexpr KernelSet kQ3_K = make_set<P, QuantType::kQ3_K, NP, NP1>();
  switch (t) {
    case QuantType::kQ8_0: return kQ8_0;
    case QuantType::kQ4_0: return kQ4_0;
    case QuantType::kQ4_1: return kQ4_1;
    case QuantType::kQ4_K: return kQ4_K;
    case QuantType::kQ5_0: return kQ5_0;
    case QuantType::kQ5_1: return kQ5_1;
    case QuantType::kIQ4_NL: return kIQ4_NL;
    case QuantType::kQ5_K: return kQ5_K;
    case QuantType::kIQ4_XS: return kIQ4_XS;
    case QuantType::kQ2_K: return kQ2_K;
    case QuantType::kQ3_K: return kQ3_K;
    default: return kQ6_K;
  }
}

void run_path(const KernelSet& ks, const Shapes& shapes, const ActLayout& a, const uint8_t* act, int64_t m,
              const PackedMatrix& w, float* y, int64_t ldy, ThreadPool* pool) {
  const int64_t num_panels = w.num_panels();
  const int group = m == 1 ? shapes.panels_one_row : shapes.panels;
  const int64_t num_groups = (num_panels + group - 1) / group;
  QTile base{};
  base.a = &a;
  base.panel_bytes = w.panel_bytes();
  base.pb_bytes = quant_panel_block_bytes(w.quant);
  base.ldy = ldy;
  base.prefetch = kernel_tuning().qgemv_prefetch_bytes;
  auto run = [&](size_t begin, size_t end) {
    for (size_t g = begin; g < end; ++g) {
      const int64_t p0 = static_cast<int64_t>(g) * group;
      const int panels = static_cast<int>(std::min<int64_t>(group, num_panels - p0));
      for (int64_t m0 = 0; m0 < m; m0 += shapes.rows) {
        const int rows = static_cast<int>(std::min<int64_t>(shapes.rows, m - m0));
        QTile t = base;
        t.act = act + m0 * a.row_bytes;
        if (panels == group) {
          t.panel = w.data.data() + p0 * base.panel_bytes;
          t.y = y + m0 * ldy + p0 * kPanelWidth;
          t.valid = w.n - p0 * kPanelWidth;
          (m == 1 ? ks.decode_group : ks.group[rows - 1])(t);
          continue;
        }
        for (int64_t p = p0; p < p0 + panels; ++p) {
          t.panel = w.data.data() + p * base.panel_bytes;
          t.y = y + m0 * ldy + p * kPanelWidth;
          t.valid = w.n - p * kPanelWidth;
          ks.single[rows - 1](t);
        }
      }
    }
  };
  if (pool == nullptr) {
    run(0, static_cast<size_t>(num_groups));
  } else {
    const auto group_bytes = static_cast<size_t>(group * base.panel_bytes);
    pool->parallel_for_dynamic(static_cast<size_t>(num_groups),
                               weight_chunk_groups(static_cast<size_t>(num_groups), group_bytes, *pool), run);
  }
}

// quantize_activation_row on 16 lanes: the same IEEE operations per element (|x|, max, x·id, round
// to nearest even by the conversion itself, clamp), the same scalar d and 1/d, and integer sums,
// which are exact in any order — so the same bytes as the portable loop.
}  // namespace

DITTO_AVX512 bool quantize_activation_row_avx512(const ActLayout& a, const float* x, uint8_t* row) {
  const __m512 sign = _mm512_castsi512_ps(_mm512_set1_epi32(INT32_MIN));
  const __m512 max_finite = _mm512_set1_ps(FLT_MAX);
  __mmask16 bad = 0;
  for (int64_t i = 0; i < a.k; i += 16)
    bad |= _mm512_cmp_ps_mask(_mm512_andnot_ps(sign, _mm512_loadu_ps(x + i)), max_finite, _CMP_NLE_UQ);
  if (bad != 0) {
    std::memset(row, 0, static_cast<size_t>(a.row_bytes));
    return false;
  }
  auto* q = reinterpret_cast<int8_t*>(row);
  auto* d = reinterpret_cast<float*>(row + a.d_offset);
  auto* s = reinterpret_cast<float*>(row + a.s_offset);
  auto* sums = reinterpret_cast<int32_t*>(row + a.sum_offset);
  for (int64_t b = 0; b < a.nb; ++b) {
    const float* xb = x + b * a.block;
    __m512 vmax = _mm512_setzero_ps();
    for (int64_t i = 0; i < a.block; i += 16)
      vmax = _mm512_max_ps(vmax, _mm512_andnot_ps(sign, _mm512_loadu_ps(xb + i)));
    float db = _mm512_reduce_max_ps(vmax) / 127.0f;
    const bool zero = !(db >= FLT_MIN);
    if (zero) db = 0.0f;
    const __m512 id = _mm512_set1_ps(zero ? 0.0f : 1.0f / db);
    int32_t total = 0;
    for (int64_t i = 0; i < a.block; i += 16) {
      const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(xb + i), id);
      __m512i qi = _mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      qi = _mm512_min_epi32(_mm512_max_epi32(qi, _mm512_set1_epi32(-127)), _mm512_set1_epi32(127));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * a.block + i),
                       _mm512_cvtepi32_epi8(qi));  // truncating, in range
      const int32_t sum16 = _mm512_reduce_add_epi32(qi);
      if (a.k_blocks) sums[16 * b + i / 16] = sum16;
      total += sum16;
    }
    d[b] = db;
    if (a.k_blocks) {
      s[b] = 0.0f;
    } else {
      sums[b] = total;
      s[b] = db * static_cast<float>(total);
    }
  }
  return true;
}

bool quant_gemm_simd(const ActLayout& a, const uint8_t* act, int64_t m, const PackedMatrix& w, float* y, int64_t ldy,
                     ThreadPool* pool) {
  switch (active_isa()) {
    case Isa::kAvx512:
      if (avx512_vnni_enabled()) {
        run_path(kernel_set<Path::kAvx512Vnni>(w.quant), kAvx512Shapes, a, act, m, w, y, ldy, pool);
      } else {
        run_path(kernel_set<Path::kAvx512>(w.quant), kAvx512Shapes, a, act, m, w, y, ldy, pool);
      }
      return true;
    case Isa::kAvx2: run_path(kernel_set<Path::kAvx2>(w.quant), kAvx2Shapes, a, act, m, w, y, ldy, pool); return true;
    case Isa::kScalar: break;
  }
  return false;
}

}  // namespace ditto

#endif  // __x86_64__
