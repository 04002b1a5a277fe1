#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace ditto {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_not_found(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw_invalid_argument(path + ": not a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw_error(ErrorCode::kResourceExhausted, path + ": mmap failed: " + std::strerror(err));
    }
    data_ = static_cast<uint8_t*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

void MappedFile::release(size_t offset, size_t length) const {
  if (data_ == nullptr || length == 0) return;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  // Only whole pages inside the range: a page shared with a neighbouring tensor stays.
  const size_t begin = (offset + page - 1) / page * page;
  const size_t end = (offset + length) / page * page;
  if (end > begin) ::madvise(data_ + begin, end - begin, MADV_DONTNEED);
}

}  // namespace ditto
