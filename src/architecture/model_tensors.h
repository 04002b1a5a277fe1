// The tensors of a model, described once (gemma.cpp's ForEachTensor pattern): for each, its Hugging
// Face name, shape (a function of the config), role in ditto's packed weights and llama.cpp GGUF
// name. This one description drives weight validation (expected_tensors, validate_weights), loading
// and packing (CausalLM::load), the test-model generator and GGUF export (checkpoint/gguf_export.h).
// Which tensors exist follows the config and its architecture's features (architecture/architecture.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "architecture/config.h"

namespace ditto {

// Where a checkpoint tensor goes in ditto's weights (model/causal_lm.h). Tensors with the same
// slot in the same layer (and expert) are fused, in visit order: q, k, v into qkv_proj; gate, up
// into gate_up_proj. Matrices are packed in the checkpoint's dtype; vectors (norm weights,
// biases) are widened to f32.
enum class WeightSlot {
  kEmbedTokens,             // matrix [vocab_size, hidden_size]
  kInputLayernorm,          // vector [hidden_size]
  kQkvProj,                 // matrix [q_dim + 2·kv_dim, hidden_size]
  kQkvBias,                 // vector [q_dim + 2·kv_dim]
  kQNorm,                   // vector [head_dim]
  kKNorm,                   // vector [head_dim]
  kOProj,                   // matrix [hidden_size, q_dim]
  kOBias,                   // vector [hidden_size]
  kPostAttentionLayernorm,  // vector [hidden_size] the MLP's input norm (Gemma: pre_feedforward_layernorm)
  kAttentionOutputNorm,     // vector [hidden_size] Gemma's post_attention_layernorm (sandwich_norms)
  kMlpOutputNorm,           // vector [hidden_size] Gemma's post_feedforward_layernorm (sandwich_norms)
  kGateUpProj,              // matrix [2·intermediate_size, hidden_size]
  kGateUpBias,              // vector [2·intermediate_size]
  kDownProj,                // matrix [hidden_size, intermediate_size]
  kDownBias,                // vector [hidden_size]
  kRouter,                  // matrix [num_experts, hidden_size]
  kExpertGateUpProj,        // matrix [2·moe_intermediate_size, hidden_size], per expert
  kExpertDownProj,          // matrix [hidden_size, moe_intermediate_size], per expert
  kNorm,                    // vector [hidden_size]
  kLmHead,                  // matrix [vocab_size, hidden_size]
};

// True for the slots that hold a packed matrix, false for f32 vectors.
bool is_matrix_slot(WeightSlot slot);

// How transformers' _init_weights starts a tensor, and so how the test-model generator fills it.
enum class TensorInit {
  kNormal,  // normal(0, initializer_range)
  kOnes,    // norm weights
  kZeros,   // biases
};

struct TensorDesc {
  std::string name;            // Hugging Face: "model.layers.3.self_attn.q_proj.weight"
  std::vector<int64_t> shape;  // Hugging Face: [out_features, in_features] or [n]
  WeightSlot slot;
  int64_t layer = -1;   // -1 outside the decoder layers
  int64_t expert = -1;  // -1 unless one expert's
  // llama.cpp: "blk.3.attn_q.weight". An expert's tensors name the layer's stacked tensor
  // ("blk.3.ffn_gate_exps.weight", [num_experts, out, in]) that the converter merges them into.
  std::string gguf_name;
  // llama.cpp stores it as F32 whatever the checkpoint's dtype (norm weights, biases, the router);
  // every other tensor keeps the checkpoint's dtype.
  bool gguf_f32 = false;
  // q_proj / k_proj weight or bias: rows are heads of head_dim that RoPE rotates (GGUF export
  // regroups them when GgufArchitecture::permute_qk).
  bool rope_rows = false;
  // A norm weight applied as (1 + w) (ArchitectureFeatures::unit_offset_norms): a safetensors
  // checkpoint stores w, ditto keeps 1 + w in float32, and a GGUF file stores 1 + w (llama.cpp's
  // converter adds the 1).
  bool unit_offset = false;
  TensorInit init = TensorInit::kNormal;
};

using TensorVisitor = std::function<void(const TensorDesc&)>;

// Calls `visit` for every tensor of a checkpoint of `c`, in model (state_dict) order:
// model.embed_tokens.weight; then per layer self_attn.{q,k,v,o}_proj.weight [+ .bias:
// has_qkv_bias / has_o_bias], self_attn.{q,k}_norm.weight (features.qk_norm), then either mlp.gate.weight
// and mlp.experts.E.{gate,up,down}_proj.weight (is_moe_layer) or mlp.{gate,up,down}_proj.weight
// [+ .bias with mlp_bias], input_layernorm.weight, post_attention_layernorm.weight (with
// sandwich_norms also pre_feedforward_layernorm.weight, post_feedforward_layernorm.weight); then
// model.norm.weight and lm_head.weight unless tie_word_embeddings.
void for_each_tensor(const ModelConfig& c, const TensorVisitor& visit);

}  // namespace ditto
