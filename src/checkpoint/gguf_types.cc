#include "checkpoint/gguf_types.h"

#include <array>
#include <utility>

#include "core/error.h"

namespace ditto {
namespace {

struct TypeEntry {
  GgmlType type;
  GgmlTypeTraits traits;
};

// ggml.c type_traits: blck_size and type_size (the quantized ones as kernels/quant.h's formats,
// checked by the test).
constexpr std::array<TypeEntry, 15> kTypes{{
    {GgmlType::kF32, {"F32", 1, 4}},
    {GgmlType::kF16, {"F16", 1, 2}},
    {GgmlType::kBF16, {"BF16", 1, 2}},
    {GgmlType::kQ8_0, {"Q8_0", 32, 34}},
    {GgmlType::kQ4_0, {"Q4_0", 32, 18}},
    {GgmlType::kQ4_1, {"Q4_1", 32, 20}},
    {GgmlType::kQ4_K, {"Q4_K", 256, 144}},
    {GgmlType::kQ6_K, {"Q6_K", 256, 210}},
    {GgmlType::kQ5_0, {"Q5_0", 32, 22}},
    {GgmlType::kQ5_1, {"Q5_1", 32, 24}},
    {GgmlType::kQ5_K, {"Q5_K", 256, 176}},
    {GgmlType::kQ3_K, {"Q3_K", 256, 110}},
    {GgmlType::kQ2_K, {"Q2_K", 256, 84}},
    {GgmlType::kIQ4_NL, {"IQ4_NL", 32, 18}},
    {GgmlType::kIQ4_XS, {"IQ4_XS", 256, 136}},
}};

// GgmlType ↔ QuantType of the quantized types.
constexpr std::pair<GgmlType, QuantType> kQuantTypes[] = {
    {GgmlType::kQ8_0, QuantType::kQ8_0},     {GgmlType::kQ4_0, QuantType::kQ4_0},
    {GgmlType::kQ4_1, QuantType::kQ4_1},     {GgmlType::kQ4_K, QuantType::kQ4_K},
    {GgmlType::kQ6_K, QuantType::kQ6_K},     {GgmlType::kQ5_0, QuantType::kQ5_0},
    {GgmlType::kQ5_1, QuantType::kQ5_1},     {GgmlType::kQ5_K, QuantType::kQ5_K},
    {GgmlType::kQ3_K, QuantType::kQ3_K},     {GgmlType::kQ2_K, QuantType::kQ2_K},
    {GgmlType::kIQ4_NL, QuantType::kIQ4_NL}, {GgmlType::kIQ4_XS, QuantType::kIQ4_XS},
};

}  // namespace

std::string gguf_value_type_name(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8: return "u8";
    case GgufValueType::kInt8: return "i8";
    case GgufValueType::kUint16: return "u16";
    case GgufValueType::kInt16: return "i16";
    case GgufValueType::kUint32: return "u32";
    case GgufValueType::kInt32: return "i32";
    case GgufValueType::kFloat32: return "f32";
    case GgufValueType::kBool: return "bool";
    case GgufValueType::kString: return "string";
    case GgufValueType::kArray: return "array";
    case GgufValueType::kUint64: return "u64";
    case GgufValueType::kInt64: return "i64";
    case GgufValueType::kFloat64: return "f64";
  }
  return "type " + std::to_string(static_cast<uint32_t>(t));
}

const GgmlTypeTraits* ggml_type_traits(uint32_t type) {
  for (const TypeEntry& e : kTypes)
    if (static_cast<uint32_t>(e.type) == type) return &e.traits;
  return nullptr;
}

size_t ggml_type_size(GgmlType t) {
  const GgmlTypeTraits* traits = ggml_type_traits(static_cast<uint32_t>(t));
  if (traits == nullptr || traits->block_size != 1)
    throw_invalid_argument("GGML type " + std::string(ggml_type_name(t)) +
                           " has no per-element size (supported: F32, F16, BF16)");
  return static_cast<size_t>(traits->block_bytes);
}

std::string_view ggml_type_name(GgmlType t) {
  const GgmlTypeTraits* traits = ggml_type_traits(static_cast<uint32_t>(t));
  return traits == nullptr ? "?" : traits->name;
}

bool ggml_type_is_quantized(GgmlType t) {
  const GgmlTypeTraits* traits = ggml_type_traits(static_cast<uint32_t>(t));
  return traits != nullptr && traits->block_size > 1;
}

GgmlType ggml_type_of(DType t) {
  switch (t) {
    case DType::kF32: return GgmlType::kF32;
    case DType::kF16: return GgmlType::kF16;
    case DType::kBF16: return GgmlType::kBF16;
  }
  return GgmlType::kF32;
}

DType dtype_of(GgmlType t) {
  switch (t) {
    case GgmlType::kF32: return DType::kF32;
    case GgmlType::kF16: return DType::kF16;
    case GgmlType::kBF16: return DType::kBF16;
    default: break;
  }
  throw_invalid_argument("GGML type " + std::string(ggml_type_name(t)) + " is quantized, not a float dtype");
}

std::string supported_ggml_types() {
  std::string out;
  for (const TypeEntry& e : kTypes) out += (out.empty() ? "" : ", ") + std::string(e.traits.name);
  return out;
}

QuantType quant_type_of(GgmlType t) {
  for (const auto& [g, q] : kQuantTypes)
    if (g == t) return q;
  return QuantType::kNone;
}

GgmlType ggml_type_of(QuantType t) {
  for (const auto& [g, q] : kQuantTypes)
    if (q == t) return g;
  DITTO_CHECK(false) << "ggml_type_of: not a quantized type";
  return GgmlType::kF32;
}

int64_t ggml_nbytes(GgmlType type, const int64_t* ne, int n_dims) {
  const GgmlTypeTraits* traits = ggml_type_traits(static_cast<uint32_t>(type));
  if (traits == nullptr || n_dims < 1 || ne[0] % traits->block_size != 0) return -1;
  unsigned __int128 bytes = static_cast<unsigned __int128>(ne[0] / traits->block_size) * traits->block_bytes;
  for (int i = 1; i < n_dims; ++i) {
    bytes *= static_cast<unsigned __int128>(ne[i]);
    if (bytes > static_cast<unsigned __int128>(INT64_MAX)) return -1;
  }
  return static_cast<int64_t>(bytes);
}

}  // namespace ditto
