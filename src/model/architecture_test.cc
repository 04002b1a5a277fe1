// Architectures as data: a variant added through the registry alone (a test-only
// "LlamaQkNormForCausalLM", Llama with Qwen3's per-head q/k norm) parses, lists its tensors, is
// written by the generator, validates, loads and runs; where its features coincide with
// Qwen3ForCausalLM's (q/k norm, no biases, no rope scaling) its logits equal Qwen3's bit for bit.
#include "architecture/architecture.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "architecture/config.h"
#include "checkpoint/gguf_export.h"
#include "checkpoint/test_model_generator.h"
#include "core/test_support.h"
#include "core/thread_pool.h"
#include "model/causal_lm.h"
#include "model/kv_cache.h"

namespace ditto {
namespace {

using nlohmann::json;
using testing::error_message;
using testing::TempDir;

constexpr const char* kVariant = "LlamaQkNormForCausalLM";

// Registers the variant once per process: Llama's entry with q/k norm on, and no GGUF mapping.
void register_variant() {
  if (find_architecture(kVariant) != nullptr) return;
  Architecture variant = *find_architecture("LlamaForCausalLM");
  variant.name = kVariant;
  variant.model_type = "llama_qk_norm";
  variant.features.qk_norm = true;
  variant.gguf = {};
  register_architecture(variant);
}

// A tiny config of `architecture`: 2 layers, hidden 64, 4 heads / 2 KV heads of 16, vocab 300.
json tiny_config(const std::string& architecture) {
  return {{"architectures", {architecture}},
          {"vocab_size", 300},
          {"hidden_size", 64},
          {"intermediate_size", 96},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 16},
          {"rms_norm_eps", 1e-6},
          {"rope_theta", 1000000.0},
          {"max_position_embeddings", 4096},
          {"tie_word_embeddings", true},
          {"initializer_range", 0.1},
          {"torch_dtype", "bfloat16"}};
}

// config.json and seeded weights (they depend only on the seed and each tensor's name).
std::string write_model(const TempDir& dir, const json& config) {
  dir.write("config.json", config.dump(2));
  TestModelOptions options;
  options.out_dir = dir.path().string();
  options.seed = 11;
  write_test_model_weights(parse_model_config(config, "config.json"), options);
  return dir.path().string();
}

// Logits [5, vocab_size] f32 of a 5-token prompt, every row.
std::vector<float> prompt_logits(const std::string& model_dir) {
  ThreadPool pool(2);
  const auto model = CausalLM::load(model_dir, &pool);
  KvCache cache(model->config(), /*num_blocks=*/1, /*block_size=*/16);
  const std::vector<int32_t> tokens = {3, 141, 59, 26, 299}, positions = {0, 1, 2, 3, 4};
  const std::vector<int64_t> slots = {0, 1, 2, 3, 4};
  const std::vector<int32_t> token_seq(5, 0), block_tables = {0}, logits_indices = {0, 1, 2, 3, 4};
  ForwardBatch batch{tokens, positions, slots, token_seq, block_tables, 1, logits_indices};
  std::vector<float> logits(5 * static_cast<size_t>(model->config().vocab_size));
  model->forward(batch, cache, logits.data());
  return logits;
}

TEST(Architecture, RegistryListsTheBuiltInsFirst) {
  ASSERT_GE(architectures().size(), 3u);
  EXPECT_EQ(architectures()[0].name, "Qwen3ForCausalLM");
  EXPECT_EQ(architectures()[1].name, "LlamaForCausalLM");
  EXPECT_EQ(architectures()[2].name, "Qwen3MoeForCausalLM");
  EXPECT_EQ(find_architecture_by_model_type("qwen3_moe")->gguf.arch, "qwen3moe");
  EXPECT_EQ(find_architecture("PhiForCausalLM"), nullptr);
  EXPECT_EQ(find_architecture_by_model_type("qwen2")->gguf.arch, "qwen2");
  EXPECT_EQ(find_architecture("MistralForCausalLM")->gguf.arch, "llama");  // as llama.cpp converts it
  Architecture duplicate = *find_architecture("LlamaForCausalLM");
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { register_architecture(duplicate); }, ErrorCode::kInvalidArgument),
                           "LlamaForCausalLM", "already registered");
}

TEST(Architecture, AVariantAddedThroughTheRegistryAloneMatchesQwen3BitForBit) {
  register_variant();
  const ModelConfig c = parse_model_config(tiny_config(kVariant), "config.json");
  EXPECT_TRUE(c.has_qk_norm());
  EXPECT_EQ(c.model_type, "llama_qk_norm");
  EXPECT_EQ(c.bos_token_id, 1);  // Llama's defaults came along
  bool has_q_norm = false;
  for (const TensorSpec& t : expected_tensors(c)) has_q_norm |= t.name == "model.layers.1.self_attn.q_norm.weight";
  EXPECT_TRUE(has_q_norm);

  TempDir variant_dir, qwen3_dir;
  const std::vector<float> variant = prompt_logits(write_model(variant_dir, tiny_config(kVariant)));
  const std::vector<float> qwen3 = prompt_logits(write_model(qwen3_dir, tiny_config("Qwen3ForCausalLM")));
  ASSERT_EQ(variant.size(), qwen3.size());
  EXPECT_EQ(std::memcmp(variant.data(), qwen3.data(), variant.size() * sizeof(float)), 0);

  // Llama's logits differ (the feature is on), and its checkpoint, without q/k norm weights, is not
  // one of the variant.
  TempDir llama_dir;
  const std::vector<float> llama = prompt_logits(write_model(llama_dir, tiny_config("LlamaForCausalLM")));
  EXPECT_NE(std::memcmp(variant.data(), llama.data(), variant.size() * sizeof(float)), 0);
  llama_dir.write("config.json", tiny_config(kVariant).dump());
  DITTO_EXPECT_MESSAGE_HAS(error_message(
                               [&] {
                                 ThreadPool pool(1);
                                 CausalLM::load(llama_dir.path().string(), &pool);
                               },
                               ErrorCode::kNotFound),
                           "self_attn.q_norm.weight", kVariant);

  // No GGUF mapping in its entry: the converter refuses it by name.
  DITTO_EXPECT_MESSAGE_HAS(
      error_message([&] { export_gguf(variant_dir.path().string(), variant_dir.file("x.gguf"), "x"); },
                    ErrorCode::kInvalidArgument),
      kVariant, "cannot be exported to GGUF");
}

// Qwen2 is Llama's forward pass with q/k/v biases and no o_proj bias; Mistral with sliding_window
// null is Llama's. With the generator's zero biases (transformers' init), both give Llama's logits
// bit for bit from the same weights.
TEST(Architecture, Qwen2AndMistralRunLlamasForwardPass) {
  TempDir llama_dir, qwen2_dir, mistral_dir;
  const std::vector<float> llama = prompt_logits(write_model(llama_dir, tiny_config("LlamaForCausalLM")));
  const std::vector<float> qwen2 = prompt_logits(write_model(qwen2_dir, tiny_config("Qwen2ForCausalLM")));
  json mistral_config = tiny_config("MistralForCausalLM");
  mistral_config["sliding_window"] = nullptr;
  const std::vector<float> mistral = prompt_logits(write_model(mistral_dir, mistral_config));
  ASSERT_EQ(llama.size(), qwen2.size());
  ASSERT_EQ(llama.size(), mistral.size());
  EXPECT_EQ(std::memcmp(llama.data(), qwen2.data(), llama.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(llama.data(), mistral.data(), llama.size() * sizeof(float)), 0);
}

// A Qwen2 checkpoint without its q/k/v biases is refused with one error naming the first missing
// tensor and the architecture.
TEST(Architecture, Qwen2CheckpointMissingAQkvBiasNamesTheTensor) {
  TempDir dir;
  write_model(dir, tiny_config("LlamaForCausalLM"));  // the same tensors, less the biases
  dir.write("config.json", tiny_config("Qwen2ForCausalLM").dump());
  DITTO_EXPECT_MESSAGE_HAS(error_message(
                               [&] {
                                 ThreadPool pool(1);
                                 CausalLM::load(dir.path().string(), &pool);
                               },
                               ErrorCode::kNotFound),
                           "model.layers.0.self_attn.q_proj.bias", "Qwen2ForCausalLM");
}

}  // namespace
}  // namespace ditto
