#include "kernels/gemm.h"

#include <cmath>
#include <cstring>

namespace ditto {
namespace {

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

// One weight panel against up to kRowBlock rows. Compiled for x86-64-v3 as well as the baseline:
// std::fma rounds once on both, and the chain order is the source's, so the clones agree bitwise.
__attribute__((target_clones("arch=x86-64-v3", "default")))
void panel_kernel(const float* x, int64_t rows, int64_t ldx, const uint8_t* panel, DType dtype,
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

}  // namespace

void gemm(const float* x, int64_t m, int64_t ldx, const PackedMatrix& w, float* y, int64_t ldy,
          ThreadPool* pool) {
  const int64_t num_panels = w.num_panels();
  const size_t panel_bytes = static_cast<size_t>(w.k * kPanelWidth) * dtype_size(w.dtype);
  auto run = [&](size_t begin, size_t end) {
    float out[kRowBlock * kPanelWidth];
    for (size_t p = begin; p < end; ++p) {
      const uint8_t* panel = w.data.data() + p * panel_bytes;
      const int64_t n0 = static_cast<int64_t>(p) * kPanelWidth;
      const int64_t width = std::min<int64_t>(kPanelWidth, w.n - n0);
      for (int64_t m0 = 0; m0 < m; m0 += kRowBlock) {
        const int64_t rows = std::min<int64_t>(kRowBlock, m - m0);
        panel_kernel(x + m0 * ldx, rows, ldx, panel, w.dtype, w.k, out);
        for (int64_t r = 0; r < rows; ++r)
          std::memcpy(y + (m0 + r) * ldy + n0, out + r * kPanelWidth, sizeof(float) * width);
      }
    }
  };
  if (pool == nullptr) {
    run(0, static_cast<size_t>(num_panels));
  } else {
    pool->parallel_for(static_cast<size_t>(num_panels), run);
  }
}

}  // namespace ditto
