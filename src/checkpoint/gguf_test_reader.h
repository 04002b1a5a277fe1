// A minimal GGUF reader for tests, written from the spec (ggml docs/gguf.md) independently of
// GgufWriter, so that a writer bug cannot hide behind a matching reader bug. Reads the whole file
// into memory: for test-sized files only.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace ditto::testing {

struct Value;
using Array = std::vector<Value>;
struct Value {
  uint32_t type = 0;
  std::variant<uint64_t, int64_t, float, bool, std::string, Array> v;
};

struct ParsedTensor {
  std::string name;
  std::vector<uint64_t> dims;  // as stored: innermost first
  uint32_t type = 0;
  uint64_t offset = 0;
};

struct ParsedGguf {
  uint32_t version = 0;
  std::vector<std::pair<std::string, Value>> kv;  // file order
  std::vector<ParsedTensor> tensors;
  uint64_t data_start = 0;
  std::string bytes;  // the whole file

  const Value& get(const std::string& key) const {
    for (const auto& [k, v] : kv) {
      if (k == key) return v;
    }
    ADD_FAILURE() << "no key " << key;
    static const Value kNone;
    return kNone;
  }
  const ParsedTensor* find_tensor(const std::string& name) const {
    for (const ParsedTensor& t : tensors) {
      if (t.name == name) return &t;
    }
    return nullptr;
  }
  // The first `nbytes` bytes of tensor `name`'s data; throws when it is absent or runs past the end.
  std::string tensor_data(const std::string& name, uint64_t nbytes) const {
    const ParsedTensor* t = find_tensor(name);
    if (t == nullptr) throw std::runtime_error("no tensor " + name);
    if (data_start + t->offset + nbytes > bytes.size()) throw std::runtime_error(name + " past the end");
    return bytes.substr(data_start + t->offset, nbytes);
  }
};

class GgufBytesReader {
 public:
  explicit GgufBytesReader(const std::string& bytes) : b_(bytes) {}
  uint64_t uint(int n) {
    if (pos_ + n > b_.size()) throw std::runtime_error("read past end at " + std::to_string(pos_));
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t{static_cast<uint8_t>(b_[pos_ + i])} << (8 * i);
    pos_ += n;
    return v;
  }
  std::string str() {
    const uint64_t n = uint(8);
    if (pos_ + n > b_.size()) throw std::runtime_error("string past end");
    std::string s = b_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  Value value(uint32_t type) {
    Value out;
    out.type = type;
    switch (type) {
      case 0: out.v = uint(1); break;  // u8
      case 1: out.v = static_cast<int64_t>(static_cast<int8_t>(uint(1))); break;
      case 2: out.v = uint(2); break;
      case 3: out.v = static_cast<int64_t>(static_cast<int16_t>(uint(2))); break;
      case 4: out.v = uint(4); break;  // u32
      case 5: out.v = static_cast<int64_t>(static_cast<int32_t>(uint(4))); break;
      case 6: {  // f32
        const uint32_t bits = static_cast<uint32_t>(uint(4));
        float f;
        std::memcpy(&f, &bits, 4);
        out.v = f;
        break;
      }
      case 7: {
        const uint64_t b = uint(1);
        if (b > 1) throw std::runtime_error("bool byte " + std::to_string(b));
        out.v = b == 1;
        break;
      }
      case 8: out.v = str(); break;
      case 9: {
        const uint32_t elem = static_cast<uint32_t>(uint(4));
        const uint64_t n = uint(8);
        Array a;
        for (uint64_t i = 0; i < n; ++i) a.push_back(value(elem));
        out.v = std::move(a);
        break;
      }
      case 10: out.v = uint(8); break;
      case 11: out.v = static_cast<int64_t>(uint(8)); break;
      default: throw std::runtime_error("unknown value type " + std::to_string(type));
    }
    return out;
  }
  size_t pos() const { return pos_; }

 private:
  const std::string& b_;
  size_t pos_ = 0;
};

inline ParsedGguf parse_gguf(const std::string& path) {
  ParsedGguf g;
  std::ifstream in(path, std::ios::binary);
  g.bytes.assign(std::istreambuf_iterator<char>(in), {});
  GgufBytesReader r(g.bytes);
  if (g.bytes.substr(0, 4) != "GGUF") throw std::runtime_error("bad magic");
  r.uint(4);
  g.version = static_cast<uint32_t>(r.uint(4));
  const uint64_t n_tensors = r.uint(8);
  const uint64_t n_kv = r.uint(8);
  uint64_t alignment = 32;
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = r.str();
    Value v = r.value(static_cast<uint32_t>(r.uint(4)));
    if (key == "general.alignment") alignment = std::get<uint64_t>(v.v);
    g.kv.emplace_back(std::move(key), std::move(v));
  }
  for (uint64_t i = 0; i < n_tensors; ++i) {
    ParsedTensor t;
    t.name = r.str();
    const uint32_t n_dims = static_cast<uint32_t>(r.uint(4));
    for (uint32_t d = 0; d < n_dims; ++d) t.dims.push_back(r.uint(8));
    t.type = static_cast<uint32_t>(r.uint(4));
    t.offset = r.uint(8);
    g.tensors.push_back(std::move(t));
  }
  // The padding after the tensor infos must be zeros.
  g.data_start = (r.pos() + alignment - 1) / alignment * alignment;
  for (uint64_t p = r.pos(); p < g.data_start; ++p) {
    if (g.bytes[p] != 0) throw std::runtime_error("non-zero header padding");
  }
  return g;
}

inline uint64_t as_uint(const Value& v) { return std::get<uint64_t>(v.v); }
inline int64_t as_int(const Value& v) { return std::get<int64_t>(v.v); }
inline const std::string& as_string(const Value& v) { return std::get<std::string>(v.v); }
inline const Array& as_array(const Value& v) { return std::get<Array>(v.v); }

}  // namespace ditto::testing
