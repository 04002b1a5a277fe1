#include "model/causal_lm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>

#include "core/error.h"
#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/convert.h"
#include "kernels/embedding.h"
#include "kernels/gemm.h"
#include "kernels/quant.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"
#include "kernels/softmax.h"
#include "parallel/tensor_parallel.h"

namespace ditto {

namespace {

// y[r, :] += bias for rows × [n] with row stride ld.
void add_bias(float* y, int64_t rows, int64_t n, int64_t ld, const std::vector<float>& bias) {
  if (bias.empty()) return;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i) y[r * ld + i] += bias[i];
}

// Runs fn over token ranges [t0, t1) covering [0, num_tokens), split over the pool. Token-wise
// work only: each token's values are computed by one thread in the same order whatever the split.
void split_tokens(ThreadPool* pool, int64_t num_tokens, const std::function<void(int64_t t0, int64_t t1)>& fn) {
  const PhaseTimer timer(StepPhase::kTokenwise);
  if (pool == nullptr || num_tokens == 1) return fn(0, num_tokens);
  pool->parallel_for(static_cast<size_t>(num_tokens),
                     [&](size_t b, size_t e) { fn(static_cast<int64_t>(b), static_cast<int64_t>(e)); });
}

void add_residual(float* h, const float* delta, size_t count) {
  for (size_t i = 0; i < count; ++i) h[i] += delta[i];
}

}  // namespace

int64_t CausalLM::decode_weight_bytes() const {
  auto matrix = [](const LinearWeight& w) { return w.weight_bytes(); };
  auto vec = [](const std::vector<float>& v) { return static_cast<int64_t>(v.size() * sizeof(float)); };
  int64_t bytes = vec(norm_) + matrix(config_.tie_word_embeddings ? embed_tokens_ : lm_head_);
  for (const DecoderLayerWeights& l : layers_) {
    bytes += matrix(l.qkv_proj) + matrix(l.o_proj);
    if (l.is_moe()) {  // the router, and k experts of equal size
      bytes += matrix(l.router) +
               config_.num_experts_per_tok * (matrix(l.experts[0].gate_up_proj) + matrix(l.experts[0].down_proj));
    } else {
      bytes += matrix(l.gate_up_proj) + matrix(l.down_proj);
    }
    bytes += vec(l.input_layernorm) + vec(l.post_attention_layernorm) + vec(l.q_norm) + vec(l.k_norm);
    bytes += vec(l.attention_output_norm) + vec(l.mlp_output_norm);
    bytes += vec(l.qkv_bias) + vec(l.o_bias) + vec(l.gate_up_bias) + vec(l.down_bias);
  }
  return bytes;
}

double CausalLM::prefill_flops(int64_t prompt_tokens) const {
  const ModelConfig& c = config_;
  auto mac = [](const LinearWeight& w) { return static_cast<double>(w.n()) * static_cast<double>(w.k()); };
  double per_token = 0;  // multiply-adds of the linear layers per token
  for (const DecoderLayerWeights& l : layers_) {
    per_token += mac(l.qkv_proj) + mac(l.o_proj);
    if (l.is_moe()) {
      per_token += mac(l.router) + static_cast<double>(c.num_experts_per_tok) *
                                       (mac(l.experts[0].gate_up_proj) + mac(l.experts[0].down_proj));
    } else {
      per_token += mac(l.gate_up_proj) + mac(l.down_proj);
    }
  }
  const auto t = static_cast<double>(prompt_tokens);
  // A query at position p sees p + 1 keys, at most sliding_window on a sliding layer.
  const double full_keys = t * (t + 1) / 2;
  const auto w = static_cast<double>(c.sliding_window);
  const double window_keys = t <= w ? full_keys : w * (w + 1) / 2 + (t - w) * w;
  double visible_keys = 0;
  for (int64_t li = 0; li < c.num_hidden_layers; ++li) visible_keys += c.is_sliding_layer(li) ? window_keys : full_keys;
  const double attention =
      4.0 * static_cast<double>(c.head_dim) * static_cast<double>(c.num_attention_heads) * visible_keys;
  return 2.0 * per_token * t + attention + 2.0 * mac(c.tie_word_embeddings ? embed_tokens_ : lm_head_);
}

// forward()'s activations for one batch: spans of arena_, which only grows, so a prefill does not
// pay for fresh zeroed pages on every step. "Local" buffers hold this rank's columns under tensor
// parallelism; without it they are the whole-width buffers themselves.
struct CausalLM::Activations {
  int64_t num_tokens = 0;
  std::span<float> h;              // [num_tokens, hidden_size] f32 residual stream
  std::span<float> x;              // [num_tokens, hidden_size] f32 a block's normed input
  std::span<float> qkv;            // [num_tokens, (heads + 2·kv_heads)·head_dim] f32 this rank's q, k, v
  std::span<float> attn_local;     // [num_tokens, heads·head_dim] f32 this rank's heads' attention output
  std::span<float> attn;           // [num_tokens, q_dim] f32 every head's, side by side
  std::span<float> gate_up;        // [num_tokens, 2·shard.intermediate] f32 gate, up
  std::span<float> act_local;      // [num_tokens, shard.intermediate] f32 silu(gate) · up
  std::span<float> act;            // [num_tokens, intermediate_size] f32 every rank's features
  std::span<float> delta_local;    // [num_tokens, shard.hidden] f32 this rank's columns of a block's output
  std::span<float> delta;          // [num_tokens, hidden_size] f32 a block's output, added to h
  std::span<float> gathered;       // [size · num_tokens · widest local] f32 all-gather landing space
  std::span<float> cos_sin;        // [num_tokens, 2, head_dim / 2] f32 RoPE cos, sin of each position
  std::span<float> cos_sin_local;  // [num_tokens, 2, head_dim / 2] f32 the sliding layers' (local base), or empty
  std::span<float> moe;            // [moe_scratch_floats(num_tokens)] f32 moe_block's scratch
};

void CausalLM::release_activations() const { std::vector<float>().swap(arena_); }

CausalLM::Activations CausalLM::activations(int64_t num_tokens) const {
  const ModelConfig& c = config_;
  const TensorParallelShard& s = shard_;
  const bool split = s.size > 1;
  const auto n = static_cast<size_t>(num_tokens);
  const auto hidden = static_cast<size_t>(c.hidden_size);
  const auto head_dim = static_cast<size_t>(c.head_dim);
  const auto q_local = static_cast<size_t>(s.num_heads) * head_dim;
  const auto qkv_local = q_local + 2 * static_cast<size_t>(s.num_kv_heads) * head_dim;
  const auto inter_local = static_cast<size_t>(s.intermediate);
  const size_t widest = std::max({q_local, inter_local, static_cast<size_t>(s.hidden)});
  const size_t sizes[] = {n * hidden,
                          n * hidden,
                          n * qkv_local,
                          split ? n * q_local : 0,
                          n * static_cast<size_t>(c.num_attention_heads) * head_dim,
                          n * 2 * inter_local,
                          split ? n * inter_local : 0,
                          n * static_cast<size_t>(c.intermediate_size),
                          split ? n * static_cast<size_t>(s.hidden) : 0,
                          n * hidden,
                          split ? static_cast<size_t>(s.size) * n * widest : 0,
                          n * head_dim,
                          local_inv_freq_.empty() ? 0 : n * head_dim,
                          c.is_moe() ? moe_scratch_floats(num_tokens) : 0};
  size_t total = 0;
  for (size_t sz : sizes) total += sz;
  if (arena_.size() < total) arena_.resize(total);
  float* next = arena_.data();
  const size_t* size = sizes;
  auto take = [&] {
    std::span<float> out(next, *size);
    next += *size++;
    return out;
  };
  Activations a;
  a.num_tokens = num_tokens;
  a.h = take();
  a.x = take();
  a.qkv = take();
  a.attn_local = take();
  a.attn = take();
  a.gate_up = take();
  a.act_local = take();
  a.act = take();
  a.delta_local = take();
  a.delta = take();
  a.gathered = take();
  a.cos_sin = take();
  a.cos_sin_local = take();
  a.moe = take();
  if (!split) {  // one process: the local buffers are the whole ones
    a.attn_local = a.attn;
    a.act_local = a.act;
    a.delta_local = a.delta;
  }
  return a;
}

// Token-wise work (norms, RoPE, KV writes, activations, residual adds) is split over tokens; each
// token's values are computed by one thread in the same order whatever the split.
void CausalLM::for_tokens(int64_t num_tokens, const std::function<void(int64_t t0, int64_t t1)>& fn) const {
  split_tokens(pool_, num_tokens, fn);
}

void CausalLM::gather_columns(const float* local, int64_t rows, int64_t width, float* full, float* scratch,
                              const LinearWeight* consumer) const {
  const int size = shard_.size;
  if (size == 1) {
    if (full != local) std::memcpy(full, local, static_cast<size_t>(rows * width) * sizeof(float));
    return;
  }
  if (consumer == nullptr || !rounds_input_to_bf16(*consumer)) {
    return tp_->all_gather_columns(local, static_cast<size_t>(rows), static_cast<size_t>(width) * sizeof(float), full);
  }
  // The consumer rounds its input to bf16 first (kernels/gemm.h), with this same function: sending
  // the rounded values halves the bytes, and widening them back is exact, so the GEMM sees the
  // same bf16 inputs.
  auto* mine = reinterpret_cast<uint16_t*>(scratch);  // [rows, width] bf16
  uint16_t* all = mine + rows * width;                // [rows, size · width] bf16
  for_tokens(rows, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) round_to_bf16(local + t * width, width, mine + t * width);
  });
  tp_->all_gather_columns(mine, static_cast<size_t>(rows), static_cast<size_t>(width) * sizeof(uint16_t), all);
  const int64_t n = rows * width * size;
  for_tokens(rows, [&](int64_t t0, int64_t t1) {
    for (int64_t i = t0 * width * size; i < std::min(n, t1 * width * size); ++i) full[i] = bf16_to_f32(all[i]);
  });
}

void CausalLM::forward(const ForwardBatch& batch, KvCache& cache, float* logits, float* hidden,
                       int32_t* routed_experts) const {
  const ModelConfig& c = config_;
  const int64_t num_tokens = batch.num_tokens();
  DITTO_CHECK(static_cast<int64_t>(batch.positions.size()) == num_tokens &&
              static_cast<int64_t>(batch.slot_mapping.size()) == num_tokens &&
              static_cast<int64_t>(batch.token_seq.size()) == num_tokens);
  for (int32_t row : batch.logits_indices) DITTO_CHECK(row >= 0 && row < num_tokens);
  for (int32_t row : batch.hidden_indices) DITTO_CHECK(row >= 0 && row < num_tokens);
  DITTO_CHECK(batch.hidden_indices.empty() || hidden != nullptr);
  for (int32_t pos : batch.positions) {
    if (pos < 0 || pos >= c.max_position_embeddings)
      throw_invalid_argument("position " + std::to_string(pos) + " is outside the model's context [0, " +
                             std::to_string(c.max_position_embeddings) + ") (max_position_embeddings)");
  }
  for (int32_t id : batch.token_ids) {
    if (id < 0 || id >= c.vocab_size)
      throw_invalid_argument("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                             std::to_string(c.vocab_size) + ")");
  }
  if (num_tokens == 0) return;
  if (tp_ == nullptr || tp_->rank() != 0) return forward_shard(batch, cache, logits, hidden, routed_experts);

  auto lock = tp_->lock();
  WireBuffer command;
  command.put_i64(tp_model_id_);
  command.put_i64(cache.tensor_parallel_id());
  command.put_array(batch.token_ids);
  command.put_array(batch.positions);
  command.put_array(batch.slot_mapping);
  command.put_array(batch.token_seq);
  command.put_array(batch.block_tables);
  command.put_i64(batch.max_blocks_per_seq);
  command.put_array(batch.logits_indices);
  tp_->send_command(TensorParallelCommand::kForward, command);
  try {
    forward_shard(batch, cache, logits, hidden, routed_experts);
  } catch (const std::exception& e) {  // the other ranks are inside the same pass: stop them all
    tp_->abort(std::string("forward pass failed: ") + e.what());
  }
}

void CausalLM::forward_shard(const ForwardBatch& batch, KvCache& cache, float* logits, float* hidden,
                             int32_t* routed_experts) const {
  const ModelConfig& c = config_;
  Activations a = activations(batch.num_tokens());
  const AttentionShape shape{shard_.num_heads, shard_.num_kv_heads, c.head_dim, cache.block_size(),
                             static_cast<float>(c.attention_scale())};
  AttentionShape sliding_shape = shape;
  sliding_shape.sliding_window = c.sliding_window;
  embedding_block(batch, a);
  const int64_t routed_stride = c.num_moe_layers() * c.num_experts_per_tok;  // routed_experts' token stride
  int64_t moe_layer = 0;
  for (int64_t li = 0; li < c.num_hidden_layers; ++li) {
    const DecoderLayerWeights& l = layers_[static_cast<size_t>(li)];
    attention_block(l, li, cache.layer(li), batch, c.is_sliding_layer(li) ? sliding_shape : shape, a);
    int32_t* routed =
        routed_experts != nullptr && l.is_moe() ? routed_experts + moe_layer * c.num_experts_per_tok : nullptr;
    feed_forward_block(l, a, routed, routed_stride);
    moe_layer += l.is_moe() ? 1 : 0;
  }
  final_norm_and_lm_head(batch, a, logits, hidden);
}

// h = embed_tokens[token_ids] (Gemma: times sqrt(hidden_size) rounded to float32, one float32
// multiply per element, as Hugging Face's float32 Gemma3TextScaledWordEmbedding and llama.cpp's
// ggml_scale(sqrtf(n_embd))); the RoPE cos/sin of every position (and with the local base, for
// sliding layers). Under tensor parallelism each rank looks up the tokens in its vocabulary rows and
// the ranks gather the rows.
void CausalLM::embedding_block(const ForwardBatch& batch, Activations& a) const {
  const PhaseTimer timer(StepPhase::kTokenwise);
  rope_cos_sin(batch.positions.data(), a.num_tokens, inv_freq_, a.cos_sin.data());
  if (!local_inv_freq_.empty())
    rope_cos_sin(batch.positions.data(), a.num_tokens, local_inv_freq_, a.cos_sin_local.data());
  embedding_rows(batch, a);
  if (!config_.features.scaled_embedding) return;
  const auto scale = static_cast<float>(std::sqrt(static_cast<double>(config_.hidden_size)));
  for (float& v : a.h.subspan(0, static_cast<size_t>(a.num_tokens * config_.hidden_size))) v *= scale;
}

void CausalLM::embedding_rows(const ForwardBatch& batch, Activations& a) const {
  if (shard_.size == 1) return embedding(embed_tokens_.parts[0], batch.token_ids.data(), a.num_tokens, a.h.data());
  const int size = shard_.size;
  const int64_t hidden = config_.hidden_size;
  std::vector<int> owner(static_cast<size_t>(a.num_tokens));
  std::vector<size_t> bytes(static_cast<size_t>(size), 0);
  std::vector<int32_t> mine;  // this rank's tokens, as rows of its shard, in batch order
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    const int32_t id = batch.token_ids[static_cast<size_t>(t)];
    int r = 0;
    while (TensorParallelShard::vocab_range(config_.vocab_size, r, size).second <= id) ++r;
    owner[static_cast<size_t>(t)] = r;
    bytes[static_cast<size_t>(r)] += static_cast<size_t>(hidden) * sizeof(float);
    if (r == shard_.rank) mine.push_back(static_cast<int32_t>(id - shard_.vocab_begin));
  }
  float* rows = a.x.data();  // [mine, hidden] this rank's rows; x is free until the first layer
  if (!mine.empty()) embedding(embed_tokens_.parts[0], mine.data(), static_cast<int64_t>(mine.size()), rows);
  float* all = a.delta.data();  // [num_tokens, hidden] every rank's rows, rank-major
  tp_->all_gather_v(rows, bytes, all);
  std::vector<int64_t> next(static_cast<size_t>(size), 0);  // rank r's next row in `all`
  for (int r = 1; r < size; ++r)
    next[static_cast<size_t>(r)] =
        next[static_cast<size_t>(r) - 1] + static_cast<int64_t>(bytes[static_cast<size_t>(r) - 1] / sizeof(float));
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    int64_t& from = next[static_cast<size_t>(owner[static_cast<size_t>(t)])];
    std::memcpy(a.h.data() + t * hidden, all + from, static_cast<size_t>(hidden) * sizeof(float));
    from += hidden;
  }
}

// h += o_proj(attention(rope(qk_norm(qkv_proj(input_layernorm(h)))))), with sandwich norms the
// o_proj output normalised by attention_output_norm first. Every token's K/V is
// written to its cache slot before any query attends. Under tensor parallelism this rank runs its
// heads and its columns of o_proj; the heads' outputs and o_proj's columns are gathered.
void CausalLM::attention_block(const DecoderLayerWeights& l, int64_t layer, KvCacheLayer kv, const ForwardBatch& batch,
                               const AttentionShape& shape, Activations& a) const {
  const ModelConfig& c = config_;
  const int64_t num_tokens = a.num_tokens;
  const int64_t hidden = c.hidden_size;
  const int64_t head_dim = c.head_dim;
  const int64_t q_dim = shard_.num_heads * head_dim;
  const int64_t kv_dim = shard_.num_kv_heads * head_dim;
  const int64_t qkv_dim = q_dim + 2 * kv_dim;
  const auto eps = static_cast<float>(c.rms_norm_eps);
  float* const h = a.h.data();
  float* const x = a.x.data();
  float* const qkv = a.qkv.data();
  const float* const cos_sin =
      c.is_sliding_layer(layer) && !a.cos_sin_local.empty() ? a.cos_sin_local.data() : a.cos_sin.data();
  for_tokens(num_tokens, [&](int64_t t0, int64_t t1) {
    rms_norm(h + t0 * hidden, t1 - t0, hidden, hidden, l.input_layernorm.data(), eps, x + t0 * hidden, hidden);
  });
  linear(x, num_tokens, hidden, l.qkv_proj, qkv, qkv_dim, pool_);
  for_tokens(num_tokens, [&](int64_t t0, int64_t t1) {
    add_bias(qkv + t0 * qkv_dim, t1 - t0, qkv_dim, qkv_dim, l.qkv_bias);
    for (int64_t t = t0; t < t1; ++t) {
      float* q = qkv + t * qkv_dim;  // [heads, head_dim]
      float* k = q + q_dim;          // [kv_heads, head_dim]
      if (c.has_qk_norm()) {
        rms_norm(q, shard_.num_heads, head_dim, head_dim, l.q_norm.data(), eps, q, head_dim);
        rms_norm(k, shard_.num_kv_heads, head_dim, head_dim, l.k_norm.data(), eps, k, head_dim);
      }
      rope_apply(q, shard_.num_heads, head_dim, cos_sin + t * head_dim);
      rope_apply(k, shard_.num_kv_heads, head_dim, cos_sin + t * head_dim);
    }
    write_kv(qkv + t0 * qkv_dim + q_dim, qkv_dim, qkv + t0 * qkv_dim + q_dim + kv_dim, qkv_dim,
             batch.slot_mapping.data() + t0, t1 - t0, kv_dim, kv);
  });
  {
    const PhaseTimer timer(StepPhase::kAttention);
    paged_attention(qkv, qkv_dim, batch.positions.data(), batch.token_seq.data(), num_tokens, batch.block_tables.data(),
                    batch.max_blocks_per_seq, kv, shape, a.attn_local.data(), q_dim, pool_);
  }
  gather_columns(a.attn_local.data(), num_tokens, q_dim, a.attn.data(), a.gathered.data(), &l.o_proj);
  const int64_t all_heads = c.num_attention_heads * head_dim;
  linear(a.attn.data(), num_tokens, all_heads, l.o_proj, a.delta_local.data(), shard_.hidden, pool_);
  gather_columns(a.delta_local.data(), num_tokens, shard_.hidden, a.delta.data(), a.gathered.data());
  for_tokens(num_tokens, [&](int64_t t0, int64_t t1) {
    float* const delta = a.delta.data() + t0 * hidden;
    add_bias(delta, t1 - t0, hidden, hidden, l.o_bias);
    if (!l.attention_output_norm.empty())
      rms_norm(delta, t1 - t0, hidden, hidden, l.attention_output_norm.data(), eps, delta, hidden);
    add_residual(h + t0 * hidden, delta, static_cast<size_t>((t1 - t0) * hidden));
  });
}

// h += mlp(post_attention_layernorm(h)) (with sandwich norms mlp_output_norm(mlp(...))): the dense
// gated MLP, or the sparse MoE block on the layers that have one.
void CausalLM::feed_forward_block(const DecoderLayerWeights& l, Activations& a, int32_t* routed,
                                  int64_t routed_stride) const {
  const int64_t num_tokens = a.num_tokens;
  const int64_t hidden = config_.hidden_size;
  const auto eps = static_cast<float>(config_.rms_norm_eps);
  for_tokens(num_tokens, [&](int64_t t0, int64_t t1) {
    rms_norm(a.h.data() + t0 * hidden, t1 - t0, hidden, hidden, l.post_attention_layernorm.data(), eps,
             a.x.data() + t0 * hidden, hidden);
  });
  if (l.is_moe()) {
    moe_block(l, a.x.data(), num_tokens, a.delta_local.data(), a.moe.data(), routed, routed_stride);
  } else {
    mlp_block(l, a);
  }
  gather_columns(a.delta_local.data(), num_tokens, shard_.hidden, a.delta.data(), a.gathered.data());
  for_tokens(num_tokens, [&](int64_t t0, int64_t t1) {
    float* const delta = a.delta.data() + t0 * hidden;
    add_bias(delta, t1 - t0, hidden, hidden, l.down_bias);
    if (!l.mlp_output_norm.empty())
      rms_norm(delta, t1 - t0, hidden, hidden, l.mlp_output_norm.data(), eps, delta, hidden);
    add_residual(a.h.data() + t0 * hidden, delta, static_cast<size_t>((t1 - t0) * hidden));
  });
}

// delta_local = down_proj(act(gate_proj(x)) · up_proj(x)) (+ gate/up biases; down_bias is added by
// the caller), act being silu or GELU(tanh) (hidden_act): this rank's features of act·up, gathered,
// then its columns of down_proj.
void CausalLM::mlp_block(const DecoderLayerWeights& l, Activations& a) const {
  const int64_t num_tokens = a.num_tokens;
  const int64_t hidden = config_.hidden_size;
  const int64_t inter = shard_.intermediate;
  float* const gate_up = a.gate_up.data();
  const bool gelu = config_.hidden_act == "gelu_pytorch_tanh";
  linear(a.x.data(), num_tokens, hidden, l.gate_up_proj, gate_up, 2 * inter, pool_);
  for_tokens(num_tokens, [&](int64_t t0, int64_t t1) {
    add_bias(gate_up + t0 * 2 * inter, t1 - t0, 2 * inter, 2 * inter, l.gate_up_bias);
    if (gelu) {
      gelu_tanh_mul(gate_up + t0 * 2 * inter, t1 - t0, inter, 2 * inter, a.act_local.data() + t0 * inter, inter);
    } else {
      silu_mul(gate_up + t0 * 2 * inter, t1 - t0, inter, 2 * inter, a.act_local.data() + t0 * inter, inter);
    }
  });
  gather_columns(a.act_local.data(), num_tokens, inter, a.act.data(), a.gathered.data(), &l.down_proj);
  linear(a.act.data(), num_tokens, config_.intermediate_size, l.down_proj, a.delta_local.data(), shard_.hidden, pool_);
}

// logits = lm_head(norm(h)), only for the rows batch.logits_indices; a tied head is the embedding.
// Under tensor parallelism each rank computes its vocabulary rows and rank 0 assembles them.
void CausalLM::final_norm_and_lm_head(const ForwardBatch& batch, const Activations& a, float* logits,
                                      float* hidden) const {
  const ModelConfig& c = config_;
  const int64_t hidden_size = c.hidden_size;
  const auto norm = [&](int32_t row, float* out) {
    rms_norm_row(a.h.data() + row * hidden_size, hidden_size, norm_.data(), static_cast<float>(c.rms_norm_eps), out);
  };
  if (hidden != nullptr)  // rank 0 (only its caller asks): every rank holds the whole residual stream
    for (size_t i = 0; i < batch.hidden_indices.size(); ++i)
      norm(batch.hidden_indices[i], hidden + static_cast<int64_t>(i) * hidden_size);
  const auto num_logits = static_cast<int64_t>(batch.logits_indices.size());
  if (num_logits == 0) return;  // a step of pooling requests only: no rank runs the LM head
  std::vector<float> final_x(static_cast<size_t>(num_logits * hidden_size));  // [num_logits, hidden_size] f32
  for (int64_t i = 0; i < num_logits; ++i) norm(batch.logits_indices[i], final_x.data() + i * hidden_size);
  const LinearWeight& head = c.tie_word_embeddings ? embed_tokens_ : lm_head_;
  if (shard_.size == 1)
    return linear(final_x.data(), num_logits, hidden_size, head, logits, c.vocab_size, pool_, StepPhase::kLmHead);
  const int64_t width = shard_.vocab_end - shard_.vocab_begin;
  std::vector<float> local(static_cast<size_t>(num_logits * width));  // [num_logits, width] f32
  linear(final_x.data(), num_logits, hidden_size, head, local.data(), width, pool_, StepPhase::kLmHead);
  gather_logits(local.data(), num_logits, logits);
}

void CausalLM::gather_logits(const float* local, int64_t num_logits, float* logits) const {
  const int64_t vocab = config_.vocab_size;
  if (shard_.rank != 0) {
    const int64_t width = shard_.vocab_end - shard_.vocab_begin;
    return tp_->send_to(0, local, static_cast<size_t>(num_logits * width) * sizeof(float));
  }
  std::vector<float> received;
  for (int r = 0; r < shard_.size; ++r) {
    const auto [begin, end] = TensorParallelShard::vocab_range(vocab, r, shard_.size);
    const float* from = local;
    if (r != 0) {
      received.resize(static_cast<size_t>(num_logits * (end - begin)));
      tp_->receive_from(r, received.data(), received.size() * sizeof(float));
      from = received.data();
    }
    for (int64_t i = 0; i < num_logits; ++i)
      std::memcpy(logits + i * vocab + begin, from + i * (end - begin),
                  static_cast<size_t>(end - begin) * sizeof(float));
  }
}

}  // namespace ditto
