// A model's config.json, parsed and validated, with Hugging Face's defaults for missing keys.
//
// Which keys an architecture reads, and their defaults (the __init__ of transformers' config class),
// come from its registry entry (architecture/architecture.h); parsing compares no architecture name.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "architecture/architecture.h"

namespace ditto {

// Hugging Face "rope_scaling". Only "llama3" is represented; "default" (and null) parse to no
// scaling at all (ModelConfig::rope_scaling == std::nullopt). Formula: transformers'
// modeling_rope_utils._compute_llama3_parameters.
struct RopeScaling {
  std::string rope_type;  // "llama3"
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct ModelConfig {
  std::string architecture;       // a registered name (architecture/architecture.h): "Qwen3ForCausalLM", ...
  std::string model_type;         // "qwen3" | "llama" | "qwen3_moe" (as written, or derived)
  ArchitectureFeatures features;  // the registry entry's, what the forward pass and the tensors follow
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;  // dense MLP width (MoE: the mlp_only_layers' width)
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 0;
  double rope_theta = 0;
  double initializer_range = 0;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v/o_proj have biases (config.json's; features.attention_bias kConfig)
  bool mlp_bias = false;        // gate/up/down_proj have biases (only with features.mlp_bias)
  std::string hidden_act;       // "silu" or "gelu_pytorch_tanh" (config.json hidden_activation or hidden_act)
  std::optional<RopeScaling> rope_scaling;
  // [head_dim / 2] per-frequency divisors of θ_i, as a GGUF file's rope_freqs.weight stores llama3
  // scaling (llama.cpp's freq_factors); empty otherwise. Set only by the GGUF loader, never with
  // rope_scaling.
  std::vector<double> rope_freq_divisors;
  std::string torch_dtype;  // as written ("bfloat16"), "" when absent
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // config.json may hold an int or a list; empty when null
  // The weights are seeded random numbers written by ditto's test-model generator (config.json's
  // "ditto_random_weights", a GGUF's "ditto.random_weights"): the model writes noise, and serve and
  // demo say so when they start.
  bool random_weights = false;

  // Sparse MoE (features.moe; all zero / empty for dense models).
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  int64_t decoder_sparse_step = 1;
  bool norm_topk_prob = false;
  std::vector<int64_t> mlp_only_layers;

  // Sliding-window attention (features.sliding_window with a window; 0 / empty otherwise: every
  // layer slides, or those layer_types picks with features.local_attention_layers). A query at position p
  // of a sliding layer attends to the keys at positions p - sliding_window + 1 .. p (Hugging Face's
  // sliding_window_overlay: kv_idx > q_idx - sliding_window; llama.cpp's is_masked_swa: p1 - p0 >=
  // n_swa is masked).
  int64_t sliding_window = 0;
  std::vector<bool> sliding_layers;  // [num_hidden_layers] true: "sliding_attention" (layer_types)
  double rope_local_base_freq = 0;   // the sliding layers' own RoPE base (unscaled); 0: rope_theta's
  // Attention scores are scaled by query_pre_attn_scalar^-0.5 (Gemma); 0: head_dim^-0.5.
  double query_pre_attn_scalar = 0;

  bool is_moe() const { return num_experts > 0; }
  // q/k/v_proj have biases: attention_bias, or always (Qwen2: features.attention_bias kQkv).
  bool has_qkv_bias() const { return attention_bias || features.attention_bias == AttentionBias::kQkv; }
  // o_proj has a bias: attention_bias only.
  bool has_o_bias() const { return attention_bias; }
  bool is_sliding_layer(int64_t layer) const {
    return !sliding_layers.empty() && sliding_layers[static_cast<size_t>(layer)];
  }
  bool has_sliding_layers() const;
  // The softmax scale of attention scores: 1/sqrt(query_pre_attn_scalar or head_dim), in double.
  double attention_scale() const;
  // RMSNorm over each head of q and k before RoPE (Qwen3, Qwen3-MoE; not Llama).
  bool has_qk_norm() const { return features.qk_norm; }
  // Hugging Face's rule (modeling_qwen3_moe.py): layer not in mlp_only_layers, num_experts > 0 and
  // (layer + 1) % decoder_sparse_step == 0.
  bool is_moe_layer(int64_t layer) const;
  // How many layers is_moe_layer selects (0 for a dense model): the middle axis of routed experts.
  int64_t num_moe_layers() const;
};

// The names of the registered architectures, in the order error messages list them.
std::vector<std::string> supported_architectures();

// Parses a config.json object. `source` (the file path) prefixes every error message.
// Throws Error(kInvalidArgument) naming the key for a missing architecture/model_type, an
// unsupported architecture, a wrong-typed or out-of-range value, or an unsupported feature
// (hidden_act other than silu / gelu_pytorch_tanh, a rope_scaling type the architecture does not
// list, use_sliding_window true where the architecture has no window, a sliding_window that is not
// a positive integer, non-null logit softcapping).
ModelConfig parse_model_config(const nlohmann::json& j, const std::string& source);

// Reads and parses a config.json file. Error(kNotFound) if it cannot be read, kInvalidArgument
// (with the parse position) if it is not valid JSON.
ModelConfig load_model_config(const std::string& config_json_path);

// One tensor of a checkpoint: its Hugging Face name and shape.
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
};

// Every tensor a Hugging Face checkpoint of this config holds, in model (state_dict) order: the
// names and shapes of for_each_tensor (architecture/model_tensors.h), which describes them.
std::vector<TensorSpec> expected_tensors(const ModelConfig& c);

}  // namespace ditto
