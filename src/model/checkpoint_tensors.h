// Where CausalLM::load() reads tensors from: a Hugging Face safetensors checkpoint
// (checkpoint/safetensors.h) or a llama.cpp GGUF file (checkpoint/gguf_model.h), behind one
// interface, and the packing of a fused linear layer from its tensors (model/linear.h).
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "architecture/config.h"
#include "architecture/model_tensors.h"
#include "checkpoint/gguf_model.h"
#include "checkpoint/safetensors.h"
#include "core/thread_pool.h"
#include "kernels/packed_matrix.h"
#include "model/linear.h"

namespace ditto {

// The tensors of a checkpoint, as load() takes them: Hugging Face safetensors or a GGUF file.
class CheckpointTensors {
 public:
  virtual ~CheckpointTensors() = default;
  // A 1-D tensor (norm weight, bias) converted to float32, a unit-offset norm weight as 1 + w
  // (TensorDesc::unit_offset); its mapped pages are released.
  virtual std::vector<float> vector(const TensorDesc& t) const = 0;
  // A 2-D tensor as a packing source in Hugging Face row order. When the rows must be reordered
  // the source points into `copy`, which the caller keeps until packing is done.
  virtual MatrixSource matrix(const TensorDesc& t, std::vector<uint8_t>& copy) const = 0;
  // Drops rows [row_begin, row_end) of t's mapped pages (packed, not read again); release() all.
  virtual void release_rows(const TensorDesc& t, int64_t row_begin, int64_t row_end) const = 0;
  virtual void release(const TensorDesc& t) const = 0;
};

// n values of a 1-D tensor (norm weight, bias) in `dtype` (possibly unaligned: mmap) into out[n]
// float32, exactly; with unit_offset (TensorDesc::unit_offset) each as 1 + w, one float32 add.
void widen_to_f32(const void* data, DType dtype, size_t n, bool unit_offset, float* out);

// The tensors of a safetensors checkpoint (`store` must outlive the result).
std::unique_ptr<CheckpointTensors> safetensors_tensors(const WeightStore& store);
// The tensors of a GGUF file, in Hugging Face's names, shapes and row order (llama.cpp's q/k row
// permutation undone); `file` and `config` must outlive the result.
std::unique_ptr<CheckpointTensors> gguf_tensors(const GgufFile& file, const ModelConfig& config);

// The row-wise concatenation of rows[i] of each 2-D tensor descs[i], packed: one part per run of
// tensors of the same type (LinearWeight). Their mapped pages are released as they are packed.
LinearWeight load_matrix(const CheckpointTensors& tensors, const std::vector<TensorDesc>& descs,
                         const std::vector<std::pair<int64_t, int64_t>>& rows, ThreadPool* pool);

}  // namespace ditto
