// The bf16-weight GEMM's vector paths: the pair step of kernels/bf16_dot.h on 16 (AVX-512, native
// VDPBF16PS or its FMA emulation, or unpacked to f32 for large m) or 2 × 8 (AVX2) lanes; the
// same bits as gemm.cc's portable definition.
#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "core/cpu_features.h"
#include "core/error.h"
#include "kernels/bf16_dot.h"
#include "kernels/gemm.h"
#include "kernels/gemm_internal.h"
#include "kernels/kernel_tuning.h"
#include "kernels/simd.h"

#if defined(__x86_64__)

namespace ditto::gemm_detail {
namespace {

// ---- bf16 weights: the pair step of kernels/bf16_dot.h on 16 (AVX-512) or 2 × 8 (AVX2) lanes --

// Arguments of one bf16 micro-kernel call.
struct TileBf16 {
  const uint16_t* x;  // [MR, 2·ldx] bf16: rows of pairs (VDPBF16PS)
  const float* xw;    // the same widened to float32 (FMA emulation), or null
  int64_t ldx;        // pairs per row
  const uint8_t* panel;
  size_t panel_bytes;
  int64_t pairs;  // ceil(k / 2)
  float* y;
  int64_t ldy;
  int64_t valid;
  int64_t prefetch;  // bytes ahead of each panel's current pair to prefetch; 0: none
};

DITTO_INLINE int pair_bits(const uint16_t* p) {
  int v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

constexpr size_t kPairStep = kPanelWidth * 2 * sizeof(uint16_t);  // bytes of 16 lanes' pairs

template <int NP>
DITTO_AVX512 DITTO_INLINE void store_bf16_tile_x16(const TileBf16& t, int r, const __m512 (&acc)[NP]) {
  for (int p = 0; p < NP; ++p) {
    const int64_t lanes = std::min<int64_t>(kPanelWidth, t.valid - p * kPanelWidth);
    _mm512_mask_storeu_ps(t.y + r * t.ldy + p * kPanelWidth, simd::first_lanes_x16(lanes),
                          simd::canonical_nan_x16(acc[p]));
  }
}

// Each pair step reads one 64-byte line from each of NP panels, NP sequential streams that the
// hardware prefetchers may follow too late when few rows share them (decode: the GEMV is bound by
// how many lines are in flight). So each step may ask for the line t.prefetch bytes ahead in every
// panel. Whether that helps, and how far ahead, differs per CPU (kernels/kernel_tuning.h measures it
// at start: on Sapphire Rapids 2 KiB ahead took the GEMV from 0.50–0.80 to 0.80–0.94 of the read
// bandwidth). Past a panel's end the hint touches the next panel or nothing: a prefetch never faults.
template <int NP>
DITTO_INLINE void prefetch_panels(const uint8_t* w, size_t panel_bytes, int64_t ahead) {
  if (ahead == 0) return;
  for (int p = 0; p < NP; ++p) _mm_prefetch(reinterpret_cast<const char*>(w + p * panel_bytes + ahead), _MM_HINT_T0);
}

// VDPBF16PS: MR rows × NP panels of accumulators.
template <int MR, int NP>
DITTO_AVX512_BF16 void micro_bf16_native(const TileBf16& t) {
  __m512 acc[MR][NP];
  for (int r = 0; r < MR; ++r)
    for (int p = 0; p < NP; ++p) acc[r][p] = _mm512_setzero_ps();
  const uint8_t* w = t.panel;
  for (int64_t j = 0; j < t.pairs; ++j, w += kPairStep) {
    __m512i wv[NP];
    prefetch_panels<NP>(w, t.panel_bytes, t.prefetch);
    for (int p = 0; p < NP; ++p) wv[p] = _mm512_loadu_si512(w + p * t.panel_bytes);
    for (int r = 0; r < MR; ++r) {
      const __m512i xb = _mm512_set1_epi32(pair_bits(t.x + 2 * (r * t.ldx + j)));
      for (int p = 0; p < NP; ++p) acc[r][p] = simd::bf16_dot2_native_x16(acc[r][p], xb, wv[p]);
    }
  }
  for (int r = 0; r < MR; ++r) store_bf16_tile_x16<NP>(t, r, acc[r]);
}

// The same tile by two FMAs per pair (CPUs without AVX512-BF16, or where VDPBF16PS is slower);
// runs under ScopedFlushDenormals. Per pair, each weight vector is unpacked once (one and, one
// shift) into its odd and even halves, shared by the tile's MR rows; x comes widened to float32
// (t.xw), two broadcasts per row shared by the NP panels.
template <int MR, int NP>
DITTO_AVX512 void micro_bf16_emulated(const TileBf16& t) {
  __m512 acc[MR][NP];
  for (int r = 0; r < MR; ++r)
    for (int p = 0; p < NP; ++p) acc[r][p] = _mm512_setzero_ps();
  const uint8_t* w = t.panel;
  for (int64_t j = 0; j < t.pairs; ++j, w += kPairStep) {
    __m512 w1[NP], w0[NP];
    prefetch_panels<NP>(w, t.panel_bytes, t.prefetch);
    for (int p = 0; p < NP; ++p) {
      const __m512i wv = _mm512_loadu_si512(w + p * t.panel_bytes);
      w1[p] = simd::bf16_odd_x16(wv);
      w0[p] = simd::bf16_even_x16(wv);
    }
    for (int r = 0; r < MR; ++r) {
      const float* xr = t.xw + 2 * (r * t.ldx + j);
      const __m512 x1 = _mm512_set1_ps(xr[1]), x0 = _mm512_set1_ps(xr[0]);
      for (int p = 0; p < NP; ++p) acc[r][p] = simd::bf16_dot2_emulated_x16(acc[r][p], x1, x0, w1[p], w0[p]);
    }
  }
  for (int r = 0; r < MR; ++r) store_bf16_tile_x16<NP>(t, r, acc[r]);
}

// The emulation for many rows: a thread unpacks a group's weights for a block of pairs once —
// per pair, the NP panels' odd halves, then their even halves, as float32 (exact) — and runs every
// row block of x over that block with FMAs alone, the weights' unpacking no longer repeated per
// row block. Accumulators pass through y between blocks of pairs (a float32 store and load keep
// every bit), so each output runs the same chain: x1·w1 then x0·w0 for pair 0, 1, 2, ...
struct TileUnpacked {
  const float* xw;  // widened x, [MR, 2·ldx] float32, at the block's first pair
  int64_t ldx;      // pairs per row of x
  const float* w;   // [pairs, 2 (odd, even), NP, 16] float32
  int64_t pairs;    // pairs in this block
  float* y;
  int64_t ldy;
  int64_t valid;
  bool first;  // the block starts the chain (accumulators from +0.0, else from y)
  bool last;   // the block ends it (NaNs made canonical)
};

template <int MR, int NP>
DITTO_AVX512 void micro_bf16_unpacked(const TileUnpacked& t) {
  __m512 acc[MR][NP];
  for (int p = 0; p < NP; ++p) {
    const __mmask16 mask = simd::first_lanes_x16(std::min<int64_t>(kPanelWidth, t.valid - p * kPanelWidth));
    for (int r = 0; r < MR; ++r)
      acc[r][p] = t.first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask, t.y + r * t.ldy + p * kPanelWidth);
  }
  const float* w = t.w;
  for (int64_t j = 0; j < t.pairs; ++j) {
    for (int h = 0; h < 2; ++h, w += NP * kPanelWidth) {  // h = 0: odd elements, 1: even
      __m512 wv[NP];
      for (int p = 0; p < NP; ++p) wv[p] = _mm512_load_ps(w + p * kPanelWidth);
      for (int r = 0; r < MR; ++r) {
        const __m512 xb = _mm512_set1_ps(t.xw[2 * (r * t.ldx + j) + 1 - h]);
        for (int p = 0; p < NP; ++p) acc[r][p] = _mm512_fmadd_ps(xb, wv[p], acc[r][p]);
      }
    }
  }
  for (int p = 0; p < NP; ++p) {
    const __mmask16 mask = simd::first_lanes_x16(std::min<int64_t>(kPanelWidth, t.valid - p * kPanelWidth));
    for (int r = 0; r < MR; ++r)
      _mm512_mask_storeu_ps(t.y + r * t.ldy + p * kPanelWidth, mask,
                            t.last ? simd::canonical_nan_x16(acc[r][p]) : acc[r][p]);
  }
}

// Unpacks pairs [j0, j0 + pairs) of `panels` consecutive panels from `panel` into out
// ([pairs, 2, panels, 16] float32, 64-byte aligned).
DITTO_AVX512 void unpack_bf16_block(const uint8_t* panel, size_t panel_bytes, int panels, int64_t j0, int64_t pairs,
                                    float* out) {
  for (int64_t j = 0; j < pairs; ++j) {
    for (int p = 0; p < panels; ++p) {
      const __m512i wv = _mm512_loadu_si512(panel + p * panel_bytes + (j0 + j) * kPairStep);
      _mm512_store_ps(out + (2 * j * panels + p) * kPanelWidth, simd::bf16_odd_x16(wv));
      _mm512_store_ps(out + ((2 * j + 1) * panels + p) * kPanelWidth, simd::bf16_even_x16(wv));
    }
  }
}

// AVX2: a panel's 16 lanes are two registers of 8 pairs (h = 0: lanes 0–7, h = 1: lanes 8–15);
// runs under ScopedFlushDenormals, x widened as above. AVX2 has 16 vector registers: with several
// rows, pair j's odd elements go through every row first and its even elements after, so only one
// half's unpacked weights (2·NP registers) are live beside the 2·MR·NP accumulators and a
// broadcast — each accumulator still takes x1·w1 before x0·w0, the chain of the other paths.
// (Holding both halves for a row at a time needed 18 registers at 6 × 1 and GCC kept most
// accumulators on the stack, a store and a reload in every chain's every pair step: 0.41–0.55 of
// the FMA peak on a Zen 3, kernels_bench gemm --gemm-rows 32,512.)
// Lanes 8·h … 8·h + 7 of panel p's pairs at w (the current pair step of the first panel).
DITTO_AVX2 DITTO_INLINE __m256i load_pairs_x8(const uint8_t* w, size_t panel_bytes, int p, int h) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + p * panel_bytes + h * (kPairStep / 2)));
}

template <int MR, int NP>
DITTO_AVX2 void micro_bf16_avx2(const TileBf16& t) {
  __m256 acc[MR][NP][2];
  for (int r = 0; r < MR; ++r)
    for (int p = 0; p < NP; ++p) acc[r][p][0] = acc[r][p][1] = _mm256_setzero_ps();
  const uint8_t* w = t.panel;
  for (int64_t j = 0; j < t.pairs; ++j, w += kPairStep) {
    prefetch_panels<NP>(w, t.panel_bytes, t.prefetch);
    if constexpr (MR == 1) {
      const float* xr = t.xw + 2 * j;
      const __m256 x1 = _mm256_set1_ps(xr[1]), x0 = _mm256_set1_ps(xr[0]);
      for (int p = 0; p < NP; ++p) {
        for (int h = 0; h < 2; ++h) {
          const __m256i wv = load_pairs_x8(w, t.panel_bytes, p, h);
          acc[0][p][h] =
              simd::bf16_dot2_emulated_x8(acc[0][p][h], x1, x0, simd::bf16_odd_x8(wv), simd::bf16_even_x8(wv));
        }
      }
    } else {
      for (int e = 1; e >= 0; --e) {  // 1: the odd elements, then 0: the even ones
        __m256 wv[NP][2];
        for (int p = 0; p < NP; ++p)
          for (int h = 0; h < 2; ++h) {
            const __m256i pairs = load_pairs_x8(w, t.panel_bytes, p, h);
            wv[p][h] = e == 1 ? simd::bf16_odd_x8(pairs) : simd::bf16_even_x8(pairs);
          }
        for (int r = 0; r < MR; ++r) {
          const __m256 xb = _mm256_set1_ps(t.xw[2 * (r * t.ldx + j) + e]);
          for (int p = 0; p < NP; ++p)
            for (int h = 0; h < 2; ++h) acc[r][p][h] = _mm256_fmadd_ps(xb, wv[p][h], acc[r][p][h]);
        }
      }
    }
  }
  for (int p = 0; p < NP; ++p) {
    const int64_t lanes = std::min<int64_t>(kPanelWidth, t.valid - p * kPanelWidth);
    for (int r = 0; r < MR; ++r) {
      alignas(32) float buf[kPanelWidth];
      _mm256_store_ps(buf, simd::canonical_nan_x8(acc[r][p][0]));
      _mm256_store_ps(buf + 8, simd::canonical_nan_x8(acc[r][p][1]));
      std::memcpy(t.y + r * t.ldy + p * kPanelWidth, buf, sizeof(float) * lanes);
    }
  }
}

using MicroBf16Fn = void (*)(const TileBf16&);

template <int MR, int NP>
struct Bf16NativeK {
  static constexpr MicroBf16Fn fn = &micro_bf16_native<MR, NP>;
};
template <int MR, int NP>
struct Bf16EmulatedK {
  static constexpr MicroBf16Fn fn = &micro_bf16_emulated<MR, NP>;
};
template <int MR, int NP>
struct Bf16UnpackedK {
  static constexpr void (*fn)(const TileUnpacked&) = &micro_bf16_unpacked<MR, NP>;
};
template <int MR, int NP>
struct Bf16Avx2K {
  static constexpr MicroBf16Fn fn = &micro_bf16_avx2<MR, NP>;
};

template <template <int, int> class K, int... I>
constexpr auto make_bf16_table(std::integer_sequence<int, I...>) {
  return std::array{K<I / kMaxPanelsAll + 1, I % kMaxPanelsAll + 1>::fn...};
}
template <template <int, int> class K>
constexpr auto kBf16Table = make_bf16_table<K>(std::make_integer_sequence<int, kMaxRowsAll * kMaxPanelsAll>{});

// Register budgets: VDPBF16PS 6 × 4 (24 accumulators, 4 weight vectors); its emulation 6 × 3 (18
// accumulators, 6 unpacked weight halves, 2 broadcasts); AVX2 5 × 1 (10 accumulators, 2 weight
// halves, a broadcast and the odd-half mask in 16 registers: at 6 × 1 one accumulator went through
// the stack every pair step, and kernels_bench gemm --gemm-rows 32,512 on a Zen 3 gave 0.56–0.61
// of the FMA peak against 0.57–0.88, typically 0.62–0.70, at 5 × 1).
constexpr Shapes kBf16NativeShapes{6, 4, 8};
constexpr Shapes kBf16EmulatedShapes{5, 4, 8};
constexpr Shapes kBf16Avx2Shapes{5, 1, 4};

template <template <int, int> class K>
void gemm_bf16_simd(const Shapes& shapes, bool flush, const BfPairs& xp, int64_t m, const PackedMatrix& w, float* y,
                    int64_t ldy, ThreadPool* pool) {
  const auto panel_bytes = static_cast<size_t>(w.panel_bytes());
  const int64_t prefetch = m == 1 ? kernel_tuning().gemv_prefetch_bytes : kernel_tuning().gemm_prefetch_bytes;
  for_each_tile(shapes, m, w, pool, flush, [&](int64_t p0, int panels, int64_t m0, int rows) {
    const TileBf16 t{.x = xp.data + 2 * m0 * xp.ld,
                     .xw = xp.wide != nullptr ? xp.wide + 2 * m0 * xp.ld : nullptr,
                     .ldx = xp.ld,
                     .panel = w.data.data() + p0 * panel_bytes,
                     .panel_bytes = panel_bytes,
                     .pairs = xp.ld,
                     .y = y + m0 * ldy + p0 * kPanelWidth,
                     .ldy = ldy,
                     .valid = w.n - p0 * kPanelWidth,
                     .prefetch = prefetch};
    kBf16Table<K>[(rows - 1) * kMaxPanelsAll + (panels - 1)](t);
  });
}

// Rows from which the emulation unpacks each weight block once (micro_bf16_unpacked): the
// unpacked block is written to L2 and read back by every row block, which pays off only over
// enough row blocks (kernels_bench gemm --gemm-rows 16..256 on qwen3-0.6b shapes, 2 threads:
// unpacking loses at 16–64 rows, e.g. 0.39–0.63 against 0.53–0.73 of the FMA peak, and wins from
// about 128). Pairs per unpacked block: a 4-panel block of 2048 pairs is 1 MiB of float32, held in
// L2 while every row block runs over it (smaller blocks measured slower: each block sends every
// accumulator through memory and restarts x's streams; at m = 512, 64 / 128 / 256 pairs gave 0.48
// / 0.56 / 0.65 of the FMA peak, the whole k 0.78; 64 pairs also lost at m = 32).
constexpr int64_t kUnpackMinRows = 128;
constexpr int64_t kUnpackPairs = 2048;
constexpr Shapes kBf16UnpackedShapes{6, 4, 4};

void gemm_bf16_unpacked(const BfPairs& xp, int64_t m, const PackedMatrix& w, float* y, int64_t ldy, ThreadPool* pool) {
  const auto panel_bytes = static_cast<size_t>(w.panel_bytes());
  const Shapes& shapes = kBf16UnpackedShapes;
  const int64_t block_pairs = std::min(kUnpackPairs, xp.ld);
  for_each_group(shapes, m, w, pool, /*flush=*/true, [&](int64_t p0, int panels) {
    thread_local std::vector<float> storage;
    const size_t floats = static_cast<size_t>(block_pairs * 2 * shapes.panels * kPanelWidth);
    if (storage.size() < floats + kPanelWidth) storage.resize(floats + kPanelWidth);
    float* block = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(storage.data()) + 63) & ~uintptr_t{63});
    const uint8_t* panel = w.data.data() + p0 * panel_bytes;
    for (int64_t j0 = 0; j0 < xp.ld; j0 += block_pairs) {
      const int64_t pairs = std::min(block_pairs, xp.ld - j0);
      unpack_bf16_block(panel, panel_bytes, panels, j0, pairs, block);
      for (int64_t m0 = 0; m0 < m; m0 += shapes.max_rows) {
        const int rows = static_cast<int>(std::min<int64_t>(shapes.max_rows, m - m0));
        const TileUnpacked t{.xw = xp.wide + 2 * (m0 * xp.ld + j0),
                             .ldx = xp.ld,
                             .w = block,
                             .pairs = pairs,
                             .y = y + m0 * ldy + p0 * kPanelWidth,
                             .ldy = ldy,
                             .valid = w.n - p0 * kPanelWidth,
                             .first = j0 == 0,
                             .last = j0 + pairs == xp.ld};
        kBf16Table<Bf16UnpackedK>[(rows - 1) * kMaxPanelsAll + (panels - 1)](t);
      }
    }
  });
}

}  // namespace

void gemm_bf16(const float* x, int64_t m, int64_t ldx, const PackedMatrix& w, float* y, int64_t ldy, ThreadPool* pool) {
  const bool native = active_isa() == Isa::kAvx512 && avx512_bf16_enabled();
  const BfPairs xp = round_rows_to_bf16_pairs(x, m, ldx, w.k, pool, /*widen=*/!native);
  switch (active_isa()) {
    case Isa::kAvx512:
      if (native) return gemm_bf16_simd<Bf16NativeK>(kBf16NativeShapes, false, xp, m, w, y, ldy, pool);
      if (m >= kUnpackMinRows) return gemm_bf16_unpacked(xp, m, w, y, ldy, pool);
      return gemm_bf16_simd<Bf16EmulatedK>(kBf16EmulatedShapes, true, xp, m, w, y, ldy, pool);
    case Isa::kAvx2: return gemm_bf16_simd<Bf16Avx2K>(kBf16Avx2Shapes, true, xp, m, w, y, ldy, pool);
    case Isa::kScalar: break;
  }
  DITTO_CHECK(false) << "gemm_bf16: no vector path active";
}

}  // namespace ditto::gemm_detail

#endif  // __x86_64__
