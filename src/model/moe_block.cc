// CausalLM's sparse MoE block (the canonical routing of causal_lm.h's file comment).
#include "model/causal_lm.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "kernels/activation.h"
#include "kernels/softmax.h"
#include "model/linear.h"

namespace ditto {

size_t CausalLM::moe_scratch_floats(int64_t num_tokens) const {
  const ModelConfig& c = config_;
  const auto t = static_cast<size_t>(num_tokens);
  const auto rows = t * static_cast<size_t>(c.num_experts_per_tok);  // (token, expert) pairs
  const auto hidden = static_cast<size_t>(c.hidden_size);
  const auto mi = static_cast<size_t>(c.moe_intermediate_size);
  const auto mi_local = static_cast<size_t>(shard_.moe_intermediate);
  const auto hidden_local = static_cast<size_t>(shard_.hidden);
  // probs, xg, gate_up, act (every rank's), y; under tensor parallelism also act (this rank's)
  // and the all-gather's landing space
  const size_t split = shard_.size > 1 ? rows * (mi_local + mi) : 0;
  return t * static_cast<size_t>(c.num_experts) + rows * (hidden + 2 * mi_local + mi + hidden_local) + split;
}

void CausalLM::moe_block(const DecoderLayerWeights& l, const float* x, int64_t num_tokens, float* delta, float* scratch,
                         int32_t* routed, int64_t routed_stride) const {
  const ModelConfig& c = config_;
  const int64_t num_experts = c.num_experts;
  const int64_t k = c.num_experts_per_tok;
  const int64_t hidden = c.hidden_size;
  const int64_t mi = c.moe_intermediate_size;
  const int64_t mi_local = shard_.moe_intermediate;  // this rank's features of each expert
  const int64_t out = shard_.hidden;                 // this rank's output columns
  const int64_t rows = num_tokens * k;
  float* probs = scratch;                        // [num_tokens, num_experts] f32 router logits, then softmax
  float* xg = probs + num_tokens * num_experts;  // [rows, hidden] f32 x gathered by expert
  float* gate_up = xg + rows * hidden;           // [rows, 2·mi_local] f32
  float* act = gate_up + rows * 2 * mi_local;    // [rows, mi] f32 every rank's features
  float* y = act + rows * mi;                    // [rows, out] f32 expert outputs, this rank's columns
  float* act_local = shard_.size > 1 ? y + rows * out : act;  // [rows, mi_local] f32
  float* landing = act_local + rows * mi_local;               // [size · rows · mi_local] f32
  // Routing: per token, its k experts (ascending id) and weights. Every rank routes the whole
  // batch with the whole router, so every rank picks the same experts.
  linear(x, num_tokens, hidden, l.router, probs, num_experts, pool_);
  std::vector<int32_t> expert(static_cast<size_t>(rows));  // [num_tokens, k] ascending expert id
  std::vector<float> weight(static_cast<size_t>(rows));    // [num_tokens, k] matching weights
  for_tokens(num_tokens, [&](int64_t t0, int64_t t1) {
    std::vector<int32_t> order(static_cast<size_t>(num_experts));
    std::vector<std::pair<int32_t, float>> picked(static_cast<size_t>(k));
    for (int64_t t = t0; t < t1; ++t) {
      float* p = probs + t * num_experts;
      softmax_row(p, num_experts, p);
      for (int64_t e = 0; e < num_experts; ++e) order[static_cast<size_t>(e)] = static_cast<int32_t>(e);
      // (probability desc, id asc); NaN ranks last, so the order is a strict weak one.
      auto key = [&](int32_t e) { return std::isnan(p[e]) ? -INFINITY : p[e]; };
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [&](int32_t a, int32_t b) { return key(a) > key(b) || (key(a) == key(b) && a < b); });
      if (routed != nullptr)  // the router's order, before the combine's ascending id
        std::copy(order.begin(), order.begin() + k, routed + t * routed_stride);
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
  for (int64_t i = 0; i < rows; ++i)
    row_of[static_cast<size_t>(i)] = fill[static_cast<size_t>(expert[static_cast<size_t>(i)])]++;
  for_tokens(num_tokens, [&](int64_t t0, int64_t t1) {
    for (int64_t i = t0 * k; i < t1 * k; ++i)
      std::memcpy(xg + row_of[static_cast<size_t>(i)] * hidden, x + (i / k) * hidden,
                  static_cast<size_t>(hidden) * sizeof(float));
  });

  // Each expert over its tokens: its weights are read once for all of them. Under tensor
  // parallelism each rank computes its features of silu(gate)·up, the ranks gather all of them,
  // and each computes its columns of down_proj.
  for (int64_t e = 0; e < num_experts; ++e) {
    const int64_t r0 = begin[static_cast<size_t>(e)];
    const int64_t m = begin[static_cast<size_t>(e) + 1] - r0;
    if (m == 0) continue;
    const ExpertWeights& w = l.experts[static_cast<size_t>(e)];
    linear(xg + r0 * hidden, m, hidden, w.gate_up_proj, gate_up + r0 * 2 * mi_local, 2 * mi_local, pool_);
    silu_mul(gate_up + r0 * 2 * mi_local, m, mi_local, 2 * mi_local, act_local + r0 * mi_local, mi_local);
  }
  bool down_rounds = true;  // every expert's down_proj takes bf16 inputs: gather bf16
  for (const ExpertWeights& w : l.experts) down_rounds = down_rounds && rounds_input_to_bf16(w.down_proj);
  gather_columns(act_local, rows, mi_local, act, landing, down_rounds ? &l.experts[0].down_proj : nullptr);
  for (int64_t e = 0; e < num_experts; ++e) {
    const int64_t r0 = begin[static_cast<size_t>(e)];
    const int64_t m = begin[static_cast<size_t>(e) + 1] - r0;
    if (m == 0) continue;
    linear(act + r0 * mi, m, mi, l.experts[static_cast<size_t>(e)].down_proj, y + r0 * out, out, pool_);
  }

  // Combine: Σ over the token's experts in ascending id of weight · output, from +0.
  for_tokens(num_tokens, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* o = delta + t * out;
      std::fill(o, o + out, 0.0f);
      for (int64_t j = 0; j < k; ++j) {
        const float w = weight[static_cast<size_t>(t * k + j)];
        const float* yr = y + row_of[static_cast<size_t>(t * k + j)] * out;
        for (int64_t i = 0; i < out; ++i) o[i] += w * yr[i];
      }
    }
  });
}

}  // namespace ditto
