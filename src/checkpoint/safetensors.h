// Reading safetensors checkpoints, zero-copy through mmap.
//
// Format (https://github.com/huggingface/safetensors): 8-byte little-endian header length N, N
// bytes of JSON {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {..}},
// then the data section; offsets are relative to its start. Every header is validated before any
// tensor is handed out, so a truncated or hand-edited file fails with a message naming the file and
// the tensor ("<file>: tensor '<name>': <what>") instead of reading out of bounds.
// Thread-safety: all const methods may be called concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"

namespace ditto {

struct ModelConfig;

// One tensor inside a mapped safetensors file.
struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // [numel] of dtype, inside the mmap, NOT necessarily aligned
  size_t nbytes = 0;
  const MappedFile* file = nullptr;
  size_t file_offset = 0;  // absolute offset of data in the file (for release)

  int64_t numel() const;
};

// One .safetensors file: mapped, header parsed and validated. Movable; TensorInfo pointers stay
// valid for the object's lifetime (the mapping does not move).
class SafetensorsFile {
 public:
  // Throws Error(kNotFound) if the file cannot be opened, kInvalidArgument if it is not a valid
  // safetensors file or holds a dtype other than F32/F16/BF16.
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return file_->path(); }
  const MappedFile& file() const { return *file_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // sorted by name
  const TensorInfo* find(const std::string& name) const;               // nullptr when absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::unique_ptr<MappedFile> file_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a model directory: model.safetensors, or else the shards listed in
// model.safetensors.index.json (the order transformers' from_pretrained tries them).
class WeightStore {
 public:
  // Throws Error(kNotFound) if the directory has neither file or the index names a missing shard,
  // kInvalidArgument if the index or a shard is malformed or a listed tensor is not in its shard.
  static WeightStore open(const std::string& model_dir);

  WeightStore(WeightStore&&) noexcept = default;
  WeightStore& operator=(WeightStore&&) noexcept = default;

  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  // Error(kNotFound) naming the tensor and the file or index it was looked up in.
  const TensorInfo& get(const std::string& name) const;
  std::vector<std::string> names() const;  // sorted
  // Drops the tensor's pages from this process's resident set (after repacking them elsewhere).
  void release(const TensorInfo& t) const;
  int64_t total_bytes() const;  // sum of tensor payload bytes

  const std::string& model_dir() const { return model_dir_; }
  // model.safetensors or model.safetensors.index.json, with the directory: for messages.
  const std::string& source() const { return source_; }
  size_t num_files() const { return files_.size(); }

 private:
  WeightStore() = default;

  std::string model_dir_;
  std::string source_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, TensorInfo> tensors_;
};

// Checks that every tensor of expected_tensors(c) is present with the config's shape.
// Error(kNotFound) names the missing tensor(s) and the source; kInvalidArgument names the tensor,
// its file, the expected and the actual shape. Extra tensors (rotary_emb.inv_freq, a tied
// lm_head.weight) are ignored, as transformers does.
void validate_weights(const ModelConfig& c, const WeightStore& w);

// "[151936, 1024]": for messages.
std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace ditto
