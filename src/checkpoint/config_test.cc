#include "architecture/config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "architecture/model_tensors.h"
#include "checkpoint/test_model_generator.h"
#include "core/test_support.h"

namespace ditto {
namespace {

using nlohmann::json;
using testing::error_message;
using testing::TempDir;

constexpr const char* kSrc = "/models/x/config.json";

std::string parse_error(const json& j) {
  return error_message([&] { parse_model_config(j, kSrc); }, ErrorCode::kInvalidArgument);
}

json qwen3() { return preset_config("qwen3-0.6b"); }

TEST(ModelConfig, ParsesQwen3Preset) {
  const ModelConfig c = parse_model_config(qwen3(), kSrc);
  EXPECT_EQ(c.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(c.model_type, "qwen3");
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.hidden_size, 1024);
  EXPECT_EQ(c.intermediate_size, 3072);
  EXPECT_EQ(c.num_hidden_layers, 28);
  EXPECT_EQ(c.num_attention_heads, 16);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.head_dim, 128);  // not hidden_size / num_attention_heads (64)
  EXPECT_EQ(c.max_position_embeddings, 40960);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.rope_scaling.has_value());
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_EQ(c.bos_token_id, 151643);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{151645});
  EXPECT_TRUE(c.has_qk_norm());
  EXPECT_FALSE(c.is_moe());
  EXPECT_FALSE(c.is_moe_layer(0));
}

TEST(ModelConfig, ParsesLlamaPresetWithRopeScaling) {
  const ModelConfig c = parse_model_config(preset_config("llama-3.2-1b"), kSrc);
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.rope_theta, 500000.0);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->rope_type, "llama3");
  EXPECT_EQ(c.rope_scaling->factor, 32.0);
  EXPECT_EQ(c.rope_scaling->low_freq_factor, 1.0);
  EXPECT_EQ(c.rope_scaling->high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 8192);
  EXPECT_FALSE(c.has_qk_norm());
  EXPECT_EQ(c.bos_token_id, 128000);
}

TEST(ModelConfig, ParsesMoePreset) {
  const ModelConfig c = parse_model_config(preset_config("qwen3-30b-a3b"), kSrc);
  EXPECT_EQ(c.architecture, "Qwen3MoeForCausalLM");
  EXPECT_EQ(c.num_experts, 128);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.moe_intermediate_size, 768);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_TRUE(c.has_qk_norm());
  EXPECT_TRUE(c.is_moe_layer(0));
  EXPECT_TRUE(c.is_moe_layer(47));
}

TEST(ModelConfig, HuggingFaceDefaults) {
  const ModelConfig q = parse_model_config({{"architectures", {"Qwen3ForCausalLM"}}}, kSrc);
  EXPECT_EQ(q.vocab_size, 151936);
  EXPECT_EQ(q.hidden_size, 4096);
  EXPECT_EQ(q.intermediate_size, 22016);
  EXPECT_EQ(q.num_hidden_layers, 32);
  EXPECT_EQ(q.num_key_value_heads, 32);
  EXPECT_EQ(q.head_dim, 128);
  EXPECT_EQ(q.max_position_embeddings, 32768);
  EXPECT_EQ(q.rope_theta, 10000.0);
  EXPECT_EQ(q.initializer_range, 0.02);
  EXPECT_EQ(q.hidden_act, "silu");
  EXPECT_FALSE(q.tie_word_embeddings);
  EXPECT_FALSE(q.bos_token_id.has_value());
  EXPECT_TRUE(q.eos_token_ids.empty());

  const ModelConfig l = parse_model_config(
      {{"architectures", {"LlamaForCausalLM"}}, {"num_attention_heads", 16}, {"num_key_value_heads", nullptr}}, kSrc);
  EXPECT_EQ(l.vocab_size, 32000);
  EXPECT_EQ(l.intermediate_size, 11008);
  EXPECT_EQ(l.num_key_value_heads, 16);  // None -> num_attention_heads
  EXPECT_EQ(l.head_dim, 4096 / 16);      // Llama derives head_dim
  EXPECT_EQ(l.max_position_embeddings, 2048);
  EXPECT_EQ(l.bos_token_id, 1);
  EXPECT_EQ(l.eos_token_ids, std::vector<int64_t>{2});

  const ModelConfig m = parse_model_config({{"architectures", {"Qwen3MoeForCausalLM"}}}, kSrc);
  EXPECT_EQ(m.hidden_size, 2048);
  EXPECT_EQ(m.num_hidden_layers, 24);
  EXPECT_EQ(m.num_key_value_heads, 4);
  EXPECT_EQ(m.head_dim, 2048 / 32);  // Qwen3MoeConfig has no head_dim default
  EXPECT_EQ(m.num_experts, 128);
  EXPECT_EQ(m.moe_intermediate_size, 768);
  EXPECT_FALSE(m.norm_topk_prob);
}

TEST(ModelConfig, ArchitectureFallsBackToModelType) {
  json j = qwen3();
  j.erase("architectures");
  EXPECT_EQ(parse_model_config(j, kSrc).architecture, "Qwen3ForCausalLM");
  j["model_type"] = "llama";
  EXPECT_EQ(parse_model_config(j, kSrc).architecture, "LlamaForCausalLM");
  j.erase("model_type");
  DITTO_EXPECT_MESSAGE_HAS(parse_error(j), kSrc, "architectures", "model_type");
  j["model_type"] = "qwen2";
  EXPECT_EQ(parse_model_config(j, kSrc).architecture, "Qwen2ForCausalLM");
  j["model_type"] = "gemma";
  DITTO_EXPECT_MESSAGE_HAS(parse_error(j), kSrc, "gemma", "Qwen3ForCausalLM");
}

TEST(ModelConfig, UnknownArchitectureNamesValueAndSupportedList) {
  json j = qwen3();
  j["architectures"] = {"PhiForCausalLM"};
  DITTO_EXPECT_MESSAGE_HAS(parse_error(j), kSrc, "architectures", "PhiForCausalLM", "Qwen3ForCausalLM",
                           "LlamaForCausalLM", "Qwen3MoeForCausalLM", "Qwen2ForCausalLM", "MistralForCausalLM");
}

TEST(ModelConfig, ParsesQwen25Presets) {
  const ModelConfig c = parse_model_config(preset_config("qwen2.5-0.5b"), kSrc);
  EXPECT_EQ(c.architecture, "Qwen2ForCausalLM");
  EXPECT_EQ(c.model_type, "qwen2");
  EXPECT_EQ(c.hidden_size, 896);
  EXPECT_EQ(c.intermediate_size, 4864);
  EXPECT_EQ(c.num_hidden_layers, 24);
  EXPECT_EQ(c.num_attention_heads, 14);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 64);  // hidden_size / num_attention_heads: Qwen2Config has no head_dim
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.max_position_embeddings, 32768);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.has_qk_norm());
  EXPECT_TRUE(c.has_qkv_bias());
  EXPECT_FALSE(c.has_o_bias());
  const ModelConfig c7 = parse_model_config(preset_config("qwen2.5-7b"), kSrc);
  EXPECT_EQ(c7.hidden_size, 3584);
  EXPECT_EQ(c7.intermediate_size, 18944);
  EXPECT_EQ(c7.num_attention_heads, 28);
  EXPECT_EQ(c7.num_key_value_heads, 4);
  EXPECT_EQ(c7.head_dim, 128);
  EXPECT_EQ(c7.vocab_size, 152064);
  EXPECT_FALSE(c7.tie_word_embeddings);
  const ModelConfig c15 = parse_model_config(preset_config("qwen2.5-1.5b"), kSrc);
  EXPECT_EQ(c15.hidden_size, 1536);
  EXPECT_EQ(c15.num_hidden_layers, 28);
  EXPECT_TRUE(c15.tie_word_embeddings);
}

TEST(ModelConfig, Qwen2RefusesSlidingWindowAndYarnByName) {
  json j = preset_config("qwen2.5-0.5b");
  j["max_window_layers"] = 3;   // read only when use_sliding_window is true: ignored
  j["attention_bias"] = false;  // not a Qwen2Config key: q/k/v biases stay
  EXPECT_TRUE(parse_model_config(j, kSrc).has_qkv_bias());
  j["use_sliding_window"] = true;
  DITTO_EXPECT_MESSAGE_HAS(parse_error(j), kSrc, "'use_sliding_window'");
  j = preset_config("qwen2.5-7b");
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
  DITTO_EXPECT_MESSAGE_HAS(parse_error(j), kSrc, "'rope_scaling.rope_type'", "yarn");
}

TEST(ModelConfig, ParsesMistralPresetAndItsSlidingWindow) {
  const ModelConfig c = parse_model_config(preset_config("mistral-7b-v0.3"), kSrc);
  EXPECT_EQ(c.architecture, "MistralForCausalLM");
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.intermediate_size, 14336);
  EXPECT_EQ(c.num_hidden_layers, 32);
  EXPECT_EQ(c.num_attention_heads, 32);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.vocab_size, 32768);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.has_qk_norm());
  EXPECT_FALSE(c.has_qkv_bias());
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{2});

  json j = preset_config("mistral-7b-v0.3");
  j["attention_bias"] = true;  // not a MistralConfig key: no biases
  EXPECT_FALSE(parse_model_config(j, kSrc).has_qkv_bias());
  EXPECT_EQ(c.sliding_window, 0);  // null: no window
  EXPECT_FALSE(c.has_sliding_layers());
  j["sliding_window"] = 32768;  // as long as the context: the window never binds
  EXPECT_EQ(parse_model_config(j, kSrc).sliding_window, 32768);
  j["sliding_window"] = 4096;  // Mistral-7B-v0.1's: every layer attends to the last 4096 positions
  const ModelConfig v01 = parse_model_config(j, kSrc);
  EXPECT_EQ(v01.sliding_window, 4096);
  for (int64_t i = 0; i < v01.num_hidden_layers; ++i) EXPECT_TRUE(v01.is_sliding_layer(i)) << i;
  EXPECT_EQ(v01.rope_local_base_freq, 0);  // one RoPE base for every layer
  EXPECT_EQ(v01.attention_scale(), 1.0 / std::sqrt(128.0));
  j.erase("sliding_window");  // MistralConfig's default is 4096
  EXPECT_EQ(parse_model_config(j, kSrc).sliding_window, 4096);
  j["sliding_window"] = 0;
  DITTO_EXPECT_MESSAGE_HAS(parse_error(j), kSrc, "'sliding_window'", "positive");
  j["sliding_window"] = 4096.5;
  DITTO_EXPECT_MESSAGE_HAS(parse_error(j), kSrc, "'sliding_window'");
}

TEST(ModelConfig, MalformedJsonNamesFileAndPosition) {
  TempDir dir;
  const std::string path = dir.write("config.json", "{\"hidden_size\": 12,\n  oops }");
  const std::string msg = error_message([&] { load_model_config(path); }, ErrorCode::kInvalidArgument);
  DITTO_EXPECT_MESSAGE_HAS(msg, path, "byte");
  const std::string missing = dir.file("nope.json");
  DITTO_EXPECT_MESSAGE_HAS(error_message([&] { load_model_config(missing); }, ErrorCode::kNotFound), missing);
}

TEST(ModelConfig, LoadsFromFile) {
  TempDir dir;
  const std::string path = dir.write("config.json", qwen3().dump(2));
  EXPECT_EQ(load_model_config(path).hidden_size, 1024);
}

TEST(ModelConfig, WrongTypesNameTheKey) {
  for (const auto& [key, value] : std::vector<std::pair<std::string, json>>{{"hidden_size", "1024"},
                                                                            {"num_hidden_layers", 2.5},
                                                                            {"rms_norm_eps", "small"},
                                                                            {"tie_word_embeddings", 1},
                                                                            {"hidden_act", 7},
                                                                            {"vocab_size", nullptr},
                                                                            {"architectures", "Qwen3ForCausalLM"},
                                                                            {"rope_scaling", "llama3"},
                                                                            {"eos_token_id", "x"}}) {
    json j = qwen3();
    j[key] = value;
    if (key == "vocab_size") j.erase("vocab_size"), j["vocab_size"] = "big";
    DITTO_EXPECT_MESSAGE_HAS(parse_error(j), kSrc, "'" + key + "'");
  }
}

TEST(ModelConfig, InvalidValuesNameTheKey) {
  auto with = [](const std::string& key, const json& value) {
    json j = qwen3();
    j[key] = value;
    return j;
  };
  DITTO_EXPECT_MESSAGE_HAS(parse_error(with("hidden_size", -1024)), kSrc, "'hidden_size'");
  DITTO_EXPECT_MESSAGE_HAS(parse_error(with("num_hidden_layers", 0)), "'num_hidden_layers'");
  DITTO_EXPECT_MESSAGE_HAS(parse_error(with("head_dim", 127)), "'head_dim'");
  DITTO_EXPECT_MESSAGE_HAS(parse_error(with("num_key_value_heads", 3)), "'num_attention_heads'",
                           "'num_key_value_heads'");
  DITTO_EXPECT_MESSAGE_HAS(parse_error(with("hidden_act", "gelu")), "'hidden_act'", "gelu");
  DITTO_EXPECT_MESSAGE_HAS(parse_error(with("rms_norm_eps", 0)), "'rms_norm_eps'");
  DITTO_EXPECT_MESSAGE_HAS(parse_error(with("use_sliding_window", true)), "'use_sliding_window'");

  json llama = preset_config("llama-3.2-1b");
  llama.erase("head_dim");
  llama["hidden_size"] = 1000;
  llama["num_attention_heads"] = 24;
  llama["num_key_value_heads"] = 8;
  DITTO_EXPECT_MESSAGE_HAS(parse_error(llama), kSrc, "'hidden_size'", "'num_attention_heads'");
}

// Gemma 3: the official configurations parse to their sliding layers, RoPE bases and scale; bad
// sliding-window keys and what ditto does not run are refused naming the key.
TEST(ModelConfig, ParsesGemma3Presets) {
  const ModelConfig c = parse_model_config(preset_config("gemma-3-270m"), kSrc);
  EXPECT_EQ(c.architecture, "Gemma3ForCausalLM");
  EXPECT_EQ(c.model_type, "gemma3_text");
  EXPECT_EQ(c.hidden_size, 640);
  EXPECT_EQ(c.num_hidden_layers, 18);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.hidden_act, "gelu_pytorch_tanh");
  EXPECT_EQ(c.sliding_window, 512);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_local_base_freq, 1e4);
  EXPECT_EQ(c.attention_scale(), 1.0 / 16.0);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.features.unit_offset_norms && c.features.sandwich_norms && c.features.scaled_embedding);
  for (int64_t i = 0; i < 18; ++i) EXPECT_EQ(c.is_sliding_layer(i), (i + 1) % 6 != 0) << i;
  // gemma-3-1b has no layer_types: sliding_window_pattern 6 gives the same rule.
  const ModelConfig b = parse_model_config(preset_config("gemma-3-1b"), kSrc);
  EXPECT_EQ(b.num_hidden_layers, 26);
  for (int64_t i = 0; i < 26; ++i) EXPECT_EQ(b.is_sliding_layer(i), (i + 1) % 6 != 0) << i;
  // Gemma3TextConfig's defaults where the file is silent.
  json j = preset_config("gemma-3-1b");
  for (const char* key : {"sliding_window_pattern", "rope_theta", "query_pre_attn_scalar", "hidden_activation"})
    j.erase(key);
  const ModelConfig d = parse_model_config(j, kSrc);
  EXPECT_EQ(d.rope_theta, 1e6);
  EXPECT_EQ(d.query_pre_attn_scalar, 256);
  EXPECT_EQ(d.hidden_act, "gelu_pytorch_tanh");
  EXPECT_FALSE(d.is_sliding_layer(5));
  EXPECT_TRUE(d.is_sliding_layer(6));
  // A window wider than the context is allowed: it never binds.
  j["sliding_window"] = 1 << 20;
  EXPECT_EQ(parse_model_config(j, kSrc).sliding_window, 1 << 20);
}

TEST(ModelConfig, Gemma3BadKeysNameTheKey) {
  auto with = [](const std::string& key, const json& value) {
    json j = preset_config("gemma-3-270m");
    j[key] = value;
    return j;
  };
  DITTO_EXPECT_MESSAGE_HAS(parse_error(with("sliding_window", 0)), kSrc, "'sliding_window'", "positive");
  DITTO_EXPECT_MESSAGE_HAS(parse_error(with("sliding_window", -8)), "'sliding_window'");
  DITTO_EXPECT_MESSAGE_HAS(parse_error(with("sliding_window", 512.5)), "'sliding_window'");
  DITTO_EXPECT_MESSAGE_HAS(parse_error(with("sliding_window", "512")), "'sliding_window'");
  DITTO_EXPECT_MESSAGE_HAS(parse_error(with("layer_types", json::array({"full_attention"}))), "'layer_types'", "18");
  json types = preset_config("gemma-3-270m")["layer_types"];
  types[3] = "chunked_attention";
  DITTO_EXPECT_MESSAGE_HAS(parse_error(with("layer_types", types)), "'layer_types'", "chunked_attention");
  DITTO_EXPECT_MESSAGE_HAS(parse_error(with("final_logit_softcapping", 30.0)), "'final_logit_softcapping'");
  DITTO_EXPECT_MESSAGE_HAS(parse_error(with("attn_logit_softcapping", 50.0)), "'attn_logit_softcapping'");
  DITTO_EXPECT_MESSAGE_HAS(parse_error(with("rope_scaling", {{"rope_type", "linear"}, {"factor", 8.0}})),
                           "'rope_scaling.rope_type'", "linear");
  DITTO_EXPECT_MESSAGE_HAS(parse_error(with("hidden_activation", "gelu")), "'hidden_activation'", "gelu");
  DITTO_EXPECT_MESSAGE_HAS(parse_error(with("query_pre_attn_scalar", 0)), "'query_pre_attn_scalar'");
  DITTO_EXPECT_MESSAGE_HAS(parse_error(with("rope_local_base_freq", -1)), "'rope_local_base_freq'");
  DITTO_EXPECT_MESSAGE_HAS(parse_error(with("use_bidirectional_attention", true)), "'use_bidirectional_attention'");
  json pattern = preset_config("gemma-3-1b");
  pattern["sliding_window_pattern"] = 0;
  DITTO_EXPECT_MESSAGE_HAS(parse_error(pattern), "'sliding_window_pattern'");
}

TEST(ExpectedTensors, Gemma3LayerHasFourNormsWithUnitOffset) {
  json j = preset_config("gemma-3-270m");
  j["num_hidden_layers"] = 1;
  j["layer_types"] = json::array({"sliding_attention"});
  std::vector<std::string> names, gguf;
  for_each_tensor(parse_model_config(j, kSrc), [&](const TensorDesc& t) {
    names.push_back(t.name);
    gguf.push_back(t.gguf_name);
    const bool norm = t.name.find("norm") != std::string::npos;
    EXPECT_EQ(t.unit_offset, norm) << t.name;
  });
  const std::vector<std::string> want = {"model.embed_tokens.weight",
                                         "model.layers.0.self_attn.q_proj.weight",
                                         "model.layers.0.self_attn.k_proj.weight",
                                         "model.layers.0.self_attn.v_proj.weight",
                                         "model.layers.0.self_attn.o_proj.weight",
                                         "model.layers.0.self_attn.q_norm.weight",
                                         "model.layers.0.self_attn.k_norm.weight",
                                         "model.layers.0.mlp.gate_proj.weight",
                                         "model.layers.0.mlp.up_proj.weight",
                                         "model.layers.0.mlp.down_proj.weight",
                                         "model.layers.0.input_layernorm.weight",
                                         "model.layers.0.post_attention_layernorm.weight",
                                         "model.layers.0.pre_feedforward_layernorm.weight",
                                         "model.layers.0.post_feedforward_layernorm.weight",
                                         "model.norm.weight"};
  EXPECT_EQ(names, want);
  const std::vector<std::string> want_gguf = {
      "token_embd.weight",        "blk.0.attn_q.weight",        "blk.0.attn_k.weight",
      "blk.0.attn_v.weight",      "blk.0.attn_output.weight",   "blk.0.attn_q_norm.weight",
      "blk.0.attn_k_norm.weight", "blk.0.ffn_gate.weight",      "blk.0.ffn_up.weight",
      "blk.0.ffn_down.weight",    "blk.0.attn_norm.weight",     "blk.0.post_attention_norm.weight",
      "blk.0.ffn_norm.weight",    "blk.0.post_ffw_norm.weight", "output_norm.weight"};
  EXPECT_EQ(gguf, want_gguf);
}

TEST(ModelConfig, RopeScaling) {
  json j = preset_config("llama-3.2-1b");
  j["rope_scaling"]["rope_type"] = "yarn";
  DITTO_EXPECT_MESSAGE_HAS(parse_error(j), kSrc, "'rope_scaling.rope_type'", "yarn", "llama3");
  j = preset_config("llama-3.2-1b");
  j["rope_scaling"].erase("factor");
  DITTO_EXPECT_MESSAGE_HAS(parse_error(j), kSrc, "'rope_scaling.factor'");
  j = preset_config("llama-3.2-1b");
  j["rope_scaling"]["high_freq_factor"] = 1.0;
  DITTO_EXPECT_MESSAGE_HAS(parse_error(j), "'rope_scaling.high_freq_factor'");

  j = preset_config("llama-3.2-1b");  // legacy spelling "type"
  j["rope_scaling"].erase("rope_type");
  j["rope_scaling"]["type"] = "llama3";
  EXPECT_EQ(parse_model_config(j, kSrc).rope_scaling->factor, 32.0);
  j["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_FALSE(parse_model_config(j, kSrc).rope_scaling.has_value());

  json v5 = qwen3();  // transformers 5 writes rope_parameters instead
  v5.erase("rope_theta");
  v5.erase("rope_scaling");
  v5["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 5e5}};
  EXPECT_EQ(parse_model_config(v5, kSrc).rope_theta, 5e5);
}

TEST(ModelConfig, TokenIds) {
  json j = qwen3();
  j["eos_token_id"] = {151645, 151643};
  j["bos_token_id"] = nullptr;
  const ModelConfig c = parse_model_config(j, kSrc);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{151645, 151643}));
  EXPECT_FALSE(c.bos_token_id.has_value());
}

TEST(ModelConfig, MoeValidationAndLayerRule) {
  json j = preset_config("qwen3-30b-a3b");
  j["num_experts"] = 4;
  DITTO_EXPECT_MESSAGE_HAS(parse_error(j), kSrc, "'num_experts_per_tok'");
  j = preset_config("qwen3-30b-a3b");
  j["mlp_only_layers"] = {48};
  DITTO_EXPECT_MESSAGE_HAS(parse_error(j), "'mlp_only_layers'", "48");
  j = preset_config("qwen3-30b-a3b");
  j["decoder_sparse_step"] = 0;
  DITTO_EXPECT_MESSAGE_HAS(parse_error(j), "'decoder_sparse_step'");

  j = preset_config("qwen3-30b-a3b");
  j["decoder_sparse_step"] = 2;
  j["mlp_only_layers"] = {3};
  const ModelConfig c = parse_model_config(j, kSrc);
  EXPECT_FALSE(c.is_moe_layer(0));  // (0 + 1) % 2 != 0
  EXPECT_TRUE(c.is_moe_layer(1));
  EXPECT_FALSE(c.is_moe_layer(3));  // listed in mlp_only_layers
  EXPECT_TRUE(c.is_moe_layer(5));
}

TEST(ExpectedTensors, Qwen3DenseLayer) {
  json j = qwen3();
  j["num_hidden_layers"] = 1;
  const auto t = expected_tensors(parse_model_config(j, kSrc));
  std::vector<std::string> names;
  for (const auto& s : t) names.push_back(s.name);
  const std::vector<std::string> want = {"model.embed_tokens.weight",
                                         "model.layers.0.self_attn.q_proj.weight",
                                         "model.layers.0.self_attn.k_proj.weight",
                                         "model.layers.0.self_attn.v_proj.weight",
                                         "model.layers.0.self_attn.o_proj.weight",
                                         "model.layers.0.self_attn.q_norm.weight",
                                         "model.layers.0.self_attn.k_norm.weight",
                                         "model.layers.0.mlp.gate_proj.weight",
                                         "model.layers.0.mlp.up_proj.weight",
                                         "model.layers.0.mlp.down_proj.weight",
                                         "model.layers.0.input_layernorm.weight",
                                         "model.layers.0.post_attention_layernorm.weight",
                                         "model.norm.weight"};  // tied: no lm_head.weight
  EXPECT_EQ(names, want);
  EXPECT_EQ(t[0].shape, (std::vector<int64_t>{151936, 1024}));
  EXPECT_EQ(t[1].shape, (std::vector<int64_t>{16 * 128, 1024}));
  EXPECT_EQ(t[2].shape, (std::vector<int64_t>{8 * 128, 1024}));
  EXPECT_EQ(t[4].shape, (std::vector<int64_t>{1024, 16 * 128}));
  EXPECT_EQ(t[5].shape, (std::vector<int64_t>{128}));
  EXPECT_EQ(t[7].shape, (std::vector<int64_t>{3072, 1024}));
  EXPECT_EQ(t[9].shape, (std::vector<int64_t>{1024, 3072}));
}

TEST(ExpectedTensors, BiasesAndUntiedHead) {
  json j = preset_config("llama-3.2-1b");
  j["num_hidden_layers"] = 2;
  j["attention_bias"] = true;
  j["mlp_bias"] = true;
  j["tie_word_embeddings"] = false;
  const auto t = expected_tensors(parse_model_config(j, kSrc));
  std::set<std::string> names;
  for (const auto& s : t) names.insert(s.name);
  EXPECT_EQ(t.size(), 1 + 2 * (8 + 6 + 2) + 1 + 1u);
  EXPECT_TRUE(names.count("model.layers.1.self_attn.o_proj.bias"));
  EXPECT_TRUE(names.count("model.layers.1.mlp.down_proj.bias"));
  EXPECT_FALSE(names.count("model.layers.0.self_attn.q_norm.weight"));
  EXPECT_EQ(t.back().name, "lm_head.weight");
  EXPECT_EQ(t.back().shape, (std::vector<int64_t>{128256, 2048}));
}

TEST(ExpectedTensors, Qwen2BiasesOnQkvOnly) {
  json j = preset_config("qwen2.5-0.5b");
  j["num_hidden_layers"] = 1;
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& s : expected_tensors(parse_model_config(j, kSrc))) shapes[s.name] = s.shape;
  EXPECT_EQ(shapes.at("model.layers.0.self_attn.q_proj.bias"), (std::vector<int64_t>{896}));
  EXPECT_EQ(shapes.at("model.layers.0.self_attn.k_proj.bias"), (std::vector<int64_t>{128}));
  EXPECT_EQ(shapes.at("model.layers.0.self_attn.v_proj.bias"), (std::vector<int64_t>{128}));
  EXPECT_FALSE(shapes.count("model.layers.0.self_attn.o_proj.bias"));
  EXPECT_FALSE(shapes.count("model.layers.0.self_attn.q_norm.weight"));
  EXPECT_FALSE(shapes.count("model.layers.0.mlp.gate_proj.bias"));
  EXPECT_FALSE(shapes.count("lm_head.weight"));
  EXPECT_EQ(shapes.size(), 1 + 12 + 1u);
}

TEST(ExpectedTensors, MoeLayers) {
  json j = preset_config("qwen3-30b-a3b");
  j["num_hidden_layers"] = 2;
  j["num_experts"] = 3;
  j["num_experts_per_tok"] = 2;
  j["mlp_only_layers"] = {1};
  const auto t = expected_tensors(parse_model_config(j, kSrc));
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& s : t) shapes[s.name] = s.shape;
  EXPECT_EQ(shapes.at("model.layers.0.mlp.gate.weight"), (std::vector<int64_t>{3, 2048}));
  EXPECT_EQ(shapes.at("model.layers.0.mlp.experts.2.gate_proj.weight"), (std::vector<int64_t>{768, 2048}));
  EXPECT_EQ(shapes.at("model.layers.0.mlp.experts.2.down_proj.weight"), (std::vector<int64_t>{2048, 768}));
  EXPECT_FALSE(shapes.count("model.layers.0.mlp.gate_proj.weight"));
  EXPECT_EQ(shapes.at("model.layers.1.mlp.gate_proj.weight"), (std::vector<int64_t>{6144, 2048}));
  EXPECT_FALSE(shapes.count("model.layers.1.mlp.gate.weight"));
  EXPECT_EQ(shapes.at("model.layers.0.self_attn.k_proj.weight"), (std::vector<int64_t>{512, 2048}));
  EXPECT_TRUE(shapes.count("lm_head.weight"));
}

}  // namespace
}  // namespace ditto
