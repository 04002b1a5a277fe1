// The vocabulary of the GGUF format (ggml docs/gguf.md; ggml's gguf.h and ggml.h): metadata value
// types and tensor element types, shared by the writer (checkpoint/gguf_writer.h) and the reader
// (checkpoint/gguf_reader.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/dtype.h"
#include "kernels/quant.h"

namespace ditto {

// Metadata value types (gguf_type in ggml's gguf.h).
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// "u32", "string", ... ("type 42" for a number that names no type): for messages.
std::string gguf_value_type_name(GgufValueType t);

// Tensor element types ditto reads and writes (ggml_type numbers in ggml.h). The float types hold
// one value per element; the quantized ones store rows in blocks of block_size values
// (kernels/quant.h has their layouts).
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kIQ4_NL = 20,
  kIQ4_XS = 23,
  kBF16 = 30,
};

// Block geometry of a type: a row of ne0 values takes ne0 / block_size blocks of block_bytes.
// Float types have block_size 1. Values from ggml's type_traits (ggml.c).
struct GgmlTypeTraits {
  std::string_view name;  // "F32", "Q4_K", ... as ggml and llama.cpp print them
  int64_t block_size;
  int64_t block_bytes;
};

// nullptr for a number that is not one of GgmlType's (the reader's "unsupported type" error).
const GgmlTypeTraits* ggml_type_traits(uint32_t type);

// Bytes per element for the float types (4, 2, 2). Error(kInvalidArgument) for a quantized type.
size_t ggml_type_size(GgmlType t);
std::string_view ggml_type_name(GgmlType t);  // "F32", "Q8_0", ... ("?" for others)
bool ggml_type_is_quantized(GgmlType t);
GgmlType ggml_type_of(DType t);  // the same bits: F32, F16, BF16
// The DType of a float GgmlType. Error(kInvalidArgument) for a quantized type.
DType dtype_of(GgmlType t);
// "F32, F16, BF16, Q8_0, Q4_0, ...": every type the reader parses, for messages.
std::string supported_ggml_types();

// The block format of a quantized GgmlType (kernels/quant.h), kNone for a float type; and back.
QuantType quant_type_of(GgmlType t);
GgmlType ggml_type_of(QuantType t);  // t must not be kNone

// Bytes of a tensor of `type` with ne = {ne0, ne1, ...} (innermost first); nullopt-like -1 when
// ne0 is not a multiple of the block size or the size overflows 64 bits.
int64_t ggml_nbytes(GgmlType type, const int64_t* ne, int n_dims);

}  // namespace ditto
