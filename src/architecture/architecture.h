// The architectures ditto runs, as data: one registry entry per Hugging Face `architectures` name.
//
// An entry holds what differs between decoder-only models that share ditto's forward pass: the
// Hugging Face config defaults, the features the config and the weights may use, and how llama.cpp
// names the architecture. Nothing outside this registry compares against an architecture's name:
// config parsing (config.cc), the list of tensors (model_tensors.cc, which also drives validation,
// loading, the test-model generator and GGUF export) and the forward pass read the features.
// docs/ARCHITECTURE.md, "Adding an architecture", says how to add one.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace ditto {

// The __init__ defaults of the architecture's transformers config class, used for keys that
// config.json leaves out.
struct ArchitectureDefaults {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // 0: num_attention_heads
  int64_t head_dim = 0;             // 0: hidden_size / num_attention_heads
  int64_t max_position_embeddings = 0;
  // sliding_window when config.json leaves it out (read only with ArchitectureFeatures::
  // sliding_window); nullopt: none.
  std::optional<int64_t> sliding_window = std::nullopt;
  std::optional<int64_t> bos_token_id = std::nullopt;
  std::optional<int64_t> eos_token_id = std::nullopt;
  // Sparse MoE (read only with ArchitectureFeatures::moe).
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  int64_t decoder_sparse_step = 1;
  bool norm_topk_prob = false;
  // hidden_act / hidden_activation when the file gives neither ("silu"; Gemma 3: "gelu_pytorch_tanh").
  std::string hidden_act = "silu";
  double rope_theta = 10000.0;
  bool tie_word_embeddings = false;
  // Gemma 3's per-layer keys (read only with ArchitectureFeatures::local_attention_layers).
  int64_t sliding_window_pattern = 0;  // layer_types' default: every pattern-th layer full
  double rope_local_base_freq = 10000.0;
  double query_pre_attn_scalar = 0;
};

// Which attention projections carry biases.
enum class AttentionBias {
  kConfig,  // q/k/v/o_proj, when config.json's attention_bias is true (Llama, Qwen3)
  kQkv,     // q/k/v_proj always, o_proj never; attention_bias is not read (Qwen2)
  kNone,    // never; attention_bias is not read (Mistral)
};

// What a config and its checkpoint may use. Every architecture reads tie_word_embeddings (the LM
// head shares the embedding; default false) and accepts rope_scaling null / "default".
struct ArchitectureFeatures {
  AttentionBias attention_bias = AttentionBias::kConfig;
  // self_attn.q_norm / k_norm: RMSNorm over each head of q and k before RoPE (Qwen3).
  bool qk_norm = false;
  // config.json's mlp_bias is read: gate/up/down_proj may carry biases (Llama). Without it the
  // MLP never has biases, whatever the config says.
  bool mlp_bias = false;
  // A sparse MoE block replaces the MLP on the layers that num_experts, decoder_sparse_step and
  // mlp_only_layers select (ModelConfig::is_moe_layer); those keys are read only with it.
  bool moe = false;
  // use_sliding_window and layer_types are read, and anything but full attention refused (Qwen3
  // and Qwen2 configs carry these keys; their window is off in every released checkpoint).
  bool refuses_sliding_window = false;
  // config.json's sliding_window is read (null: none; absent: the architecture's default): a query
  // at position p attends to the keys p − sliding_window + 1 .. p, on every layer (Mistral) or on
  // the layers local_attention_layers picks (Gemma 3).
  bool sliding_window = false;
  // rope_scaling / rope_parameters rope_type values accepted besides "default" (rope_frequencies.h
  // implements "llama3").
  std::vector<std::string> rope_scaling_types;
  // Gemma's RMSNorm: every norm weight (the layers', q/k norms', the final one) is stored as w and
  // applied as (1 + w), computed once at load in float32 (Hugging Face Gemma3RMSNorm). llama.cpp's
  // converter stores w + 1 in GGUF files, which are read as they are.
  bool unit_offset_norms = false;
  // Four norms per layer: post_attention_layernorm normalises the attention output before the
  // residual add, pre_feedforward_layernorm the MLP's input, post_feedforward_layernorm the MLP's
  // output before the residual add (Gemma 2/3 "sandwich" norms).
  bool sandwich_norms = false;
  // The embedding rows are multiplied by sqrt(hidden_size) rounded to float32 (Gemma).
  bool scaled_embedding = false;
  // Sliding (local) and full (global) layers interleaved: layer_types (or sliding_window_pattern)
  // pick the layers the window applies to, rope_local_base_freq is their RoPE base, and
  // query_pre_attn_scalar the attention scale; attn_logit_softcapping / final_logit_softcapping must
  // be null (Gemma 3). Goes with sliding_window.
  bool local_attention_layers = false;
};

// How llama.cpp's convert_hf_to_gguf.py writes the architecture (checkpoint/gguf_export.h).
struct GgufArchitecture {
  // general.architecture; every hyperparameter key is prefixed "<arch>." (llama.block_count).
  // Empty: the architecture cannot be exported.
  std::string arch;
  // llama.cpp's graph rotates adjacent pairs while Hugging Face rotates the two halves of a head:
  // q/k rows are regrouped per head (LlamaModel.permute). Without it, llama.cpp runs NEOX-style RoPE.
  bool permute_qk = false;
  // llama3 rope scaling is written as a rope_freqs.weight tensor; without it rope scaling is refused.
  bool rope_freqs = false;
  // LlamaModel.set_gguf_parameters' extra keys: <arch>.vocab_size, <arch>.rope.dimension_count and
  // tokenizer.ggml.add_space_prefix.
  bool llama_keys = false;
  // llama.cpp has a sparse block on every layer and always renormalises the top-k weights
  // (qwen3moe): a dense layer is refused, norm_topk_prob = false warned about.
  bool sparse_every_layer = false;
  // Sliding-window layers as llama.cpp's graph fixes them rather than reads them (gemma3:
  // hparams.set_swa_pattern(6), so layer i is full attention when (i + 1) % 6 == 0;
  // rope_freq_base_train_swa = 10000; attention scale 1/sqrt(key_length)). 0: no sliding layers.
  int64_t swa_pattern = 0;
  double swa_rope_freq_base = 0;
};

struct Architecture {
  std::string name;        // config.json "architectures"[0], e.g. "Qwen3ForCausalLM"
  std::string model_type;  // config.json "model_type", e.g. "qwen3" (the fallback when no architectures)
  ArchitectureDefaults defaults;
  ArchitectureFeatures features;
  GgufArchitecture gguf;
};

// Every registered architecture, the built-in ones first (Qwen3ForCausalLM, LlamaForCausalLM,
// Qwen3MoeForCausalLM, Qwen2ForCausalLM, MistralForCausalLM: the order error messages list them;
// a GGUF general.architecture loads as the first entry that writes it). A deque: entries never move.
const std::deque<Architecture>& architectures();

// The entry named `name` ("Qwen3ForCausalLM"), or nullptr.
const Architecture* find_architecture(const std::string& name);
// The entry whose model_type is `model_type`, or nullptr.
const Architecture* find_architecture_by_model_type(const std::string& model_type);

// Adds an architecture (tests use it to add a variant through the registry alone). Not
// thread-safe: call it before any model is parsed. Throws Error(kInvalidArgument) when the name or
// model_type is empty or already registered.
void register_architecture(Architecture architecture);

}  // namespace ditto
