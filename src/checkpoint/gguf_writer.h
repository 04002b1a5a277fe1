// Writing GGUF v3 files (ggml's model format, the one llama.cpp loads), a tensor at a time.
//
// Layout (ggml docs/gguf.md, https://github.com/ggml-org/ggml/blob/master/docs/gguf.md), all
// integers little-endian:
//   header       "GGUF", u32 version = 3, u64 tensor_count, u64 metadata_kv_count
//   metadata     per pair: string key, u32 value type, value
//   tensor infos per tensor: string name, u32 n_dims, u64 dims[n_dims] innermost first (the
//                reverse of the PyTorch shape), u32 ggml type, u64 offset from the start of the
//                data section (a multiple of the alignment)
//   padding      zeros up to a multiple of the alignment (general.alignment, default 32)
//   data         each tensor's bytes, zero-padded to a multiple of the alignment
// A string is a u64 byte length and its UTF-8 bytes (no terminator); a bool is one byte; an array
// is a u32 element type, a u64 count and the elements.
//
// Streaming: metadata and tensor infos are kept in memory (the tokenizer's ~150k strings are a few
// MB); tensor bytes go to the file as they are appended, so converting a checkpoint needs memory
// for one chunk, not for the model. Same calls in the same order -> byte-identical file.
// Thread-safety: a writer is used by one thread.
#pragma once

#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/gguf_types.h"
#include "core/dtype.h"

namespace ditto {

// `value` as a GGUF u32 value. Error(kInvalidArgument) "WHAT = VALUE does not fit GGUF's u32".
uint32_t gguf_u32(int64_t value, const std::string& what);

// One tensor of the file.
struct GgufTensorSpec {
  std::string name;  // e.g. "blk.0.attn_q.weight"; at most 64 bytes (GGML_MAX_NAME)
  GgmlType type = GgmlType::kF32;
  std::vector<int64_t> shape;  // PyTorch order, outermost first: [rows, cols]; 1 to 4 dims

  // Bytes of the data (unpadded): the rows of the innermost dimension in blocks of the type.
  uint64_t nbytes() const;
};

class GgufWriter {
 public:
  static constexpr uint32_t kVersion = 3;
  static constexpr uint32_t kDefaultAlignment = 32;

  // Creates (truncates) `path`. Error(kInvalidArgument) naming the path if it cannot be created.
  // A writer destroyed before finish() deletes the file: a half-written GGUF never remains.
  explicit GgufWriter(const std::string& path);
  ~GgufWriter();
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;

  // Metadata, in file order. Each must come before the first write_tensor_data(). A repeated key
  // is Error(kInvalidArgument) naming it; so is an empty array (GGUF readers reject them).
  // "general.alignment" (u32) also sets the data alignment: a power of two, at least 8.
  void add_u32(const std::string& key, uint32_t value);
  void add_i32(const std::string& key, int32_t value);
  void add_f32(const std::string& key, float value);
  void add_bool(const std::string& key, bool value);
  void add_string(const std::string& key, std::string_view value);
  void add_string_array(const std::string& key, const std::vector<std::string>& values);
  void add_i32_array(const std::string& key, const std::vector<int32_t>& values);
  void add_f32_array(const std::string& key, const std::vector<float>& values);

  // Declares a tensor; data is appended in declaration order. Error(kInvalidArgument) naming the
  // tensor for a duplicate or over-long name, an unsupported type, a shape with no dims, more
  // than 4, or a dim < 1, or an innermost dimension that is not a multiple of the type's block.
  void add_tensor(GgufTensorSpec spec);

  // Appends the next bytes of tensor data (any split: part of a tensor, or the end of one and the
  // start of the next); padding between tensors is inserted here. The first call writes the
  // header, metadata and tensor infos. Error(kInvalidArgument) past the last tensor's end,
  // kResourceExhausted when the write fails (disk full).
  void write_tensor_data(const void* data, size_t nbytes);

  // Checks every tensor got all its bytes (Error(kInvalidArgument) naming the first short one),
  // writes the final padding, flushes and closes.
  void finish();

  uint32_t alignment() const { return alignment_; }
  const std::vector<GgufTensorSpec>& tensors() const { return tensors_; }
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  void begin_kv(const std::string& key, GgufValueType type);
  void write_header();
  void write_raw(const void* data, size_t nbytes);
  void write_zeros(uint64_t n);
  void finish_tensor_padding();

  bool remove_on_failure_ = true;  // false for a non-regular file (device, FIFO)
  std::string path_;
  std::FILE* file_ = nullptr;
  uint32_t alignment_ = kDefaultAlignment;
  std::set<std::string> keys_;
  std::string kv_bytes_;  // serialised metadata pairs
  uint64_t kv_count_ = 0;
  std::vector<GgufTensorSpec> tensors_;
  std::set<std::string> tensor_names_;
  bool header_written_ = false;
  size_t current_ = 0;            // tensor receiving data
  uint64_t current_written_ = 0;  // bytes of it written so far
  uint64_t bytes_written_ = 0;    // total file bytes so far
};

}  // namespace ditto
