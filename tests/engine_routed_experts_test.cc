// Routed experts (EngineConfig::enable_return_routed_experts) under the engine's contract, on the
// tiny Qwen3-MoE (layer 0 sparse: 8 experts, top 3; layer 1 dense): every finished choice carries
// one row per token that went through the model (prompt + output - 1), and the rows are the same
// ints alone or in a batch, in any order, under any token budget, with prefix-cache hits,
// preemption, speculative guesses, kDelta streaming and 1 or 2 threads; they equal the rows of one
// prefill of the finished sequence (so each row is its position's). Correctness against the
// float64 reference: tests/reference/test_routed_experts_parity.py.
#include "engine/model_runner.h"
#include "engine_invariance_fixture.h"

#include <numeric>
#include <set>

namespace ditto::engine_invariance {
namespace {

// Guesses that are almost always wrong, so that the rows of rejected guesses are written and must
// be overwritten by the token that replaces them.
class WrongProposer : public Proposer {
 public:
  void propose(std::span<const ProposalRequest> requests, std::vector<std::vector<int32_t>>& proposals) override {
    proposals.assign(requests.size(), {});
    for (size_t i = 0; i < requests.size(); ++i)
      for (int64_t j = 0; j < requests[i].max_tokens; ++j)
        proposals[i].push_back((requests[i].seq->token_ids.back() * 31 + static_cast<int32_t>(j) * 7 + 5) % 300);
  }
};

// The tiny MoE on 1 and 2 threads, a dense model, the cases and each case's output alone.
struct Suite {
  TempDir dir, dense_dir;
  ThreadPool pool1{1}, pool2{2};
  std::unique_ptr<CausalLM> model1, model2;
  std::vector<Case> cases = make_cases();
  std::vector<size_t> all;  // every case, in order
  std::map<std::string, RequestOutput> baseline;

  Suite() {
    write_tiny_model(dir, "qwen3_moe");
    write_tiny_model(dense_dir, "qwen3");
    model1 = CausalLM::load(dir.path().string(), &pool1);
    model2 = CausalLM::load(dir.path().string(), &pool2);
    for (size_t i = 0; i < cases.size(); ++i) {
      all.push_back(i);
      baseline[cases[i].id] = run(*model2, cases, {i}, options()).outputs.at(cases[i].id);
    }
  }
  static RunOptions options() {
    RunOptions o;
    o.routed_experts = true;
    return o;
  }
};

class RoutedExpertsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { s_ = new Suite(); }
  static void TearDownTestSuite() { delete s_; }
  static RunOptions options() { return Suite::options(); }
  static void expect_baseline(const RunResult& r, const std::string& label) {
    ASSERT_EQ(r.outputs.size(), s_->cases.size()) << label;
    for (const Case& c : s_->cases) {
      const RequestOutput& got = r.outputs.at(c.id);
      EXPECT_EQ(diff(s_->baseline.at(c.id), got), "") << label << ", request " << c.id;
      for (const CompletionOutput& o : got.outputs) EXPECT_TRUE(o.routed_experts.has_value()) << label << " " << c.id;
    }
  }
  inline static Suite* s_ = nullptr;
};

// The rows of one prefill of `tokens` through a fresh runner: what the engine's rows must equal.
RoutedExperts prefill_rows(const CausalLM& model, const std::vector<int32_t>& tokens) {
  const int64_t block_size = 16;
  const auto n = static_cast<int64_t>(tokens.size());
  std::vector<int32_t> table(static_cast<size_t>((n + block_size - 1) / block_size));
  std::iota(table.begin(), table.end(), 0);
  ModelRunner runner(model, static_cast<int64_t>(table.size()), block_size, /*record_routed_experts=*/true);
  SequenceStep step;
  step.token_ids = tokens;
  step.block_table = table;
  runner.step(std::span<const SequenceStep>(&step, 1));
  return runner.routed_experts()->read(table, block_size, n);
}

TEST_F(RoutedExpertsTest, ShapeIdsAndPositions) {
  int64_t rows = 0;
  for (const Case& c : s_->cases) {
    const RequestOutput& out = s_->baseline.at(c.id);
    for (const CompletionOutput& o : out.outputs) {
      ASSERT_TRUE(o.routed_experts.has_value()) << c.id;
      const RoutedExperts& r = *o.routed_experts;
      const auto num_tokens = static_cast<int64_t>(c.prompt.size() + o.token_ids.size()) - 1;
      EXPECT_EQ(r.num_tokens, num_tokens) << c.id;
      EXPECT_EQ(r.num_moe_layers, 1) << c.id;  // layer 1 is dense (mlp_only_layers)
      EXPECT_EQ(r.num_experts_per_tok, 3) << c.id;
      EXPECT_EQ(r.num_experts, 8) << c.id;
      ASSERT_EQ(r.expert_ids.size(), static_cast<size_t>(num_tokens * 3)) << c.id;
      for (int64_t t = 0; t < num_tokens; ++t) {
        const std::set<uint16_t> row(r.expert_ids.begin() + t * 3, r.expert_ids.begin() + t * 3 + 3);
        EXPECT_EQ(row.size(), 3u) << c.id << " row " << t;  // k distinct experts
        EXPECT_LT(*row.rbegin(), 8) << c.id << " row " << t;
      }
      // Row t is position t's: one prefill of the finished sequence (less its last token) gives the same ints.
      std::vector<int32_t> seq = c.prompt;
      seq.insert(seq.end(), o.token_ids.begin(), o.token_ids.end() - 1);
      EXPECT_EQ(prefill_rows(*s_->model2, seq), r) << c.id << " choice " << o.index;
      rows += num_tokens;
    }
  }
  EXPECT_GT(rows, 300);
}

TEST_F(RoutedExpertsTest, AloneEqualsTogetherShuffledAndChunked) {
  expect_baseline(run(*s_->model2, s_->cases, s_->all, options()), "all at once");
  std::mt19937 rng(5);
  for (int64_t budget : {7, 16, 64}) {
    std::vector<size_t> order = s_->all;
    std::shuffle(order.begin(), order.end(), rng);
    RunOptions o = options();
    o.max_num_batched_tokens = budget;
    expect_baseline(run(*s_->model2, s_->cases, order, o, 3), "budget " + std::to_string(budget) + ", shuffled");
  }
}

// A prefix-cache hit skips the cached prompt tokens' forward pass; their rows are the ones stored
// with the cached blocks, the same ints a recomputation gives.
TEST_F(RoutedExpertsTest, PrefixCacheHitsPreemptionAndThreads) {
  const RunResult twice = run(*s_->model2, s_->cases, s_->all, options(), 1000, 2);
  EXPECT_GT(twice.prefix_hit_tokens, 40);
  expect_baseline(twice, "prefix cache warm (second pass)");
  RunOptions off = options();
  off.prefix_caching = false;
  expect_baseline(run(*s_->model2, s_->cases, s_->all, off), "prefix caching off");
  RunOptions small = options();
  small.num_blocks = 7;
  const RunResult preempted = run(*s_->model2, s_->cases, s_->all, small);
  EXPECT_GT(preempted.preemptions, 0);
  expect_baseline(preempted, "7 KV blocks");
  expect_baseline(run(*s_->model1, s_->cases, s_->all, options()), "1 thread");
}

TEST_F(RoutedExpertsTest, SpeculativeDecodingAndDeltaReports) {
  RunOptions o = options();
  o.speculative.method = "ngram";
  o.speculative.num_speculative_tokens = 4;
  o.speculative.prompt_lookup_min = 1;
  o.speculative.prompt_lookup_max = 3;
  expect_baseline(run(*s_->model2, s_->cases, s_->all, o, 2), "ngram, k 4");
  RunOptions oracle = options();  // long accepted runs, a rejection every 4th output position
  oracle.proposer = std::make_shared<OracleProposer>(s_->cases, s_->baseline, 4);
  oracle.speculative.num_speculative_tokens = 5;
  const RunResult accepted = run(*s_->model2, s_->cases, s_->all, oracle, 3);
  EXPECT_GT(accepted.speculation.num_accepted_tokens, 50);
  expect_baseline(accepted, "oracle guesses, every 4th wrong");
  RunOptions wrong = options();
  wrong.proposer = std::make_shared<WrongProposer>();
  wrong.speculative.num_speculative_tokens = 3;
  const RunResult rejected = run(*s_->model2, s_->cases, s_->all, wrong, 3);
  EXPECT_GT(rejected.speculation.num_draft_tokens, rejected.speculation.num_accepted_tokens);
  expect_baseline(rejected, "guesses mostly rejected");

  std::vector<Case> cases = s_->cases;
  for (Case& c : cases) c.params.output_kind = RequestOutputKind::kDelta;
  RunOptions chunked = options();
  chunked.max_num_batched_tokens = 16;
  const RunResult streamed = run(*s_->model2, cases, s_->all, chunked, 3);
  for (const Case& c : cases) {
    EXPECT_EQ(diff(s_->baseline.at(c.id), streamed.outputs.at(c.id)), "") << c.id;
    int carried = 0;  // the rows come once per choice, in the report that finishes it
    for (const RequestOutput& report : streamed.reports.at(c.id))
      for (const CompletionOutput& d : report.outputs) {
        EXPECT_EQ(d.routed_experts.has_value(), !d.finish_reason.empty()) << c.id;
        carried += d.routed_experts.has_value();
      }
    EXPECT_EQ(carried, c.params.n) << c.id;
  }
}

TEST_F(RoutedExpertsTest, OffByDefaultAndRefusedOnADenseModel) {
  const RunResult off = run(*s_->model2, s_->cases, {0}, RunOptions{});
  for (const CompletionOutput& o : off.outputs.at(s_->cases[0].id).outputs) EXPECT_FALSE(o.routed_experts);
  const auto dense = CausalLM::load(s_->dense_dir.path().string(), &s_->pool1);
  EngineConfig config;
  config.num_kv_blocks = 8;
  config.enable_return_routed_experts = true;
  try {
    Engine engine(*dense, nullptr, kEos, config);
    FAIL() << "a dense model with enable_return_routed_experts was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.param(), "enable_return_routed_experts");
    EXPECT_NE(std::string(e.what()).find("no MoE layers"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ditto::engine_invariance
