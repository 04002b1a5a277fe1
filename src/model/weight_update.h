// New weights for a loaded CausalLM, by Hugging Face name, written into its packed layout in place:
// the core of vLLM's weight-transfer API (start_weight_update → update_weights, repeated →
// finish_weight_update; engine/llm_engine.h holds the calls and their order).
//
// A WeightUpdate checks each chunk of tensors against the model's tensor list (for_each_tensor,
// architecture/model_tensors.h: the list the safetensors loader validates and packs) and stages
// them *by reference*: nothing is copied, and nothing of the model changes until apply(). apply()
// then writes every staged tensor into its slot exactly as loading it from a checkpoint would
// (a matrix's rows by pack_rows_into into its fused packed matrix, kernels/packed_matrix.h; a norm
// weight or bias widened to f32, Gemma's (1 + w) added), so the model equals, bit for bit, one
// loaded from a checkpoint holding the new tensors (and the old values of tensors not sent).
//
// Memory: no byte is allocated for the new weights. The caller's buffers (a shared-memory region,
// a mapped file, the trainer's tensors) must stay valid and unchanged from add() until apply()
// returns; the packed weights are overwritten where they are.
//
// Refused, with Error(kInvalidArgument) naming the tensor: a name that is not a tensor of this
// model, a shape other than the model's, a dtype other than bf16/f16/f32, a matrix in another
// dtype than the model holds it in (a cast would round: send it as the checkpoint stores it), a
// byte count other than shape × dtype size, a null pointer. Refused whole, with
// Error(kInvalidArgument): a model loaded from a GGUF file (its weights are packed from GGUF's own
// types, quantized or not; an update needs a model loaded from a bf16/f16/f32 Hugging Face
// checkpoint) and a tensor-parallel model (its other ranks would need their shards: a later piece).
//
// Thread-safety: one thread; apply() must not run concurrently with forward().
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "architecture/model_tensors.h"
#include "core/dtype.h"
#include "ditto/weight_transfer.h"
#include "kernels/packed_matrix.h"

namespace ditto {

class CausalLM;
class ThreadPool;

// The DType of a dtype name as a trainer sends it: PyTorch's ("bfloat16", "float16", "float32",
// with or without "torch.", and "half" / "float") or safetensors' ("BF16", "F16", "F32"). Throws
// Error(kInvalidArgument) naming `tensor` and the dtype for any other (int8, float8_e4m3fn, ...).
DType weight_dtype(const std::string& dtype_name, const std::string& tensor);
// PyTorch's name of a float dtype ("bfloat16", "float16", "float32").
const char* torch_dtype_name(DType dtype);

// A tensor-parallel rank other than 0: rank 0's kUpdateTensor for `model` (already checked there)
// written into this rank's rows. Throws Error(kInvalidArgument) if it does not fit (it would on
// rank 0 too).
void apply_received_tensor(CausalLM& model, const WeightTensor& t, ThreadPool* pool);

// Gives the pages of every packed matrix of `model` back to the OS (madvise MADV_DONTNEED on the
// whole pages inside each; they read as zeros until written): sleep level 2. The model computes
// garbage until an update of every tensor is applied; LLMEngine refuses to generate meanwhile.
void drop_weight_pages(CausalLM& model);

class WeightUpdate {
 public:
  // An empty update of `model` (which must outlive it; nothing of it changes before apply()).
  // Throws Error(kInvalidArgument) for a model loaded from GGUF or split by tensor parallelism
  // (see the file comment).
  explicit WeightUpdate(CausalLM& model);

  // Checks every tensor of the chunk, then stages them all; a refused chunk stages none (the
  // tensors of earlier chunks stay staged). A name sent again replaces its earlier tensor (the last
  // one wins). On a model with a tied LM head, "lm_head.weight" is checked as the embedding is and
  // then ignored (vLLM skips it too): the head is the embedding. Throws as the file comment says.
  void add(std::span<const WeightTensor> tensors);

  // True when every tensor of the model is staged (a tied head counts as the embedding).
  bool covers_every_tensor() const { return staged_.size() == targets_.size(); }

  // The staged tensors by name (each tensor's data is the caller's; dtype names canonical:
  // "bfloat16", "float16", "float32").
  const std::map<std::string, WeightTensor>& staged() const { return staged_; }

  // Writes every staged tensor into the model's weights, in place, counts a new weights epoch
  // (CausalLM::weights_epoch) and sets the model's weight_version to `version`. Everything that can
  // fail was checked by add(). `pool` (may be null) packs the rows. Cost: one pass over the staged
  // bytes (docs/RL.md gives a measurement).
  void apply(ThreadPool* pool, const std::string& version) const;

 private:
  friend void apply_received_tensor(CausalLM& model, const WeightTensor& t, ThreadPool* pool);
  // A tensor of the model and where its values go in its slot: its first row (matrices) or element
  // (vectors) in the fused weight of (layer, expert, slot).
  struct Target {
    TensorDesc desc;
    int64_t offset = 0;     // its first row (element) in the fused slot this rank holds
    int64_t row_begin = 0;  // the rows [row_begin, row_end) of the tensor this rank keeps
    int64_t row_end = 0;    //   (TensorParallelShard::rows; all of them in one process)
  };
  // Writes one checked tensor's rows this rank keeps into its slot.
  void apply_one(const std::string& name, const WeightTensor& t, ThreadPool* pool) const;
  // The target of t, after checking t against it; throws as the file comment says.
  const Target& check(const WeightTensor& t) const;
  // The packed part that holds a matrix target's rows, and the target's first row in it.
  PackedMatrix& part_of(const Target& target, int64_t& row_in_part) const;

  CausalLM& model_;
  std::map<std::string, Target> targets_;  // every tensor of the model by Hugging Face name
  std::map<std::string, WeightTensor> staged_;
};

}  // namespace ditto
