#include "engine/scheduler.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace ditto {

Scheduler::Scheduler(const SchedulerConfig& config, KvCacheManager& kv) : config_(config), kv_(kv) {
  if (config.max_num_batched_tokens < 1)
    throw_invalid_argument("max_num_batched_tokens must be at least 1, got " +
                           std::to_string(config.max_num_batched_tokens));
  if (config.max_num_seqs < 1)
    throw_invalid_argument("max_num_seqs must be at least 1, got " + std::to_string(config.max_num_seqs));
}

void Scheduler::add(Sequence* seq) {
  auto pos = std::upper_bound(waiting_.begin(), waiting_.end(), seq,
                              [](const Sequence* a, const Sequence* b) { return a->arrival < b->arrival; });
  waiting_.insert(pos, seq);
}

void Scheduler::remove(Sequence* seq) {
  running_.erase(std::remove(running_.begin(), running_.end(), seq), running_.end());
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), seq), waiting_.end());
  kv_.free(seq->id);
}

void Scheduler::preempt(Sequence* seq) {
  kv_.free(seq->id);
  seq->num_computed_tokens = 0;
  ++seq->num_preemptions;
  ++num_preemptions_;
  running_.erase(std::remove(running_.begin(), running_.end(), seq), running_.end());
  // Back to the waiting queue in arrival order (ahead of everything that arrived later).
  add(seq);
}

std::vector<ScheduledSequence> Scheduler::schedule() {
  std::vector<ScheduledSequence> out;
  int64_t budget = config_.max_num_batched_tokens;
  bool preempted = false;
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i];
    const int64_t n = std::min(seq->num_uncomputed_tokens(), budget);
    bool self_preempted = false;
    while (!kv_.allocate(seq->id, seq->num_computed_tokens + n)) {
      Sequence* victim = running_.back();
      preempt(victim);
      preempted = true;
      if (victim == seq) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) break;  // everything after it was preempted already
    out.push_back({seq, n});
    budget -= n;
    ++i;
  }
  if (preempted) return out;
  while (!waiting_.empty() && budget > 0 && static_cast<int64_t>(running_.size()) < config_.max_num_seqs) {
    Sequence* seq = waiting_.front();
    if (seq->num_computed_tokens == 0 && seq->use_prefix_cache)
      seq->num_computed_tokens = kv_.acquire_cached_prefix(seq->id, seq->token_ids);
    const int64_t n = std::min(seq->num_uncomputed_tokens(), budget);
    if (!kv_.allocate(seq->id, seq->num_computed_tokens + n)) {
      kv_.free(seq->id);
      seq->num_computed_tokens = 0;
      break;
    }
    waiting_.pop_front();
    running_.push_back(seq);
    out.push_back({seq, n});
    budget -= n;
  }
  return out;
}

}  // namespace ditto
