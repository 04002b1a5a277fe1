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

namespace {

using S = WeightSlot;

// transformers starts a norm weight at 1, a (1 + w) one at 0. The generator fills the latter with
// normal(0, initializer_range) instead: at 0 every norm would be the identity, and a model that
// dropped or doubled the 1, or read the weights in the wrong order, would go unnoticed.
TensorInit norm_init(bool unit_offset) { return unit_offset ? TensorInit::kNormal : TensorInit::kOnes; }

// Visits the tensors of one decoder layer, named under its Hugging Face prefix (model.layers.L.)
// and its GGUF prefix (blk.L.).
class LayerTensors {
 public:
  LayerTensors(const TensorVisitor& visit, int64_t layer, bool unit_offset_norms)
      : visit_(visit),
        layer_(layer),
        unit_offset_norms_(unit_offset_norms),
        p_("model.layers." + std::to_string(layer) + "."),
        b_("blk." + std::to_string(layer) + ".") {}

  // A linear layer: [out, in] weight, and with `bias` its [out] bias.
  void linear(const std::string& hf, const std::string& gguf, int64_t out, int64_t in, bool bias, S weight_slot,
              S bias_slot, bool rope_rows = false) const {
    visit_({.name = p_ + hf + ".weight",
            .shape = {out, in},
            .slot = weight_slot,
            .layer = layer_,
            .gguf_name = b_ + gguf + ".weight",
            .rope_rows = rope_rows});
    if (bias)
      visit_({.name = p_ + hf + ".bias",
              .shape = {out},
              .slot = bias_slot,
              .layer = layer_,
              .gguf_name = b_ + gguf + ".bias",
              .gguf_f32 = true,
              .rope_rows = rope_rows,
              .init = TensorInit::kZeros});
  }

  void norm(const std::string& hf, const std::string& gguf, int64_t n, S slot) const {
    visit_({.name = p_ + hf + ".weight",
            .shape = {n},
            .slot = slot,
            .layer = layer_,
            .gguf_name = b_ + gguf + ".weight",
            .gguf_f32 = true,
            .unit_offset = unit_offset_norms_,
            .init = norm_init(unit_offset_norms_)});
  }

  // The MoE router: [num_experts, hidden_size], kept f32 in GGUF.
  void router(int64_t num_experts, int64_t h) const {
    visit_({.name = p_ + "mlp.gate.weight",
            .shape = {num_experts, h},
            .slot = S::kRouter,
            .layer = layer_,
            .gguf_name = b_ + "ffn_gate_inp.weight",
            .gguf_f32 = true});
  }

  // One expert's projection (`proj` is gate, up or down). Every expert of the layer gives the same
  // GGUF name, the layer's stacked ffn_<proj>_exps tensor (see TensorDesc::gguf_name).
  void expert(int64_t e, const char* proj, int64_t out, int64_t in, S slot) const {
    visit_({.name = p_ + "mlp.experts." + std::to_string(e) + "." + proj + "_proj.weight",
            .shape = {out, in},
            .slot = slot,
            .layer = layer_,
            .expert = e,
            .gguf_name = b_ + "ffn_" + proj + "_exps.weight"});
  }

 private:
  const TensorVisitor& visit_;
  const int64_t layer_;
  const bool unit_offset_norms_;
  const std::string p_;  // Hugging Face prefix
  const std::string b_;  // GGUF prefix
};

void visit_attention_tensors(const ModelConfig& c, const LayerTensors& t) {
  const int64_t h = c.hidden_size;
  const int64_t q = c.num_attention_heads * c.head_dim;
  const int64_t kv = c.num_key_value_heads * c.head_dim;
  const bool qkv_bias = c.has_qkv_bias();
  t.linear("self_attn.q_proj", "attn_q", q, h, qkv_bias, S::kQkvProj, S::kQkvBias, /*rope_rows=*/true);
  t.linear("self_attn.k_proj", "attn_k", kv, h, qkv_bias, S::kQkvProj, S::kQkvBias, /*rope_rows=*/true);
  t.linear("self_attn.v_proj", "attn_v", kv, h, qkv_bias, S::kQkvProj, S::kQkvBias);
  t.linear("self_attn.o_proj", "attn_output", h, q, c.has_o_bias(), S::kOProj, S::kOBias);
  if (c.features.qk_norm) {
    t.norm("self_attn.q_norm", "attn_q_norm", c.head_dim, S::kQNorm);
    t.norm("self_attn.k_norm", "attn_k_norm", c.head_dim, S::kKNorm);
  }
}

void visit_moe_tensors(const ModelConfig& c, const LayerTensors& t) {
  const int64_t h = c.hidden_size;
  const int64_t mi = c.moe_intermediate_size;
  t.router(c.num_experts, h);
  for (int64_t e = 0; e < c.num_experts; ++e) {
    t.expert(e, "gate", mi, h, S::kExpertGateUpProj);
    t.expert(e, "up", mi, h, S::kExpertGateUpProj);
    t.expert(e, "down", h, mi, S::kExpertDownProj);
  }
}

void visit_mlp_tensors(const ModelConfig& c, const LayerTensors& t) {
  const int64_t h = c.hidden_size;
  const int64_t inter = c.intermediate_size;
  t.linear("mlp.gate_proj", "ffn_gate", inter, h, c.mlp_bias, S::kGateUpProj, S::kGateUpBias);
  t.linear("mlp.up_proj", "ffn_up", inter, h, c.mlp_bias, S::kGateUpProj, S::kGateUpBias);
  t.linear("mlp.down_proj", "ffn_down", h, inter, c.mlp_bias, S::kDownProj, S::kDownBias);
}

void visit_layer_tensors(const ModelConfig& c, int64_t layer, const TensorVisitor& visit) {
  const LayerTensors t(visit, layer, c.features.unit_offset_norms);
  visit_attention_tensors(c, t);
  if (c.is_moe_layer(layer)) {
    visit_moe_tensors(c, t);
  } else {
    visit_mlp_tensors(c, t);
  }
  t.norm("input_layernorm", "attn_norm", c.hidden_size, S::kInputLayernorm);
  if (c.features.sandwich_norms) {  // llama.cpp's Gemma names (tensor_mapping.py)
    t.norm("post_attention_layernorm", "post_attention_norm", c.hidden_size, S::kAttentionOutputNorm);
    t.norm("pre_feedforward_layernorm", "ffn_norm", c.hidden_size, S::kPostAttentionLayernorm);
    t.norm("post_feedforward_layernorm", "post_ffw_norm", c.hidden_size, S::kMlpOutputNorm);
  } else {
    t.norm("post_attention_layernorm", "ffn_norm", c.hidden_size, S::kPostAttentionLayernorm);
  }
}

}  // namespace

void for_each_tensor(const ModelConfig& c, const TensorVisitor& visit) {
  const int64_t h = c.hidden_size;
  visit({.name = "model.embed_tokens.weight",
         .shape = {c.vocab_size, h},
         .slot = S::kEmbedTokens,
         .gguf_name = "token_embd.weight"});
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) visit_layer_tensors(c, layer, visit);
  visit({.name = "model.norm.weight",
         .shape = {h},
         .slot = S::kNorm,
         .gguf_name = "output_norm.weight",
         .gguf_f32 = true,
         .unit_offset = c.features.unit_offset_norms,
         .init = norm_init(c.features.unit_offset_norms)});
  if (!c.tie_word_embeddings)
    visit({.name = "lm_head.weight", .shape = {c.vocab_size, h}, .slot = S::kLmHead, .gguf_name = "output.weight"});
}

std::vector<TensorSpec> expected_tensors(const ModelConfig& c) {
  std::vector<TensorSpec> out;
  for_each_tensor(c, [&](const TensorDesc& t) { out.push_back({t.name, t.shape}); });
  return out;
}

}  // namespace ditto
