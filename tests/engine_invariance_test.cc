// The engine's contract, compared bit for bit on a tiny model: a request's tokens, logprobs and
// cumulative logprob do not depend on what runs beside it (alone vs together), on arrival order,
// on the token budget (chunked prefill at different offsets), on prefix-cache hits, on
// preemption and recomputation, or on the thread count; and the logprob a token got in decode
// equals its prompt logprob when the finished sequence is re-scored.
#include "engine_invariance_fixture.h"

namespace ditto::engine_invariance {
namespace {

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
  EXPECT_EQ(refuse("oov", {1, 300}, ok), "prompt token 1 = 300 is out of vocabulary (the vocabulary is [0, 300))");
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

// vLLM's num_cached_tokens (issue 30): the prompt tokens the prefix cache held when a request first
// ran — 0 cold, the whole blocks before the last token when the same prompt comes again (its
// outputs the same bits), 0 with prefix caching off; a kDelta request's reports carry it too.
TEST_F(EngineInvarianceTest, NumCachedTokensCountsPrefixCacheHits) {
  for (bool caching : {true, false}) {
    EngineConfig config;
    config.block_size = 16;
    config.num_kv_blocks = 64;
    config.enable_prefix_caching = caching;
    Engine engine(*model2_, nullptr, kEos, config);
    SamplingParams p;
    p.temperature = 0.0f;
    p.max_tokens = 4;
    p.ignore_eos = true;
    const std::vector<int32_t> prompt(50, 7);
    auto run_one = [&](const std::string& id, RequestOutputKind kind) {
      SamplingParams q = p;
      q.output_kind = kind;
      engine.add_request(id, prompt, q);
      RequestOutput whole;
      std::vector<int64_t> reported;
      while (engine.has_unfinished())
        for (RequestOutput& out : engine.step()) {
          reported.push_back(out.num_cached_tokens);
          append_delta(whole, std::move(out));
        }
      for (int64_t n : reported) EXPECT_EQ(n, whole.num_cached_tokens) << id;  // the same in every report
      return whole;
    };
    const RequestOutput cold = run_one("cold", RequestOutputKind::kFinalOnly);
    const RequestOutput warm = run_one("warm", RequestOutputKind::kDelta);
    EXPECT_EQ(cold.num_cached_tokens, 0);
    EXPECT_EQ(warm.num_cached_tokens, caching ? 48 : 0) << "caching " << caching;  // 3 whole blocks of 16
    EXPECT_EQ(warm.outputs.at(0).token_ids, cold.outputs.at(0).token_ids);
  }
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
}  // namespace ditto::engine_invariance
