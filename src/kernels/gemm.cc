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
#include "kernels/gemm_internal.h"
#include "kernels/kernel_tuning.h"
#include "kernels/portable_clones.h"
#include "kernels/quant_gemm.h"
#include "kernels/simd.h"

namespace ditto {

namespace gemm_detail {

// Rounds x [m, k] (row stride ldx) into this thread's pair buffers (reused across calls: their size
// is bounded by the largest m·k seen, i.e. by the step's token budget), rows split over pool.
BfPairs round_rows_to_bf16_pairs(const float* x, int64_t m, int64_t ldx, int64_t k, ThreadPool* pool, bool widen) {
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

}  // namespace gemm_detail

namespace {

using namespace gemm_detail;  // NOLINT(google-build-using-namespace)

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

constexpr Shapes kAvx512Shapes{6, 4, 8};
constexpr Shapes kAvx2Shapes{6, 1, 4};

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
