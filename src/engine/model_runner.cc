#include "engine/model_runner.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace ditto {

ModelRunner::ModelRunner(const CausalLM& model, int64_t num_blocks, int64_t block_size, bool record_routed_experts)
    : model_(model), cache_(model.make_kv_cache(num_blocks, block_size)) {
  if (record_routed_experts) {
    try {
      routed_experts_.emplace(model.config(), num_blocks * block_size);
    } catch (...) {
      model_.release_kv_cache(cache_);
      throw;
    }
  }
}

ModelRunner::~ModelRunner() { model_.release_kv_cache(cache_); }

StepOutputs ModelRunner::step(std::span<const SequenceStep> steps) {
  const int64_t block_size = cache_.block_size();
  int64_t max_blocks = 1;
  for (const SequenceStep& s : steps)
    max_blocks = std::max<int64_t>(max_blocks, static_cast<int64_t>(s.block_table.size()));

  std::vector<int32_t> token_ids, positions, token_seq, logits_indices, hidden_indices;
  std::vector<int64_t> slot_mapping;
  std::vector<int32_t> block_tables(steps.size() * static_cast<size_t>(max_blocks), 0);
  for (size_t si = 0; si < steps.size(); ++si) {
    const SequenceStep& s = steps[si];
    const auto n = static_cast<int64_t>(s.token_ids.size());
    if (n == 0) throw_invalid_argument("sequence step " + std::to_string(si) + " has no tokens");
    const int64_t end = s.start_position + n;
    if (s.start_position < 0 || end > static_cast<int64_t>(s.block_table.size()) * block_size)
      throw_invalid_argument("sequence step " + std::to_string(si) + ": block table of " +
                             std::to_string(s.block_table.size()) + " blocks cannot hold positions up to " +
                             std::to_string(end - 1));
    std::copy(s.block_table.begin(), s.block_table.end(), block_tables.begin() + si * max_blocks);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t pos = s.start_position + i;
      const auto row = static_cast<int32_t>(token_ids.size());
      if (s.logits && (s.all_logits || i == n - 1)) logits_indices.push_back(row);
      if (s.hidden == HiddenRows::kAll || (s.hidden == HiddenRows::kFirst && i == 0) ||
          (s.hidden == HiddenRows::kLast && i == n - 1))
        hidden_indices.push_back(row);
      token_ids.push_back(s.token_ids[i]);
      positions.push_back(static_cast<int32_t>(pos));
      token_seq.push_back(static_cast<int32_t>(si));
      slot_mapping.push_back(static_cast<int64_t>(s.block_table[pos / block_size]) * block_size + pos % block_size);
    }
  }
  ForwardBatch batch{token_ids,    positions,  slot_mapping,   token_seq,
                     block_tables, max_blocks, logits_indices, hidden_indices};
  StepOutputs out;
  out.logits.resize(logits_indices.size() * static_cast<size_t>(model_.config().vocab_size));
  out.hidden.resize(hidden_indices.size() * static_cast<size_t>(model_.config().hidden_size));
  std::vector<int32_t> routed;  // [num_tokens, num_moe_layers, num_experts_per_tok]
  if (routed_experts_) routed.resize(token_ids.size() * static_cast<size_t>(routed_experts_->row_width()));
  model_.forward(batch, cache_, out.logits.data(), out.hidden.data(), routed_experts_ ? routed.data() : nullptr);
  if (routed_experts_) routed_experts_->record(slot_mapping, routed);
  return out;
}

}  // namespace ditto
