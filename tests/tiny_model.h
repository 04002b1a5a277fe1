// A tiny model directory for engine and forward-pass tests: real tensor names and layout, small
// sizes (vocab 300, hidden 64, 2 layers, 4 heads / 2 KV heads of 16), seeded bf16 weights.
// Families: "qwen3", "llama", "qwen3_moe" (layer 0 a sparse MoE block of 8 experts, top 3,
// moe_intermediate_size 32, norm_topk_prob; layer 1 dense via mlp_only_layers), "qwen2", "mistral",
// "mistral_window" (a window of 6 on every layer) and "gemma3" (layer 0 sliding with a window of 5,
// layer 1 full; (1 + w) norms, four per layer, GELU(tanh)).
#pragma once

#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "architecture/config.h"
#include "checkpoint/safetensors_writer.h"
#include "core/dtype.h"
#include "core/test_support.h"

namespace ditto {

// family: "qwen3" (tied head), "llama" (biases, llama3 rope scaling, untied head), "qwen3_moe",
// "qwen2" (q/k/v biases, tied head), "mistral" (sliding_window null, untied head), "mistral_window"
// (sliding_window 6) or "gemma3".
// `edit`, if set, may change any tensor's float32 values (before bf16 rounding) by name;
// `edit_config`, if set, any config.json key before the tensors are made (e.g. a longer
// max_position_embeddings, fewer layers, a larger vocabulary). Returns the directory.
using TensorEdit = std::function<void(const std::string& name, std::vector<float>& values)>;
using ConfigEdit = std::function<void(nlohmann::json& config)>;
inline std::string write_tiny_model(const testing::TempDir& dir, const std::string& family,
                                    const TensorEdit& edit = nullptr, const ConfigEdit& edit_config = nullptr) {
  nlohmann::json c = {{"vocab_size", 300},      {"hidden_size", 64},        {"intermediate_size", 96},
                      {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                      {"head_dim", 16},         {"rms_norm_eps", 1e-6},     {"max_position_embeddings", 4096},
                      {"hidden_act", "silu"},   {"torch_dtype", "bfloat16"}};
  if (family == "qwen3") {
    c["architectures"] = {"Qwen3ForCausalLM"};
    c["model_type"] = "qwen3";
    c["rope_theta"] = 1000000.0;
    c["tie_word_embeddings"] = true;
  } else if (family == "gemma3") {  // layer 0 sliding (window 5: every prompt crosses it), layer 1 full
    c["architectures"] = {"Gemma3ForCausalLM"};
    c["model_type"] = "gemma3_text";
    c["rope_theta"] = 1000000.0;
    c["rope_local_base_freq"] = 10000.0;
    c["tie_word_embeddings"] = true;
    c["hidden_activation"] = "gelu_pytorch_tanh";
    c["sliding_window"] = 5;
    c["layer_types"] = {"sliding_attention", "full_attention"};
    c["query_pre_attn_scalar"] = 24;
  } else if (family == "qwen3_moe") {
    c["architectures"] = {"Qwen3MoeForCausalLM"};
    c["model_type"] = "qwen3_moe";
    c["rope_theta"] = 1000000.0;
    c["tie_word_embeddings"] = false;
    c["num_experts"] = 8;
    c["num_experts_per_tok"] = 3;
    c["moe_intermediate_size"] = 32;
    c["norm_topk_prob"] = true;
    c["decoder_sparse_step"] = 1;
    c["mlp_only_layers"] = {1};
  } else if (family == "qwen2") {  // q/k/v biases (always), no o_proj bias, no q/k norm
    c["architectures"] = {"Qwen2ForCausalLM"};
    c["model_type"] = "qwen2";
    c["rope_theta"] = 1000000.0;
    c["tie_word_embeddings"] = true;
    c["use_sliding_window"] = false;
  } else if (family == "mistral" || family == "mistral_window") {  // no biases, untied head
    c["architectures"] = {"MistralForCausalLM"};
    c["model_type"] = "mistral";
    c["rope_theta"] = 1000000.0;
    c["tie_word_embeddings"] = false;
    c["sliding_window"] = family == "mistral" ? nlohmann::json(nullptr) : nlohmann::json(6);
  } else {  // llama with biases, llama3 rope scaling and an untied head
    c["architectures"] = {"LlamaForCausalLM"};
    c["model_type"] = "llama";
    c["rope_theta"] = 500000.0;
    c["attention_bias"] = true;
    c["mlp_bias"] = true;
    c["tie_word_embeddings"] = false;
    c["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", 32.0},
                         {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0},
                         {"original_max_position_embeddings", 64}};
  }
  if (edit_config) edit_config(c);
  dir.write("config.json", c.dump());
  const ModelConfig config = parse_model_config(c, "config.json");
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.15f);
  std::vector<std::pair<SafetensorsEntry, std::vector<uint8_t>>> tensors;
  for (const TensorSpec& spec : expected_tensors(config)) {
    SafetensorsEntry e{spec.name, DType::kBF16, spec.shape};
    std::vector<uint8_t> bytes(e.nbytes());
    auto* h = reinterpret_cast<uint16_t*>(bytes.data());
    const bool is_norm = spec.name.find("norm.weight") != std::string::npos;
    std::vector<float> values(bytes.size() / 2);
    for (float& v : values) v = is_norm ? 1.0f + normal(rng) : normal(rng);
    if (edit) edit(spec.name, values);
    for (size_t i = 0; i < values.size(); ++i) h[i] = f32_to_bf16(values[i]);
    tensors.emplace_back(e, std::move(bytes));
  }
  write_safetensors(dir.file("model.safetensors"), tensors);
  return dir.path().string();
}

}  // namespace ditto
