#include "model/checkpoint_tensors.h"

#include <cstring>
#include <span>

#include "kernels/quant.h"

namespace ditto {
namespace {

class SafetensorsTensors final : public CheckpointTensors {
 public:
  explicit SafetensorsTensors(const WeightStore& store) : store_(store) {}

  std::vector<float> vector(const TensorDesc& d) const override {
    const TensorInfo& t = store_.get(d.name);
    std::vector<float> v(static_cast<size_t>(t.numel()));
    widen_to_f32(t.data, t.dtype, v.size(), d.unit_offset, v.data());
    store_.release(t);
    return v;
  }
  MatrixSource matrix(const TensorDesc& d, std::vector<uint8_t>& /*copy*/) const override {
    const TensorInfo& t = store_.get(d.name);
    return MatrixSource{t.data, t.dtype, t.shape[0], t.shape[1]};
  }
  void release_rows(const TensorDesc& d, int64_t row_begin, int64_t row_end) const override {
    const TensorInfo& t = store_.get(d.name);
    const size_t row_bytes = static_cast<size_t>(t.shape[1]) * dtype_size(t.dtype);
    t.file->release(t.file_offset + static_cast<size_t>(row_begin) * row_bytes,
                    static_cast<size_t>(row_end - row_begin) * row_bytes);
  }
  void release(const TensorDesc& d) const override { store_.release(store_.get(d.name)); }

 private:
  const WeightStore& store_;
};

class GgufTensors final : public CheckpointTensors {
 public:
  GgufTensors(const GgufFile& g, const ModelConfig& c) : g_(g), c_(c) {}

  // A unit-offset norm (TensorDesc::unit_offset) is stored as 1 + w already.
  std::vector<float> vector(const TensorDesc& d) const override {
    const GgufWeight w = gguf_weight(g_, c_, d);
    const DType dtype = dtype_of(w.type);
    std::vector<float> v(static_cast<size_t>(w.cols));
    const size_t es = dtype_size(dtype);
    for (int64_t i = 0; i < w.cols; ++i) {
      uint8_t bytes[4];
      std::memcpy(bytes, w.data + static_cast<size_t>(i) * es, es);
      const int64_t to = w.permute_head_dim > 0 ? llama_permuted_row(i, w.permute_head_dim) : i;
      v[static_cast<size_t>(to)] = load_as_f32(bytes, dtype, 0);
    }
    release(d);
    return v;
  }
  MatrixSource matrix(const TensorDesc& d, std::vector<uint8_t>& copy) const override {
    const GgufWeight w = gguf_weight(g_, c_, d);
    const QuantType quant = quant_type_of(w.type);
    MatrixSource source{w.data, quant == QuantType::kNone ? dtype_of(w.type) : DType::kF32, w.rows, w.cols};
    source.quant = quant;
    if (w.permute_head_dim > 0) {  // back to Hugging Face's row order
      copy.resize(static_cast<size_t>(w.rows) * w.row_bytes);
      for (int64_t r = 0; r < w.rows; ++r)
        std::memcpy(copy.data() + static_cast<size_t>(llama_permuted_row(r, w.permute_head_dim)) * w.row_bytes,
                    w.data + static_cast<size_t>(r) * w.row_bytes, w.row_bytes);
      source.data = copy.data();
      release(d);
    }
    return source;
  }
  void release_rows(const TensorDesc& d, int64_t row_begin, int64_t row_end) const override {
    const GgufWeight w = gguf_weight(g_, c_, d);
    if (w.permute_head_dim > 0) return;  // packed from the copy; released already
    const size_t begin = static_cast<size_t>(w.data - g_.file().data()) + static_cast<size_t>(row_begin) * w.row_bytes;
    g_.release(begin, static_cast<size_t>(row_end - row_begin) * w.row_bytes);
  }
  void release(const TensorDesc& d) const override {
    const GgufWeight w = gguf_weight(g_, c_, d);
    g_.release(static_cast<size_t>(w.data - g_.file().data()), static_cast<size_t>(w.rows) * w.row_bytes);
  }

 private:
  const GgufFile& g_;
  const ModelConfig& c_;
};

}  // namespace

void widen_to_f32(const void* data, DType dtype, size_t n, bool unit_offset, float* out) {
  const size_t es = dtype_size(dtype);
  for (size_t i = 0; i < n; ++i) {
    uint8_t bytes[4];
    std::memcpy(bytes, static_cast<const uint8_t*>(data) + i * es, es);  // mmap data need not be aligned
    out[i] = load_as_f32(bytes, dtype, 0);
    if (unit_offset) out[i] = 1.0f + out[i];  // Gemma's (1 + w), once, in float32
  }
}

std::unique_ptr<CheckpointTensors> safetensors_tensors(const WeightStore& store) {
  return std::make_unique<SafetensorsTensors>(store);
}

std::unique_ptr<CheckpointTensors> gguf_tensors(const GgufFile& file, const ModelConfig& config) {
  return std::make_unique<GgufTensors>(file, config);
}

// The row-wise concatenation of rows[i] of each 2-D tensor descs[i], packed: one part per run of
// tensors of the same type (LinearWeight). Their mapped pages are released as they are packed.
LinearWeight load_matrix(const CheckpointTensors& tensors, const std::vector<TensorDesc>& descs,
                         const std::vector<std::pair<int64_t, int64_t>>& rows, ThreadPool* pool) {
  std::vector<MatrixSource> sources;
  std::vector<std::vector<uint8_t>> copies(descs.size());
  for (size_t i = 0; i < descs.size(); ++i) {
    MatrixSource s = tensors.matrix(descs[i], copies[i]);
    const int64_t row_bytes =
        s.quant != QuantType::kNone ? quant_row_bytes(s.quant, s.k) : s.k * static_cast<int64_t>(dtype_size(s.dtype));
    s.data = static_cast<const uint8_t*>(s.data) + rows[i].first * row_bytes;
    s.n = rows[i].second - rows[i].first;
    sources.push_back(s);
  }
  LinearWeight w;
  for (size_t begin = 0; begin < descs.size();) {
    size_t end = begin + 1;
    while (end < descs.size() && sources[end].quant == sources[begin].quant &&
           (sources[end].quant != QuantType::kNone || sources[end].dtype == sources[begin].dtype))
      ++end;
    const auto release_rows = [&](size_t part, int64_t row_begin, int64_t row_end) {
      const int64_t first = rows[begin + part].first;
      tensors.release_rows(descs[begin + part], first + row_begin, first + row_end);
    };
    w.parts.push_back(
        pack_matrix(std::span<const MatrixSource>(sources.data() + begin, end - begin), pool, release_rows));
    for (size_t i = begin; i < end; ++i) tensors.release(descs[i]);
    begin = end;
  }
  return w;
}

}  // namespace ditto
