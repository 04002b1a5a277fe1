// Reading GGUF files (ggml's model format, what llama.cpp loads), zero-copy through mmap.
//
// Layout (ggml docs/gguf.md): "GGUF", u32 version (2 or 3), u64 tensor_count, u64 kv_count;
// kv_count metadata pairs (string key, u32 value type, value); tensor_count tensor infos (string
// name, u32 n_dims, u64 ne[n_dims] innermost first, u32 ggml type, u64 offset into the data
// section); padding to general.alignment (default 32); the data section. Strings are a u64 length
// and the bytes; arrays a u32 element type, a u64 count and the elements; all little-endian.
//
// Everything is validated when the file is opened, before any tensor is handed out: the magic and
// version, that every count, string and array fits in the bytes that remain, value types, duplicate
// keys and tensor names, 1 to 4 dimensions each ≥ 1, the tensor type (checkpoint/gguf_types.h), an
// innermost dimension that is a multiple of the type's block, offsets aligned and every tensor's
// bytes inside the file. A malformed file is Error(kInvalidArgument) "<path>: <what>", naming the
// key or tensor and the byte offset where that helps; never a read outside the mapping.
// Thread-safety: all const methods may be called concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/gguf_types.h"
#include "core/mapped_file.h"

namespace ditto {

// One metadata value. Scalars use the member of their kind; arrays hold their elements.
struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;
  uint64_t u = 0;                                      // kUint8/16/32/64
  int64_t i = 0;                                       // kInt8/16/32/64
  double f = 0;                                        // kFloat32/64 (a float32 converted exactly)
  bool b = false;                                      // kBool
  std::string s;                                       // kString
  GgufValueType element_type = GgufValueType::kUint8;  // kArray
  std::vector<GgufValue> array;                        // kArray

  bool is_integer() const;
  bool is_float() const { return type == GgufValueType::kFloat32 || type == GgufValueType::kFloat64; }
  // "u32 7", "string \"llama\"", "array of 49152 string": for messages.
  std::string describe() const;
};

// One tensor of the file.
struct GgufTensor {
  std::string name;
  GgmlType type = GgmlType::kF32;
  std::vector<int64_t> ne;        // ggml order: innermost (contiguous) first
  const uint8_t* data = nullptr;  // inside the mmap; aligned to general.alignment from the file start
  size_t nbytes = 0;
  size_t file_offset = 0;  // absolute offset of data in the file

  // PyTorch / Hugging Face order, outermost first: [rows, cols] for a matrix (ne reversed).
  std::vector<int64_t> shape() const;
  size_t row_bytes() const;  // bytes of one row of ne[0] values in `type`
};

class GgufFile {
 public:
  // Maps and validates `path`. Error(kNotFound) if it cannot be opened, kInvalidArgument (naming
  // the path and what is wrong) if it is not a valid GGUF file of a supported version and types.
  // `metadata_only`: read the header and metadata and stop before the tensor infos (no tensors;
  // a tensor type ditto cannot read is no error), e.g. to load only the tokenizer.
  static std::unique_ptr<GgufFile> open(const std::string& path, bool metadata_only = false);

  const std::string& path() const { return file_->path(); }
  const MappedFile& file() const { return *file_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }

  // Metadata, by key. find() is nullptr when absent.
  const GgufValue* find(const std::string& key) const;
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  // Typed lookups: nullopt when the key is absent; Error(kInvalidArgument) "<path>: metadata
  // '<key>' is <what it is>, expected <type>" when present with another type (or, for integers,
  // a value outside int64 or negative where `non_negative`).
  std::optional<int64_t> get_int(const std::string& key, bool non_negative = true) const;
  std::optional<double> get_float(const std::string& key) const;  // f32, f64 (or an integer)
  std::optional<bool> get_bool(const std::string& key) const;
  std::optional<std::string> get_string(const std::string& key) const;
  std::optional<std::vector<std::string>> get_string_array(const std::string& key) const;
  std::optional<std::vector<int64_t>> get_int_array(const std::string& key) const;
  // An array of numbers (f32, f64 or integers, as llama.cpp reads tokenizer.ggml.scores), as double.
  std::optional<std::vector<double>> get_float_array(const std::string& key) const;
  // get_int / get_string that throw Error(kInvalidArgument) "<path>: metadata '<key>' is missing"
  // when absent.
  int64_t require_int(const std::string& key) const;
  std::string require_string(const std::string& key) const;

  // Tensors in file order; find_tensor() is nullptr when absent.
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find_tensor(const std::string& name) const;
  // Error(kInvalidArgument) "<path>: tensor '<name>' is missing" when absent.
  const GgufTensor& tensor(const std::string& name) const;
  // Drops [offset, offset + length) of the mapping from the resident set (after repacking).
  void release(size_t offset, size_t length) const { file_->release(offset, length); }
  int64_t total_tensor_bytes() const;

 private:
  GgufFile() = default;

  std::unique_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

// "{576, 49152}": a tensor's ggml ne (innermost first), for messages.
std::string ggml_ne_string(const std::vector<int64_t>& ne);

// True if `path` is a regular file that starts with the GGUF magic (how --model tells a GGUF file
// from a model directory). Never throws.
bool is_gguf_file(const std::string& path);

}  // namespace ditto
