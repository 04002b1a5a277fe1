// A weight matrix W [n, k] repacked once at load into panels of kPanelWidth output rows:
// data[panel][kk][lane] = W[panel·16 + lane, kk], rows past n zero-filled. The GEMM reads one
// contiguous 16-wide vector of weights per k step (lanes over n) and broadcasts x[m, k].
// Weights keep their stored dtype (bf16, f16 or f32): packing copies bits, never rounds.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "core/huge_page_allocator.h"
#include "core/thread_pool.h"

namespace ditto {

inline constexpr int64_t kPanelWidth = 16;

// One source matrix to pack: rows [n, k] row-major in `dtype`, possibly unaligned (mmap).
struct MatrixSource {
  const void* data;  // [n, k] dtype
  DType dtype;
  int64_t n;
  int64_t k;
};

struct PackedMatrix {
  int64_t n = 0;  // output features (rows of W)
  int64_t k = 0;  // input features (columns of W)
  DType dtype = DType::kBF16;
  std::vector<uint8_t, HugePageAllocator<uint8_t>> data;  // [ceil(n/16), k, 16] dtype

  int64_t num_panels() const { return (n + kPanelWidth - 1) / kPanelWidth; }
  // Element W[row, col] as float32 (exact). Used by the embedding lookup on tied weights.
  float at(int64_t row, int64_t col) const;
  // Row `row` of W into out[k] float32.
  void row_to_f32(int64_t row, float* out) const;
};

// Packs the row-wise concatenation of `parts` (all with the same k and dtype) into one matrix,
// e.g. q_proj, k_proj, v_proj into one QKV weight. Concatenation along n leaves every output's
// reduction unchanged, so fused and separate projections give identical bits.
// Throws Error(kInvalidArgument) if the parts disagree on k or dtype. pool may be null.
// Packing runs in chunks of rows; after each chunk `on_rows_packed(part, row_begin, row_end)` (if
// set) is told which source rows of which part will not be read again, so a caller packing from
// a memory map can drop those pages and keep peak memory near the packed size.
using RowsPackedFn = std::function<void(size_t part, int64_t row_begin, int64_t row_end)>;
PackedMatrix pack_matrix(std::span<const MatrixSource> parts, ThreadPool* pool = nullptr,
                         const RowsPackedFn& on_rows_packed = nullptr);

}  // namespace ditto
