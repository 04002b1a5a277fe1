// Helpers shared by quant_test.cc and quant_gemm_test.cc: the quantized types, random GGML rows
// with finite scales, packing them.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/kernel_test_util.h"
#include "kernels/packed_matrix.h"
#include "kernels/quant.h"

namespace ditto::quant_test {

using test::Rng;

// Every defined block format (the GEMM multiplies each: quant_gemm_supported).
inline constexpr QuantType kAllQuant[] = {QuantType::kQ8_0, QuantType::kQ4_0, QuantType::kQ4_1,   QuantType::kQ4_K,
                                          QuantType::kQ6_K, QuantType::kQ5_0, QuantType::kQ5_1,   QuantType::kQ5_K,
                                          QuantType::kQ3_K, QuantType::kQ2_K, QuantType::kIQ4_NL, QuantType::kIQ4_XS};
inline constexpr uint32_t kCanonicalNan = 0x7FC00000u;

// An f16 bit pattern as the double it stands for.
inline double decode_f16_bits(uint16_t h) { return test::decode_f16(h); }

inline const char* label(QuantType t) { return quant_format(t).name.data(); }

inline void put_f16(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

// n rows of random GGML blocks: random bytes (every bit pattern of the integer fields is valid)
// with the f16 scales replaced by finite values of both signs (the K-quants' d/dmin and Q6_K's d
// positive as the quantizers make them; min offsets are subtracted either way).
inline std::vector<uint8_t> random_rows(Rng& rng, QuantType t, int64_t n, int64_t k, float scale = 0.01f) {
  const QuantFormat& f = quant_format(t);
  std::vector<uint8_t> bytes(static_cast<size_t>(n * quant_row_bytes(t, k)));
  for (uint8_t& v : bytes) v = static_cast<uint8_t>(rng.next());
  for (int64_t b = 0; b < n * (k / f.block_size); ++b) {
    uint8_t* blk = bytes.data() + b * f.block_bytes;
    const float sign = rng.next() % 2 ? 1.0f : -1.0f;
    switch (t) {
      case QuantType::kQ8_0:
      case QuantType::kQ4_0: put_f16(blk, sign * rng.uniform(0.1f, 1.0f) * scale); break;
      case QuantType::kQ4_1:
        put_f16(blk, rng.uniform(0.1f, 1.0f) * scale);
        put_f16(blk + 2, sign * rng.uniform(0.0f, 8.0f) * scale);
        break;
      case QuantType::kQ4_K:
        put_f16(blk, rng.uniform(0.1f, 1.0f) * scale / 16);
        put_f16(blk + 2, rng.uniform(0.1f, 1.0f) * scale / 16);
        break;
      case QuantType::kQ6_K: put_f16(blk + 208, rng.uniform(0.1f, 1.0f) * scale / 64); break;
      case QuantType::kQ5_0: put_f16(blk, sign * rng.uniform(0.1f, 1.0f) * scale / 2); break;
      case QuantType::kQ5_1:
        put_f16(blk, rng.uniform(0.1f, 1.0f) * scale / 2);
        put_f16(blk + 2, sign * rng.uniform(0.0f, 8.0f) * scale);
        break;
      case QuantType::kQ5_K:
        put_f16(blk, rng.uniform(0.1f, 1.0f) * scale / 32);
        put_f16(blk + 2, rng.uniform(0.1f, 1.0f) * scale / 32);
        break;
      case QuantType::kQ3_K: put_f16(blk + 108, sign * rng.uniform(0.1f, 1.0f) * scale / 32); break;
      case QuantType::kQ2_K:
        put_f16(blk + 80, rng.uniform(0.1f, 1.0f) * scale / 8);
        put_f16(blk + 82, rng.uniform(0.1f, 1.0f) * scale / 8);
        break;
      case QuantType::kIQ4_NL: put_f16(blk, sign * rng.uniform(0.1f, 1.0f) * scale / 64); break;
      case QuantType::kIQ4_XS: put_f16(blk, sign * rng.uniform(0.1f, 1.0f) * scale / 1024); break;
      case QuantType::kNone: break;
    }
  }
  return bytes;
}

inline PackedMatrix pack_rows(QuantType t, const std::vector<uint8_t>& bytes, int64_t n, int64_t k,
                              ThreadPool* pool = nullptr) {
  const MatrixSource src{bytes.data(), DType::kF32, n, k, t};
  return pack_matrix({&src, 1}, pool);
}

}  // namespace ditto::quant_test
