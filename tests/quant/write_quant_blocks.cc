// write_quant_blocks OUT.gguf: the file tests/quant/test_gguf_py_dequantize.py compares against
// gguf-py. For every GGML block format ditto defines (kernels/quant.h), tensor NAME ("Q5_K", ...)
// holds rows of blocks and tensor NAME.f32 ditto's dequantize_row_f32 of them, so that gguf-py,
// reading the same file with its own parser and decoders, checks the type ids, block sizes, layouts
// and values. Rows, 4 blocks each: 8 of random bytes with every f16 field a random finite f16 (both
// signs, subnormals and zeros included), 4 of wholly random bytes (inf and NaN scales too), 4 of
// ditto's own quantize_row of random values.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "checkpoint/gguf_types.h"
#include "checkpoint/gguf_writer.h"
#include "core/error.h"
#include "kernels/quant.h"

namespace ditto {
namespace {

constexpr QuantType kFormats[] = {QuantType::kQ8_0, QuantType::kQ4_0, QuantType::kQ4_1,   QuantType::kQ4_K,
                                  QuantType::kQ6_K, QuantType::kQ5_0, QuantType::kQ5_1,   QuantType::kQ5_K,
                                  QuantType::kQ3_K, QuantType::kQ2_K, QuantType::kIQ4_NL, QuantType::kIQ4_XS};
constexpr int64_t kRows = 16, kBlocksPerRow = 4;

// Byte offsets of a block's f16 fields (d, and m or dmin), as quant.h lays them out.
std::vector<int> f16_fields(QuantType t) {
  switch (t) {
    case QuantType::kQ6_K: return {208};
    case QuantType::kQ3_K: return {108};
    case QuantType::kQ2_K: return {80, 82};
    case QuantType::kQ4_1:
    case QuantType::kQ4_K:
    case QuantType::kQ5_1:
    case QuantType::kQ5_K: return {0, 2};
    default: return {0};
  }
}

int run(const std::string& path) {
  std::mt19937_64 rng(31);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  GgufWriter w(path);
  std::vector<std::vector<uint8_t>> blocks;
  std::vector<std::vector<float>> values;
  for (QuantType t : kFormats) {
    const QuantFormat& f = quant_format(t);
    const int64_t k = kBlocksPerRow * f.block_size, row_bytes = quant_row_bytes(t, k);
    std::vector<uint8_t> b(static_cast<size_t>(kRows * row_bytes));
    for (uint8_t& v : b) v = static_cast<uint8_t>(rng());
    for (int64_t r = 0; r < kRows; ++r) {
      uint8_t* row = b.data() + r * row_bytes;
      if (r < 8) {
        for (int64_t blk = 0; blk < kBlocksPerRow; ++blk)
          for (int off : f16_fields(t)) {
            uint16_t h = static_cast<uint16_t>(rng());
            if ((h & 0x7c00) == 0x7c00) h = static_cast<uint16_t>(h & ~0x4000);  // inf/NaN → finite
            std::memcpy(row + blk * f.block_bytes + off, &h, 2);
          }
      } else if (r >= 12) {
        std::vector<float> x(static_cast<size_t>(k));
        const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 16) - 8);
        for (float& v : x) v = normal(rng) * scale;
        quantize_row(t, x.data(), k, row);
      }
    }
    std::vector<float> out(static_cast<size_t>(kRows * k));
    for (int64_t r = 0; r < kRows; ++r) dequantize_row_f32(t, b.data() + r * row_bytes, k, out.data() + r * k);
    w.add_tensor({std::string(f.name), ggml_type_of(t), {kRows, k}});
    w.add_tensor({std::string(f.name) + ".f32", GgmlType::kF32, {kRows, k}});
    blocks.push_back(std::move(b));
    values.push_back(std::move(out));
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    w.write_tensor_data(blocks[i].data(), blocks[i].size());
    w.write_tensor_data(values[i].data(), values[i].size() * sizeof(float));
  }
  w.finish();
  return 0;
}

}  // namespace
}  // namespace ditto

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: write_quant_blocks OUT.gguf\n");
    return 2;
  }
  try {
    return ditto::run(argv[1]);
  } catch (const ditto::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
