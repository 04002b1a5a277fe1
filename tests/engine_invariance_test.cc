// The engine's contract, compared bit for bit on a tiny model: a request's tokens, logprobs and
// cumulative logprob do not depend on what runs beside it (alone vs together), on arrival order,
// on the token budget (chunked prefill at different offsets), on prefix-cache hits, on
// preemption and recomputation, or on the thread count; and the logprob a token got in decode
// equals its prompt logprob when the finished sequence is re-scored.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/test_support.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "model/causal_lm.h"
#include "output_diff.h"
#include "tiny_model.h"

namespace ditto {
namespace {

using testing::TempDir;

struct Case {
  std::string id;
  std::vector<int32_t> prompt;
  SamplingParams params;
};

const std::vector<int32_t> kEos = {7};

std::vector<Case> make_cases() {
  std::mt19937 rng(11);
  auto prompt = [&](int n) {
    std::vector<int32_t> p(static_cast<size_t>(n));
    for (int32_t& t : p) t = static_cast<int32_t>(rng() % 300);
    return p;
  };
  std::vector<Case> cases;
  const std::vector<int32_t> shared = prompt(40);  // a prefix several prompts share (prefix cache)
  for (int i = 0; i < 14; ++i) {
    Case c;
    c.id = 'r' + std::to_string(i);
    c.prompt = prompt(1 + (i * 37) % 70);
    if (i % 4 == 1) {
      c.prompt = shared;
      const std::vector<int32_t> tail = prompt(1 + i);
      c.prompt.insert(c.prompt.end(), tail.begin(), tail.end());
    }
    SamplingParams& p = c.params;
    p.max_tokens = 6 + (i * 5) % 17;
    p.ignore_eos = i % 3 != 0;
    switch (i % 7) {
      case 0: p.temperature = 0.0f; break;
      case 1:
        p.temperature = 0.8f;
        p.seed = 1000 + i;
        p.n = 2;
        break;
      case 2:
        p.temperature = 1.0f;
        p.seed = 42;
        p.top_p = 0.9f;
        p.logprobs = 3;
        break;
      case 3:
        p.temperature = 0.7f;
        p.seed = 5;
        p.top_k = 5;
        p.repetition_penalty = 1.2f;
        break;
      case 4:
        p.temperature = 1.2f;
        p.seed = 9;
        p.min_p = 0.05f;
        p.frequency_penalty = 0.5f;
        p.presence_penalty = 0.3f;
        break;
      case 5:
        p.temperature = 0.0f;
        p.logprobs = 2;
        p.prompt_logprobs = 2;
        p.min_tokens = 3;
        break;
      case 6:
        p.temperature = 0.9f;
        p.seed = 77;
        p.n = 3;
        p.stop_token_ids = {11, 12};
        break;
    }
    cases.push_back(c);
  }
  return cases;
}

struct RunOptions {
  int64_t max_num_batched_tokens = 8192;
  int64_t num_blocks = 256;
  int64_t block_size = 16;
  bool prefix_caching = true;
  int64_t max_num_seqs = 256;
  // Between repeated passes, the idle engine's memory release (Engine::release_idle_memory):
  // 0 none, 1 activations and uncached KV pages, 2 the prefix cache too.
  int release_between_passes = 0;
  // Speculative decoding: a config (ngram, draft_model with `draft`), or a test proposer.
  SpeculativeConfig speculative;
  const CausalLM* draft = nullptr;
  std::shared_ptr<Proposer> proposer;
};

struct RunResult {
  std::map<std::string, RequestOutput> outputs;
  std::map<std::string, std::vector<RequestOutput>> reports;  // kDelta requests' reports, in order
  int64_t preemptions = 0;
  int64_t prefix_hit_tokens = 0;
  int64_t prefix_hit_tokens_before_release = 0;
  int64_t released_bytes = 0;
  SpeculationStats speculation;
};

// Adds `order` of `cases` (at most `arrive_per_step` per step, the rest while earlier ones run)
// and runs the engine to completion.
RunResult run(const CausalLM& model, const std::vector<Case>& cases, const std::vector<size_t>& order,
              const RunOptions& o, size_t arrive_per_step = 1000, int repeat = 1) {
  EngineConfig config;
  config.block_size = o.block_size;
  config.num_kv_blocks = o.num_blocks;
  config.enable_prefix_caching = o.prefix_caching;
  config.scheduler.max_num_batched_tokens = o.max_num_batched_tokens;
  config.scheduler.max_num_seqs = o.max_num_seqs;
  config.speculative = o.speculative;
  config.draft_model = o.draft;
  config.proposer = o.proposer;
  Engine engine(model, nullptr, kEos, config);
  RunResult result;
  for (int r = 0; r < repeat; ++r) {
    if (r > 0 && o.release_between_passes > 0) {
      result.released_bytes += engine.release_idle_memory(/*drop_prefix_cache=*/o.release_between_passes == 2);
      result.prefix_hit_tokens_before_release = engine.kv_cache().stats().prefix_hit_tokens;
    }
    size_t next = 0;
    while (next < order.size() || engine.has_unfinished()) {
      for (size_t k = 0; k < arrive_per_step && next < order.size(); ++k, ++next) {
        const Case& c = cases[order[next]];
        engine.add_request(c.id, c.prompt, c.params);
      }
      for (RequestOutput& out : engine.step()) {
        const std::string id = out.request_id;
        if (out.finished && !result.reports.contains(id)) {
          result.outputs[id] = std::move(out);
          continue;
        }
        result.reports[id].push_back(out);
        append_delta(result.outputs[id], std::move(out));
      }
    }
  }
  result.preemptions = engine.scheduler().num_preemptions();
  result.prefix_hit_tokens = engine.kv_cache().stats().prefix_hit_tokens;
  result.speculation = engine.speculation_stats();
  return result;
}

class EngineInvarianceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    write_tiny_model(*dir_, "qwen3");
    pool1_ = new ThreadPool(1);
    pool2_ = new ThreadPool(2);
    model1_ = CausalLM::load(dir_->path().string(), pool1_).release();
    model2_ = CausalLM::load(dir_->path().string(), pool2_).release();
    cases_ = new std::vector<Case>(make_cases());
    baseline_ = new std::map<std::string, RequestOutput>();
    for (size_t i = 0; i < cases_->size(); ++i) {
      RunResult alone = run(*model2_, *cases_, {i}, RunOptions{});
      (*baseline_)[(*cases_)[i].id] = alone.outputs.at((*cases_)[i].id);
    }
  }
  static void TearDownTestSuite() {
    delete baseline_;
    delete cases_;
    delete model1_;
    delete model2_;
    delete pool1_;
    delete pool2_;
    delete dir_;
  }

  static void expect_baseline(const RunResult& r, const std::string& label) {
    ASSERT_EQ(r.outputs.size(), cases_->size()) << label;
    int64_t tokens = 0;
    for (const Case& c : *cases_) {
      const RequestOutput& got = r.outputs.at(c.id);
      EXPECT_EQ(diff(baseline_->at(c.id), got), "") << label << ", request " << c.id;
      for (const CompletionOutput& o : got.outputs) tokens += static_cast<int64_t>(o.token_ids.size());
    }
    EXPECT_GT(tokens, 100) << label;
  }

  static std::vector<size_t> identity() {
    std::vector<size_t> v(cases_->size());
    for (size_t i = 0; i < v.size(); ++i) v[i] = i;
    return v;
  }

  static TempDir* dir_;
  static ThreadPool* pool1_;
  static ThreadPool* pool2_;
  static CausalLM* model1_;
  static CausalLM* model2_;
  static std::vector<Case>* cases_;
  static std::map<std::string, RequestOutput>* baseline_;
};
TempDir* EngineInvarianceTest::dir_ = nullptr;
ThreadPool* EngineInvarianceTest::pool1_ = nullptr;
ThreadPool* EngineInvarianceTest::pool2_ = nullptr;
CausalLM* EngineInvarianceTest::model1_ = nullptr;
CausalLM* EngineInvarianceTest::model2_ = nullptr;
std::vector<Case>* EngineInvarianceTest::cases_ = nullptr;
std::map<std::string, RequestOutput>* EngineInvarianceTest::baseline_ = nullptr;

TEST_F(EngineInvarianceTest, AloneEqualsTogether) {
  expect_baseline(run(*model2_, *cases_, identity(), RunOptions{}), "all at once");
  expect_baseline(run(*model2_, *cases_, identity(), RunOptions{}, 2), "arriving two per step");
}

TEST_F(EngineInvarianceTest, ShuffledOrderAndTokenBudgets) {
  std::mt19937 rng(3);
  for (int64_t budget : {16, 64, 8192}) {
    std::vector<size_t> order = identity();
    std::shuffle(order.begin(), order.end(), rng);
    RunOptions o;
    o.max_num_batched_tokens = budget;
    expect_baseline(run(*model2_, *cases_, order, o, 3), "budget " + std::to_string(budget) + ", shuffled");
  }
}

// Streaming (kDelta) reports, appended, are the same bits as the final-only output; each report is
// only what is new, a choice's finish comes once, and the last report is the only finished one.
TEST_F(EngineInvarianceTest, DeltaReportsRebuildTheFinalOutput) {
  std::vector<Case> cases = *cases_;
  for (Case& c : cases) c.params.output_kind = RequestOutputKind::kDelta;
  RunOptions o;
  o.max_num_batched_tokens = 16;  // chunked prefill: several steps report nothing
  const RunResult r = run(*model2_, cases, identity(), o, 3);
  ASSERT_EQ(r.outputs.size(), cases.size());
  for (const Case& c : cases) {
    EXPECT_EQ(diff(baseline_->at(c.id), r.outputs.at(c.id)), "") << "request " << c.id;
    const std::vector<RequestOutput>& reports = r.reports.at(c.id);
    ASSERT_FALSE(reports.empty());
    size_t tokens = 0;
    std::vector<int> finishes(static_cast<size_t>(c.params.n), 0);
    for (size_t k = 0; k < reports.size(); ++k) {
      EXPECT_EQ(reports[k].finished, k + 1 == reports.size()) << c.id << " report " << k;
      EXPECT_EQ(reports[k].prompt_token_ids.empty(), k > 0) << c.id << " report " << k;
      for (const CompletionOutput& d : reports[k].outputs) {
        tokens += d.token_ids.size();
        finishes[static_cast<size_t>(d.index)] += !d.finish_reason.empty();
      }
    }
    size_t expected = 0;
    for (const CompletionOutput& o2 : baseline_->at(c.id).outputs) expected += o2.token_ids.size();
    EXPECT_EQ(tokens, expected) << c.id;
    for (int f : finishes) EXPECT_EQ(f, 1) << c.id;
    EXPECT_EQ(r.outputs.at(c.id).prompt_token_ids, c.prompt) << c.id;
  }
}

TEST_F(EngineInvarianceTest, PreemptionAndRecomputation) {
  RunOptions o;
  o.num_blocks = 7;  // the largest request needs 6 blocks of 16: others get preempted
  const RunResult r = run(*model2_, *cases_, identity(), o);
  EXPECT_GT(r.preemptions, 0);
  expect_baseline(r, "7 KV blocks");
  o.block_size = 4;
  o.num_blocks = 24;
  o.max_num_batched_tokens = 32;
  const RunResult r2 = run(*model2_, *cases_, identity(), o);
  EXPECT_GT(r2.preemptions, 0);
  expect_baseline(r2, "24 blocks of 4, budget 32");
}

TEST_F(EngineInvarianceTest, PrefixCacheColdWarmAndOff) {
  const RunResult twice = run(*model2_, *cases_, identity(), RunOptions{}, 1000, 2);
  EXPECT_GT(twice.prefix_hit_tokens, 40);
  expect_baseline(twice, "prefix cache warm (second pass)");
  RunOptions off;
  off.prefix_caching = false;
  const RunResult r = run(*model2_, *cases_, identity(), off);
  EXPECT_EQ(r.prefix_hit_tokens, 0);
  expect_baseline(r, "prefix caching off");
}

// An idle server gives back the KV pages and activation buffers a burst touched, then its prefix
// cache: the next pass's outputs are the same bits; only the prefix cache's hits differ.
TEST_F(EngineInvarianceTest, IdleMemoryReleaseBetweenPasses) {
  RunOptions keep;
  keep.release_between_passes = 1;
  const RunResult kept = run(*model2_, *cases_, identity(), keep, 1000, 2);
  expect_baseline(kept, "activations and uncached KV pages released between passes");
  EXPECT_GT(kept.released_bytes, 0);
  EXPECT_GT(kept.prefix_hit_tokens - kept.prefix_hit_tokens_before_release, 40);  // the cache survived
  RunOptions drop;
  drop.release_between_passes = 2;
  const RunResult dropped = run(*model2_, *cases_, identity(), drop, 1000, 2);
  expect_baseline(dropped, "prefix cache dropped between passes");
  EXPECT_GT(dropped.released_bytes, kept.released_bytes);
  EXPECT_LT(dropped.prefix_hit_tokens - dropped.prefix_hit_tokens_before_release,
            kept.prefix_hit_tokens - kept.prefix_hit_tokens_before_release);
}

TEST_F(EngineInvarianceTest, ThreadCount) {
  expect_baseline(run(*model1_, *cases_, identity(), RunOptions{}), "1 thread");
}

TEST_F(EngineInvarianceTest, DecodeLogprobEqualsRescoredPromptLogprob) {
  for (const Case& c : *cases_) {
    if (!c.params.logprobs) continue;
    const RequestOutput& out = baseline_->at(c.id);
    const CompletionOutput& o = out.outputs[0];
    Case rescore;
    rescore.id = c.id + "-rescore";
    rescore.prompt = c.prompt;
    rescore.prompt.insert(rescore.prompt.end(), o.token_ids.begin(), o.token_ids.end());
    rescore.params.temperature = 0.0f;
    rescore.params.max_tokens = 1;
    rescore.params.prompt_logprobs = 0;
    const RunResult r = run(*model2_, {rescore}, {0}, RunOptions{});
    const RequestOutput& s = r.outputs.at(rescore.id);
    for (size_t t = 0; t < o.token_ids.size(); ++t) {
      const auto& entry = s.prompt_logprobs[c.prompt.size() + t];
      ASSERT_TRUE(entry.has_value());
      EXPECT_EQ(entry->token.token_id, o.token_ids[t]);
      EXPECT_EQ(std::bit_cast<uint32_t>(entry->token.logprob), std::bit_cast<uint32_t>(o.logprobs[t].token.logprob))
          << c.id << " output token " << t;
    }
  }
}

// A test proposer that knows the answers: it proposes each sequence's baseline continuation, with
// every `wrong_every`-th output position deliberately wrong (0: never), so verification accepts
// long runs, rejects mid-run, and runs up to max_tokens and stop tokens.
class OracleProposer : public Proposer {
 public:
  OracleProposer(const std::vector<Case>& cases, const std::map<std::string, RequestOutput>& baseline, int wrong_every)
      : cases_(cases), baseline_(baseline), wrong_every_(wrong_every) {}
  void propose(std::span<const ProposalRequest> requests, std::vector<std::vector<int32_t>>& proposals) override {
    proposals.assign(requests.size(), {});
    for (size_t i = 0; i < requests.size(); ++i) {
      const Sequence& seq = *requests[i].seq;
      const std::vector<int32_t> prompt(seq.token_ids.begin(), seq.token_ids.begin() + seq.num_prompt_tokens);
      const auto c = std::find_if(cases_.begin(), cases_.end(), [&](const Case& k) { return k.prompt == prompt; });
      ASSERT_NE(c, cases_.end());
      const std::vector<int32_t>& truth = baseline_.at(c->id).outputs[static_cast<size_t>(seq.choice)].token_ids;
      for (int64_t t = seq.num_output_tokens();
           t < static_cast<int64_t>(truth.size()) && static_cast<int64_t>(proposals[i].size()) < requests[i].max_tokens;
           ++t) {
        const bool wrong = wrong_every_ > 0 && t % wrong_every_ == wrong_every_ - 1;
        proposals[i].push_back(wrong ? (truth[static_cast<size_t>(t)] + 1) % 300 : truth[static_cast<size_t>(t)]);
      }
    }
  }

 private:
  const std::vector<Case>& cases_;
  const std::map<std::string, RequestOutput>& baseline_;
  int wrong_every_;
};

// Guesses at random: nothing it proposes may change a bit.
class RandomProposer : public Proposer {
 public:
  void propose(std::span<const ProposalRequest> requests, std::vector<std::vector<int32_t>>& proposals) override {
    proposals.assign(requests.size(), {});
    for (size_t i = 0; i < requests.size(); ++i)
      for (int64_t j = 0; j < requests[i].max_tokens; ++j) proposals[i].push_back(static_cast<int32_t>(rng_() % 300));
  }

 private:
  std::mt19937 rng_{17};
};

// Speculative decoding on vs off: with every proposer (prompt lookup, a draft model, one that knows
// the answers but lies at times, one that guesses at random), mixed with the other requests'
// prefills and decodes, under small token budgets, preemption and prefix-cache hits, the outputs —
// tokens, logprobs, prompt logprobs, cumulative logprobs, finish reasons — are the baseline's bits.
TEST_F(EngineInvarianceTest, SpeculativeDecodingOnVsOff) {
  RunOptions o;
  o.speculative.method = "ngram";
  o.speculative.num_speculative_tokens = 4;
  o.speculative.prompt_lookup_min = 1;
  o.speculative.prompt_lookup_max = 3;
  const RunResult ngram = run(*model2_, *cases_, identity(), o, 2);
  expect_baseline(ngram, "ngram, k 4");
  EXPECT_GT(ngram.speculation.num_draft_tokens, 0);
  EXPECT_GT(ngram.speculation.num_accepted_tokens, 0);  // a random model's greedy loops get copied
  EXPECT_LT(ngram.speculation.num_accepted_tokens, ngram.speculation.num_draft_tokens);
  o.max_num_batched_tokens = 16;  // guesses share a step with chunked prefills and get cut
  expect_baseline(run(*model2_, *cases_, identity(), o, 3), "ngram, budget 16");
  o.max_num_batched_tokens = 8192;
  o.speculative.disable_by_batch_size = 2;  // off while two or more run: only the last one guesses
  const RunResult batch_off = run(*model2_, *cases_, identity(), o);
  expect_baseline(batch_off, "ngram, disable_by_batch_size 2");
  EXPECT_LT(batch_off.speculation.num_draft_tokens, ngram.speculation.num_draft_tokens);
  o.speculative.disable_by_batch_size = 1;
  EXPECT_EQ(run(*model2_, *cases_, identity(), o).speculation.num_draft_tokens, 0);

  RunOptions oracle;
  oracle.speculative.num_speculative_tokens = 5;
  oracle.proposer = std::make_shared<OracleProposer>(*cases_, *baseline_, 4);
  const RunResult told = run(*model2_, *cases_, identity(), oracle, 2);
  expect_baseline(told, "oracle, every 4th guess wrong");
  EXPECT_GT(told.speculation.acceptance_rate(), 0.5);
  EXPECT_LT(told.speculation.acceptance_rate(), 0.9);
  oracle.proposer = std::make_shared<OracleProposer>(*cases_, *baseline_, 0);
  oracle.num_blocks = 7;  // preemption and recomputation with guesses in flight
  const RunResult preempted = run(*model2_, *cases_, identity(), oracle);
  EXPECT_GT(preempted.preemptions, 0);
  expect_baseline(preempted, "oracle, never wrong, 7 KV blocks");
  EXPECT_GT(preempted.speculation.acceptance_rate(), 0.9);
  oracle.num_blocks = 256;
  const RunResult twice = run(*model2_, *cases_, identity(), oracle, 1000, 2);
  EXPECT_GT(twice.prefix_hit_tokens, 40);
  expect_baseline(twice, "oracle, prefix cache warm (second pass)");

  RunOptions random;
  random.speculative.num_speculative_tokens = 3;
  random.proposer = std::make_shared<RandomProposer>();
  const RunResult guessed = run(*model2_, *cases_, identity(), random, 2);
  expect_baseline(guessed, "random guesses");
  EXPECT_GT(guessed.speculation.num_draft_tokens, 0);
}

// A draft model (the same tiny model, so greedy guesses are mostly right, and a Llama of another
// architecture and weights, so most are wrong) in the engine with its own KV cache.
TEST_F(EngineInvarianceTest, SpeculativeDecodingWithADraftModel) {
  RunOptions o;
  o.speculative.method = "draft_model";
  o.speculative.model = "(loaded by the test)";
  o.speculative.num_speculative_tokens = 3;
  o.draft = model1_;
  const RunResult self = run(*model2_, *cases_, identity(), o, 2);
  expect_baseline(self, "the model as its own draft");
  EXPECT_GT(self.speculation.num_accepted_tokens, 0);
  // Greedy requests without min_tokens: the draft's greedy guesses are the model's tokens.
  std::vector<size_t> greedy;
  for (size_t i = 0; i < cases_->size(); ++i)
    if ((*cases_)[i].params.temperature == 0.0f && (*cases_)[i].params.min_tokens == 0) greedy.push_back(i);
  ASSERT_FALSE(greedy.empty());
  const RunResult exact = run(*model2_, *cases_, greedy, o);
  EXPECT_EQ(exact.speculation.num_accepted_tokens, exact.speculation.num_draft_tokens);
  EXPECT_GT(exact.speculation.num_draft_tokens, 4);
  TempDir other;
  write_tiny_model(other, "llama");
  const std::unique_ptr<CausalLM> llama = CausalLM::load(other.path().string(), pool2_);
  o.draft = llama.get();
  o.max_num_batched_tokens = 16;
  o.num_blocks = 12;
  const RunResult r = run(*model2_, *cases_, identity(), o, 3);
  expect_baseline(r, "a Llama draft, budget 16, 12 KV blocks");
  EXPECT_GT(r.speculation.num_draft_tokens, 0);
  // A draft with a shorter context than the model (48 positions; prompts reach 70 + outputs):
  // past its context it stops guessing, nothing fails.
  TempDir short_context;
  write_tiny_model(short_context, "qwen3", nullptr, [](nlohmann::json& c) { c["max_position_embeddings"] = 48; });
  const std::unique_ptr<CausalLM> short_draft = CausalLM::load(short_context.path().string(), pool2_);
  RunOptions s;
  s.speculative = o.speculative;
  s.draft = short_draft.get();
  const RunResult shorter = run(*model2_, *cases_, identity(), s, 2);
  expect_baseline(shorter, "a draft with a 48-token context");
  EXPECT_GT(shorter.speculation.num_draft_tokens, 0);
}

TEST_F(EngineInvarianceTest, BadRequestsAreRefusedAloneAndOthersComplete) {
  EngineConfig config;
  config.num_kv_blocks = 8;
  Engine engine(*model2_, nullptr, kEos, config);
  auto refuse = [&](const std::string& id, std::vector<int32_t> prompt, const SamplingParams& p) {
    try {
      engine.add_request(id, prompt, p);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  SamplingParams ok;
  ok.temperature = 0.0f;
  ok.max_tokens = 4;
  engine.add_request("good", {1, 2, 3}, ok);
  EXPECT_EQ(refuse("empty", {}, ok), "the prompt is empty");
  EXPECT_EQ(refuse("oov", {1, 300}, ok), "prompt token 1 = 300 is outside the vocabulary [0, 300)");
  SamplingParams bad = ok;
  bad.top_p = 1.5f;
  EXPECT_EQ(refuse("top_p", {1}, bad), "top_p must be in (0, 1], got 1.5");
  bad = ok;
  bad.n = 0;
  EXPECT_EQ(refuse("n", {1}, bad), "n must be in [1, 128], got 0");
  bad = ok;
  bad.max_tokens = 0;
  EXPECT_EQ(refuse("max", {1}, bad), "max_tokens must be at least 1, got 0");
  bad = ok;
  bad.max_tokens = 200;
  EXPECT_NE(refuse("kv", {1}, bad).find("the request needs 13 KV cache blocks"), std::string::npos);
  EXPECT_NE(refuse("long", std::vector<int32_t>(4096, 1), ok).find("leaves no room for output"), std::string::npos);
  bad = ok;
  bad.stop = {"x"};
  EXPECT_EQ(refuse("stop", {1}, bad), "stop strings need the model's tokenizer (tokenizer.json)");
  std::vector<RequestOutput> done;
  while (engine.has_unfinished())
    for (RequestOutput& o : engine.step()) done.push_back(std::move(o));
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].request_id, "good");
  EXPECT_EQ(done[0].outputs[0].token_ids.size(), 4u);
  EXPECT_EQ(done[0].outputs[0].finish_reason, "length");
}

TEST_F(EngineInvarianceTest, AbortFreesBlocksAndReportsAbort) {
  EngineConfig config;
  config.num_kv_blocks = 16;
  Engine engine(*model2_, nullptr, kEos, config);
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = 50;
  p.ignore_eos = true;
  engine.add_request("a", std::vector<int32_t>(30, 3), p);
  engine.add_request("b", std::vector<int32_t>(20, 4), p);
  engine.step();
  engine.step();
  EXPECT_LT(engine.kv_cache().num_free_blocks(), 16);
  engine.abort("a");
  std::vector<RequestOutput> out = engine.step();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].request_id, "a");
  EXPECT_EQ(out[0].outputs[0].finish_reason, "abort");
  while (engine.has_unfinished()) engine.step();
  EXPECT_EQ(engine.kv_cache().num_free_blocks(), 16);
}

// No request starves behind a long one: a 5-token request sent while a 16,384-token prompt is
// prefilling gets its first token in the next step and a token in every step after (the long prompt
// takes at most long_prefill_token_threshold, by default a quarter of the budget, of a step it
// shares), with the bits it gets alone. Before the threshold it waited for all 8 of the long
// prompt's 2048-token steps.
TEST(EngineSchedulingTest, ShortRequestIsNotStarvedByALongPrefill) {
  TempDir dir;
  write_tiny_model(dir, "qwen3", nullptr, [](nlohmann::json& c) { c["max_position_embeddings"] = 20000; });
  ThreadPool pool(2);
  const std::unique_ptr<CausalLM> model = CausalLM::load(dir.path().string(), &pool);
  EngineConfig config;
  config.num_kv_blocks = 16384 / 16 + 16;  // budget 2048, threshold 512 (the defaults)
  std::mt19937 rng(5);
  std::vector<int32_t> long_prompt(16384);
  for (int32_t& t : long_prompt) t = static_cast<int32_t>(rng() % 300);
  SamplingParams long_params;
  long_params.temperature = 0.0f;
  long_params.max_tokens = 1;
  const std::vector<int32_t> short_prompt = {17, 4, 250, 9, 88};
  SamplingParams short_params;
  short_params.temperature = 0.8f;
  short_params.seed = 3;
  short_params.max_tokens = 4;
  short_params.ignore_eos = true;
  short_params.logprobs = 2;

  Engine engine(*model, nullptr, kEos, config);
  engine.add_request("long", long_prompt, long_params);
  engine.step();
  engine.step();  // 4096 of its tokens computed: it is prefilling
  engine.add_request("short", short_prompt, short_params);
  std::vector<int64_t> tokens_per_step;  // the short request's, from its arrival
  RequestOutput short_out;
  while (short_out.request_id.empty()) {
    ASSERT_LT(tokens_per_step.size(), 20u) << "the short request starves";
    for (RequestOutput& out : engine.step())
      if (out.request_id == "short") short_out = std::move(out);
    int64_t sampled = 0;
    for (const auto& [id, n] : engine.last_step_tokens())
      if (id == "short") sampled = n;
    tokens_per_step.push_back(sampled);
  }
  EXPECT_EQ(tokens_per_step, (std::vector<int64_t>{1, 1, 1, 1}));  // first token in 1 step, then 1 per step
  EXPECT_EQ(engine.num_unfinished(), 1);                           // the long prompt is still prefilling
  engine.abort("long");
  while (engine.has_unfinished()) engine.step();

  Engine alone(*model, nullptr, kEos, config);
  alone.add_request("short", short_prompt, short_params);
  RequestOutput reference;
  while (alone.has_unfinished())
    for (RequestOutput& out : alone.step()) reference = std::move(out);
  EXPECT_EQ(diff(reference, short_out), "");
  EXPECT_EQ(short_out.outputs[0].token_ids.size(), 4u);
}

}  // namespace
}  // namespace ditto
