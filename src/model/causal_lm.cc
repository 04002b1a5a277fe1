#include "model/causal_lm.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <span>
#include <string>

#include "core/error.h"
#include "core/memory_info.h"
#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/embedding.h"
#include "kernels/gemm.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"
#include "kernels/softmax.h"
#include "model/rope_frequencies.h"
#include "model/safetensors.h"

namespace ditto {
namespace {

// A 1-D tensor (norm weight, bias) converted to float32; its mapped pages are released.
std::vector<float> load_vector(const WeightStore& store, const std::string& name) {
  const TensorInfo& t = store.get(name);
  std::vector<float> v(static_cast<size_t>(t.numel()));
  const size_t es = dtype_size(t.dtype);
  for (size_t i = 0; i < v.size(); ++i) {
    uint8_t bytes[4];
    std::memcpy(bytes, t.data + i * es, es);  // mmap data need not be aligned
    v[i] = load_as_f32(bytes, t.dtype, 0);
  }
  store.release(t);
  return v;
}

// The row-wise concatenation of 2-D tensors `names`, packed; their mapped pages are released.
PackedMatrix load_matrix(const WeightStore& store, const std::vector<std::string>& names, ThreadPool* pool) {
  std::vector<MatrixSource> parts;
  std::vector<const TensorInfo*> infos;
  for (const std::string& name : names) {
    const TensorInfo& t = store.get(name);
    infos.push_back(&t);
    if (!parts.empty() && t.dtype != parts[0].dtype)
      throw_invalid_argument("tensor '" + name + "' has dtype " + std::string(dtype_name(t.dtype)) +
                             " but '" + names[0] + "', fused with it, has " +
                             std::string(dtype_name(parts[0].dtype)));
    parts.push_back(MatrixSource{t.data, t.dtype, t.shape[0], t.shape[1]});
  }
  const auto release_rows = [&](size_t part, int64_t row_begin, int64_t row_end) {
    const TensorInfo& t = *infos[part];
    const size_t row_bytes = static_cast<size_t>(t.shape[1]) * dtype_size(t.dtype);
    t.file->release(t.file_offset + static_cast<size_t>(row_begin) * row_bytes,
                    static_cast<size_t>(row_end - row_begin) * row_bytes);
  };
  PackedMatrix packed = pack_matrix(parts, pool, release_rows);
  for (const TensorInfo* t : infos) store.release(*t);
  return packed;
}

std::vector<float> concat(std::vector<std::vector<float>> parts) {
  std::vector<float> out;
  for (auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// y[r, :] += bias for rows × [n] with row stride ld.
void add_bias(float* y, int64_t rows, int64_t n, int64_t ld, const std::vector<float>& bias) {
  if (bias.empty()) return;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i) y[r * ld + i] += bias[i];
}

// Runs fn over token ranges [t0, t1) covering [0, num_tokens), split over the pool. Token-wise
// work only: each token's values are computed by one thread in the same order whatever the split.
void split_tokens(ThreadPool* pool, int64_t num_tokens, const std::function<void(int64_t t0, int64_t t1)>& fn) {
  if (pool == nullptr || num_tokens == 1) return fn(0, num_tokens);
  pool->parallel_for(static_cast<size_t>(num_tokens),
                     [&](size_t b, size_t e) { fn(static_cast<int64_t>(b), static_cast<int64_t>(e)); });
}

void add_residual(float* h, const float* delta, size_t count) {
  for (size_t i = 0; i < count; ++i) h[i] += delta[i];
}

}  // namespace

std::unique_ptr<CausalLM> CausalLM::load(const std::string& model_dir, ThreadPool* pool) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<CausalLM> m(new CausalLM());
  m->pool_ = pool;
  m->config_ = load_model_config(model_dir + "/config.json");
  const ModelConfig& c = m->config_;
  const WeightStore store = WeightStore::open(model_dir);
  validate_weights(c, store);
  // The packed weights are one anonymous copy (each tensor's mapped pages are released once it
  // is packed), so loading needs about the checkpoint's size. Refuse now, with the numbers, rather
  // than be killed for memory halfway.
  if (const std::optional<int64_t> available = mem_available_bytes(); available && store.total_bytes() > *available)
    throw Error(ErrorCode::kResourceExhausted,
                model_dir + ": the weights need " + format_gib(store.total_bytes()) + " of memory, but " +
                    format_gib(*available) + " is available (MemAvailable, /proc/meminfo); free memory or use a "
                    "machine with more");
  m->load_stats_.num_tensors = static_cast<int64_t>(expected_tensors(c).size());
  m->load_stats_.weight_bytes = store.total_bytes();
  m->inv_freq_ = rope_inv_freq(c);

  m->embed_tokens_ = load_matrix(store, {"model.embed_tokens.weight"}, pool);
  m->layers_.resize(static_cast<size_t>(c.num_hidden_layers));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    DecoderLayerWeights& l = m->layers_[static_cast<size_t>(i)];
    l.input_layernorm = load_vector(store, p + "input_layernorm.weight");
    l.qkv_proj = load_matrix(store, {p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight",
                                     p + "self_attn.v_proj.weight"}, pool);
    l.o_proj = load_matrix(store, {p + "self_attn.o_proj.weight"}, pool);
    if (c.attention_bias) {
      l.qkv_bias = concat({load_vector(store, p + "self_attn.q_proj.bias"), load_vector(store, p + "self_attn.k_proj.bias"),
                           load_vector(store, p + "self_attn.v_proj.bias")});
      l.o_bias = load_vector(store, p + "self_attn.o_proj.bias");
    }
    if (c.has_qk_norm()) {
      l.q_norm = load_vector(store, p + "self_attn.q_norm.weight");
      l.k_norm = load_vector(store, p + "self_attn.k_norm.weight");
    }
    l.post_attention_layernorm = load_vector(store, p + "post_attention_layernorm.weight");
    if (c.is_moe_layer(i)) {
      l.router = load_matrix(store, {p + "mlp.gate.weight"}, pool);
      l.experts.resize(static_cast<size_t>(c.num_experts));
      for (int64_t e = 0; e < c.num_experts; ++e) {
        const std::string q = p + "mlp.experts." + std::to_string(e) + ".";
        ExpertWeights& x = l.experts[static_cast<size_t>(e)];
        x.gate_up_proj = load_matrix(store, {q + "gate_proj.weight", q + "up_proj.weight"}, pool);
        x.down_proj = load_matrix(store, {q + "down_proj.weight"}, pool);
      }
      continue;
    }
    l.gate_up_proj = load_matrix(store, {p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"}, pool);
    l.down_proj = load_matrix(store, {p + "mlp.down_proj.weight"}, pool);
    if (c.mlp_bias) {
      l.gate_up_bias = concat({load_vector(store, p + "mlp.gate_proj.bias"), load_vector(store, p + "mlp.up_proj.bias")});
      l.down_bias = load_vector(store, p + "mlp.down_proj.bias");
    }
  }
  m->norm_ = load_vector(store, "model.norm.weight");
  if (!c.tie_word_embeddings) m->lm_head_ = load_matrix(store, {"lm_head.weight"}, pool);
  m->load_stats_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return m;
}

int64_t CausalLM::decode_weight_bytes() const {
  auto matrix = [](const PackedMatrix& w) {
    return w.n * w.k * static_cast<int64_t>(dtype_size(w.dtype));
  };
  auto vec = [](const std::vector<float>& v) { return static_cast<int64_t>(v.size() * sizeof(float)); };
  int64_t bytes = vec(norm_) + matrix(config_.tie_word_embeddings ? embed_tokens_ : lm_head_);
  for (const DecoderLayerWeights& l : layers_) {
    bytes += matrix(l.qkv_proj) + matrix(l.o_proj);
    if (l.is_moe()) {  // the router, and k experts of equal size
      bytes += matrix(l.router) + config_.num_experts_per_tok * (matrix(l.experts[0].gate_up_proj) +
                                                                  matrix(l.experts[0].down_proj));
    } else {
      bytes += matrix(l.gate_up_proj) + matrix(l.down_proj);
    }
    bytes += vec(l.input_layernorm) + vec(l.post_attention_layernorm) + vec(l.q_norm) + vec(l.k_norm);
    bytes += vec(l.qkv_bias) + vec(l.o_bias) + vec(l.gate_up_bias) + vec(l.down_bias);
  }
  return bytes;
}

size_t CausalLM::moe_scratch_floats(int64_t num_tokens) const {
  const ModelConfig& c = config_;
  const auto t = static_cast<size_t>(num_tokens);
  const auto rows = t * static_cast<size_t>(c.num_experts_per_tok);  // (token, expert) pairs
  const auto hidden = static_cast<size_t>(c.hidden_size);
  const auto mi = static_cast<size_t>(c.moe_intermediate_size);
  return t * static_cast<size_t>(c.num_experts) + rows * (hidden + 2 * mi + mi + hidden);
}

void CausalLM::moe_block(const DecoderLayerWeights& l, const float* x, int64_t num_tokens, float* delta,
                         float* scratch) const {
  const ModelConfig& c = config_;
  const int64_t num_experts = c.num_experts;
  const int64_t k = c.num_experts_per_tok;
  const int64_t hidden = c.hidden_size;
  const int64_t mi = c.moe_intermediate_size;
  const int64_t rows = num_tokens * k;
  float* probs = scratch;                    // [num_tokens, num_experts] router logits, then softmax
  float* xg = probs + num_tokens * num_experts;  // [rows, hidden] x gathered by expert
  float* gate_up = xg + rows * hidden;       // [rows, 2·mi]
  float* act = gate_up + rows * 2 * mi;      // [rows, mi]
  float* y = act + rows * mi;                // [rows, hidden] expert outputs
  auto for_tokens = [&](const std::function<void(int64_t t0, int64_t t1)>& fn) {
    split_tokens(pool_, num_tokens, fn);
  };

  // Routing: per token, its k experts (ascending id) and weights.
  gemm(x, num_tokens, hidden, l.router, probs, num_experts, pool_);
  std::vector<int32_t> expert(static_cast<size_t>(rows));  // [num_tokens, k] ascending expert id
  std::vector<float> weight(static_cast<size_t>(rows));    // [num_tokens, k] matching weights
  for_tokens([&](int64_t t0, int64_t t1) {
    std::vector<int32_t> order(static_cast<size_t>(num_experts));
    std::vector<std::pair<int32_t, float>> picked(static_cast<size_t>(k));
    for (int64_t t = t0; t < t1; ++t) {
      float* p = probs + t * num_experts;
      softmax_row(p, num_experts, p);
      for (int64_t e = 0; e < num_experts; ++e) order[static_cast<size_t>(e)] = static_cast<int32_t>(e);
      // (probability desc, id asc); NaN ranks last, so the order is a strict weak one.
      auto key = [&](int32_t e) { return std::isnan(p[e]) ? -INFINITY : p[e]; };
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
        return key(a) > key(b) || (key(a) == key(b) && a < b);
      });
      float sum = 0.0f;
      for (int64_t j = 0; j < k; ++j) sum += p[order[static_cast<size_t>(j)]];
      for (int64_t j = 0; j < k; ++j) {
        const int32_t e = order[static_cast<size_t>(j)];
        picked[static_cast<size_t>(j)] = {e, c.norm_topk_prob ? p[e] / sum : p[e]};
      }
      std::sort(picked.begin(), picked.end());
      for (int64_t j = 0; j < k; ++j) {
        expert[static_cast<size_t>(t * k + j)] = picked[static_cast<size_t>(j)].first;
        weight[static_cast<size_t>(t * k + j)] = picked[static_cast<size_t>(j)].second;
      }
    }
  });

  // Group the (token, expert) pairs by expert (counting sort; tokens ascending within an expert).
  std::vector<int64_t> begin(static_cast<size_t>(num_experts) + 1, 0);
  for (int32_t e : expert) ++begin[static_cast<size_t>(e) + 1];
  for (int64_t e = 0; e < num_experts; ++e) begin[static_cast<size_t>(e) + 1] += begin[static_cast<size_t>(e)];
  std::vector<int64_t> fill(begin.begin(), begin.end() - 1);
  std::vector<int64_t> row_of(static_cast<size_t>(rows));  // pair (t, j) → its row in xg / y
  for (int64_t i = 0; i < rows; ++i) row_of[static_cast<size_t>(i)] = fill[static_cast<size_t>(expert[static_cast<size_t>(i)])]++;
  for_tokens([&](int64_t t0, int64_t t1) {
    for (int64_t i = t0 * k; i < t1 * k; ++i)
      std::memcpy(xg + row_of[static_cast<size_t>(i)] * hidden, x + (i / k) * hidden, static_cast<size_t>(hidden) * sizeof(float));
  });

  // Each expert over its tokens: its weights are read once for all of them.
  for (int64_t e = 0; e < num_experts; ++e) {
    const int64_t r0 = begin[static_cast<size_t>(e)];
    const int64_t m = begin[static_cast<size_t>(e) + 1] - r0;
    if (m == 0) continue;
    const ExpertWeights& w = l.experts[static_cast<size_t>(e)];
    gemm(xg + r0 * hidden, m, hidden, w.gate_up_proj, gate_up + r0 * 2 * mi, 2 * mi, pool_);
    silu_mul(gate_up + r0 * 2 * mi, m, mi, 2 * mi, act + r0 * mi, mi);
    gemm(act + r0 * mi, m, mi, w.down_proj, y + r0 * hidden, hidden, pool_);
  }

  // Combine: Σ over the token's experts in ascending id of weight · output, from +0.
  for_tokens([&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* out = delta + t * hidden;
      std::fill(out, out + hidden, 0.0f);
      for (int64_t j = 0; j < k; ++j) {
        const float w = weight[static_cast<size_t>(t * k + j)];
        const float* yr = y + row_of[static_cast<size_t>(t * k + j)] * hidden;
        for (int64_t i = 0; i < hidden; ++i) out[i] += w * yr[i];
      }
    }
  });
}

void CausalLM::forward(const ForwardBatch& batch, KvCache& cache, float* logits) const {
  const ModelConfig& c = config_;
  const int64_t num_tokens = batch.num_tokens();
  DITTO_CHECK(static_cast<int64_t>(batch.positions.size()) == num_tokens &&
              static_cast<int64_t>(batch.slot_mapping.size()) == num_tokens &&
              static_cast<int64_t>(batch.token_seq.size()) == num_tokens);
  for (int32_t row : batch.logits_indices) DITTO_CHECK(row >= 0 && row < num_tokens);
  for (int32_t pos : batch.positions) {
    if (pos < 0 || pos >= c.max_position_embeddings)
      throw_invalid_argument("position " + std::to_string(pos) + " is outside the model's context [0, " +
                             std::to_string(c.max_position_embeddings) + ") (max_position_embeddings)");
  }
  if (num_tokens == 0) return;

  const int64_t hidden = c.hidden_size;
  const int64_t head_dim = c.head_dim;
  const int64_t q_dim = c.num_attention_heads * head_dim;
  const int64_t kv_dim = c.num_key_value_heads * head_dim;
  const int64_t qkv_dim = q_dim + 2 * kv_dim;
  const int64_t inter = c.intermediate_size;
  const auto eps = static_cast<float>(c.rms_norm_eps);
  const AttentionShape shape{c.num_attention_heads, c.num_key_value_heads, head_dim, cache.block_size(),
                             static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)))};

  const auto n = static_cast<size_t>(num_tokens);
  // Activations live in one arena reused across calls (it only grows), so a prefill does not pay
  // for fresh zeroed pages on every step.
  const size_t sizes[] = {n * hidden, n * hidden, n * qkv_dim, n * q_dim, n * 2 * inter, n * inter,
                          n * hidden, n * head_dim, c.is_moe() ? moe_scratch_floats(num_tokens) : 0};
  size_t total = 0;
  for (size_t sz : sizes) total += sz;
  if (arena_.size() < total) arena_.resize(total);
  float* next = arena_.data();
  auto take = [&](size_t count) {
    std::span<float> out(next, count);
    next += count;
    return out;
  };
  std::span<float> h = take(sizes[0]);        // [num_tokens, hidden_size] residual stream
  std::span<float> x = take(sizes[1]);        // [num_tokens, hidden_size] normed input
  std::span<float> qkv = take(sizes[2]);      // [num_tokens, q_dim + 2·kv_dim]
  std::span<float> attn = take(sizes[3]);     // [num_tokens, q_dim]
  std::span<float> gate_up = take(sizes[4]);  // [num_tokens, 2·intermediate_size]
  std::span<float> act = take(sizes[5]);      // [num_tokens, intermediate_size]
  std::span<float> delta = take(sizes[6]);    // [num_tokens, hidden_size] a sublayer's output
  std::span<float> cos_sin = take(sizes[7]);  // [num_tokens, 2, head_dim / 2]
  std::span<float> moe = take(sizes[8]);      // moe_block's scratch

  embedding(embed_tokens_, batch.token_ids.data(), num_tokens, h.data());
  rope_cos_sin(batch.positions.data(), num_tokens, inv_freq_, cos_sin.data());

  // Token-wise work (norms, RoPE, KV writes, activations, residual adds) is split over tokens;
  // each token's values are computed by one thread in the same order whatever the split.
  auto for_tokens = [&](const std::function<void(int64_t t0, int64_t t1)>& fn) {
    split_tokens(pool_, num_tokens, fn);
  };

  for (int64_t li = 0; li < c.num_hidden_layers; ++li) {
    const DecoderLayerWeights& l = layers_[static_cast<size_t>(li)];
    KvCacheLayer kv = cache.layer(li);
    // Attention block.
    for_tokens([&](int64_t t0, int64_t t1) {
      rms_norm(h.data() + t0 * hidden, t1 - t0, hidden, hidden, l.input_layernorm.data(), eps,
               x.data() + t0 * hidden, hidden);
    });
    gemm(x.data(), num_tokens, hidden, l.qkv_proj, qkv.data(), qkv_dim, pool_);
    for_tokens([&](int64_t t0, int64_t t1) {
      add_bias(qkv.data() + t0 * qkv_dim, t1 - t0, qkv_dim, qkv_dim, l.qkv_bias);
      for (int64_t t = t0; t < t1; ++t) {
        float* q = qkv.data() + t * qkv_dim;
        float* k = q + q_dim;
        if (c.has_qk_norm()) {
          rms_norm(q, c.num_attention_heads, head_dim, head_dim, l.q_norm.data(), eps, q, head_dim);
          rms_norm(k, c.num_key_value_heads, head_dim, head_dim, l.k_norm.data(), eps, k, head_dim);
        }
        rope_apply(q, c.num_attention_heads, head_dim, cos_sin.data() + t * head_dim);
        rope_apply(k, c.num_key_value_heads, head_dim, cos_sin.data() + t * head_dim);
      }
      write_kv(qkv.data() + t0 * qkv_dim + q_dim, qkv_dim, qkv.data() + t0 * qkv_dim + q_dim + kv_dim,
               qkv_dim, batch.slot_mapping.data() + t0, t1 - t0, kv_dim, kv);
    });
    paged_attention(qkv.data(), qkv_dim, batch.positions.data(), batch.token_seq.data(), num_tokens,
                    batch.block_tables.data(), batch.max_blocks_per_seq, kv, shape, attn.data(), q_dim, pool_);
    gemm(attn.data(), num_tokens, q_dim, l.o_proj, delta.data(), hidden, pool_);
    // Residual add, then the MLP block (SwiGLU).
    for_tokens([&](int64_t t0, int64_t t1) {
      add_bias(delta.data() + t0 * hidden, t1 - t0, hidden, hidden, l.o_bias);
      add_residual(h.data() + t0 * hidden, delta.data() + t0 * hidden, static_cast<size_t>((t1 - t0) * hidden));
      rms_norm(h.data() + t0 * hidden, t1 - t0, hidden, hidden, l.post_attention_layernorm.data(), eps,
               x.data() + t0 * hidden, hidden);
    });
    if (l.is_moe()) {
      moe_block(l, x.data(), num_tokens, delta.data(), moe.data());
    } else {
      gemm(x.data(), num_tokens, hidden, l.gate_up_proj, gate_up.data(), 2 * inter, pool_);
      for_tokens([&](int64_t t0, int64_t t1) {
        add_bias(gate_up.data() + t0 * 2 * inter, t1 - t0, 2 * inter, 2 * inter, l.gate_up_bias);
        silu_mul(gate_up.data() + t0 * 2 * inter, t1 - t0, inter, 2 * inter, act.data() + t0 * inter, inter);
      });
      gemm(act.data(), num_tokens, inter, l.down_proj, delta.data(), hidden, pool_);
    }
    for_tokens([&](int64_t t0, int64_t t1) {
      add_bias(delta.data() + t0 * hidden, t1 - t0, hidden, hidden, l.down_bias);
      add_residual(h.data() + t0 * hidden, delta.data() + t0 * hidden, static_cast<size_t>((t1 - t0) * hidden));
    });
  }

  // Final norm and LM head, only for the rows whose logits are wanted.
  const auto num_logits = static_cast<int64_t>(batch.logits_indices.size());
  std::vector<float> final_x(static_cast<size_t>(num_logits * hidden));  // [num_logits, hidden_size]
  for (int64_t i = 0; i < num_logits; ++i)
    rms_norm_row(h.data() + batch.logits_indices[i] * hidden, hidden, norm_.data(), eps, final_x.data() + i * hidden);
  const PackedMatrix& head = c.tie_word_embeddings ? embed_tokens_ : lm_head_;
  gemm(final_x.data(), num_logits, hidden, head, logits, c.vocab_size, pool_);
}

}  // namespace ditto
