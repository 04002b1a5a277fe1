// Builds the flat batch for one engine step from per-sequence pieces, runs the model and returns
// the logits. Owns the KV cache memory; which blocks a sequence uses is decided by the engine's
// KV cache manager (kv_cache_manager.h).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/routed_experts.h"
#include "model/causal_lm.h"
#include "model/kv_cache.h"

namespace ditto {

// Which of a step's tokens return their final-normed hidden state (pooling requests).
enum class HiddenRows { kNone, kFirst, kLast, kAll };

// One sequence's share of a step.
struct SequenceStep {
  std::span<const int32_t> token_ids;    // [n] tokens to run now (a prompt chunk or one decode token)
  int32_t start_position = 0;            // absolute position of token_ids[0]
  std::span<const int32_t> block_table;  // physical blocks covering positions [0, start_position + n)
  bool all_logits = false;               // logits for every token (scoring) or only the last one
  bool logits = true;                    // false: no logits row at all (an embedding's prefill)
  HiddenRows hidden = HiddenRows::kNone;
};

// What a step computed: the logits rows and the hidden rows, each in step order.
struct StepOutputs {
  // For each step with `logits`, n rows if all_logits else 1 row (its last token): [rows, vocab_size] f32.
  std::vector<float> logits;
  // For each step, its hidden rows (kFirst, kLast: 1; kAll: n; kNone: 0): [rows, hidden_size] f32.
  std::vector<float> hidden;
};

class ModelRunner {
 public:
  // Allocates a KV cache of num_blocks blocks of block_size tokens (under tensor parallelism, for
  // this rank's KV heads, and the other ranks allocate theirs: CausalLM::make_kv_cache). With
  // record_routed_experts, also a RoutedExpertsStore of the same slots, which every step fills
  // (throws as RoutedExpertsStore for a model without MoE layers).
  ModelRunner(const CausalLM& model, int64_t num_blocks, int64_t block_size, bool record_routed_experts = false);
  ~ModelRunner();
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  // Runs all steps as one flat batch. Returns the logits and hidden rows the steps ask for
  // (StepOutputs). Throws Error(kInvalidArgument) if a block table is too short for its positions.
  StepOutputs step(std::span<const SequenceStep> steps);

  const CausalLM& model() const { return model_; }
  KvCache& kv_cache() { return cache_; }
  // The routers' choices by KV slot, or null without record_routed_experts.
  const RoutedExpertsStore* routed_experts() const { return routed_experts_ ? &*routed_experts_ : nullptr; }

 private:
  const CausalLM& model_;
  KvCache cache_;
  std::optional<RoutedExpertsStore> routed_experts_;
};

}  // namespace ditto
