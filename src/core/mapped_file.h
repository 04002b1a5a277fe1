// A read-only memory map of a whole file (safetensors shards are read through it, zero-copy).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ditto {

class MappedFile {
 public:
  // Maps `path` read-only. Throws Error(kNotFound) if it cannot be opened, kInvalidArgument if it
  // is not a regular file. An empty file maps to data() == nullptr, size() == 0.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Tells the kernel the pages of [offset, offset+length) are no longer needed, so they leave this
  // process's resident set (used after weights are repacked into owned memory).
  void release(size_t offset, size_t length) const;

 private:
  std::string path_;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ditto
