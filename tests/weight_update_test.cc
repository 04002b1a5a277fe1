// Weights updated in place (vLLM's weight-transfer API, docs/RL.md) against an engine loaded from a
// checkpoint that holds the new weights, bit for bit: every tensor (dense, MoE, biases and an untied
// head, Gemma's (1 + w) norms), part of them, through the shm transport; a refused update leaves the
// old weights serving bit for bit; no prefix-cache hit crosses versions; outputs carry the version.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "core/test_support.h"
#include "ditto/llm.h"
#include "tiny_model.h"

namespace ditto {
namespace {

using testing::TempDir;

// New weights: every value moved (norms too), so a tensor left unsent changes the outputs.
void shift(const std::string& /*name*/, std::vector<float>& values) {
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.8f * values[i] + 0.05f * std::sin(static_cast<float>(i));
}

// What a run gives, in bits: every choice's token ids and its tokens' logprob bit patterns.
struct Bits {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<uint32_t>> logprobs;
  bool operator==(const Bits&) const = default;
};

std::vector<PromptInput> prompts() {
  std::vector<PromptInput> p(3);
  p[0].token_ids = std::vector<int32_t>{5, 17, 42, 99, 100, 7, 3, 250, 11, 12, 13, 14, 15, 16, 17, 18, 19};
  p[1].token_ids = std::vector<int32_t>{1, 2, 3};
  p[2].token_ids = std::vector<int32_t>{200, 201, 202, 203, 204, 205, 206, 207, 208, 209, 210, 211, 212, 213, 214, 215};
  return p;
}

SamplingParams sampling() {
  SamplingParams s;
  s.temperature = 0.9f;
  s.n = 2;
  s.max_tokens = 12;
  s.logprobs = 0;
  s.seed = 5;
  s.ignore_eos = true;
  return s;
}

Bits run(LLM& llm, std::vector<std::string>* versions = nullptr) {
  Bits bits;
  for (const GenerateResult& r : llm.generate(prompts(), std::vector<SamplingParams>{sampling()})) {
    EXPECT_FALSE(r.error.has_value()) << *r.error;
    if (versions != nullptr) versions->push_back(r.output.weight_version);
    for (const CompletionOutput& c : r.output.outputs) {
      bits.tokens.push_back(c.token_ids);
      std::vector<uint32_t> lp;
      for (const SampledToken& t : c.logprobs) lp.push_back(std::bit_cast<uint32_t>(t.token.logprob));
      bits.logprobs.push_back(lp);
    }
  }
  return bits;
}

std::unique_ptr<LLM> load(const std::string& dir) {
  EngineArgs args;
  args.model = dir;
  args.threads = 2;
  return std::make_unique<LLM>(args);
}

// Every tensor of the checkpoint in `dir` (or only `only`), as a trainer would send them; the bytes
// are the store's (it must outlive the update).
std::vector<WeightTensor> tensors_of(const WeightStore& store, const std::string& only = "") {
  std::vector<WeightTensor> out;
  for (const std::string& name : store.names()) {
    if (!only.empty() && name != only) continue;
    const TensorInfo& t = store.get(name);
    out.push_back({name, std::string(dtype_name(t.dtype)), t.shape, t.data, t.nbytes});
  }
  return out;
}

class WeightUpdateTest : public ::testing::TestWithParam<const char*> {};

TEST_P(WeightUpdateTest, EveryTensorEqualsAFreshEngineOnTheNewWeights) {
  TempDir old_dir, new_dir;
  const std::string family = GetParam();
  auto llm = load(write_tiny_model(old_dir, family));
  const Bits before = run(*llm);
  const std::string new_path = write_tiny_model(new_dir, family, shift);
  const Bits want = run(*load(new_path));
  ASSERT_NE(before, want) << "the new weights must change the outputs for the test to mean anything";

  const WeightStore store = WeightStore::open(new_path);
  const std::vector<WeightTensor> all = tensors_of(store);
  llm->start_weight_update();
  // In three chunks, as a trainer streams them.
  const size_t third = all.size() / 3;
  llm->update_weights(std::vector<WeightTensor>(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(third)));
  llm->update_weights(std::vector<WeightTensor>(all.begin() + static_cast<std::ptrdiff_t>(third),
                                                all.begin() + 2 * static_cast<std::ptrdiff_t>(third)));
  llm->update_weights(std::vector<WeightTensor>(all.begin() + 2 * static_cast<std::ptrdiff_t>(third), all.end()));
  EXPECT_EQ(llm->weight_version(), "0");  // nothing changes before the finish
  llm->finish_weight_update("step-1");
  EXPECT_EQ(llm->weight_version(), "step-1");
  std::vector<std::string> versions;
  EXPECT_EQ(run(*llm, &versions), want) << family;
  for (const std::string& v : versions) EXPECT_EQ(v, "step-1");

  // And back: the old weights again give the old bits.
  const WeightStore old_store = WeightStore::open(old_dir.path().string());
  llm->start_weight_update();
  llm->update_weights(tensors_of(old_store));
  llm->finish_weight_update();
  EXPECT_EQ(llm->weight_version(), "2");
  EXPECT_EQ(run(*llm), before) << family;
}

INSTANTIATE_TEST_SUITE_P(Families, WeightUpdateTest,
                         ::testing::Values("qwen3", "qwen3_moe", "llama", "qwen2", "gemma3"));

TEST(WeightUpdate, OneTensorEqualsACheckpointWithOnlyItChanged) {
  TempDir old_dir, new_dir, want_dir;
  const std::string name = "model.layers.1.mlp.down_proj.weight";
  auto llm = load(write_tiny_model(old_dir, "llama"));
  const std::string new_path = write_tiny_model(new_dir, "llama", shift);
  const Bits want = run(*load(write_tiny_model(want_dir, "llama", [&](const std::string& n, std::vector<float>& v) {
    if (n == name) shift(n, v);
  })));
  const WeightStore store = WeightStore::open(new_path);
  llm->start_weight_update();
  llm->update_weights(tensors_of(store, name));
  llm->finish_weight_update("partial");
  EXPECT_EQ(run(*llm), want);
}

TEST(WeightUpdate, ARefusedChunkLeavesTheOldWeightsServing) {
  TempDir old_dir, new_dir;
  auto llm = load(write_tiny_model(old_dir, "qwen3"));
  const Bits before = run(*llm);
  const WeightStore store = WeightStore::open(write_tiny_model(new_dir, "qwen3", shift));
  const std::vector<WeightTensor> good = tensors_of(store);
  const std::vector<float> f32(64 * 64, 0.0f);
  struct Case {
    WeightTensor bad;
    const char* says;
  };
  const Case cases[] = {
      {{"model.layers.0.self_attn.q_prj.weight", "bfloat16", {64, 64}, good[0].data, 64 * 64 * 2},
       "q_prj.weight' is not a tensor"},
      {{"model.layers.0.self_attn.o_proj.weight", "bfloat16", {64, 32}, good[0].data, 64 * 32 * 2}, "shape [64, 32]"},
      {{"model.layers.0.self_attn.o_proj.weight", "float32", {64, 64}, f32.data(), f32.size() * 4},
       "a cast would round"},
      {{"model.layers.0.self_attn.o_proj.weight", "int8", {64, 64}, f32.data(), 64 * 64}, "dtype 'int8'"},
      {{"model.layers.0.self_attn.o_proj.weight", "bfloat16", {64, 64}, f32.data(), 10}, "10 bytes"},
  };
  for (const Case& c : cases) {
    llm->start_weight_update();
    llm->update_weights(std::vector<WeightTensor>(good.begin(), good.begin() + 4));  // staged, never applied
    std::vector<WeightTensor> chunk(good.begin() + 4, good.end());
    chunk.push_back(c.bad);
    try {
      llm->update_weights(chunk);
      ADD_FAILURE() << "accepted a bad tensor (" << c.says << ")";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("the old weights keep serving"), std::string::npos) << e.what();
    }
    // The update is cancelled: finishing it is refused, and the old weights serve, bit for bit.
    EXPECT_THROW(llm->finish_weight_update("never"), Error);
    EXPECT_EQ(llm->weight_version(), "0");
    EXPECT_EQ(run(*llm), before) << c.says;
  }
}

TEST(WeightUpdate, CallsOutOfOrderAreRefusedByName) {
  TempDir dir;
  auto llm = load(write_tiny_model(dir, "qwen3"));
  EXPECT_THROW(llm->update_weights(std::vector<WeightTensor>{}), Error);
  EXPECT_THROW(llm->finish_weight_update(), Error);
  llm->start_weight_update();
  EXPECT_THROW(llm->start_weight_update(), Error);
  try {
    llm->generate(prompts(), std::vector<SamplingParams>{sampling()});
    ADD_FAILURE() << "generate ran during an update";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a weight update is in progress"), std::string::npos) << e.what();
  }
  llm->finish_weight_update("empty");  // an update of no tensors only sets the version
  EXPECT_EQ(llm->weight_version(), "empty");
}

TEST(WeightUpdate, NoPrefixCacheHitCrossesVersions) {
  TempDir old_dir, new_dir;
  auto llm = load(write_tiny_model(old_dir, "qwen3"));
  const std::string new_path = write_tiny_model(new_dir, "qwen3", shift);
  const Bits want = run(*load(new_path));
  run(*llm);
  run(*llm);
  EXPECT_GT(llm->last_stats().prefix_hit_tokens, 0) << "the same prompts again hit the prefix cache";
  const WeightStore store = WeightStore::open(new_path);
  llm->start_weight_update();
  llm->update_weights(tensors_of(store));
  llm->finish_weight_update("v2");
  EXPECT_EQ(run(*llm), want);
  EXPECT_EQ(llm->last_stats().prefix_hit_tokens, 0) << "KV computed under the old weights was reused";
  EXPECT_EQ(run(*llm), want);
  EXPECT_GT(llm->last_stats().prefix_hit_tokens, 0) << "KV of the new weights is cached as usual";
}

TEST(WeightUpdate, SharedMemoryTransportEqualsAFreshEngine) {
  TempDir old_dir, new_dir, shm;
  auto llm = load(write_tiny_model(old_dir, "qwen3_moe"));
  const std::string new_path = write_tiny_model(new_dir, "qwen3_moe", shift);
  const Bits want = run(*load(new_path));
  // The trainer's side: every tensor's bytes at a 64-byte aligned offset of one file.
  const WeightStore store = WeightStore::open(new_path);
  const std::string region = shm.file("weights");
  nlohmann::json info = {{"names", nlohmann::json::array()},
                         {"dtype_names", nlohmann::json::array()},
                         {"shapes", nlohmann::json::array()},
                         {"offsets", nlohmann::json::array()}};
  {
    std::ofstream out(region, std::ios::binary);
    size_t offset = 0;
    for (const WeightTensor& t : tensors_of(store)) {
      offset = (offset + 63) / 64 * 64;
      out.seekp(static_cast<std::streamoff>(offset));
      out.write(static_cast<const char*>(t.data), static_cast<std::streamsize>(t.nbytes));
      info["names"].push_back(t.name);
      info["dtype_names"].push_back("bfloat16");
      info["shapes"].push_back(t.shape);
      info["offsets"].push_back(offset);
      offset += t.nbytes;
    }
  }
  EXPECT_THROW(llm->init_weight_transfer_engine(R"({"path": "/nonexistent/ditto-weights"})"), Error);
  EXPECT_THROW(llm->init_weight_transfer_engine(R"({"pth": "x"})"), Error);
  llm->init_weight_transfer_engine(nlohmann::json{{"path", region}}.dump());
  llm->start_weight_update();
  nlohmann::json bad = info;
  bad["offsets"][1] = 1 << 30;
  try {
    llm->update_weights(bad.dump());
    ADD_FAILURE() << "accepted an offset past the file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("end past"), std::string::npos) << e.what();
  }
  llm->start_weight_update();
  llm->update_weights(info.dump());
  llm->finish_weight_update("shm-1");
  EXPECT_EQ(run(*llm), want);
}

}  // namespace
}  // namespace ditto
