// Invariance of the forward pass, compared as bit patterns: a sequence's logits do not depend on
// the batch around it, on how its prompt is chunked, on prefill vs decode, on the KV block size
// or physical blocks, or on the thread count. Correctness against an independent float64
// reference lives in tests/reference/.
#include "model/causal_lm.h"  // the forward pass under test, driven through the engine's ModelRunner

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include <nlohmann/json.hpp>

#include "checkpoint/safetensors_writer.h"
#include "core/test_support.h"
#include "engine/model_runner.h"
#include "tiny_model.h"

namespace ditto {
namespace {

using testing::TempDir;

struct Seq {
  std::vector<int32_t> ids;
};

// Runs the sequences as one flat batch. chunk[s] > 0 splits sequence s into prompt chunks of that
// many tokens run in successive steps (the others run whole in the first step). Returns per
// sequence its all-position logits [len, vocab].
std::vector<std::vector<float>> run(const CausalLM& model, const std::vector<Seq>& seqs, int64_t block_size,
                                    const std::vector<int>& chunk = {}, int block_offset = 0) {
  const int64_t vocab = model.config().vocab_size;
  int64_t num_blocks = block_offset;
  for (const Seq& s : seqs) num_blocks += (static_cast<int64_t>(s.ids.size()) + block_size - 1) / block_size;
  ModelRunner runner(model, num_blocks, block_size);
  // Hand out blocks from the top of the pool down, offset, so physical ids differ between runs.
  std::vector<std::vector<int32_t>> tables;
  int32_t next = static_cast<int32_t>(num_blocks) - 1;
  for (const Seq& s : seqs) {
    std::vector<int32_t> t;
    for (size_t i = 0; i < (s.ids.size() + block_size - 1) / block_size; ++i) t.push_back(next--);
    tables.push_back(t);
  }
  std::vector<std::vector<float>> out(seqs.size());
  std::vector<size_t> done(seqs.size(), 0);
  for (;;) {
    std::vector<SequenceStep> steps;
    std::vector<size_t> which;
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (done[i] == seqs[i].ids.size()) continue;
      const size_t n = (i < chunk.size() && chunk[i] > 0) ? std::min<size_t>(chunk[i], seqs[i].ids.size() - done[i])
                                                          : seqs[i].ids.size() - done[i];
      steps.push_back(SequenceStep{std::span<const int32_t>(seqs[i].ids).subspan(done[i], n),
                                   static_cast<int32_t>(done[i]), tables[i], true});
      which.push_back(i);
    }
    if (steps.empty()) break;
    const std::vector<float> logits = runner.step(steps).logits;
    size_t row = 0;
    for (size_t k = 0; k < steps.size(); ++k) {
      const size_t n = steps[k].token_ids.size();
      out[which[k]].insert(out[which[k]].end(), logits.begin() + row * vocab, logits.begin() + (row + n) * vocab);
      row += n;
      done[which[k]] += n;
    }
  }
  return out;
}

void expect_same_bits(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) {
      ADD_FAILURE() << what << ": first difference at element " << i << ": " << a[i] << " vs " << b[i];
      return;
    }
  }
}

std::vector<int32_t> random_ids(std::mt19937& rng, size_t n) {
  std::uniform_int_distribution<int32_t> d(0, 299);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

class CausalLMInvarianceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    pool1_ = std::make_unique<ThreadPool>(1);
    model_ = CausalLM::load(write_tiny_model(dir_, GetParam()), pool1_.get());
  }
  TempDir dir_;
  std::unique_ptr<ThreadPool> pool1_;
  std::unique_ptr<CausalLM> model_;
};

TEST_P(CausalLMInvarianceTest, LogitsAreFiniteAndNotConstant) {
  std::mt19937 rng(1);
  const auto out = run(*model_, {{random_ids(rng, 20)}}, 16);
  float lo = out[0][0], hi = out[0][0];
  for (float v : out[0]) {
    ASSERT_TRUE(std::isfinite(v));
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_GT(hi - lo, 0.1f);
}

TEST_P(CausalLMInvarianceTest, SequenceAloneEqualsSequenceInsideBatches) {
  std::mt19937 rng(2);
  const Seq target{random_ids(rng, 45)};  // > one attention tile of 32
  const auto alone = run(*model_, {target}, 16);
  for (int trial = 0; trial < 6; ++trial) {
    std::vector<Seq> batch;
    const int others = 1 + trial * 2;
    const int at = static_cast<int>(rng() % (others + 1));
    for (int i = 0; i < others; ++i) batch.push_back({random_ids(rng, 1 + rng() % 60)});
    batch.insert(batch.begin() + at, target);
    const auto together = run(*model_, batch, 16);
    expect_same_bits(alone[0], together[at],
                     "batch of " + std::to_string(batch.size()) + ", index " + std::to_string(at));
  }
}

TEST_P(CausalLMInvarianceTest, ChunkedPrefillAndDecodeEqualOnePrefill) {
  std::mt19937 rng(3);
  const Seq target{random_ids(rng, 70)};
  const auto whole = run(*model_, {target}, 16);
  for (int chunk : {1, 3, 16, 33}) {  // chunk 1 is pure token-by-token decode
    const auto chunked = run(*model_, {{random_ids(rng, 20)}, target}, 16, {5, chunk});
    expect_same_bits(whole[0], chunked[1], "chunk " + std::to_string(chunk));
  }
}

TEST_P(CausalLMInvarianceTest, BlockSizeAndPhysicalBlocksDoNotMatter) {
  std::mt19937 rng(4);
  const Seq target{random_ids(rng, 50)};
  const auto base = run(*model_, {target}, 16);
  expect_same_bits(base[0], run(*model_, {target}, 5, {}, 7)[0], "block_size 5, shifted blocks");
  expect_same_bits(base[0], run(*model_, {target}, 64, {}, 3)[0], "block_size 64");
}

TEST_P(CausalLMInvarianceTest, ThreadCountDoesNotMatter) {
  std::mt19937 rng(5);
  const std::vector<Seq> batch{{random_ids(rng, 40)}, {random_ids(rng, 7)}, {random_ids(rng, 33)}};
  const auto one = run(*model_, batch, 16);
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    const auto model = CausalLM::load(dir_.path().string(), &pool);
    const auto many = run(*model, batch, 16);
    for (size_t i = 0; i < batch.size(); ++i)
      expect_same_bits(one[i], many[i], std::to_string(threads) + " threads, sequence " + std::to_string(i));
  }
}

INSTANTIATE_TEST_SUITE_P(Families, CausalLMInvarianceTest,
                         ::testing::Values("qwen3", "llama", "qwen3_moe", "qwen2", "mistral", "mistral_window",
                                           "gemma3"));

TEST(CausalLMTest, RejectsTokenIdsOutsideTheVocabulary) {
  TempDir dir;
  ThreadPool pool(1);
  const auto model = CausalLM::load(write_tiny_model(dir, "qwen3"), &pool);
  ModelRunner runner(*model, 1, 16);
  const std::vector<int32_t> ids{1, 300};
  const std::vector<int32_t> table{0};
  const SequenceStep step{ids, 0, table, true};
  const std::string msg = testing::error_message([&] { runner.step({&step, 1}); }, ErrorCode::kInvalidArgument);
  DITTO_EXPECT_MESSAGE_HAS(msg, "token id 300", "vocabulary");
}

// All-position logits of four sequences from a tiny MoE model written with `edit`: each run
// alone (batched = false) or all four in one batch, prompts in chunks of 5 tokens.
std::vector<std::vector<float>> moe_logits(const TensorEdit& edit, bool batched) {
  TempDir dir;
  ThreadPool pool(2);
  const auto model = CausalLM::load(write_tiny_model(dir, "qwen3_moe", edit), &pool);
  std::mt19937 rng(21);
  std::vector<Seq> seqs;
  for (size_t n : {9, 1, 33, 17}) seqs.push_back({random_ids(rng, n)});
  if (batched) return run(*model, seqs, 16, {5, 0, 5, 0});
  std::vector<std::vector<float>> out;
  for (const Seq& s : seqs) out.push_back(run(*model, {s}, 16)[0]);
  return out;
}

// Router ties: layer 0's router is all zeros, so all 8 experts' probabilities are bitwise equal
// and the top 3 must be experts 0, 1, 2 (ties to the lower id) — in any batch, alone or together.
TEST(CausalLMTest, MoeRouterTiesGoToTheLowerExpertIdInEveryBatch) {
  auto zero_router = [](const std::string& name, std::vector<float>& v) {
    if (name == "model.layers.0.mlp.gate.weight") std::fill(v.begin(), v.end(), 0.0f);
  };
  const auto alone = moe_logits(zero_router, false);
  const auto batched = moe_logits(zero_router, true);
  for (size_t i = 0; i < alone.size(); ++i) expect_same_bits(alone[i], batched[i], "sequence " + std::to_string(i));
  // Experts 3..7 are never chosen: changing them changes nothing; changing expert 2 does.
  auto unused_changed = [&](const std::string& name, std::vector<float>& v) {
    zero_router(name, v);
    for (int e = 3; e < 8; ++e)
      if (name.rfind("model.layers.0.mlp.experts." + std::to_string(e) + ".", 0) == 0)
        for (float& x : v) x = -x * 3.0f;
  };
  const auto other = moe_logits(unused_changed, true);
  for (size_t i = 0; i < alone.size(); ++i) expect_same_bits(alone[i], other[i], "unused experts changed");
  auto chosen_changed = [&](const std::string& name, std::vector<float>& v) {
    zero_router(name, v);
    if (name == "model.layers.0.mlp.experts.2.down_proj.weight")
      for (float& x : v) x = -x;
  };
  const auto changed = moe_logits(chosen_changed, false);
  EXPECT_NE(std::memcmp(alone[0].data(), changed[0].data(), alone[0].size() * sizeof(float)), 0)
      << "expert 2 (tied at the 3rd place) should be one of the chosen";
}

// mlp_only_layers and decoder_sparse_step decide which layers are sparse; decode_weight_bytes
// counts the active weights (router and top-k experts) of those.
TEST(CausalLMTest, MoeLayersAreTheOnesTheConfigSelects) {
  TempDir dir;
  ThreadPool pool(1);
  const auto model = CausalLM::load(write_tiny_model(dir, "qwen3_moe"), &pool);
  EXPECT_TRUE(model->config().is_moe_layer(0));
  EXPECT_FALSE(model->config().is_moe_layer(1));  // mlp_only_layers [1]
  // Active bytes: the router and 3 of 8 experts on layer 0, the dense MLP on layer 1.
  const int64_t hidden = 64, mi = 32, inter = 96, bf16 = 2;
  const int64_t attn = (64 + 2 * 32) * hidden * bf16 + hidden * 64 * bf16;  // qkv + o
  const int64_t norms = (2 * hidden + 2 * 16) * 4;
  const int64_t expected = 2 * (attn + norms) + (8 * hidden + 3 * (2 * mi * hidden + hidden * mi)) * bf16 +
                           (2 * inter * hidden + hidden * inter) * bf16 + hidden * 4 + 300 * hidden * bf16;
  EXPECT_EQ(model->decode_weight_bytes(), expected);
}

}  // namespace
}  // namespace ditto
