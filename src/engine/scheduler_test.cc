// The scheduler's policy (scheduler.h) on sequences driven as the engine drives them, without a
// model: a short request is admitted and gets its first token within a step or two while a long
// prompt prefills, decodes run every step, a long prompt alone still takes the whole budget, and
// the threshold's default and bad values.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace ditto {
namespace {

constexpr int64_t kBlockSize = 16;

// A scheduler over a KV cache of num_blocks blocks and the sequences it schedules, advanced as
// Engine::step advances them: each scheduled sequence's tokens become computed, one whose tokens
// are all computed samples a token, and one with max_tokens outputs finishes.
class Sim {
 public:
  explicit Sim(const SchedulerConfig& config, int64_t num_blocks = 4096)
      : config_(config), kv_(num_blocks, kBlockSize, /*enable_prefix_caching=*/false), scheduler_(config, kv_) {}

  Sequence* add(int64_t prompt_tokens, int64_t max_tokens) {
    auto seq = std::make_unique<Sequence>();
    seq->id = seq->arrival = static_cast<int64_t>(seqs_.size());
    seq->token_ids.assign(static_cast<size_t>(prompt_tokens), 1);
    seq->num_prompt_tokens = prompt_tokens;
    seq->use_prefix_cache = false;
    max_tokens_[seq->id] = max_tokens;
    scheduler_.add(seq.get());
    seqs_.push_back(std::move(seq));
    return seqs_.back().get();
  }

  // One step: {sequence id: tokens scheduled}.
  std::map<int64_t, int64_t> step() {
    std::map<int64_t, int64_t> got;
    int64_t total = 0;
    for (const ScheduledSequence& s : scheduler_.schedule()) {
      Sequence& seq = *s.seq;
      EXPECT_GT(s.num_tokens, 0);
      EXPECT_FALSE(got.contains(seq.id)) << "sequence " << seq.id << " scheduled twice";
      got[seq.id] = s.num_tokens;
      total += s.num_tokens;
      seq.num_computed_tokens += s.num_tokens;
      EXPECT_LE(seq.num_computed_tokens, static_cast<int64_t>(seq.token_ids.size()));
      if (seq.num_uncomputed_tokens() > 0) continue;
      seq.token_ids.push_back(2);  // sampled
      if (seq.num_output_tokens() >= max_tokens_.at(seq.id)) {
        seq.finish = FinishReason::kLength;
        scheduler_.remove(&seq);
      }
    }
    EXPECT_LE(total, config_.max_num_batched_tokens);
    ++num_steps_;
    return got;
  }

  const Scheduler& scheduler() const { return scheduler_; }
  int64_t num_steps() const { return num_steps_; }

 private:
  SchedulerConfig config_;
  KvCacheManager kv_;
  Scheduler scheduler_;
  std::vector<std::unique_ptr<Sequence>> seqs_;
  std::map<int64_t, int64_t> max_tokens_;
  int64_t num_steps_ = 0;
};

TEST(SchedulerTest, DefaultThresholdIsAQuarterOfTheBudget) {
  EXPECT_EQ(default_long_prefill_token_threshold(2048), 512);
  EXPECT_EQ(default_long_prefill_token_threshold(16), 4);
  EXPECT_EQ(default_long_prefill_token_threshold(3), 1);
  EXPECT_EQ(default_long_prefill_token_threshold(1), 1);
  KvCacheManager kv(16, kBlockSize, false);
  EXPECT_EQ(Scheduler(SchedulerConfig{}, kv).long_prefill_token_threshold(), 512);
  SchedulerConfig c;
  c.max_num_batched_tokens = 8192;
  EXPECT_EQ(Scheduler(c, kv).long_prefill_token_threshold(), 2048);
  c.long_prefill_token_threshold = 100;
  EXPECT_EQ(Scheduler(c, kv).long_prefill_token_threshold(), 100);
}

TEST(SchedulerTest, BadLimitsAreRefusedByName) {
  KvCacheManager kv(16, kBlockSize, false);
  auto message = [&](const SchedulerConfig& c) {
    try {
      Scheduler s(c, kv);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  SchedulerConfig c;
  c.long_prefill_token_threshold = -1;
  EXPECT_EQ(message(c), "long_prefill_token_threshold must be at least 0 (0: max_num_batched_tokens / 4), got -1");
  c = SchedulerConfig{};
  c.max_num_batched_tokens = 0;
  EXPECT_EQ(message(c), "max_num_batched_tokens must be at least 1, got 0");
  c = SchedulerConfig{};
  c.max_num_seqs = 0;
  EXPECT_EQ(message(c), "max_num_seqs must be at least 1, got 0");
}

// The case: a 16k-token prompt is prefilling when a 5-token request arrives. Before the
// threshold, the long prompt took the whole budget of every step and the short one waited for all
// 8 of its steps; now it is prefilled in the next step, samples its first token there, and decodes
// in every step after, while the long prompt keeps progressing beside it.
TEST(SchedulerTest, ShortRequestGetsItsFirstTokenWhileALongPromptPrefills) {
  Sim sim(SchedulerConfig{});  // budget 2048, threshold 512
  const Sequence* long_seq = sim.add(16384, 1);
  EXPECT_EQ(sim.step(), (std::map<int64_t, int64_t>{{0, 2048}}));  // alone: the whole budget
  const Sequence* short_seq = sim.add(5, 4);
  int64_t steps_to_first_token = 0;
  while (short_seq->num_output_tokens() == 0) {
    ASSERT_LT(++steps_to_first_token, 8) << "the short request starves";
    sim.step();
  }
  EXPECT_EQ(steps_to_first_token, 1);
  // Its 3 decodes run in the next 3 steps, each beside 512 more tokens of the long prompt.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(sim.step(), (std::map<int64_t, int64_t>{{0, 512}, {1, 1}})) << "decode " << i;
  EXPECT_TRUE(short_seq->finished());
  EXPECT_EQ(long_seq->num_computed_tokens, 2048 + 4 * 512);
  while (!long_seq->finished()) sim.step();  // alone again: 2048 a step
  EXPECT_EQ(sim.num_steps(), 1 + 4 + (16384 - 4096) / 2048);
}

// A long prompt alone is never slowed by the cap: a step in which nobody samples gets the whole
// budget, and with two capped prompts the leftover goes to the one nearer its first token.
TEST(SchedulerTest, LeftoverBudgetGoesToThePromptNearestItsFirstToken) {
  Sim alone(SchedulerConfig{});
  alone.add(5000, 1);
  EXPECT_EQ(alone.step(), (std::map<int64_t, int64_t>{{0, 2048}}));
  EXPECT_EQ(alone.step(), (std::map<int64_t, int64_t>{{0, 2048}}));
  EXPECT_EQ(alone.step(), (std::map<int64_t, int64_t>{{0, 904}}));
  EXPECT_EQ(alone.scheduler().num_running(), 0);

  Sim two(SchedulerConfig{});
  two.add(10000, 1);
  two.add(3000, 1);
  EXPECT_EQ(two.step(), (std::map<int64_t, int64_t>{{0, 512}, {1, 1536}}));
  // Nobody samples before the leftover is handed out: 1 gets its last 952 tokens, 0 the rest.
  EXPECT_EQ(two.step(), (std::map<int64_t, int64_t>{{0, 584}, {1, 1464}}));
  EXPECT_EQ(two.step(), (std::map<int64_t, int64_t>{{0, 2048}}));
}

// Decodes go first in the budget: every sequence with one token to compute is scheduled in every
// step (while the decodes alone fit the budget), whatever prompts were admitted before them; and
// requests that arrive while a long prompt prefills finish before it (the old policy made them all
// wait for it). Random arrivals of short and medium prompts under several budgets and thresholds.
TEST(SchedulerTest, DecodesAreNeverSkippedAndShortRequestsFinishFirst) {
  std::mt19937 rng(9);
  for (const auto& [budget, threshold] : std::vector<std::pair<int64_t, int64_t>>{{16, 8}, {16, 0}, {32, 5}, {64, 0}}) {
    SchedulerConfig c;
    c.max_num_batched_tokens = budget;
    c.long_prefill_token_threshold = threshold;
    Sim sim(c);
    const Sequence* long_seq = sim.add(40 * budget, 1);
    std::vector<const Sequence*> others;
    std::map<const Sequence*, int> finished_at;  // step
    for (int step = 0; step < 2000; ++step) {
      if (step < 30 && rng() % 2 == 0) others.push_back(sim.add(1 + rng() % (2 * budget), 1 + rng() % 30));
      std::vector<int64_t> decodes;  // running sequences with one token to compute
      for (const Sequence* s : others)
        if (s->num_computed_tokens > 0 && !s->finished() && s->num_uncomputed_tokens() == 1) decodes.push_back(s->id);
      const std::map<int64_t, int64_t> got = sim.step();
      if (static_cast<int64_t>(decodes.size()) <= budget) {
        for (int64_t id : decodes) {
          EXPECT_EQ(got.contains(id) ? got.at(id) : 0, 1)
              << "decode of " << id << ", step " << step << ", budget " << budget << ", threshold " << threshold;
        }
      }
      bool all = long_seq->finished();
      if (all && !finished_at.contains(long_seq)) finished_at[long_seq] = step;
      for (const Sequence* s : others) {
        if (s->finished() && !finished_at.contains(s)) finished_at[s] = step;
        all = all && s->finished();
      }
      if (all) break;
    }
    ASSERT_FALSE(others.empty());
    ASSERT_TRUE(finished_at.contains(long_seq) && finished_at.contains(others[0])) << "budget " << budget;
    EXPECT_LT(finished_at[others[0]], finished_at[long_seq]) << "budget " << budget << ", threshold " << threshold;
  }
}

// A threshold of the whole budget turns the cap off: the pre-threshold FCFS policy, in which a
// request queued behind a long prompt waits for all of it.
TEST(SchedulerTest, ThresholdOfTheWholeBudgetIsPlainFcfs) {
  SchedulerConfig c;
  c.long_prefill_token_threshold = c.max_num_batched_tokens;
  Sim sim(c);
  sim.add(8192, 1);
  const Sequence* short_seq = sim.add(5, 1);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(sim.step(), (std::map<int64_t, int64_t>{{0, 2048}}));
  EXPECT_EQ(short_seq->num_computed_tokens, 0);
  EXPECT_EQ(sim.step(), (std::map<int64_t, int64_t>{{1, 5}}));
}

// With a KV cache too small for everyone, preemption still frees room and every request finishes
// (decode reservations and the leftover rule never take blocks from the oldest sequence).
TEST(SchedulerTest, EveryoneFinishesUnderPreemption) {
  SchedulerConfig c;
  c.max_num_batched_tokens = 64;
  Sim sim(c, /*num_blocks=*/12);  // 192 positions
  std::vector<const Sequence*> seqs;
  for (int i = 0; i < 6; ++i) seqs.push_back(sim.add(20 + 25 * i, 20));
  for (int step = 0; step < 2000; ++step) {
    bool all = true;
    for (const Sequence* s : seqs) all = all && s->finished();
    if (all) break;
    sim.step();
  }
  for (const Sequence* s : seqs) EXPECT_TRUE(s->finished()) << "sequence " << s->id;
  EXPECT_GT(sim.scheduler().num_preemptions(), 0);
}

// Speculative guesses take only what is left: the budget after every decode and admitted prefill,
// and blocks that are free — never a token or a block of anyone else.
TEST(SchedulerTest, GuessesTakeOnlyTheLeftoverBudgetAndFreeBlocks) {
  SchedulerConfig c;
  c.max_num_batched_tokens = 8;
  c.long_prefill_token_threshold = 8;
  KvCacheManager kv(/*num_blocks=*/3, kBlockSize, /*enable_prefix_caching=*/false);
  Scheduler scheduler(c, kv);
  auto prompt = [&](int64_t id, int64_t length) {
    auto s = std::make_unique<Sequence>();
    s->id = s->arrival = id;
    s->token_ids.assign(static_cast<size_t>(length), 1);
    s->num_prompt_tokens = length;
    s->use_prefix_cache = false;
    scheduler.add(s.get());
    return s;
  };
  const std::unique_ptr<Sequence> a = prompt(0, 4), b = prompt(1, 4);
  ASSERT_EQ(scheduler.schedule().size(), 2u);
  for (Sequence* s : {a.get(), b.get()}) {  // prefilled; each sampled a token: two decodes
    s->num_computed_tokens = 4;
    s->token_ids.push_back(2);
  }
  a->proposal.assign(10, 3);
  std::vector<ScheduledSequence> out = scheduler.schedule();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].num_tokens, 1);
  EXPECT_EQ(out[0].num_proposals, 6);  // the 8-token budget less a's and b's decode tokens
  EXPECT_EQ(out[1].num_proposals, 0);
  // A prompt that arrives is admitted before guesses get anything.
  const std::unique_ptr<Sequence> p = prompt(2, 5);
  out = scheduler.schedule();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[2].num_tokens, 5);
  EXPECT_EQ(out[0].num_proposals, 1);  // the 1 token left
  // The prompt took the last free block; a guess that needs a new block is dropped, and no one
  // is preempted for it.
  ASSERT_EQ(kv.num_free_blocks(), 0);
  a->token_ids.resize(16, 2);
  a->num_computed_tokens = 15;
  out = scheduler.schedule();
  EXPECT_EQ(scheduler.num_preemptions(), 0);
  ASSERT_EQ(out.size(), 3u);
  for (const ScheduledSequence& s : out) EXPECT_EQ(s.num_proposals, 0) << "sequence " << s.seq->id;
}

}  // namespace
}  // namespace ditto
