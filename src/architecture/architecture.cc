#include "architecture/architecture.h"

#include <utility>

#include "core/error.h"

namespace ditto {
namespace {

// The built-in architectures. Defaults: transformers 4.51-4.57, models/*/configuration_*.py;
// GGUF: llama.cpp's conversion/{qwen,llama}.py and src/models/*.cpp (node-llama-cpp 3.21.1); Gemma 3:
// transformers' configuration_gemma3.py, llama.cpp's convert_hf_to_gguf.py Gemma3Model and llama-model.cpp.
std::deque<Architecture>& registry() {
  static std::deque<Architecture> all = {
      {.name = "Qwen3ForCausalLM",  // Qwen3Config; conversion/qwen.py Qwen3Model
       .model_type = "qwen3",
       .defaults = {.vocab_size = 151936,
                    .hidden_size = 4096,
                    .intermediate_size = 22016,
                    .num_hidden_layers = 32,
                    .num_attention_heads = 32,
                    .num_key_value_heads = 32,
                    .head_dim = 128,
                    .max_position_embeddings = 32768},
       .features = {.qk_norm = true, .refuses_sliding_window = true, .rope_scaling_types = {"llama3"}},
       .gguf = {.arch = "qwen3"}},
      {.name = "LlamaForCausalLM",  // LlamaConfig; conversion/llama.py LlamaModel
       .model_type = "llama",
       .defaults = {.vocab_size = 32000,
                    .hidden_size = 4096,
                    .intermediate_size = 11008,
                    .num_hidden_layers = 32,
                    .num_attention_heads = 32,
                    .max_position_embeddings = 2048,
                    .bos_token_id = 1,
                    .eos_token_id = 2},
       .features = {.mlp_bias = true, .rope_scaling_types = {"llama3"}},
       .gguf = {.arch = "llama", .permute_qk = true, .rope_freqs = true, .llama_keys = true}},
      {.name = "Qwen3MoeForCausalLM",  // Qwen3MoeConfig (no head_dim default); conversion/qwen.py Qwen3MoeModel
       .model_type = "qwen3_moe",
       .defaults = {.vocab_size = 151936,
                    .hidden_size = 2048,
                    .intermediate_size = 6144,
                    .num_hidden_layers = 24,
                    .num_attention_heads = 32,
                    .num_key_value_heads = 4,
                    .max_position_embeddings = 32768,
                    .num_experts = 128,
                    .num_experts_per_tok = 8,
                    .moe_intermediate_size = 768},
       .features = {.qk_norm = true, .moe = true, .refuses_sliding_window = true, .rope_scaling_types = {"llama3"}},
       .gguf = {.arch = "qwen3moe", .sparse_every_layer = true}},
      // Qwen2.5, DeepSeek-R1-Distill-Qwen: Qwen3 without q/k norms, with q/k/v biases. Released
      // configs carry use_sliding_window false (refused when true); max_window_layers and
      // sliding_window only matter when it is true, so they are not read.
      {.name = "Qwen2ForCausalLM",  // Qwen2Config; conversion/qwen.py Qwen2Model (llama.cpp: NEOX RoPE)
       .model_type = "qwen2",
       .defaults = {.vocab_size = 151936,
                    .hidden_size = 4096,
                    .intermediate_size = 22016,
                    .num_hidden_layers = 32,
                    .num_attention_heads = 32,
                    .num_key_value_heads = 32,
                    .max_position_embeddings = 32768},
       .features = {.attention_bias = AttentionBias::kQkv,
                    .refuses_sliding_window = true,
                    .rope_scaling_types = {"llama3"}},
       .gguf = {.arch = "qwen2"}},
      // Llama with an optional sliding window on every layer (ArchitectureFeatures::sliding_window)
      // and no biases. llama.cpp's converter writes it as a llama GGUF (LlamaModel registers
      // MistralForCausalLM), which loads back as LlamaForCausalLM: a window that binds is not
      // exported (llama GGUFs have none).
      {.name = "MistralForCausalLM",  // MistralConfig; conversion/llama.py LlamaModel
       .model_type = "mistral",
       .defaults = {.vocab_size = 32000,
                    .hidden_size = 4096,
                    .intermediate_size = 14336,
                    .num_hidden_layers = 32,
                    .num_attention_heads = 32,
                    .num_key_value_heads = 8,
                    .max_position_embeddings = 4096 * 32,
                    .sliding_window = 4096,
                    .bos_token_id = 1,
                    .eos_token_id = 2},
       .features = {.attention_bias = AttentionBias::kNone, .sliding_window = true, .rope_scaling_types = {"llama3"}},
       .gguf = {.arch = "llama", .permute_qk = true, .rope_freqs = true, .llama_keys = true}},
      {.name = "Gemma3ForCausalLM",  // Gemma3TextConfig (text only); conversion Gemma3Model, src/models/gemma3.cpp
       .model_type = "gemma3_text",
       .defaults = {.vocab_size = 262208,
                    .hidden_size = 2304,
                    .intermediate_size = 9216,
                    .num_hidden_layers = 26,
                    .num_attention_heads = 8,
                    .num_key_value_heads = 4,
                    .head_dim = 256,
                    .max_position_embeddings = 131072,
                    .sliding_window = 4096,
                    .bos_token_id = 2,
                    .eos_token_id = 1,
                    .hidden_act = "gelu_pytorch_tanh",
                    .rope_theta = 1000000.0,
                    .tie_word_embeddings = true,
                    .sliding_window_pattern = 6,
                    .rope_local_base_freq = 10000.0,
                    .query_pre_attn_scalar = 256},
       .features = {.qk_norm = true,
                    .sliding_window = true,
                    .rope_scaling_types = {},
                    .unit_offset_norms = true,
                    .sandwich_norms = true,
                    .scaled_embedding = true,
                    .local_attention_layers = true},
       .gguf = {.arch = "gemma3", .swa_pattern = 6, .swa_rope_freq_base = 10000.0}},
  };
  return all;
}

}  // namespace

const std::deque<Architecture>& architectures() { return registry(); }

const Architecture* find_architecture(const std::string& name) {
  for (const Architecture& a : registry())
    if (a.name == name) return &a;
  return nullptr;
}

const Architecture* find_architecture_by_model_type(const std::string& model_type) {
  for (const Architecture& a : registry())
    if (a.model_type == model_type) return &a;
  return nullptr;
}

void register_architecture(Architecture architecture) {
  if (architecture.name.empty() || architecture.model_type.empty())
    throw_invalid_argument("register_architecture: name and model_type must be set");
  if (find_architecture(architecture.name) != nullptr)
    throw_invalid_argument("register_architecture: '" + architecture.name + "' is already registered");
  if (find_architecture_by_model_type(architecture.model_type) != nullptr)
    throw_invalid_argument("register_architecture: model_type '" + architecture.model_type + "' is already registered");
  registry().push_back(std::move(architecture));
}

}  // namespace ditto
