#include "model/tensor_parallel_shard.h"

#include <string>

#include "core/error.h"

namespace ditto {
namespace {

int64_t split(int64_t total, int size, const std::string& key) {
  if (total % size != 0)
    throw_invalid_argument("tensor_parallel_size " + std::to_string(size) + " does not divide the model's " + key +
                           " (" + std::to_string(total) +
                           "): every rank must hold the same share of each "
                           "layer; choose a size that divides it");
  return total / size;
}

}  // namespace

std::pair<int64_t, int64_t> TensorParallelShard::vocab_range(int64_t vocab_size, int r, int size) {
  return {vocab_size * r / size, vocab_size * (r + 1) / size};
}

TensorParallelShard TensorParallelShard::of(const ModelConfig& c, int rank, int size) {
  DITTO_CHECK(size >= 1 && rank >= 0 && rank < size);
  TensorParallelShard s;
  s.rank = rank;
  s.size = size;
  s.num_heads = split(c.num_attention_heads, size, "num_attention_heads");
  s.num_kv_heads = split(c.num_key_value_heads, size, "num_key_value_heads");
  s.hidden = split(c.hidden_size, size, "hidden_size");
  bool dense = false;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) dense = dense || !c.is_moe_layer(l);
  s.intermediate = dense ? split(c.intermediate_size, size, "intermediate_size") : 0;
  s.moe_intermediate = c.is_moe() ? split(c.moe_intermediate_size, size, "moe_intermediate_size") : 0;
  if (c.vocab_size < size)
    throw_invalid_argument("tensor_parallel_size " + std::to_string(size) + " is larger than the vocabulary (" +
                           std::to_string(c.vocab_size) + " tokens, vocab_size)");
  std::tie(s.vocab_begin, s.vocab_end) = vocab_range(c.vocab_size, rank, size);
  return s;
}

std::pair<int64_t, int64_t> TensorParallelShard::rows(const ModelConfig& c, const TensorDesc& t, size_t part) const {
  const int64_t whole = t.shape[0];
  if (size == 1) return {0, whole};
  const auto slice = [&](int64_t per_rank) {
    return std::pair<int64_t, int64_t>{rank * per_rank, (rank + 1) * per_rank};
  };
  switch (t.slot) {
    case WeightSlot::kQkvProj:
    case WeightSlot::kQkvBias: return slice((part == 0 ? num_heads : num_kv_heads) * c.head_dim);
    case WeightSlot::kOProj:
    case WeightSlot::kDownProj:
    case WeightSlot::kExpertDownProj: return slice(hidden);
    case WeightSlot::kGateUpProj:
    case WeightSlot::kGateUpBias: return slice(intermediate);
    case WeightSlot::kExpertGateUpProj: return slice(moe_intermediate);
    case WeightSlot::kEmbedTokens:
    case WeightSlot::kLmHead: return {vocab_begin, vocab_end};
    default: return {0, whole};
  }
}

}  // namespace ditto
