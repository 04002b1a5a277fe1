#include "checkpoint/gguf_writer.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "core/error.h"

namespace ditto {
namespace {

constexpr size_t kMaxTensorName = 63;  // GGML_MAX_NAME (64) with its terminating NUL
constexpr int kMaxDims = 4;            // GGML_MAX_DIMS

// Little-endian serialisation, independent of the host's byte order.
void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
void put_string(std::string& out, std::string_view s) {
  put_u64(out, s.size());
  out.append(s);
}

uint64_t pad_to(uint64_t n, uint64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

}  // namespace

uint32_t gguf_u32(int64_t value, const std::string& what) {
  if (value < 0 || value > static_cast<int64_t>(UINT32_MAX))
    throw_invalid_argument(what + " = " + std::to_string(value) + " does not fit GGUF's u32");
  return static_cast<uint32_t>(value);
}

uint64_t GgufTensorSpec::nbytes() const {
  int64_t ne[4] = {1, 1, 1, 1};
  const int n = static_cast<int>(shape.size());
  for (int i = 0; i < n && i < 4; ++i) ne[i] = shape[static_cast<size_t>(n - 1 - i)];
  const int64_t bytes = ggml_nbytes(type, ne, std::max(n, 1));
  return bytes < 0 ? 0 : static_cast<uint64_t>(bytes);
}

GgufWriter::GgufWriter(const std::string& path) : path_(path) {
  // An unfinished file is deleted on failure — but only a regular file: never a device or pipe
  // the user named (deleting /dev/full would remove the device node).
  std::error_code ec;
  remove_on_failure_ = !std::filesystem::exists(path, ec) || std::filesystem::is_regular_file(path, ec);
  file_ = std::fopen(path.c_str(), "wb");
  if (file_ == nullptr) throw_invalid_argument(path + ": cannot create: " + std::strerror(errno));
  std::setvbuf(file_, nullptr, _IOFBF, 1 << 20);
}

GgufWriter::~GgufWriter() {
  if (file_ != nullptr) {
    std::fclose(file_);
    if (remove_on_failure_) std::remove(path_.c_str());
  }
}

void GgufWriter::begin_kv(const std::string& key, GgufValueType type) {
  if (header_written_) {
    throw_error(ErrorCode::kInternal, path_ + ": metadata '" + key + "' added after tensor data");
  }
  if (!keys_.insert(key).second) throw_invalid_argument(path_ + ": duplicate metadata key '" + key + "'");
  put_string(kv_bytes_, key);
  put_u32(kv_bytes_, static_cast<uint32_t>(type));
  ++kv_count_;
}

void GgufWriter::add_u32(const std::string& key, uint32_t value) {
  if (key == "general.alignment") {
    if (value < 8 || !std::has_single_bit(value)) {
      throw_invalid_argument(path_ + ": general.alignment " + std::to_string(value) +
                             " must be a power of two and at least 8");
    }
    alignment_ = value;
  }
  begin_kv(key, GgufValueType::kUint32);
  put_u32(kv_bytes_, value);
}

void GgufWriter::add_i32(const std::string& key, int32_t value) {
  begin_kv(key, GgufValueType::kInt32);
  put_u32(kv_bytes_, static_cast<uint32_t>(value));
}

void GgufWriter::add_f32(const std::string& key, float value) {
  begin_kv(key, GgufValueType::kFloat32);
  put_u32(kv_bytes_, std::bit_cast<uint32_t>(value));
}

void GgufWriter::add_bool(const std::string& key, bool value) {
  begin_kv(key, GgufValueType::kBool);
  kv_bytes_.push_back(value ? 1 : 0);
}

void GgufWriter::add_string(const std::string& key, std::string_view value) {
  begin_kv(key, GgufValueType::kString);
  put_string(kv_bytes_, value);
}

void GgufWriter::add_string_array(const std::string& key, const std::vector<std::string>& values) {
  if (values.empty()) throw_invalid_argument(path_ + ": metadata '" + key + "': empty array");
  begin_kv(key, GgufValueType::kArray);
  put_u32(kv_bytes_, static_cast<uint32_t>(GgufValueType::kString));
  put_u64(kv_bytes_, values.size());
  for (const std::string& s : values) put_string(kv_bytes_, s);
}

void GgufWriter::add_i32_array(const std::string& key, const std::vector<int32_t>& values) {
  if (values.empty()) throw_invalid_argument(path_ + ": metadata '" + key + "': empty array");
  begin_kv(key, GgufValueType::kArray);
  put_u32(kv_bytes_, static_cast<uint32_t>(GgufValueType::kInt32));
  put_u64(kv_bytes_, values.size());
  for (int32_t v : values) put_u32(kv_bytes_, static_cast<uint32_t>(v));
}

void GgufWriter::add_f32_array(const std::string& key, const std::vector<float>& values) {
  if (values.empty()) throw_invalid_argument(path_ + ": metadata '" + key + "': empty array");
  begin_kv(key, GgufValueType::kArray);
  put_u32(kv_bytes_, static_cast<uint32_t>(GgufValueType::kFloat32));
  put_u64(kv_bytes_, values.size());
  for (float v : values) put_u32(kv_bytes_, std::bit_cast<uint32_t>(v));
}

void GgufWriter::add_tensor(GgufTensorSpec spec) {
  const std::string where = path_ + ": tensor '" + spec.name + "': ";
  if (header_written_) throw_error(ErrorCode::kInternal, where + "declared after tensor data");
  if (spec.name.empty() || spec.name.size() > kMaxTensorName) {
    throw_invalid_argument(where + "name must be 1 to " + std::to_string(kMaxTensorName) + " bytes");
  }
  if (tensor_names_.count(spec.name) != 0) throw_invalid_argument(where + "duplicate tensor name");
  if (ggml_type_name(spec.type) == "?") {
    throw_invalid_argument(where + "unsupported GGML type " + std::to_string(static_cast<uint32_t>(spec.type)) +
                           " (supported: " + supported_ggml_types() + ")");
  }
  if (spec.shape.empty() || spec.shape.size() > kMaxDims) {
    throw_invalid_argument(where + "needs 1 to 4 dimensions, has " + std::to_string(spec.shape.size()));
  }
  uint64_t numel = 1;
  for (int64_t d : spec.shape) {
    // Bounded so that the byte count (numel x 4) cannot overflow 64 bits.
    if (d < 1 || static_cast<uint64_t>(d) > (uint64_t{1} << 60) / numel) {
      throw_invalid_argument(where + "dimension " + std::to_string(d) + " out of range");
    }
    numel *= static_cast<uint64_t>(d);
  }
  const int64_t block = ggml_type_traits(static_cast<uint32_t>(spec.type))->block_size;
  if (spec.shape.back() % block != 0) {
    throw_invalid_argument(where + "the innermost dimension " + std::to_string(spec.shape.back()) + " of a " +
                           std::string(ggml_type_name(spec.type)) + " tensor must be a multiple of " +
                           std::to_string(block));
  }
  tensor_names_.insert(spec.name);
  tensors_.push_back(std::move(spec));
}

void GgufWriter::write_header() {
  std::string head;
  head.append("GGUF");
  put_u32(head, kVersion);
  put_u64(head, tensors_.size());
  put_u64(head, kv_count_);
  head.append(kv_bytes_);
  uint64_t offset = 0;
  for (const GgufTensorSpec& t : tensors_) {
    put_string(head, t.name);
    put_u32(head, static_cast<uint32_t>(t.shape.size()));
    for (size_t i = t.shape.size(); i-- > 0;) put_u64(head, static_cast<uint64_t>(t.shape[i]));
    put_u32(head, static_cast<uint32_t>(t.type));
    put_u64(head, offset);
    offset += pad_to(t.nbytes(), alignment_);
  }
  head.append(pad_to(head.size(), alignment_) - head.size(), '\0');
  header_written_ = true;
  kv_bytes_.clear();
  kv_bytes_.shrink_to_fit();
  write_raw(head.data(), head.size());
}

void GgufWriter::write_raw(const void* data, size_t nbytes) {
  if (nbytes == 0) return;
  if (std::fwrite(data, 1, nbytes, file_) != nbytes) {
    throw_error(ErrorCode::kResourceExhausted, path_ + ": write failed: " + std::strerror(errno));
  }
  bytes_written_ += nbytes;
}

void GgufWriter::write_zeros(uint64_t n) {
  static const char kZeros[64] = {};
  while (n > 0) {
    const size_t k = n < sizeof(kZeros) ? static_cast<size_t>(n) : sizeof(kZeros);
    write_raw(kZeros, k);
    n -= k;
  }
}

// Pads the finished current tensor and moves to the next one.
void GgufWriter::finish_tensor_padding() {
  const uint64_t n = tensors_[current_].nbytes();
  write_zeros(pad_to(n, alignment_) - n);
  ++current_;
  current_written_ = 0;
}

void GgufWriter::write_tensor_data(const void* data, size_t nbytes) {
  if (file_ == nullptr) throw_error(ErrorCode::kInternal, path_ + ": write after finish");
  if (!header_written_) write_header();
  const auto* bytes = static_cast<const uint8_t*>(data);
  while (nbytes > 0) {
    if (current_ == tensors_.size()) {
      throw_invalid_argument(path_ + ": " + std::to_string(nbytes) + " bytes of tensor data past the last tensor");
    }
    const uint64_t left = tensors_[current_].nbytes() - current_written_;
    const size_t k = nbytes < left ? nbytes : static_cast<size_t>(left);
    write_raw(bytes, k);
    bytes += k;
    nbytes -= k;
    current_written_ += k;
    if (current_written_ == tensors_[current_].nbytes()) finish_tensor_padding();
  }
}

void GgufWriter::finish() {
  if (file_ == nullptr) throw_error(ErrorCode::kInternal, path_ + ": finish called twice");
  if (!header_written_) write_header();
  if (current_ < tensors_.size()) {
    const GgufTensorSpec& t = tensors_[current_];
    throw_invalid_argument(path_ + ": tensor '" + t.name + "': got " + std::to_string(current_written_) + " of " +
                           std::to_string(t.nbytes()) + " bytes");
  }
  const bool flushed = std::fflush(file_) == 0 && !std::ferror(file_);
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!flushed || !closed) {
    std::remove(path_.c_str());
    throw_error(ErrorCode::kResourceExhausted, path_ + ": write failed: " + std::strerror(errno));
  }
}

}  // namespace ditto
