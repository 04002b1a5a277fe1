#include "engine/scheduler.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace ditto {
namespace {

// A sequence with one token to compute: it samples in any step that schedules it.
bool is_decode(const Sequence* seq) { return seq->num_uncomputed_tokens() == 1; }

}  // namespace

int64_t default_long_prefill_token_threshold(int64_t max_num_batched_tokens) {
  if (max_num_batched_tokens < 1)
    throw_invalid_argument("max_num_batched_tokens must be at least 1, got " + std::to_string(max_num_batched_tokens));
  return std::max<int64_t>(1, max_num_batched_tokens / 4);
}

Scheduler::Scheduler(const SchedulerConfig& config, KvCacheManager& kv) : config_(config), kv_(kv) {
  if (config.max_num_batched_tokens < 1)
    throw_invalid_argument("max_num_batched_tokens must be at least 1, got " +
                           std::to_string(config.max_num_batched_tokens));
  if (config.max_num_seqs < 1)
    throw_invalid_argument("max_num_seqs must be at least 1, got " + std::to_string(config.max_num_seqs));
  if (config.long_prefill_token_threshold < 0)
    throw_invalid_argument("long_prefill_token_threshold must be at least 0 (0: max_num_batched_tokens / 4), got " +
                           std::to_string(config.long_prefill_token_threshold));
  long_prefill_token_threshold_ = config.long_prefill_token_threshold > 0
                                      ? config.long_prefill_token_threshold
                                      : default_long_prefill_token_threshold(config.max_num_batched_tokens);
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
  seq->proposal.clear();
  seq->num_computed_tokens = 0;
  ++seq->num_preemptions;
  ++num_preemptions_;
  running_.erase(std::remove(running_.begin(), running_.end(), seq), running_.end());
  // Back to the waiting queue in arrival order (ahead of everything that arrived later).
  add(seq);
}

std::vector<ScheduledSequence> Scheduler::schedule() {
  std::vector<ScheduledSequence> out;
  const int64_t cap = long_prefill_token_threshold_;
  int64_t budget = config_.max_num_batched_tokens;
  // Decodes not yet scheduled in this pass: a prefill ahead of them leaves them a token each.
  auto decodes_left = static_cast<int64_t>(std::count_if(running_.begin(), running_.end(), is_decode));
  bool preempted = false;
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i];
    const bool decode = is_decode(seq);
    if (decode) --decodes_left;
    const int64_t n = decode ? 1 : std::min({seq->num_uncomputed_tokens(), cap, budget - decodes_left});
    if (n <= 0) {  // a prefill behind more decodes than the budget has room for beside them
      ++i;
      continue;
    }
    bool self_preempted = false;
    while (!kv_.allocate(seq->id, seq->num_computed_tokens + n)) {
      Sequence* victim = running_.back();
      if (victim != seq && is_decode(victim)) --decodes_left;
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
  if (preempted) return out;  // (and no guesses: blocks are short)
  while (!waiting_.empty() && budget > 0 && static_cast<int64_t>(running_.size()) < config_.max_num_seqs) {
    Sequence* seq = waiting_.front();
    if (seq->num_computed_tokens == 0 && seq->use_prefix_cache)
      seq->num_computed_tokens = kv_.acquire_cached_prefix(
          seq->id, seq->token_ids, KvCacheManager::epoch_root(seq->prefix_root, weights_epoch_));
    const int64_t n = std::min({seq->num_uncomputed_tokens(), cap, budget});
    if (!kv_.allocate(seq->id, seq->num_computed_tokens + n)) {
      kv_.free(seq->id);
      seq->num_computed_tokens = 0;
      break;
    }
    waiting_.pop_front();
    if (seq->num_cached_tokens < 0) seq->num_cached_tokens = seq->num_computed_tokens;
    running_.push_back(seq);
    out.push_back({seq, n});
    budget -= n;
  }
  budget = schedule_proposals(out, budget);
  const bool anyone_samples = std::any_of(out.begin(), out.end(), [](const ScheduledSequence& s) {
    return s.num_tokens == s.seq->num_uncomputed_tokens();
  });
  if (budget > 0 && !anyone_samples) fill_leftover_budget(out, budget);
  return out;
}

int64_t Scheduler::schedule_proposals(std::vector<ScheduledSequence>& out, int64_t budget) {
  for (ScheduledSequence& s : out) {
    Sequence& seq = *s.seq;
    if (budget == 0) break;
    if (seq.proposal.empty() || seq.num_uncomputed_tokens() != s.num_tokens || s.num_tokens != 1) continue;
    const int64_t guesses = std::min(static_cast<int64_t>(seq.proposal.size()), budget);
    if (!kv_.allocate(seq.id, seq.num_computed_tokens + 1 + guesses)) continue;
    s.num_proposals = guesses;
    budget -= guesses;
  }
  return budget;
}

void Scheduler::fill_leftover_budget(std::vector<ScheduledSequence>& out, int64_t budget) {
  // Fewest remaining tokens first (the nearest first token), then admission order.
  std::vector<ScheduledSequence*> order;
  for (ScheduledSequence& s : out) order.push_back(&s);
  std::stable_sort(order.begin(), order.end(), [](const ScheduledSequence* a, const ScheduledSequence* b) {
    return a->seq->num_uncomputed_tokens() - a->num_tokens < b->seq->num_uncomputed_tokens() - b->num_tokens;
  });
  const int64_t block_size = kv_.block_size();
  for (ScheduledSequence* s : order) {
    if (budget == 0) break;
    Sequence& seq = *s->seq;
    const int64_t end = seq.num_computed_tokens + s->num_tokens;
    // The positions this sequence's blocks and every free block could hold: no preemption here.
    const int64_t reachable =
        (static_cast<int64_t>(kv_.block_table(seq.id).size()) + kv_.num_free_blocks()) * block_size;
    const int64_t extra = std::min({seq.num_uncomputed_tokens() - s->num_tokens, budget, reachable - end});
    if (extra <= 0 || !kv_.allocate(seq.id, end + extra)) continue;
    s->num_tokens += extra;
    budget -= extra;
  }
}

}  // namespace ditto
