#include "kernels/gemm.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "core/cpu_features.h"
#include "core/error.h"
#include "kernels/bf16_dot.h"
#include "kernels/convert.h"
#include "kernels/kernel_tuning.h"
#include "kernels/portable_clones.h"
#include "kernels/quant_gemm.h"
#include "kernels/simd.h"

namespace ditto {
namespace {

// ---- bf16 activations ----------------------------------------------------------------------
// A bf16-weight GEMM rounds x to bf16 (core/dtype.h f32_to_bf16) once per call, into pairs:
// row r holds ceil(k/2) 32-bit words, word j = (x[r, 2j], x[r, 2j + 1]) with element 0 in the low
// half and an odd k's missing last element zero (kernels/bf16_dot.h's operand layout).

struct BfPairs {
  const uint16_t* data = nullptr;  // [m, ld] pairs: [m, 2·ld] bf16
  int64_t ld = 0;                  // pairs per row: ceil(k / 2)
  // With `widen`: the same values as float32, [m, 2·ld] (element 2j even, 2j + 1 odd), for the
  // FMA emulation to broadcast straight from memory; else null.
  const float* wide = nullptr;

  // Pair j of row r as one word (element 0 in bits 0–15 on this little-endian machine).
  uint32_t at(int64_t r, int64_t j) const {
    uint32_t v;
    std::memcpy(&v, data + 2 * (r * ld + j), sizeof(v));
    return v;
  }
};

// Rounds x [m, k] (row stride ldx) into this thread's pair buffers (reused across calls: their size
// is bounded by the largest m·k seen, i.e. by the step's token budget), rows split over pool.
BfPairs round_rows_to_bf16_pairs(const float* x, int64_t m, int64_t ldx, int64_t k, ThreadPool* pool,
                                 bool widen = false) {
  thread_local std::vector<uint16_t> buffer;
  thread_local std::vector<float> wide_buffer;
  const int64_t ld = (k + 1) / 2;
  const auto size = static_cast<size_t>(2 * m * ld);
  if (buffer.size() < size) buffer.resize(size);
  if (widen && wide_buffer.size() < size) wide_buffer.resize(size);
  uint16_t* out = buffer.data();
  float* wide = widen ? wide_buffer.data() : nullptr;
  auto run = [&](size_t begin, size_t end) {
    for (size_t r = begin; r < end; ++r) {
      uint16_t* row = out + static_cast<int64_t>(r) * 2 * ld;
      if (k % 2 == 1) row[k] = 0;  // the missing odd element is zero
      round_to_bf16(x + static_cast<int64_t>(r) * ldx, k, row);
      if (wide != nullptr)
        for (int64_t i = 0; i < 2 * ld; ++i) wide[static_cast<int64_t>(r) * 2 * ld + i] = bf16_to_f32(row[i]);
    }
  };
  if (pool == nullptr || m < 16) {
    run(0, static_cast<size_t>(m));
  } else {
    pool->parallel_for(static_cast<size_t>(m), run);
  }
  return {out, ld, wide};
}

// ---- Portable path: the definition -----------------------------------------------------------

constexpr int64_t kRowBlock = 4;  // rows of x sharing one pass over a weight panel

// Converts 16 packed weights to float32 (exact).
inline void load_panel_row(const uint8_t* p, DType dtype, float (&w)[kPanelWidth]) {
  switch (dtype) {
    case DType::kBF16: {
      uint16_t h[kPanelWidth];
      std::memcpy(h, p, sizeof(h));
      for (int j = 0; j < kPanelWidth; ++j) w[j] = bf16_to_f32(h[j]);
      break;
    }
    case DType::kF16: {
      uint16_t h[kPanelWidth];
      std::memcpy(h, p, sizeof(h));
      for (int j = 0; j < kPanelWidth; ++j) w[j] = f16_to_f32(h[j]);
      break;
    }
    case DType::kF32: std::memcpy(w, p, sizeof(w)); break;
  }
}

// One weight panel against up to kRowBlock rows: acc[r][j] = fma(x[r, kk], W[n0 + j, kk], acc[r][j])
// for kk = 0, 1, ..., k−1.
DITTO_PORTABLE_HOT void panel_kernel(const float* x, int64_t rows, int64_t ldx, const uint8_t* panel, DType dtype,
                                     int64_t k, float* acc_out /* [rows, 16] */) {
  const size_t stride = static_cast<size_t>(kPanelWidth) * dtype_size(dtype);
  float acc[kRowBlock][kPanelWidth] = {};
  float w[kPanelWidth];
  for (int64_t kk = 0; kk < k; ++kk) {
    load_panel_row(panel + kk * stride, dtype, w);
    for (int64_t r = 0; r < rows; ++r) {
      const float xv = x[r * ldx + kk];
      for (int j = 0; j < kPanelWidth; ++j) acc[r][j] = std::fma(xv, w[j], acc[r][j]);
    }
  }
  for (int64_t r = 0; r < rows; ++r) std::memcpy(acc_out + r * kPanelWidth, acc[r], sizeof(acc[r]));
}

// bf16 weights: one panel against rows m0 .. m0 + rows − 1 (at most kRowBlock) of the pairs xp,
// acc[r][j] = bf16_dot2(acc[r][j], xp[r, jj], W pair jj of lane j) for jj ascending, stored
// with NaNs canonical.
DITTO_PORTABLE_HOT void panel_kernel_bf16(const BfPairs& xp, int64_t m0, int64_t rows, const uint8_t* panel,
                                          float* acc_out /* [rows, 16] */) {
  float acc[kRowBlock][kPanelWidth] = {};
  uint32_t w[kPanelWidth];
  for (int64_t jj = 0; jj < xp.ld; ++jj) {
    std::memcpy(w, panel + jj * sizeof(w), sizeof(w));
    for (int64_t r = 0; r < rows; ++r) {
      const uint32_t pair = xp.at(m0 + r, jj);
      for (int j = 0; j < kPanelWidth; ++j) acc[r][j] = bf16_dot2(acc[r][j], pair, w[j]);
    }
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int j = 0; j < kPanelWidth; ++j) acc_out[r * kPanelWidth + j] = canonical_nan_if_nan(acc[r][j]);
}

void gemm_portable(const float* x, int64_t m, int64_t ldx, const PackedMatrix& w, float* y, int64_t ldy,
                   ThreadPool* pool) {
  const BfPairs xp = w.dtype == DType::kBF16 ? round_rows_to_bf16_pairs(x, m, ldx, w.k, pool) : BfPairs{};
  const auto panel_bytes = static_cast<size_t>(w.panel_bytes());
  auto run = [&](size_t begin, size_t end) {
    float out[kRowBlock * kPanelWidth];
    for (size_t p = begin; p < end; ++p) {
      const uint8_t* panel = w.data.data() + p * panel_bytes;
      const int64_t n0 = static_cast<int64_t>(p) * kPanelWidth;
      const int64_t width = std::min<int64_t>(kPanelWidth, w.n - n0);
      for (int64_t m0 = 0; m0 < m; m0 += kRowBlock) {
        const int64_t rows = std::min<int64_t>(kRowBlock, m - m0);
        if (w.dtype == DType::kBF16) {
          panel_kernel_bf16(xp, m0, rows, panel, out);
        } else {
          panel_kernel(x + m0 * ldx, rows, ldx, panel, w.dtype, w.k, out);
        }
        for (int64_t r = 0; r < rows; ++r)
          std::memcpy(y + (m0 + r) * ldy + n0, out + r * kPanelWidth, sizeof(float) * width);
      }
    }
  };
  if (pool == nullptr) {
    run(0, static_cast<size_t>(w.num_panels()));
  } else {
    pool->parallel_for(static_cast<size_t>(w.num_panels()), run);
  }
}

// ---- SIMD paths --------------------------------------------------------------------------------
// A micro-kernel holds an MR × NP tile of outputs (MR rows of x, NP panels of 16 outputs) in
// registers, one accumulator lane per output, and runs each lane's fma chain over k in increasing
// order from +0.0: exactly panel_kernel's per-output computation, so the bits are the same for
// any tile shape, row grouping or thread split.

#if defined(__x86_64__)

// Arguments of one micro-kernel call.
struct Tile {
  const float* x;  // [MR, k] row stride ldx
  int64_t ldx;
  const uint8_t* panel;  // first of NP consecutive panels
  size_t panel_bytes;
  int64_t k;
  float* y;  // [MR, NP·16] row stride ldy
  int64_t ldy;
  int64_t valid;  // outputs of these panels that exist (the rest is zero padding)
};

template <DType D>
DITTO_AVX512 DITTO_INLINE __m512 load_w_x16(const uint8_t* p) {
  if constexpr (D == DType::kF16) return simd::load_f16_x16(reinterpret_cast<const uint16_t*>(p));
  if constexpr (D == DType::kF32) return _mm512_loadu_ps(reinterpret_cast<const float*>(p));
}

template <int MR, int NP, DType D>
DITTO_AVX512 void micro_avx512(const Tile& t) {
  constexpr size_t kStep = kPanelWidth * (D == DType::kF32 ? 4 : 2);
  __m512 acc[MR][NP];
  for (int r = 0; r < MR; ++r)
    for (int p = 0; p < NP; ++p) acc[r][p] = _mm512_setzero_ps();
  const uint8_t* w = t.panel;
  for (int64_t kk = 0; kk < t.k; ++kk, w += kStep) {
    __m512 wv[NP];
    for (int p = 0; p < NP; ++p) wv[p] = load_w_x16<D>(w + p * t.panel_bytes);
    for (int r = 0; r < MR; ++r) {
      const __m512 xb = _mm512_set1_ps(t.x[r * t.ldx + kk]);
      for (int p = 0; p < NP; ++p) acc[r][p] = _mm512_fmadd_ps(xb, wv[p], acc[r][p]);
    }
  }
  for (int p = 0; p < NP; ++p) {
    const int64_t lanes = std::min<int64_t>(kPanelWidth, t.valid - p * kPanelWidth);
    const __mmask16 mask = simd::first_lanes_x16(lanes);
    for (int r = 0; r < MR; ++r) _mm512_mask_storeu_ps(t.y + r * t.ldy + p * kPanelWidth, mask, acc[r][p]);
  }
}

template <DType D>
DITTO_AVX2 DITTO_INLINE __m256 load_w_x8(const uint8_t* p) {
  if constexpr (D == DType::kF16) return simd::load_f16_x8(reinterpret_cast<const uint16_t*>(p));
  if constexpr (D == DType::kF32) return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
}

// AVX2: a panel's 16 lanes are two 8-lane registers (h = 0: lanes 0–7, h = 1: lanes 8–15).
template <int MR, int NP, DType D>
DITTO_AVX2 void micro_avx2(const Tile& t) {
  constexpr size_t kSize = D == DType::kF32 ? 4 : 2;
  constexpr size_t kStep = kPanelWidth * kSize;
  __m256 acc[MR][NP][2];
  for (int r = 0; r < MR; ++r)
    for (int p = 0; p < NP; ++p) acc[r][p][0] = acc[r][p][1] = _mm256_setzero_ps();
  const uint8_t* w = t.panel;
  for (int64_t kk = 0; kk < t.k; ++kk, w += kStep) {
    __m256 wv[NP][2];
    for (int p = 0; p < NP; ++p) {
      wv[p][0] = load_w_x8<D>(w + p * t.panel_bytes);
      wv[p][1] = load_w_x8<D>(w + p * t.panel_bytes + 8 * kSize);
    }
    for (int r = 0; r < MR; ++r) {
      const __m256 xb = _mm256_set1_ps(t.x[r * t.ldx + kk]);
      for (int p = 0; p < NP; ++p) {
        acc[r][p][0] = _mm256_fmadd_ps(xb, wv[p][0], acc[r][p][0]);
        acc[r][p][1] = _mm256_fmadd_ps(xb, wv[p][1], acc[r][p][1]);
      }
    }
  }
  for (int p = 0; p < NP; ++p) {
    const int64_t lanes = std::min<int64_t>(kPanelWidth, t.valid - p * kPanelWidth);
    for (int r = 0; r < MR; ++r) {
      float* out = t.y + r * t.ldy + p * kPanelWidth;
      if (lanes == kPanelWidth) {
        _mm256_storeu_ps(out, acc[r][p][0]);
        _mm256_storeu_ps(out + 8, acc[r][p][1]);
      } else {
        alignas(32) float buf[kPanelWidth];
        _mm256_store_ps(buf, acc[r][p][0]);
        _mm256_store_ps(buf + 8, acc[r][p][1]);
        std::memcpy(out, buf, sizeof(float) * lanes);
      }
    }
  }
}

using MicroFn = void (*)(const Tile&);

// Tile shapes per path: kMaxRows rows of x by kPanels panels (kPanelsOneRow when m = 1, where the
// tile is memory-bound and more independent chains hide the FMA latency).
struct Shapes {
  int max_rows;
  int panels;
  int panels_one_row;
};
constexpr Shapes kAvx512Shapes{6, 4, 8};
constexpr Shapes kAvx2Shapes{6, 1, 4};
constexpr int kMaxRowsAll = 6;
constexpr int kMaxPanelsAll = 8;

template <template <int, int, DType> class K, DType D, int... I>
constexpr std::array<MicroFn, sizeof...(I)> make_table(std::integer_sequence<int, I...>) {
  return {K<I / kMaxPanelsAll + 1, I % kMaxPanelsAll + 1, D>::fn...};
}

template <int MR, int NP, DType D>
struct Avx512K {
  static constexpr MicroFn fn = &micro_avx512<MR, NP, D>;
};
template <int MR, int NP, DType D>
struct Avx2K {
  static constexpr MicroFn fn = &micro_avx2<MR, NP, D>;
};

template <template <int, int, DType> class K, DType D>
constexpr auto kTable = make_table<K, D>(std::make_integer_sequence<int, kMaxRowsAll * kMaxPanelsAll>{});

template <template <int, int, DType> class K>
MicroFn micro_fn(DType d, int rows, int panels) {
  const int i = (rows - 1) * kMaxPanelsAll + (panels - 1);
  switch (d) {
    case DType::kBF16: break;  // gemm_bf16
    case DType::kF16: return kTable<K, DType::kF16>[i];
    case DType::kF32: return kTable<K, DType::kF32>[i];
  }
  return nullptr;
}

// Runs group(p0, panels) over every group of shapes.panels panels (panels_one_row when m = 1),
// groups handed to threads. `flush`: each thread runs its groups under ScopedFlushDenormals.
template <class GroupFn>
void for_each_group(const Shapes& shapes, int64_t m, const PackedMatrix& w, ThreadPool* pool, bool flush,
                    const GroupFn& group_fn) {
  const int64_t num_panels = w.num_panels();
  const int group = m == 1 ? shapes.panels_one_row : shapes.panels;
  const int64_t num_groups = (num_panels + group - 1) / group;
  auto run = [&](size_t begin, size_t end) {
    std::optional<ScopedFlushDenormals> ftz_daz;
    if (flush) ftz_daz.emplace();
    for (size_t g = begin; g < end; ++g) {
      const int64_t p0 = static_cast<int64_t>(g) * group;
      group_fn(p0, static_cast<int>(std::min<int64_t>(group, num_panels - p0)));
    }
  };
  if (pool == nullptr) {
    run(0, static_cast<size_t>(num_groups));
  } else {
    const size_t group_bytes = static_cast<size_t>(group * w.panel_bytes());
    pool->parallel_for_dynamic(static_cast<size_t>(num_groups),
                               weight_chunk_groups(static_cast<size_t>(num_groups), group_bytes, *pool), run);
  }
}

// Runs tile(p0, panels, m0, rows) over every (panel group, row block) of y: for_each_group's
// groups, rows in blocks of shapes.max_rows.
template <class TileFn>
void for_each_tile(const Shapes& shapes, int64_t m, const PackedMatrix& w, ThreadPool* pool, bool flush,
                   const TileFn& tile) {
  for_each_group(shapes, m, w, pool, flush, [&](int64_t p0, int panels) {
    for (int64_t m0 = 0; m0 < m; m0 += shapes.max_rows)
      tile(p0, panels, m0, static_cast<int>(std::min<int64_t>(shapes.max_rows, m - m0)));
  });
}

template <template <int, int, DType> class K>
void gemm_simd(const Shapes& shapes, const float* x, int64_t m, int64_t ldx, const PackedMatrix& w, float* y,
               int64_t ldy, ThreadPool* pool) {
  const auto panel_bytes = static_cast<size_t>(w.panel_bytes());
  for_each_tile(shapes, m, w, pool, /*flush=*/false, [&](int64_t p0, int panels, int64_t m0, int rows) {
    const Tile t{.x = x + m0 * ldx,
                 .ldx = ldx,
                 .panel = w.data.data() + p0 * panel_bytes,
                 .panel_bytes = panel_bytes,
                 .k = w.k,
                 .y = y + m0 * ldy + p0 * kPanelWidth,
                 .ldy = ldy,
                 .valid = w.n - p0 * kPanelWidth};
    micro_fn<K>(w.dtype, rows, panels)(t);
  });
}

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

#endif  // __x86_64__

}  // namespace

void gemm(const float* x, int64_t m, int64_t ldx, const PackedMatrix& w, float* y, int64_t ldy, ThreadPool* pool) {
  if (m <= 0 || w.n == 0) return;
  if (w.quant != QuantType::kNone) return quant_gemm(x, m, ldx, w, y, ldy, pool);
#if defined(__x86_64__)
  switch (active_isa()) {
    case Isa::kAvx512:
      if (w.dtype == DType::kBF16) return gemm_bf16(x, m, ldx, w, y, ldy, pool);
      return gemm_simd<Avx512K>(kAvx512Shapes, x, m, ldx, w, y, ldy, pool);
    case Isa::kAvx2:
      if (w.dtype == DType::kBF16) return gemm_bf16(x, m, ldx, w, y, ldy, pool);
      return gemm_simd<Avx2K>(kAvx2Shapes, x, m, ldx, w, y, ldy, pool);
    case Isa::kScalar: break;
  }
#endif
  gemm_portable(x, m, ldx, w, y, ldy, pool);
}

}  // namespace ditto
