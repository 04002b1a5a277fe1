// Continuous batching: each step picks {sequence: number of tokens} under a token budget, mixing
// decode steps and (chunks of) prefills — there is no separate prefill phase.
//
// Policy (vLLM v1's, FCFS): running sequences first, in admission order, each taking
// min(uncomputed tokens, remaining budget); when the KV cache cannot hold a running sequence's
// tokens, the most recently admitted running sequence is preempted — its blocks freed, its
// progress reset, and it goes back to the front of the waiting queue to be recomputed later
// (recomputation gives the same bits: K/V depend only on the tokens). Then, if nothing was
// preempted, waiting sequences are admitted in order while budget, KV blocks and max_num_seqs
// allow, starting from their cached prefix. A sequence that alone cannot fit in the whole cache
// is refused by the engine before it gets here, so the oldest running sequence can always
// progress: no deadlock.
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
};

struct ScheduledSequence {
  Sequence* seq;
  int64_t num_tokens;  // token_ids[num_computed_tokens, num_computed_tokens + num_tokens) run now
};

class Scheduler {
 public:
  // Throws Error(kInvalidArgument) if a limit is below 1.
  Scheduler(const SchedulerConfig& config, KvCacheManager& kv);

  // Queues a sequence (not owned; it must outlive its time here).
  void add(Sequence* seq);
  // Takes a sequence out (finished or aborted) and frees its blocks. Unknown: no-op.
  void remove(Sequence* seq);

  // One step's work; empty when nothing can run. Sequences in the result have blocks for
  // num_computed_tokens + num_tokens positions.
  std::vector<ScheduledSequence> schedule();

  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  int64_t num_preemptions() const { return num_preemptions_; }

 private:
  void preempt(Sequence* seq);

  SchedulerConfig config_;
  KvCacheManager& kv_;
  std::vector<Sequence*> running_;  // admission order
  std::deque<Sequence*> waiting_;   // FCFS (preempted ones go to the front)
  int64_t num_preemptions_ = 0;
};

}  // namespace ditto
