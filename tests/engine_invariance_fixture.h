// The fixture of the engine invariance suites (engine_invariance_test.cc,
// engine_speculative_invariance_test.cc): a tiny Qwen3 model loaded with 1 and 2 threads, a mix
// of requests (make_cases) and each request's output alone, the baseline every run is compared
// with bit for bit.
#pragma once

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
#include "engine/invariance_check.h"
#include "engine/output_diff.h"
#include "model/causal_lm.h"
#include "tiny_model.h"

namespace ditto::engine_invariance {

using testing::TempDir;

struct Case {
  std::string id;
  std::vector<int32_t> prompt;
  SamplingParams params;
};

const std::vector<int32_t> kEos = {7};

inline std::vector<Case> make_cases() {
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
    p = contract_sampling_params(i);
    p.max_tokens = 6 + (i * 5) % 17;
    p.ignore_eos = i % 3 != 0;
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
  bool routed_experts = false;  // EngineConfig::enable_return_routed_experts
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
inline RunResult run(const CausalLM& model, const std::vector<Case>& cases, const std::vector<size_t>& order,
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
  config.enable_return_routed_experts = o.routed_experts;
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

  inline static TempDir* dir_ = nullptr;
  inline static ThreadPool* pool1_ = nullptr;
  inline static ThreadPool* pool2_ = nullptr;
  inline static CausalLM* model1_ = nullptr;
  inline static CausalLM* model2_ = nullptr;
  inline static std::vector<Case>* cases_ = nullptr;
  inline static std::map<std::string, RequestOutput>* baseline_ = nullptr;
};

}  // namespace ditto::engine_invariance
