#include "model/weight_update.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <tuple>

#include "checkpoint/safetensors.h"
#include "core/error.h"
#include "model/causal_lm.h"
#include "model/checkpoint_tensors.h"
#include "parallel/tensor_parallel.h"

namespace ditto {

const char* torch_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return "bfloat16";
    case DType::kF16: return "float16";
    case DType::kF32: return "float32";
    default: break;
  }
  return "an unsupported dtype";
}

DType weight_dtype(const std::string& dtype_name, const std::string& tensor) {
  std::string n = dtype_name.rfind("torch.", 0) == 0 ? dtype_name.substr(6) : dtype_name;
  if (n == "bfloat16" || n == "BF16") return DType::kBF16;
  if (n == "float16" || n == "half" || n == "F16") return DType::kF16;
  if (n == "float32" || n == "float" || n == "F32") return DType::kF32;
  throw_invalid_argument("update_weights: tensor '" + tensor + "': dtype '" + dtype_name +
                         "' is not supported (bfloat16, float16 or float32)");
}

void drop_weight_pages(CausalLM& model) {
  const long page = ::sysconf(_SC_PAGESIZE);
  for_each_tensor(model.config(), [&](const TensorDesc& d) {
    if (!is_matrix_slot(d.slot)) return;
    for (PackedMatrix& p : model.matrix_slot(d.slot, d.layer, d.expert)->parts) {
      const auto begin = reinterpret_cast<uintptr_t>(p.data.data());
      const uintptr_t first =
          (begin + static_cast<uintptr_t>(page) - 1) / static_cast<uintptr_t>(page) * static_cast<uintptr_t>(page);
      const uintptr_t last = (begin + p.data.size()) / static_cast<uintptr_t>(page) * static_cast<uintptr_t>(page);
      if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
    }
  });
}

WeightUpdate::WeightUpdate(CausalLM& model) : model_(model) {
  if (model.is_gguf())
    throw_invalid_argument(
        "weight update: the model was loaded from a GGUF file (its weights are packed from GGUF's types, quantized or "
        "not); updating weights in place needs a model loaded from a bf16/f16/f32 Hugging Face checkpoint");
  // Each tensor's first row (element) in its fused slot: the rows this rank keeps of the tensors
  // before it there (their parts: q 0, k 1, v 2; gate 0, up 1), as the loader fuses them.
  struct Filled {
    int64_t rows = 0;
    size_t parts = 0;
  };
  std::map<std::tuple<int64_t, int64_t, WeightSlot>, Filled> filled;
  for_each_tensor(model.config(), [&](const TensorDesc& d) {
    Filled& f = filled[{d.layer, d.expert, d.slot}];
    const auto [begin, end] = model.shard().rows(model.config(), d, f.parts++);
    targets_.emplace(d.name, Target{d, f.rows, begin, end});
    f.rows += end - begin;
  });
}

PackedMatrix& WeightUpdate::part_of(const Target& target, int64_t& row_in_part) const {
  LinearWeight& w = *model_.matrix_slot(target.desc.slot, target.desc.layer, target.desc.expert);
  row_in_part = target.offset;
  for (PackedMatrix& part : w.parts) {
    if (row_in_part < part.n) return part;
    row_in_part -= part.n;
  }
  DITTO_CHECK(false) << target.desc.name << ": row " << target.offset << " is past its packed weight's " << w.n()
                     << " rows";
  return w.parts.back();
}

const WeightUpdate::Target& WeightUpdate::check(const WeightTensor& t) const {
  const ModelConfig& c = model_.config();
  std::string name = t.name;
  if (name == "lm_head.weight" && c.tie_word_embeddings) name = "model.embed_tokens.weight";  // checked, then skipped
  const auto it = targets_.find(name);
  const std::string at = "update_weights: tensor '" + t.name + "'";
  if (it == targets_.end())
    throw_invalid_argument(
        at + " is not a tensor of this " + c.architecture + " model (" + std::to_string(targets_.size()) +
        " tensors, named as in its Hugging Face checkpoint, e.g. " + "model.layers.0.input_layernorm.weight)");
  const Target& target = it->second;
  const DType dtype = weight_dtype(t.dtype, t.name);
  if (t.shape != target.desc.shape)
    throw_invalid_argument(at + ": shape " + shape_string(t.shape) + ", but the model's is " +
                           shape_string(target.desc.shape));
  int64_t numel = 1;
  for (int64_t d : t.shape) numel *= d;
  const auto want_bytes = static_cast<size_t>(numel) * dtype_size(dtype);
  if (t.nbytes != want_bytes)
    throw_invalid_argument(at + ": " + std::to_string(t.nbytes) + " bytes, but shape " + shape_string(t.shape) + " " +
                           t.dtype + " holds " + std::to_string(want_bytes));
  if (t.data == nullptr && t.nbytes > 0) throw_invalid_argument(at + ": its data pointer is null");
  if (is_matrix_slot(target.desc.slot)) {
    int64_t row = 0;
    const PackedMatrix& part = part_of(target, row);
    if (part.dtype != dtype)
      throw_invalid_argument(at + ": dtype " + t.dtype + ", but the model holds it as " +
                             std::string(torch_dtype_name(part.dtype)) +
                             " (a cast would round it: send it in the checkpoint's dtype)");
  }
  return target;
}

void WeightUpdate::add(std::span<const WeightTensor> tensors) {
  for (const WeightTensor& t : tensors) check(t);  // all of them before any is staged
  for (const WeightTensor& t : tensors) {
    if (t.name == "lm_head.weight" && model_.config().tie_word_embeddings) continue;
    WeightTensor staged = t;
    staged.dtype = torch_dtype_name(weight_dtype(t.dtype, t.name));
    staged_.insert_or_assign(t.name, std::move(staged));
  }
}

void WeightUpdate::apply_one(const std::string& name, const WeightTensor& t, ThreadPool* pool) const {
  const Target& target = targets_.at(name);
  const TensorDesc& d = target.desc;
  const DType dtype = weight_dtype(t.dtype, name);
  const int64_t rows = target.row_end - target.row_begin;
  if (is_matrix_slot(d.slot)) {
    int64_t row = 0;
    PackedMatrix& part = part_of(target, row);
    const size_t row_bytes = static_cast<size_t>(d.shape[1]) * dtype_size(dtype);
    const auto* first = static_cast<const uint8_t*>(t.data) + static_cast<size_t>(target.row_begin) * row_bytes;
    pack_rows_into(part, row, MatrixSource{first, dtype, rows, d.shape[1]}, pool);
  } else {
    std::vector<float>& v = *model_.vector_slot(d.slot, d.layer);
    const auto* first = static_cast<const uint8_t*>(t.data) + static_cast<size_t>(target.row_begin) * dtype_size(dtype);
    widen_to_f32(first, dtype, static_cast<size_t>(rows), d.unit_offset, v.data() + static_cast<size_t>(target.offset));
  }
}

void WeightUpdate::apply(ThreadPool* pool, const std::string& version) const {
  TensorParallelGroup* tp = model_.tp_;
  const bool send = tp != nullptr && tp->rank() == 0 && tp->size() > 1 && TensorParallelGroup::current() == tp;
  for (const auto& [name, t] : staged_) {
    apply_one(name, t, pool);
    if (!send) continue;
    // The other ranks write their rows of it (a tensor at a time: one tensor's bytes in flight).
    auto lock = tp->lock();
    WireBuffer command;
    command.put_i64(model_.tp_model_id_);
    command.put_string(name);
    command.put_string(t.dtype);
    command.put_array(std::span<const int64_t>(t.shape));
    command.put_bytes(t.data, t.nbytes);
    tp->send_command(TensorParallelCommand::kUpdateTensor, command);
  }
  ++model_.weights_epoch_;
  model_.weight_version_ = version;
}

void apply_received_tensor(CausalLM& model, const WeightTensor& t, ThreadPool* pool) {
  WeightUpdate update(model);
  const WeightTensor tensors[1] = {t};
  update.add(tensors);
  for (const auto& [name, staged] : update.staged()) update.apply_one(name, staged, pool);
}

}  // namespace ditto
