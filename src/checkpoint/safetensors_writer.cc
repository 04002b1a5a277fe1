#include "checkpoint/safetensors_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace ditto {
namespace {

// Larger alignment first, as the Rust crate orders its Dtype enum (F16 < BF16 < F32).
int dtype_rank(DType t) {
  switch (t) {
    case DType::kF32: return 0;
    case DType::kBF16: return 1;
    case DType::kF16: return 2;
  }
  return 3;
}

}  // namespace

uint64_t SafetensorsEntry::nbytes() const {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

std::vector<SafetensorsEntry> safetensors_layout(std::vector<SafetensorsEntry> entries) {
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    const int ra = dtype_rank(a.dtype), rb = dtype_rank(b.dtype);
    return ra != rb ? ra < rb : a.name < b.name;
  });
  return entries;
}

std::string safetensors_header(const std::vector<SafetensorsEntry>& layout) {
  nlohmann::json header = nlohmann::json::object();  // std::map: keys come out sorted
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const auto& e : layout) {
    const uint64_t n = e.nbytes();
    header[e.name] = {
        {"dtype", std::string(dtype_name(e.dtype))}, {"shape", e.shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

SafetensorsWriter::SafetensorsWriter(const std::string& path, std::vector<SafetensorsEntry> entries)
    : path_(path), layout_(safetensors_layout(std::move(entries))) {
  std::set<std::string> seen;
  for (const auto& e : layout_) {
    if (e.name == "__metadata__" || !seen.insert(e.name).second) {
      throw_invalid_argument(path + ": tensor '" + e.name + "': duplicate or reserved name");
    }
    for (int64_t d : e.shape) {
      if (d < 0) throw_invalid_argument(path + ": tensor '" + e.name + "': negative dimension");
    }
    data_size_ += e.nbytes();
  }
  const std::string header = safetensors_header(layout_);
  header_size_ = header.size();
  file_ = std::fopen(path.c_str(), "wb");
  if (file_ == nullptr) {
    throw_invalid_argument(path + ": cannot create: " + std::strerror(errno));
  }
  std::setvbuf(file_, nullptr, _IOFBF, 1 << 20);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(header_size_ >> (8 * i));
  if (std::fwrite(len, 1, 8, file_) != 8 || std::fwrite(header.data(), 1, header.size(), file_) != header.size()) {
    throw_error(ErrorCode::kResourceExhausted, path + ": write failed: " + std::strerror(errno));
  }
}

SafetensorsWriter::~SafetensorsWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void SafetensorsWriter::append(const void* data, size_t nbytes) {
  DITTO_CHECK(file_ != nullptr) << path_ << ": append after finish";
  DITTO_CHECK(written_ + nbytes <= data_size_)
      << path_ << ": " << (written_ + nbytes) << " payload bytes, but the header declares " << data_size_;
  if (nbytes > 0 && std::fwrite(data, 1, nbytes, file_) != nbytes) {
    throw_error(ErrorCode::kResourceExhausted, path_ + ": write failed: " + std::strerror(errno));
  }
  written_ += nbytes;
}

void SafetensorsWriter::finish() {
  DITTO_CHECK(file_ != nullptr) << path_ << ": finish called twice";
  DITTO_CHECK(written_ == data_size_) << path_ << ": " << written_ << " payload bytes written, the header declares "
                                      << data_size_;
  const int flush_rc = std::fflush(file_);
  const int close_rc = std::fclose(file_);
  file_ = nullptr;
  if (flush_rc != 0 || close_rc != 0) {
    throw_error(ErrorCode::kResourceExhausted, path_ + ": write failed: " + std::strerror(errno));
  }
}

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<SafetensorsEntry, std::vector<uint8_t>>>& tensors) {
  std::vector<SafetensorsEntry> entries;
  std::map<std::string, const std::vector<uint8_t>*> bytes;
  for (const auto& [entry, data] : tensors) {
    if (data.size() != entry.nbytes()) {
      throw_invalid_argument(path + ": tensor '" + entry.name + "': " + std::to_string(data.size()) +
                             " bytes given, shape needs " + std::to_string(entry.nbytes()));
    }
    entries.push_back(entry);
    bytes[entry.name] = &data;
  }
  SafetensorsWriter writer(path, std::move(entries));
  for (const auto& e : writer.layout()) {
    const auto& data = *bytes.at(e.name);
    writer.append(data.data(), data.size());
  }
  writer.finish();
}

}  // namespace ditto
