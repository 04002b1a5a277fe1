// Writing safetensors files deterministically and in a stream (a tensor at a time, never the whole
// model in memory).
//
// Byte layout matches the Rust safetensors crate that Hugging Face's save_pretrained uses: the
// header is compact JSON with sorted keys and "__metadata__": {"format": "pt"}, padded with spaces
// so that the data section starts at a multiple of 8; payloads are laid out by dtype alignment
// (F32, then BF16, then F16) and then by name. Same entries and bytes -> byte-identical file.
// Thread-safety: a writer is used by one thread.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"

namespace ditto {

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kBF16;
  std::vector<int64_t> shape;

  uint64_t nbytes() const;
};

// The entries in file (payload) order.
std::vector<SafetensorsEntry> safetensors_layout(std::vector<SafetensorsEntry> entries);

// The header bytes (JSON plus padding, without the 8-byte length) for entries in layout order.
std::string safetensors_header(const std::vector<SafetensorsEntry>& layout);

class SafetensorsWriter {
 public:
  // Creates `path` and writes the header. Error(kInvalidArgument) if the file cannot be created
  // or two entries share a name.
  SafetensorsWriter(const std::string& path, std::vector<SafetensorsEntry> entries);
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // The order in which payload bytes must be appended.
  const std::vector<SafetensorsEntry>& layout() const { return layout_; }
  // Appends payload bytes (any split: part of a tensor, or several). Error(kInternal) past the
  // end of the data section, kResourceExhausted when the write fails (disk full).
  void append(const void* data, size_t nbytes);
  // Checks every payload byte was written, flushes and closes.
  void finish();
  uint64_t file_size() const { return 8 + header_size_ + data_size_; }

 private:
  std::string path_;
  std::vector<SafetensorsEntry> layout_;
  std::FILE* file_ = nullptr;
  uint64_t header_size_ = 0;
  uint64_t data_size_ = 0;
  uint64_t written_ = 0;
};

// Writes a whole file from memory (tests, small files). bytes.size() must equal entry.nbytes().
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<SafetensorsEntry, std::vector<uint8_t>>>& tensors);

}  // namespace ditto
