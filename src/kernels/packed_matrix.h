// A weight matrix W [n, k] repacked once at load into panels of kPanelWidth output rows:
// f16 and f32: data[panel][kk][lane] = W[panel·16 + lane, kk]; the GEMM reads one contiguous
// 16-wide vector of weights per k step (lanes over n) and broadcasts x[m, k].
// bf16: data[panel][kk / 2][lane][kk % 2] = W[panel·16 + lane, kk], pairs of consecutive k per lane
// (the operand layout of VDPBF16PS, kernels/bf16_dot.h); the GEMM reads 16 pairs per step and
// broadcasts the pair x[m, kk], x[m, kk + 1]. An odd k's last pair ends in a zero.
// Rows past n are zero-filled. Weights keep their stored dtype: packing copies bits, never rounds.
// Quantized weights (quant != kNone, GGML block formats) are regrouped into panels of 16 rows as
// kernels/quant_gemm.h describes: Q8_0, Q4_0, Q4_1, Q4_K and Q6_K keep every stored byte and add
// none; the other formats are held in a wider layout that keeps every value exactly.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "core/huge_page_allocator.h"
#include "core/thread_pool.h"
#include "kernels/quant.h"

namespace ditto {

inline constexpr int64_t kPanelWidth = 16;

// One source matrix to pack: rows [n, k] row-major in `dtype`, possibly unaligned (mmap). With
// quant != kNone, data is n rows of GGML blocks (quant_row_bytes(quant, k) bytes each) and dtype
// is ignored.
struct MatrixSource {
  const void* data;  // [n, k] dtype, or [n, quant_row_bytes(quant, k)] bytes
  DType dtype;
  int64_t n;
  int64_t k;
  QuantType quant = QuantType::kNone;
};

struct PackedMatrix {
  int64_t n = 0;                                          // output features (rows of W)
  int64_t k = 0;                                          // input features (columns of W)
  DType dtype = DType::kBF16;                             // meaningful when quant is kNone
  QuantType quant = QuantType::kNone;                     // GGML block format, or kNone for dtype
  std::vector<uint8_t, HugePageAllocator<uint8_t>> data;  // [ceil(n/16), k, 16] dtype (bf16: [ceil(n/16),
                                                          // ceil(k/2), 16, 2]), or quantized panels

  int64_t num_panels() const { return (n + kPanelWidth - 1) / kPanelWidth; }
  // Bytes of one packed panel (16 rows, all k; bf16: k rounded up to even).
  int64_t panel_bytes() const;
  // k rounded up to the packing's step: even for bf16 (pairs), k otherwise.
  int64_t padded_k() const;
  // Bytes of the weights as the checkpoint stores them: n·k·dtype_size, or n·quant_row_bytes(quant, k).
  // The decode roofline's numerator (padding rows of the last panel excluded).
  int64_t weight_bytes() const;
  // Element W[row, col] as float32: exact for float dtypes; dequantize_row_f32's value for quantized
  // ones. Used by the embedding lookup on tied weights.
  float at(int64_t row, int64_t col) const;
  // Row `row` of W into out[k] float32 (as at()).
  void row_to_f32(int64_t row, float* out) const;
};

// Packs the row-wise concatenation of `parts` (all with the same k and dtype, or the same k and
// quant type) into one matrix, e.g. q_proj, k_proj, v_proj into one QKV weight. Concatenation
// along n leaves every output's reduction unchanged, so fused and separate projections give
// identical bits. Throws Error(kInvalidArgument) if the parts disagree on k, dtype or quant type
// (naming both), or if a quantized part's k is not a multiple of its block size. pool may be null.
// Packing runs in chunks of rows; after each chunk `on_rows_packed(part, row_begin, row_end)` (if
// set) is told which source rows of which part will not be read again, so a caller packing from
// a memory map can drop those pages and keep peak memory near the packed size.
using RowsPackedFn = std::function<void(size_t part, int64_t row_begin, int64_t row_end)>;
PackedMatrix pack_matrix(std::span<const MatrixSource> parts, ThreadPool* pool = nullptr,
                         const RowsPackedFn& on_rows_packed = nullptr);

// Overwrites rows [row_begin, row_begin + rows.n) of an already packed float matrix w with `rows`
// ([rows.n, w.k] in w.dtype, row-major), in place: the bytes are those pack_matrix would have
// written for the same rows, and every other row keeps its bytes. No memory is allocated (a weight
// update, model/weight_update.h). Throws Error(kInvalidArgument) for a quantized matrix, or rows
// whose k or dtype differ from w's or that fall outside [0, w.n). pool may be null.
void pack_rows_into(PackedMatrix& w, int64_t row_begin, const MatrixSource& rows, ThreadPool* pool = nullptr);

}  // namespace ditto
