#include "kernels/packed_matrix.h"

#include <cstring>
#include <string>

#include "core/error.h"

namespace ditto {

float PackedMatrix::at(int64_t row, int64_t col) const {
  const int64_t index = ((row / kPanelWidth) * k + col) * kPanelWidth + row % kPanelWidth;
  return load_as_f32(data.data(), dtype, static_cast<size_t>(index));
}

void PackedMatrix::row_to_f32(int64_t row, float* out) const {
  const int64_t lane = row % kPanelWidth;
  const int64_t base = (row / kPanelWidth) * k * kPanelWidth + lane;
  for (int64_t col = 0; col < k; ++col)
    out[col] = load_as_f32(data.data(), dtype, static_cast<size_t>(base + col * kPanelWidth));
}

PackedMatrix pack_matrix(std::span<const MatrixSource> parts) {
  DITTO_CHECK(!parts.empty());
  PackedMatrix out;
  out.k = parts[0].k;
  out.dtype = parts[0].dtype;
  for (const MatrixSource& p : parts) {
    if (p.k != out.k || p.dtype != out.dtype)
      throw_invalid_argument("pack_matrix: parts differ in k (" + std::to_string(p.k) + " vs " +
                             std::to_string(out.k) + ") or dtype");
    out.n += p.n;
  }
  const size_t es = dtype_size(out.dtype);
  out.data.assign(static_cast<size_t>(out.num_panels() * out.k * kPanelWidth) * es, 0);
  int64_t row = 0;
  for (const MatrixSource& p : parts) {
    const auto* src = static_cast<const uint8_t*>(p.data);
    for (int64_t r = 0; r < p.n; ++r, ++row) {
      const int64_t lane = row % kPanelWidth;
      uint8_t* dst = out.data.data() + ((row / kPanelWidth) * out.k * kPanelWidth + lane) * es;
      const uint8_t* s = src + static_cast<size_t>(r * p.k) * es;
      for (int64_t col = 0; col < p.k; ++col)
        std::memcpy(dst + col * kPanelWidth * es, s + col * es, es);
    }
  }
  return out;
}

}  // namespace ditto
