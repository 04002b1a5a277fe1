#include "checkpoint/gguf_reader.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <utility>

#include "core/error.h"

namespace ditto {
namespace {

// " (IQ2_XXS)": ggml's name of a type id ditto does not read (ggml.h enum ggml_type), or "" for an id
// ggml does not define either.
std::string ggml_type_label(uint32_t type) {
  static constexpr const char* kNames[] = {
      "F32",    "F16",   "Q4_0",  "Q4_1",   nullptr, nullptr, "Q5_0",    "Q5_1",   "Q8_0",    "Q8_1",
      "Q2_K",   "Q3_K",  "Q4_K",  "Q5_K",   "Q6_K",  "Q8_K",  "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S",
      "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8",    "I16",   "I32",     "I64",    "F64",     "IQ1_M",
      "BF16",   nullptr, nullptr, nullptr,  "TQ1_0", "TQ2_0", nullptr,   nullptr,  nullptr,   "MXFP4"};
  if (type >= std::size(kNames) || kNames[type] == nullptr) return "";
  return std::string(" (") + kNames[type] + ")";
}

constexpr int kMaxDims = 4;        // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 4;  // arrays of arrays are legal; deeper nesting is no model's
constexpr uint32_t kDefaultAlignment = 32;

// A bounds-checked little-endian cursor over the mapped header. Every read names what it reads,
// so a file cut short says where.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, std::string path) : data_(data), size_(size), path_(std::move(path)) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  [[noreturn]] void fail(const std::string& what) const {
    throw_invalid_argument(path_ + ": " + what + " (at byte " + std::to_string(pos_) + " of " + std::to_string(size_) +
                           ")");
  }

  uint64_t uint(int bytes, const std::string& what) {
    if (remaining() < static_cast<size_t>(bytes)) fail("file ends inside " + what + "; truncated?");
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t{data_[pos_ + i]} << (8 * i);
    pos_ += static_cast<size_t>(bytes);
    return v;
  }

  std::string str(const std::string& what) {
    const uint64_t n = uint(8, "the length of " + what);
    if (n > remaining()) fail(what + " is " + std::to_string(n) + " bytes long, past the end of the file");
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  std::string path_;
  size_t pos_ = 0;
};

// The smallest encoding of one value of `t`: bounds an array's count by the bytes left.
size_t min_value_bytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool: return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16: return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32: return 4;
    case GgufValueType::kString:
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64: return 8;
    case GgufValueType::kArray: return 12;
  }
  return 1;
}

bool known_value_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::kFloat64); }

GgufValue read_value(Cursor& c, GgufValueType type, const std::string& key, int depth) {
  GgufValue v;
  v.type = type;
  const std::string what = "the value of '" + key + "'";
  switch (type) {
    case GgufValueType::kUint8: v.u = c.uint(1, what); break;
    case GgufValueType::kUint16: v.u = c.uint(2, what); break;
    case GgufValueType::kUint32: v.u = c.uint(4, what); break;
    case GgufValueType::kUint64: v.u = c.uint(8, what); break;
    case GgufValueType::kInt8: v.i = static_cast<int8_t>(c.uint(1, what)); break;
    case GgufValueType::kInt16: v.i = static_cast<int16_t>(c.uint(2, what)); break;
    case GgufValueType::kInt32: v.i = static_cast<int32_t>(c.uint(4, what)); break;
    case GgufValueType::kInt64: v.i = static_cast<int64_t>(c.uint(8, what)); break;
    case GgufValueType::kFloat32: {
      const auto bits = static_cast<uint32_t>(c.uint(4, what));
      float f;
      std::memcpy(&f, &bits, 4);
      v.f = f;
      break;
    }
    case GgufValueType::kFloat64: {
      const uint64_t bits = c.uint(8, what);
      std::memcpy(&v.f, &bits, 8);
      break;
    }
    case GgufValueType::kBool: {
      const uint64_t b = c.uint(1, what);
      if (b > 1) c.fail("metadata '" + key + "': a bool must be 0 or 1, is " + std::to_string(b));
      v.b = b == 1;
      break;
    }
    case GgufValueType::kString: v.s = c.str(what); break;
    case GgufValueType::kArray: {
      if (depth >= kMaxArrayDepth) c.fail("metadata '" + key + "': arrays nested deeper than 4");
      const auto element = static_cast<uint32_t>(c.uint(4, "the element type of '" + key + "'"));
      if (!known_value_type(element))
        c.fail("metadata '" + key + "': unknown array element type " + std::to_string(element));
      v.element_type = static_cast<GgufValueType>(element);
      const uint64_t count = c.uint(8, "the length of '" + key + "'");
      if (count > c.remaining() / min_value_bytes(v.element_type))
        c.fail("metadata '" + key + "': an array of " + std::to_string(count) + " " +
               gguf_value_type_name(v.element_type) + " does not fit in the rest of the file");
      v.array.reserve(static_cast<size_t>(count));
      for (uint64_t i = 0; i < count; ++i) v.array.push_back(read_value(c, v.element_type, key, depth + 1));
      break;
    }
  }
  return v;
}

}  // namespace

std::string ggml_ne_string(const std::vector<int64_t>& ne) {
  std::string s = "{";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "}";
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kUint16:
    case GgufValueType::kUint32:
    case GgufValueType::kUint64:
    case GgufValueType::kInt8:
    case GgufValueType::kInt16:
    case GgufValueType::kInt32:
    case GgufValueType::kInt64: return true;
    default: return false;
  }
}

std::string GgufValue::describe() const {
  const std::string t = gguf_value_type_name(type);
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kUint16:
    case GgufValueType::kUint32:
    case GgufValueType::kUint64: return t + " " + std::to_string(u);
    case GgufValueType::kInt8:
    case GgufValueType::kInt16:
    case GgufValueType::kInt32:
    case GgufValueType::kInt64: return t + " " + std::to_string(i);
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64: return t + " " + std::to_string(f);
    case GgufValueType::kBool: return std::string("bool ") + (b ? "true" : "false");
    case GgufValueType::kString: return "string \"" + (s.size() > 40 ? s.substr(0, 40) + "..." : s) + "\"";
    case GgufValueType::kArray:
      return "array of " + std::to_string(array.size()) + " " + gguf_value_type_name(element_type);
  }
  return t;
}

std::vector<int64_t> GgufTensor::shape() const { return {ne.rbegin(), ne.rend()}; }

size_t GgufTensor::row_bytes() const {
  const GgmlTypeTraits& t = *ggml_type_traits(static_cast<uint32_t>(type));
  return static_cast<size_t>(ne[0] / t.block_size * t.block_bytes);
}

namespace {

// The metadata key-value pairs that follow the header; each key may appear only once.
void read_metadata(Cursor& c, uint64_t kv_count, std::map<std::string, GgufValue>& metadata) {
  for (uint64_t k = 0; k < kv_count; ++k) {
    std::string key = c.str("metadata key " + std::to_string(k));
    if (key.empty()) c.fail("metadata key " + std::to_string(k) + " is empty");
    const auto type = static_cast<uint32_t>(c.uint(4, "the type of '" + key + "'"));
    if (!known_value_type(type)) c.fail("metadata '" + key + "': unknown value type " + std::to_string(type));
    GgufValue v = read_value(c, static_cast<GgufValueType>(type), key, 0);
    if (!metadata.emplace(key, std::move(v)).second) c.fail("metadata '" + key + "' appears twice");
  }
}

// The data section's alignment: metadata 'general.alignment' (a u32 power of two) or GGUF's default.
uint32_t data_alignment(const GgufFile& g, const std::string& path) {
  if (const GgufValue* a = g.find("general.alignment")) {
    if (a->type != GgufValueType::kUint32 || a->u == 0 || (a->u & (a->u - 1)) != 0)
      throw_invalid_argument(path + ": metadata 'general.alignment' must be a u32 power of two, is " + a->describe());
    return static_cast<uint32_t>(a->u);
  }
  return kDefaultAlignment;
}

// Tensor info `t`: name, dimensions, type and offset. The offset stays relative to the data
// section, whose start is known only after the last tensor info.
GgufTensor read_tensor_info(Cursor& c, uint64_t t, uint32_t alignment) {
  GgufTensor info;
  info.name = c.str("the name of tensor " + std::to_string(t));
  const std::string where = "tensor '" + info.name + "'";
  if (info.name.empty()) c.fail("tensor " + std::to_string(t) + " has an empty name");
  const uint64_t n_dims = c.uint(4, "the dimension count of " + where);
  if (n_dims < 1 || n_dims > kMaxDims)
    c.fail(where + " has " + std::to_string(n_dims) + " dimensions (GGUF allows 1 to 4)");
  for (uint64_t d = 0; d < n_dims; ++d) {
    const uint64_t ne = c.uint(8, "a dimension of " + where);
    if (ne < 1 || ne > (uint64_t{1} << 40))
      c.fail(where + " has dimension " + std::to_string(d) + " = " + std::to_string(ne) + " (must be 1 to 2^40)");
    info.ne.push_back(static_cast<int64_t>(ne));
  }
  const auto type = static_cast<uint32_t>(c.uint(4, "the type of " + where));
  const GgmlTypeTraits* traits = ggml_type_traits(type);
  if (traits == nullptr)
    c.fail(where + " has ggml type " + std::to_string(type) + ggml_type_label(type) +
           ", which ditto does not read (supported: " + supported_ggml_types() + ")");
  info.type = static_cast<GgmlType>(type);
  const int64_t nbytes = ggml_nbytes(info.type, info.ne.data(), static_cast<int>(info.ne.size()));
  if (nbytes < 0)
    c.fail(where + " of type " + std::string(traits->name) + " and shape (ne) " + ggml_ne_string(info.ne) +
           ": the innermost dimension must be a multiple of " + std::to_string(traits->block_size));
  info.nbytes = static_cast<size_t>(nbytes);
  info.file_offset = c.uint(8, "the offset of " + where);  // relative to the data section for now
  if (info.file_offset % alignment != 0)
    c.fail(where + ": offset " + std::to_string(info.file_offset) + " is not a multiple of the alignment " +
           std::to_string(alignment));
  return info;
}

// Makes each tensor's offset absolute (the data section starts at data_start) and points its data
// into the mapping, after checking that its bytes lie inside the file.
void locate_tensor_data(std::vector<GgufTensor>& tensors, const MappedFile& file, size_t data_start,
                        const std::string& path) {
  const size_t size = file.size();
  for (GgufTensor& t : tensors) {
    const size_t relative = t.file_offset;
    if (data_start > size || relative > size - data_start || t.nbytes > size - data_start - relative)
      throw_invalid_argument(path + ": tensor '" + t.name + "' (" + std::string(ggml_type_name(t.type)) + ", ne " +
                             ggml_ne_string(t.ne) + ", " + std::to_string(t.nbytes) + " bytes at data offset " +
                             std::to_string(relative) + ") runs past the end of the file (" + std::to_string(size) +
                             " bytes); truncated?");
    t.file_offset = data_start + relative;
    t.data = file.data() + t.file_offset;
  }
}

}  // namespace

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path, bool metadata_only) {
  std::unique_ptr<GgufFile> g(new GgufFile());
  g->file_ = std::make_unique<MappedFile>(path);
  Cursor c(g->file_->data(), g->file_->size(), path);
  if (g->file_->size() < 4 || std::memcmp(g->file_->data(), "GGUF", 4) != 0)
    throw_invalid_argument(path + ": not a GGUF file (it does not start with the magic \"GGUF\")");
  c.uint(4, "the magic");
  g->version_ = static_cast<uint32_t>(c.uint(4, "the version"));
  if (g->version_ != 2 && g->version_ != 3)
    throw_invalid_argument(path + ": GGUF version " + std::to_string(g->version_) +
                           " is not supported (supported: 2 and 3; version 1 files predate 64-bit counts)");
  const uint64_t tensor_count = c.uint(8, "the tensor count");
  const uint64_t kv_count = c.uint(8, "the metadata count");
  // A key-value pair takes at least 8 + 4 + 1 bytes, a tensor info at least 8 + 4 + 8 + 4 + 8.
  if (kv_count > c.remaining() / 13)
    c.fail("the header claims " + std::to_string(kv_count) +
           " metadata pairs, more than the file can hold; truncated?");
  if (tensor_count > c.remaining() / 32)
    c.fail("the header claims " + std::to_string(tensor_count) + " tensors, more than the file can hold; truncated?");

  read_metadata(c, kv_count, g->metadata_);
  g->alignment_ = data_alignment(*g, path);
  if (metadata_only) return g;

  g->tensors_.reserve(static_cast<size_t>(tensor_count));
  for (uint64_t t = 0; t < tensor_count; ++t) {
    GgufTensor info = read_tensor_info(c, t, g->alignment_);
    if (!g->tensor_index_.emplace(info.name, g->tensors_.size()).second)
      c.fail("tensor '" + info.name + "' appears twice");
    g->tensors_.push_back(std::move(info));
  }

  const size_t data_start = (c.pos() + g->alignment_ - 1) / g->alignment_ * g->alignment_;
  locate_tensor_data(g->tensors_, *g->file_, data_start, path);
  return g;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  const auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

namespace {
[[noreturn]] void wrong_type(const std::string& path, const std::string& key, const GgufValue& v,
                             const std::string& expected) {
  throw_invalid_argument(path + ": metadata '" + key + "' is " + v.describe() + ", expected " + expected);
}

std::optional<int64_t> as_int(const GgufValue& v) {
  if (v.type == GgufValueType::kUint8 || v.type == GgufValueType::kUint16 || v.type == GgufValueType::kUint32 ||
      v.type == GgufValueType::kUint64) {
    if (v.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(v.u);
  }
  if (v.is_integer()) return v.i;
  return std::nullopt;
}
}  // namespace

std::optional<int64_t> GgufFile::get_int(const std::string& key, bool non_negative) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  const std::optional<int64_t> i = as_int(*v);
  if (!i || (non_negative && *i < 0))
    wrong_type(path(), key, *v, non_negative ? "a non-negative integer" : "an integer");
  return i;
}

std::optional<double> GgufFile::get_float(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->is_float()) return v->f;
  if (const std::optional<int64_t> i = as_int(*v)) return static_cast<double>(*i);
  wrong_type(path(), key, *v, "a number");
}

std::optional<bool> GgufFile::get_bool(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufValueType::kBool) wrong_type(path(), key, *v, "a bool");
  return v->b;
}

std::optional<std::string> GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufValueType::kString) wrong_type(path(), key, *v, "a string");
  return v->s;
}

std::optional<std::vector<std::string>> GgufFile::get_string_array(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufValueType::kArray || v->element_type != GgufValueType::kString)
    wrong_type(path(), key, *v, "an array of string");
  std::vector<std::string> out;
  out.reserve(v->array.size());
  for (const GgufValue& e : v->array) out.push_back(e.s);
  return out;
}

std::optional<std::vector<int64_t>> GgufFile::get_int_array(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  std::vector<int64_t> out;
  if (v->type == GgufValueType::kArray) {
    out.reserve(v->array.size());
    for (const GgufValue& e : v->array) {
      const std::optional<int64_t> i = as_int(e);
      if (!i) break;
      out.push_back(*i);
    }
  }
  if (v->type != GgufValueType::kArray || out.size() != v->array.size())
    wrong_type(path(), key, *v, "an array of integers");
  return out;
}

std::optional<std::vector<double>> GgufFile::get_float_array(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  std::vector<double> out;
  if (v->type == GgufValueType::kArray) {
    out.reserve(v->array.size());
    for (const GgufValue& e : v->array) {
      if (e.is_float()) {
        out.push_back(e.f);
      } else if (const std::optional<int64_t> i = as_int(e)) {
        out.push_back(static_cast<double>(*i));
      } else {
        break;
      }
    }
  }
  if (v->type != GgufValueType::kArray || out.size() != v->array.size())
    wrong_type(path(), key, *v, "an array of numbers");
  return out;
}

int64_t GgufFile::require_int(const std::string& key) const {
  const std::optional<int64_t> v = get_int(key);
  if (!v) throw_invalid_argument(path() + ": metadata '" + key + "' is missing");
  return *v;
}

std::string GgufFile::require_string(const std::string& key) const {
  const std::optional<std::string> v = get_string(key);
  if (!v) throw_invalid_argument(path() + ": metadata '" + key + "' is missing");
  return *v;
}

const GgufTensor* GgufFile::find_tensor(const std::string& name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensor& GgufFile::tensor(const std::string& name) const {
  const GgufTensor* t = find_tensor(name);
  if (t == nullptr) throw_invalid_argument(path() + ": tensor '" + name + "' is missing");
  return *t;
}

int64_t GgufFile::total_tensor_bytes() const {
  int64_t total = 0;
  for (const GgufTensor& t : tensors_) total += static_cast<int64_t>(t.nbytes);
  return total;
}

bool is_gguf_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in && in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

}  // namespace ditto
