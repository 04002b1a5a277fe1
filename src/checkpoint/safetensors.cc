#include "checkpoint/safetensors.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "architecture/config.h"
#include "core/error.h"
#include "core/json_file.h"
#include "core/json_input.h"

namespace ditto {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// safetensors' own limit (MAX_HEADER_SIZE in the Rust crate).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

bool parse_dtype(const std::string& s, DType* out) {
  static const std::map<std::string, DType> kSupported = {
      {"F32", DType::kF32}, {"F16", DType::kF16}, {"BF16", DType::kBF16}};
  auto it = kSupported.find(s);
  if (it == kSupported.end()) return false;
  *out = it->second;
  return true;
}

bool is_known_safetensors_dtype(const std::string& s) {
  static const std::set<std::string> kKnown = {"BOOL",    "U8",  "I8",      "I16",     "U16",     "I32",
                                               "U32",     "I64", "U64",     "F64",     "F8_E4M3", "F8_E5M2",
                                               "F8_E8M0", "F4",  "F6_E2M3", "F6_E3M2", "C64"};
  return kKnown.count(s) != 0;
}

// The 8-byte little-endian header length at the start of the file, checked against the file's size.
uint64_t read_header_length(const std::string& path, const uint8_t* base, size_t size) {
  if (size < 8) {
    throw_invalid_argument(path + ": not a safetensors file: " + std::to_string(size) +
                           " bytes, shorter than the 8-byte header length");
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | base[i];  // little-endian
  if (header_len > kMaxHeaderBytes) {
    throw_invalid_argument(path + ": header length " + std::to_string(header_len) +
                           " exceeds the 100 MB limit; not a safetensors file?");
  }
  if (header_len > size - 8) {
    throw_invalid_argument(path + ": header length " + std::to_string(header_len) + " runs past the end of the file (" +
                           std::to_string(size) + " bytes); truncated?");
  }
  return header_len;
}

// The header's "__metadata__" object, whose values must all be strings.
void read_metadata(const json& entry, const std::string& path, std::map<std::string, std::string>& metadata) {
  if (!entry.is_object()) throw_invalid_argument(path + ": __metadata__ is not an object");
  for (const auto& [k, v] : entry.items()) {
    if (!v.is_string()) {
      throw_invalid_argument(path + ": __metadata__ '" + k + "' is not a string");
    }
    metadata[k] = v.get<std::string>();
  }
}

// A tensor entry's shape into `dims`; returns its element count, refusing a shape too large to
// count in 64 bits. `where` names the tensor.
uint64_t read_shape(const json& shape, const std::string& where, std::vector<int64_t>& dims) {
  if (!shape.is_array()) throw_invalid_argument(where + "'shape' is not a list");
  uint64_t numel = 1;
  for (const auto& d : shape) {
    if (!d.is_number_integer()) {
      throw_invalid_argument(where + "shape " + shape.dump() + " holds a non-integer");
    }
    const int64_t dim = d.get<int64_t>();
    if (dim < 0) throw_invalid_argument(where + "negative dimension in shape " + shape.dump());
    dims.push_back(dim);
    if (dim != 0 && numel > std::numeric_limits<uint64_t>::max() / 2 / uint64_t(dim)) {
      throw_invalid_argument(where + "shape " + shape.dump() + " is too large");
    }
    numel *= uint64_t(dim);
  }
  return numel;
}

// One tensor's header entry: its name, dtype, shape, size and absolute file offset (the caller
// sets data and file). `data_begin` is where the data section starts and `data_size` its length.
TensorInfo read_tensor_entry(const std::string& name, const json& entry, const std::string& where, size_t data_begin,
                             uint64_t data_size) {
  if (!entry.is_object()) throw_invalid_argument(where + "entry is not an object");
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!entry.contains(key)) throw_invalid_argument(where + "missing '" + key + "'");
  }
  TensorInfo t;
  t.name = name;
  const json& dt = entry["dtype"];
  if (!dt.is_string()) throw_invalid_argument(where + "'dtype' is not a string");
  if (!parse_dtype(dt.get<std::string>(), &t.dtype)) {
    const std::string d = dt.get<std::string>();
    throw_invalid_argument(where + (is_known_safetensors_dtype(d) ? "unsupported" : "unknown") + " dtype " + d +
                           " (ditto reads F32, F16 and BF16)");
  }
  const json& shape = entry["shape"];
  const uint64_t numel = read_shape(shape, where, t.shape);
  const json& off = entry["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
    throw_invalid_argument(where + "'data_offsets' must be two non-negative integers, got " + off.dump());
  }
  const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
  if (begin > end) {
    throw_invalid_argument(where + "data_offsets " + off.dump() + " begin after they end");
  }
  if (end > data_size) {
    throw_invalid_argument(where + "data_offsets " + off.dump() + " end past the data section (" +
                           std::to_string(data_size) + " bytes); truncated file?");
  }
  const uint64_t expected = numel * dtype_size(t.dtype);
  if (end - begin != expected) {
    throw_invalid_argument(where + "holds " + std::to_string(end - begin) + " bytes but shape " + shape.dump() +
                           " of " + dt.get<std::string>() + " needs " + std::to_string(expected));
  }
  t.nbytes = static_cast<size_t>(end - begin);
  t.file_offset = data_begin + static_cast<size_t>(begin);
  return t;
}

// No two tensors may share a byte (empty tensors share none).
void check_no_overlap(const std::vector<TensorInfo>& tensors, const std::string& path) {
  std::vector<const TensorInfo*> by_offset;
  for (const auto& t : tensors) {
    if (t.nbytes > 0) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->file_offset < b->file_offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& prev = *by_offset[i - 1];
    if (by_offset[i]->file_offset < prev.file_offset + prev.nbytes) {
      throw_invalid_argument(path + ": tensor '" + by_offset[i]->name + "': data overlaps tensor '" + prev.name + "'");
    }
  }
}

// Like the reference safetensors library: the data section holds the tensors and nothing after.
void check_no_trailing_bytes(const std::vector<TensorInfo>& tensors, size_t data_begin, uint64_t data_size,
                             const std::string& path) {
  uint64_t data_end = 0;
  for (const auto& t : tensors) data_end = std::max<uint64_t>(data_end, t.file_offset - data_begin + t.nbytes);
  if (data_end != data_size) {
    throw_invalid_argument(path + ": " + std::to_string(data_size - data_end) +
                           " bytes after the last tensor's data (the header does not describe the whole file)");
  }
}

}  // namespace

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(std::make_unique<MappedFile>(path)) {
  const size_t size = file_->size();
  const uint8_t* base = file_->data();
  const uint64_t header_len = read_header_length(path, base, size);
  const json header = parse_json_input<json>(
      std::string_view(reinterpret_cast<const char*>(base) + 8, static_cast<size_t>(header_len)), path + ": header");
  if (!header.is_object()) throw_invalid_argument(path + ": header is not a JSON object");

  const size_t data_begin = 8 + header_len;
  const uint64_t data_size = size - data_begin;
  for (const auto& [name, entry] : header.items()) {
    const std::string where = path + ": tensor '" + name + "': ";
    if (name == "__metadata__") {
      read_metadata(entry, path, metadata_);
      continue;
    }
    TensorInfo t = read_tensor_entry(name, entry, where, data_begin, data_size);
    t.data = base + t.file_offset;
    t.file = file_.get();
    tensors_.push_back(std::move(t));
  }
  check_no_overlap(tensors_, path);
  check_no_trailing_bytes(tensors_, data_begin, data_size, path);
  std::sort(tensors_.begin(), tensors_.end(), [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const TensorInfo& t, const std::string& n) { return t.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

WeightStore WeightStore::open(const std::string& model_dir) {
  WeightStore w;
  w.model_dir_ = model_dir;
  const fs::path dir(model_dir);
  if (!fs::is_directory(dir)) throw_not_found(model_dir + ": not a directory");
  const fs::path single = dir / "model.safetensors";
  const fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(single)) {
    w.source_ = single.string();
    w.files_.push_back(std::make_unique<SafetensorsFile>(single.string()));
    for (const auto& t : w.files_.back()->tensors()) w.tensors_.emplace(t.name, t);
    return w;
  }
  if (!fs::exists(index)) {
    std::string hint;
    if (fs::exists(dir / "pytorch_model.bin") || fs::exists(dir / "pytorch_model.bin.index.json")) {
      hint = " (found pytorch_model.bin: ditto reads only safetensors; convert the checkpoint)";
    }
    throw_not_found(model_dir + ": no model.safetensors or model.safetensors.index.json" + hint);
  }
  w.source_ = index.string();
  const json j = read_json_file(index.string(), /*require_object=*/false);
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
    throw_invalid_argument(index.string() + ": missing the 'weight_map' object");
  }
  std::map<std::string, std::vector<std::string>> by_shard;  // shard file -> tensor names
  for (const auto& [name, shard] : j["weight_map"].items()) {
    if (!shard.is_string()) {
      throw_invalid_argument(index.string() + ": weight_map entry for tensor '" + name +
                             "' is not a file name: " + shard.dump());
    }
    const std::string file = shard.get<std::string>();
    if (file.empty() || file == "." || file == ".." || file.find('/') != std::string::npos ||
        file.find('\\') != std::string::npos) {
      throw_invalid_argument(index.string() + ": weight_map entry for tensor '" + name + "' is '" + file +
                             "', not a file name inside the model directory");
    }
    by_shard[file].push_back(name);
  }
  for (const auto& [shard, names] : by_shard) {
    const fs::path shard_path = dir / shard;
    if (!fs::is_regular_file(shard_path)) {
      throw_not_found(index.string() + ": weight_map lists shard '" + shard + "' (for tensor '" + names.front() +
                      "'), but " + shard_path.string() + " does not exist");
    }
    w.files_.push_back(std::make_unique<SafetensorsFile>(shard_path.string()));
    const SafetensorsFile& f = *w.files_.back();
    for (const auto& name : names) {
      const TensorInfo* t = f.find(name);
      if (t == nullptr) {
        throw_invalid_argument(index.string() + ": tensor '" + name + "' is listed in shard '" + shard + "', but " +
                               f.path() + " does not hold it");
      }
      w.tensors_.emplace(name, *t);
    }
  }
  return w;
}

const TensorInfo& WeightStore::get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw_not_found(source_ + ": no tensor '" + name + "'");
  return it->second;
}

std::vector<std::string> WeightStore::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, t] : tensors_) out.push_back(name);
  return out;
}

void WeightStore::release(const TensorInfo& t) const {
  if (t.file != nullptr) t.file->release(t.file_offset, t.nbytes);
}

int64_t WeightStore::total_bytes() const {
  int64_t total = 0;
  for (const auto& [name, t] : tensors_) total += static_cast<int64_t>(t.nbytes);
  return total;
}

void validate_weights(const ModelConfig& c, const WeightStore& w) {
  std::vector<const TensorSpec*> missing;
  const std::vector<TensorSpec> expected = expected_tensors(c);
  for (const TensorSpec& spec : expected) {
    if (!w.contains(spec.name)) {
      missing.push_back(&spec);
      continue;
    }
    const TensorInfo& t = w.get(spec.name);
    if (t.shape != spec.shape) {
      throw_invalid_argument(t.file->path() + ": tensor '" + spec.name + "': shape " + shape_string(t.shape) +
                             ", but config.json (" + c.architecture + ") implies " + shape_string(spec.shape));
    }
  }
  if (!missing.empty()) {
    std::string list;
    for (size_t i = 0; i < missing.size() && i < 5; ++i) {
      list += (i ? ", '" : "'") + missing[i]->name + "' " + shape_string(missing[i]->shape);
    }
    if (missing.size() > 5) list += ", ...";
    throw_not_found(w.source() + ": " + std::to_string(missing.size()) + " of " + std::to_string(expected.size()) +
                    " tensors that config.json (" + c.architecture + ", " + std::to_string(c.num_hidden_layers) +
                    " layers) implies are missing: " + list);
  }
}

}  // namespace ditto
