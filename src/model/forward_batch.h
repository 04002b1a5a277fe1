// The flat batch a forward pass consumes: the tokens of every scheduled sequence, concatenated.
// There is no separate prefill or decode path: a prompt chunk and a decode step are both just
// tokens with positions, written to KV slots, attending to their sequence's blocks.
#pragma once

#include <cstdint>
#include <span>

namespace ditto {

struct ForwardBatch {
  std::span<const int32_t> token_ids;     // [num_tokens]
  std::span<const int32_t> positions;     // [num_tokens] absolute position in its sequence
  std::span<const int64_t> slot_mapping;  // [num_tokens] KV slot = block_id · block_size + offset
  std::span<const int32_t> token_seq;     // [num_tokens] row of block_tables this token belongs to
  std::span<const int32_t> block_tables;  // [num_seqs, max_blocks_per_seq] physical block ids
  int64_t max_blocks_per_seq = 0;
  std::span<const int32_t> logits_indices;  // [num_logits] flat-batch rows whose logits are wanted
  // [num_hidden] flat-batch rows whose final-normed hidden state is wanted (pooling: embeddings);
  // read on rank 0 only (every rank holds the whole residual stream), so it is not sent to the others.
  std::span<const int32_t> hidden_indices = {};

  int64_t num_tokens() const { return static_cast<int64_t>(token_ids.size()); }
};

}  // namespace ditto
