// A model's config.json, parsed and validated, with Hugging Face's defaults for missing keys.
//
// Defaults follow the __init__ of transformers' Qwen3Config, LlamaConfig and Qwen3MoeConfig
// (transformers 4.51-4.57, models/{qwen3,llama,qwen3_moe}/configuration_*.py). head_dim differs:
// Qwen3 defaults to 128; Llama and Qwen3-MoE to hidden_size / num_attention_heads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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
  std::string architecture;  // "Qwen3ForCausalLM" | "LlamaForCausalLM" | "Qwen3MoeForCausalLM"
  std::string model_type;    // "qwen3" | "llama" | "qwen3_moe" (as written, or derived)
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
  bool attention_bias = false;  // q/k/v/o_proj have biases
  bool mlp_bias = false;        // gate/up/down_proj have biases (Llama only)
  std::string hidden_act;       // only "silu"
  std::optional<RopeScaling> rope_scaling;
  std::string torch_dtype;  // as written ("bfloat16"), "" when absent
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // config.json may hold an int or a list; empty when null

  // Qwen3-MoE (all zero / empty for dense models).
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  int64_t decoder_sparse_step = 1;
  bool norm_topk_prob = false;
  std::vector<int64_t> mlp_only_layers;

  bool is_moe() const { return num_experts > 0; }
  // Qwen3 and Qwen3-MoE apply RMSNorm to each head of q and k before RoPE; Llama does not.
  bool has_qk_norm() const;
  // Hugging Face's rule (modeling_qwen3_moe.py): layer not in mlp_only_layers, num_experts > 0 and
  // (layer + 1) % decoder_sparse_step == 0.
  bool is_moe_layer(int64_t layer) const;
};

// The architectures ditto implements, in the order error messages list them.
const std::vector<std::string>& supported_architectures();

// Parses a config.json object. `source` (the file path) prefixes every error message.
// Throws Error(kInvalidArgument) naming the key for a missing architecture/model_type, an
// unsupported architecture, a wrong-typed or out-of-range value, or an unsupported feature
// (hidden_act other than silu, rope_scaling other than llama3/default, sliding-window attention).
ModelConfig parse_model_config(const nlohmann::json& j, const std::string& source);

// Reads and parses a config.json file. Error(kNotFound) if it cannot be read, kInvalidArgument
// (with the parse position) if it is not valid JSON.
ModelConfig load_model_config(const std::string& config_json_path);

// One tensor of a checkpoint: its Hugging Face name and shape.
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
};

// Every tensor a Hugging Face checkpoint of this config holds, in model (state_dict) order:
// model.embed_tokens.weight, then layer 0.. (self_attn q/k/v/o_proj [+bias], q_norm, k_norm; mlp
// gate/up/down_proj [+bias] or, on MoE layers, mlp.gate.weight [num_experts, hidden_size] and
// mlp.experts.E.{gate,up,down}_proj.weight; input_layernorm, post_attention_layernorm),
// model.norm.weight, and lm_head.weight unless tie_word_embeddings.
std::vector<TensorSpec> expected_tensors(const ModelConfig& c);

}  // namespace ditto
