// What one rank of a tensor-parallel group holds of a model (docs/SCALING.md, docs/INVARIANCE.md):
// every linear layer is split over its output features only, so each output value is computed by
// the same chain of FMAs as in one process, and the inputs a rank needs are all-gathered.
//
//   q/k/v_proj (and their biases): the rank's num_attention_heads / N query heads and
//     num_key_value_heads / N KV heads (rank r: heads [r·H/N, (r+1)·H/N)); its KV cache holds only
//     those KV heads;
//   o_proj, down_proj, an expert's down_proj: hidden_size / N output rows;
//   gate/up_proj (and biases): intermediate_size / N features of each; an expert's gate/up:
//     moe_intermediate_size / N;
//   embed_tokens and lm_head: vocabulary rows [r·V/N, (r+1)·V/N) (uneven splits allowed);
//   norms, o/down biases and the MoE router: whole on every rank.
#pragma once

#include <cstdint>
#include <utility>

#include "architecture/config.h"
#include "architecture/model_tensors.h"

namespace ditto {

struct TensorParallelShard {
  int rank = 0;
  int size = 1;
  int64_t num_heads = 0;         // query heads held: num_attention_heads / size
  int64_t num_kv_heads = 0;      // KV heads held: num_key_value_heads / size
  int64_t hidden = 0;            // o_proj / down_proj outputs computed: hidden_size / size
  int64_t intermediate = 0;      // gate and up features each: intermediate_size / size
  int64_t moe_intermediate = 0;  // an expert's gate and up features each: moe_intermediate_size / size
  int64_t vocab_begin = 0;       // embedding and LM head rows [vocab_begin, vocab_end)
  int64_t vocab_end = 0;

  // Rank `rank` of `size` for config c. Throws Error(kInvalidArgument) naming the config key when
  // `size` does not divide num_attention_heads, num_key_value_heads, hidden_size,
  // intermediate_size (models with dense MLP layers) or moe_intermediate_size (MoE models), or
  // when the vocabulary has fewer tokens than ranks.
  static TensorParallelShard of(const ModelConfig& c, int rank, int size);

  // Vocabulary rows [first, second) of rank r: [r·V/size, (r+1)·V/size).
  static std::pair<int64_t, int64_t> vocab_range(int64_t vocab_size, int r, int size);

  // Rows [first, second) of checkpoint tensor t that this rank keeps; `part` is t's index among
  // the tensors fused into its slot (q 0, k 1, v 2; gate 0, up 1). Vectors count elements.
  std::pair<int64_t, int64_t> rows(const ModelConfig& c, const TensorDesc& t, size_t part) const;
};

}  // namespace ditto
