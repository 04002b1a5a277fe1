// Continuous batching: each step picks {sequence: number of tokens} under a token budget, mixing
// decode steps and (chunks of) prefills — there is no separate prefill phase.
//
// Policy (vLLM v1's, FCFS, with its long_prefill_token_threshold):
// 1. Running sequences, in admission order. A decode (a sequence with one token to compute) takes
//    1 token; a prefill takes min(uncomputed tokens, long_prefill_token_threshold, what is left
//    of the budget after one token for every decode behind it) — so decodes run every step even
//    when a long prompt was admitted before them. When the KV cache cannot hold a running
//    sequence's tokens, the most recently admitted running sequence is preempted — its blocks
//    freed, its progress reset, and it goes back to the waiting queue in arrival order to be
//    recomputed later (recomputation gives the same bits: K/V depend only on the tokens).
// 2. If nothing was preempted, waiting sequences are admitted in order while budget, KV blocks and
//    max_num_seqs allow, starting from their cached prefix, each taking at most the threshold.
// 3. If no scheduled sequence finishes its tokens in this step (it samples nothing, so no one
//    waits on its latency), the budget left over goes to the capped prefills, fewest remaining
//    tokens first, as far as free KV blocks allow: a long prompt alone still runs at
//    max_num_batched_tokens per step.
// So a long prompt takes at most the threshold while anything else shares the step: a request
// that arrives meanwhile is admitted in the next step, and decodes keep flowing. How a prompt is
// split into chunks never changes a bit of its output (docs/INVARIANCE.md, row 3), so the
// scheduler is free to be fair.
//
// Speculative decoding: after 1 and 2, a scheduled decode with a proposal (Sequence::proposal)
// also runs as many of its guessed tokens as the budget left over and the free KV blocks allow, in
// admission order; guesses never preempt, delay or displace anyone's tokens.
//
// A sequence that alone cannot fit in the whole cache is refused by the engine before it gets
// here, so the oldest running sequence can always progress: no deadlock.
// Thread-safety: none; the engine thread owns it.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "engine/kv_cache_manager.h"
#include "engine/sequence.h"

namespace ditto {

struct SchedulerConfig {
  int64_t max_num_batched_tokens = 2048;  // tokens per step, all sequences together
  int64_t max_num_seqs = 256;             // sequences running at once
  // The most prompt tokens one sequence runs in a step shared with others (vLLM's
  // long_prefill_token_threshold); 0: default_long_prefill_token_threshold(max_num_batched_tokens).
  // max_num_batched_tokens or more turns the cap off (the pre-threshold FCFS policy).
  int64_t long_prefill_token_threshold = 0;
};

// The threshold a SchedulerConfig with long_prefill_token_threshold 0 gets: a quarter of the step
// budget, at least 1 (512 tokens at the default budget of 2048). vLLM leaves its threshold off by
// default (on, at 4% of max_model_len, only with concurrent partial prefills), so there a 30,000-token
// prompt holds every step until it is prefilled. A quarter leaves three quarters of every step to
// decodes and newly arrived requests while a long prompt prefills, lets up to four long prompts
// progress side by side, and keeps chunks large enough (hundreds of tokens) that the GEMMs stay
// compute-bound; rule 3 of the policy gives a long prompt the whole budget when nothing shares the
// step, so the cap costs its time to first token nothing when there is no one to be fair to.
// Throws Error(kInvalidArgument) for max_num_batched_tokens < 1.
int64_t default_long_prefill_token_threshold(int64_t max_num_batched_tokens);

struct ScheduledSequence {
  Sequence* seq;
  int64_t num_tokens;  // token_ids[num_computed_tokens, num_computed_tokens + num_tokens) run now
  // A decode's speculative tokens run after it: seq->proposal[0, num_proposals). Their positions
  // have blocks too; they count against the step's token budget.
  int64_t num_proposals = 0;
};

class Scheduler {
 public:
  // Throws Error(kInvalidArgument) if max_num_batched_tokens or max_num_seqs is below 1 or
  // long_prefill_token_threshold is negative (each message names the field).
  Scheduler(const SchedulerConfig& config, KvCacheManager& kv);

  // Queues a sequence (not owned; it must outlive its time here).
  void add(Sequence* seq);
  // Takes a sequence out (finished or aborted) and frees its blocks. Unknown: no-op.
  void remove(Sequence* seq);

  // One step's work; empty when nothing can run. Sequences in the result have blocks for
  // num_computed_tokens + num_tokens positions.
  std::vector<ScheduledSequence> schedule();

  // The weights epoch (CausalLM::weights_epoch) of the KV computed from now on: a sequence that
  // starts (or restarts after preemption) looks up the prefix cache under its root for this epoch
  // only (KvCacheManager::epoch_root), so no cached KV crosses a weight update.
  void set_weights_epoch(uint64_t epoch) { weights_epoch_ = epoch; }

  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  int64_t num_preemptions() const { return num_preemptions_; }
  // Running sequences, in admission order.
  const std::vector<Sequence*>& running() const { return running_; }
  // The threshold in force (the configured one, or its default when that is 0), tokens.
  int64_t long_prefill_token_threshold() const { return long_prefill_token_threshold_; }

 private:
  void preempt(Sequence* seq);
  // Gives scheduled decodes their guesses from `budget`; returns the budget left.
  int64_t schedule_proposals(std::vector<ScheduledSequence>& out, int64_t budget);
  // Rule 3 of the policy: hands `budget` tokens to the prefills in `out`.
  void fill_leftover_budget(std::vector<ScheduledSequence>& out, int64_t budget);

  SchedulerConfig config_;
  uint64_t weights_epoch_ = 0;
  int64_t long_prefill_token_threshold_;
  KvCacheManager& kv_;
  std::vector<Sequence*> running_;  // admission order
  std::deque<Sequence*> waiting_;   // FCFS (preempted ones go back in arrival order)
  int64_t num_preemptions_ = 0;
};

}  // namespace ditto
