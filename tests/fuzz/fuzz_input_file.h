// The fuzz targets' way to hand bytes to a parser that reads a file: an anonymous in-memory file
// (memfd) opened by its /proc/self/fd path, rewritten for every input.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace ditto::fuzz {

class InputFile {
 public:
  InputFile() : fd_(memfd_create("ditto-fuzz-input", 0)) {
    if (fd_ < 0) std::abort();
  }
  // Replaces the file's content with data[0, size) and returns a path that opens it.
  std::string write(const uint8_t* data, size_t size) {
    if (ftruncate(fd_, 0) != 0 || pwrite(fd_, data, size, 0) != static_cast<ssize_t>(size)) std::abort();
    return "/proc/self/fd/" + std::to_string(fd_);
  }

 private:
  int fd_;
};

}  // namespace ditto::fuzz
