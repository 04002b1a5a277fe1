#include "architecture/model_tensors.h"

namespace ditto {

bool is_matrix_slot(WeightSlot slot) {
  switch (slot) {
    case WeightSlot::kEmbedTokens:
    case WeightSlot::kQkvProj:
    case WeightSlot::kOProj:
    case WeightSlot::kGateUpProj:
    case WeightSlot::kDownProj:
    case WeightSlot::kRouter:
    case WeightSlot::kExpertGateUpProj:
    case WeightSlot::kExpertDownProj:
    case WeightSlot::kLmHead: return true;
    default: return false;
  }
}

void for_each_tensor(const ModelConfig& c, const TensorVisitor& visit) {
  const int64_t h = c.hidden_size;
  const int64_t q = c.num_attention_heads * c.head_dim;
  const int64_t kv = c.num_key_value_heads * c.head_dim;
  using S = WeightSlot;

  visit({.name = "model.embed_tokens.weight",
         .shape = {c.vocab_size, h},
         .slot = S::kEmbedTokens,
         .gguf_name = "token_embd.weight"});
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    const std::string b = "blk." + std::to_string(layer) + ".";
    // A linear layer: [out, in] weight, and with `bias` its [out] bias.
    auto linear = [&](const std::string& hf, const std::string& gguf, int64_t out, int64_t in, bool bias, S weight_slot,
                      S bias_slot, bool rope_rows = false) {
      visit({.name = p + hf + ".weight",
             .shape = {out, in},
             .slot = weight_slot,
             .layer = layer,
             .gguf_name = b + gguf + ".weight",
             .rope_rows = rope_rows});
      if (bias)
        visit({.name = p + hf + ".bias",
               .shape = {out},
               .slot = bias_slot,
               .layer = layer,
               .gguf_name = b + gguf + ".bias",
               .gguf_f32 = true,
               .rope_rows = rope_rows,
               .init = TensorInit::kZeros});
    };
    auto norm = [&](const std::string& hf, const std::string& gguf, int64_t n, S slot) {
      visit({.name = p + hf + ".weight",
             .shape = {n},
             .slot = slot,
             .layer = layer,
             .gguf_name = b + gguf + ".weight",
             .gguf_f32 = true,
             .init = TensorInit::kOnes});
    };

    // Attention block.
    linear("self_attn.q_proj", "attn_q", q, h, c.attention_bias, S::kQkvProj, S::kQkvBias, /*rope_rows=*/true);
    linear("self_attn.k_proj", "attn_k", kv, h, c.attention_bias, S::kQkvProj, S::kQkvBias, /*rope_rows=*/true);
    linear("self_attn.v_proj", "attn_v", kv, h, c.attention_bias, S::kQkvProj, S::kQkvBias);
    linear("self_attn.o_proj", "attn_output", h, q, c.attention_bias, S::kOProj, S::kOBias);
    if (c.features.qk_norm) {
      norm("self_attn.q_norm", "attn_q_norm", c.head_dim, S::kQNorm);
      norm("self_attn.k_norm", "attn_k_norm", c.head_dim, S::kKNorm);
    }
    // MoE or MLP block.
    if (c.is_moe_layer(layer)) {
      visit({.name = p + "mlp.gate.weight",
             .shape = {c.num_experts, h},
             .slot = S::kRouter,
             .layer = layer,
             .gguf_name = b + "ffn_gate_inp.weight",
             .gguf_f32 = true});
      const int64_t mi = c.moe_intermediate_size;
      for (int64_t e = 0; e < c.num_experts; ++e) {
        const std::string ep = p + "mlp.experts." + std::to_string(e) + ".";
        auto expert = [&](const char* proj, int64_t out, int64_t in, S slot) {
          visit({.name = ep + proj + "_proj.weight",
                 .shape = {out, in},
                 .slot = slot,
                 .layer = layer,
                 .expert = e,
                 .gguf_name = b + "ffn_" + proj + "_exps.weight"});
        };
        expert("gate", mi, h, S::kExpertGateUpProj);
        expert("up", mi, h, S::kExpertGateUpProj);
        expert("down", h, mi, S::kExpertDownProj);
      }
    } else {
      const int64_t inter = c.intermediate_size;
      linear("mlp.gate_proj", "ffn_gate", inter, h, c.mlp_bias, S::kGateUpProj, S::kGateUpBias);
      linear("mlp.up_proj", "ffn_up", inter, h, c.mlp_bias, S::kGateUpProj, S::kGateUpBias);
      linear("mlp.down_proj", "ffn_down", h, inter, c.mlp_bias, S::kDownProj, S::kDownBias);
    }
    norm("input_layernorm", "attn_norm", h, S::kInputLayernorm);
    norm("post_attention_layernorm", "ffn_norm", h, S::kPostAttentionLayernorm);
  }
  visit({.name = "model.norm.weight",
         .shape = {h},
         .slot = S::kNorm,
         .gguf_name = "output_norm.weight",
         .gguf_f32 = true,
         .init = TensorInit::kOnes});
  if (!c.tie_word_embeddings)
    visit({.name = "lm_head.weight", .shape = {c.vocab_size, h}, .slot = S::kLmHead, .gguf_name = "output.weight"});
}

std::vector<TensorSpec> expected_tensors(const ModelConfig& c) {
  std::vector<TensorSpec> out;
  for_each_tensor(c, [&](const TensorDesc& t) { out.push_back({t.name, t.shape}); });
  return out;
}

}  // namespace ditto
