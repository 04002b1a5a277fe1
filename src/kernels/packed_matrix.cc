#include "kernels/packed_matrix.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/error.h"
#include "kernels/quant_gemm.h"

namespace ditto {

int64_t PackedMatrix::panel_bytes() const {
  if (quant != QuantType::kNone) return k / quant_format(quant).block_size * quant_panel_block_bytes(quant);
  return padded_k() * kPanelWidth * static_cast<int64_t>(dtype_size(dtype));
}

int64_t PackedMatrix::padded_k() const { return dtype == DType::kBF16 ? k + (k & 1) : k; }

int64_t PackedMatrix::weight_bytes() const {
  if (quant != QuantType::kNone) return n * quant_row_bytes(quant, k);
  return n * k * static_cast<int64_t>(dtype_size(dtype));
}

namespace {

// Element index of W[row, col] in the packed data of a float matrix (packed_matrix.h's layout).
int64_t packed_index(const PackedMatrix& w, int64_t row, int64_t col) {
  const int64_t panel = row / kPanelWidth, lane = row % kPanelWidth;
  if (w.dtype == DType::kBF16) return ((panel * w.padded_k() + col - col % 2) * kPanelWidth) + lane * 2 + col % 2;
  return (panel * w.k + col) * kPanelWidth + lane;
}

// The GGML block `block` of row `row` of a quantized matrix, dequantized to float32 into out.
void dequantize_packed_block(const PackedMatrix& w, int64_t row, int64_t block, float* out) {
  const QuantFormat& f = quant_format(w.quant);
  const uint8_t* pb = w.data.data() + (row / kPanelWidth) * w.panel_bytes() + block * quant_panel_block_bytes(w.quant);
  uint8_t bytes[256];
  unpack_quant_panel_block(w.quant, pb, static_cast<int>(row % kPanelWidth), bytes);
  dequantize_row_f32(w.quant, bytes, f.block_size, out);
}

}  // namespace

float PackedMatrix::at(int64_t row, int64_t col) const {
  if (quant != QuantType::kNone) {
    const int64_t bs = quant_format(quant).block_size;
    float values[256];
    dequantize_packed_block(*this, row, col / bs, values);
    return values[col % bs];
  }
  return load_as_f32(data.data(), dtype, static_cast<size_t>(packed_index(*this, row, col)));
}

void PackedMatrix::row_to_f32(int64_t row, float* out) const {
  if (quant != QuantType::kNone) {
    const int64_t bs = quant_format(quant).block_size;
    for (int64_t b = 0; b < k / bs; ++b) dequantize_packed_block(*this, row, b, out + b * bs);
    return;
  }
  for (int64_t col = 0; col < k; ++col)
    out[col] = load_as_f32(data.data(), dtype, static_cast<size_t>(packed_index(*this, row, col)));
}

namespace {

// Copies the 16 rows rows[lane] (row-major, k columns; null: the lane is left as it is) into one
// panel at dst. ES: element size in bytes; PAIRS: the bf16 layout (pairs of consecutive k per lane).
template <size_t ES, bool PAIRS>
void pack_lanes(const uint8_t* const (&rows)[kPanelWidth], int64_t k, uint8_t* dst) {
  for (int64_t col = 0; col < k; ++col) {
    // bf16 (pairs): element (col, lane) at ((col − col % 2)·16 + lane·2 + col % 2); else col·16 + lane.
    const bool pairs = PAIRS;
    uint8_t* d = dst + static_cast<size_t>(pairs ? (col - col % 2) * kPanelWidth + col % 2 : col * kPanelWidth) * ES;
    const size_t lane_stride = (pairs ? 2 : 1) * ES;
    for (int lane = 0; lane < kPanelWidth; ++lane)
      if (rows[lane] != nullptr) std::memcpy(d + lane * lane_stride, rows[lane] + col * ES, ES);
  }
}

// pack_lanes for a float matrix of dtype `dtype`.
void pack_lanes(DType dtype, const uint8_t* const (&rows)[kPanelWidth], int64_t k, uint8_t* dst) {
  if (dtype == DType::kBF16) {
    pack_lanes<2, true>(rows, k, dst);
  } else if (dtype_size(dtype) == 2) {
    pack_lanes<2, false>(rows, k, dst);
  } else {
    pack_lanes<4, false>(rows, k, dst);
  }
}

// Copies panel `p` (16 output rows, all k columns) from the row-major sources. Reads 16 rows as
// parallel sequential streams and writes the panel contiguously.
void pack_panel(std::span<const MatrixSource> parts, int64_t p, DType dtype, int64_t k, uint8_t* dst) {
  const uint8_t* rows[kPanelWidth] = {};
  const size_t es = dtype_size(dtype);
  int64_t row = p * kPanelWidth;
  size_t part = 0;
  int64_t part_row0 = 0;  // first global row of parts[part]
  for (int lane = 0; lane < kPanelWidth; ++lane, ++row) {
    while (part < parts.size() && row >= part_row0 + parts[part].n) part_row0 += parts[part++].n;
    if (part == parts.size()) break;  // past n: the lane stays zero
    rows[lane] = static_cast<const uint8_t*>(parts[part].data) + static_cast<size_t>((row - part_row0) * k) * es;
  }
  pack_lanes(dtype, rows, k, dst);
}

// Panel `p` of quantized parts: each panel block from the 16 rows' GGML blocks.
void pack_quant_panel(std::span<const MatrixSource> parts, int64_t p, QuantType quant, int64_t k, uint8_t* dst) {
  const uint8_t* rows[kPanelWidth] = {};
  const int64_t row_bytes = quant_row_bytes(quant, k);
  int64_t row = p * kPanelWidth;
  size_t part = 0;
  int64_t part_row0 = 0;
  for (int lane = 0; lane < kPanelWidth; ++lane, ++row) {
    while (part < parts.size() && row >= part_row0 + parts[part].n) part_row0 += parts[part++].n;
    if (part == parts.size()) break;
    rows[lane] = static_cast<const uint8_t*>(parts[part].data) + (row - part_row0) * row_bytes;
  }
  const QuantFormat& f = quant_format(quant);
  const int64_t pb_bytes = quant_panel_block_bytes(quant);
  for (int64_t b = 0; b < k / f.block_size; ++b) {
    const uint8_t* src[kPanelWidth];
    for (int lane = 0; lane < kPanelWidth; ++lane)
      src[lane] = rows[lane] == nullptr ? nullptr : rows[lane] + b * f.block_bytes;
    pack_quant_panel_block(quant, src, dst + b * pb_bytes);
  }
}

std::string part_label(const MatrixSource& p) {
  return "k=" + std::to_string(p.k) + " " +
         (p.quant != QuantType::kNone ? std::string(quant_format(p.quant).name) : std::string(dtype_name(p.dtype)));
}

}  // namespace

PackedMatrix pack_matrix(std::span<const MatrixSource> parts, ThreadPool* pool, const RowsPackedFn& on_rows_packed) {
  DITTO_CHECK(!parts.empty());
  PackedMatrix out;
  out.k = parts[0].k;
  out.dtype = parts[0].dtype;
  out.quant = parts[0].quant;
  for (size_t i = 0; i < parts.size(); ++i) {
    const MatrixSource& p = parts[i];
    if (p.k != out.k || p.quant != out.quant || (out.quant == QuantType::kNone && p.dtype != out.dtype))
      throw_invalid_argument("pack_matrix: part " + std::to_string(i) + " (" + part_label(p) +
                             ") differs from part 0 (" + part_label(parts[0]) + ") in k, dtype or quant type");
    out.n += p.n;
  }
  if (out.quant != QuantType::kNone) {
    quant_row_bytes(out.quant, out.k);  // throws unless k is whole blocks
  }
  const auto panel_bytes = static_cast<size_t>(out.panel_bytes());
  out.data.assign(static_cast<size_t>(out.num_panels()) * panel_bytes, 0);
  auto run = [&](size_t begin, size_t end) {
    for (size_t p = begin; p < end; ++p) {
      uint8_t* dst = out.data.data() + p * panel_bytes;
      if (out.quant != QuantType::kNone) {
        pack_quant_panel(parts, static_cast<int64_t>(p), out.quant, out.k, dst);
      } else {
        pack_panel(parts, static_cast<int64_t>(p), out.dtype, out.k, dst);
      }
    }
  };
  // Chunks of ~16 MiB of packed data: small enough to bound the mapped pages alive at once.
  const auto panels_per_chunk =
      static_cast<int64_t>(std::max<size_t>(1, (size_t{16} << 20) / std::max<size_t>(panel_bytes, 1)));
  for (int64_t c0 = 0; c0 < out.num_panels(); c0 += panels_per_chunk) {
    const int64_t c1 = std::min(out.num_panels(), c0 + panels_per_chunk);
    const auto chunk = [&](size_t b, size_t e) { run(static_cast<size_t>(c0) + b, static_cast<size_t>(c0) + e); };
    if (pool == nullptr) {
      chunk(0, static_cast<size_t>(c1 - c0));
    } else {
      pool->parallel_for(static_cast<size_t>(c1 - c0), chunk);
    }
    if (!on_rows_packed) continue;
    // Global rows [c0·16, c1·16) are done: report them per part.
    int64_t part_row0 = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      const int64_t b = std::max<int64_t>(c0 * kPanelWidth - part_row0, 0);
      const int64_t e = std::min<int64_t>(c1 * kPanelWidth - part_row0, parts[i].n);
      if (b < e) on_rows_packed(i, b, e);
      part_row0 += parts[i].n;
    }
  }
  return out;
}

void pack_rows_into(PackedMatrix& w, int64_t row_begin, const MatrixSource& rows, ThreadPool* pool) {
  if (w.quant != QuantType::kNone || rows.quant != QuantType::kNone)
    throw_invalid_argument("pack_rows_into: quantized matrices are packed whole (pack_matrix)");
  if (rows.k != w.k || rows.dtype != w.dtype || row_begin < 0 || rows.n < 0 || row_begin + rows.n > w.n)
    throw_invalid_argument("pack_rows_into: rows [" + std::to_string(row_begin) + ", " +
                           std::to_string(row_begin + rows.n) + ") " + part_label(rows) + " do not fit a matrix of n=" +
                           std::to_string(w.n) + " " + part_label(MatrixSource{nullptr, w.dtype, w.n, w.k}));
  if (rows.n == 0) return;
  const size_t es = dtype_size(w.dtype);
  const auto panel_bytes = static_cast<size_t>(w.panel_bytes());
  const int64_t first_panel = row_begin / kPanelWidth;
  const int64_t end_panel = (row_begin + rows.n + kPanelWidth - 1) / kPanelWidth;
  auto run = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      const int64_t p = first_panel + static_cast<int64_t>(i);
      const uint8_t* src[kPanelWidth] = {};  // the lanes outside the rows keep their bytes
      for (int lane = 0; lane < kPanelWidth; ++lane) {
        const int64_t r = p * kPanelWidth + lane - row_begin;
        if (r >= 0 && r < rows.n)
          src[lane] = static_cast<const uint8_t*>(rows.data) + static_cast<size_t>(r * w.k) * es;
      }
      pack_lanes(w.dtype, src, w.k, w.data.data() + static_cast<size_t>(p) * panel_bytes);
    }
  };
  const auto num_panels = static_cast<size_t>(end_panel - first_panel);
  if (pool == nullptr) {
    run(0, num_panels);
  } else {
    pool->parallel_for(num_panels, run);
  }
}

}  // namespace ditto
