// The server's engine thread on a tiny model with the real Qwen3 tokenizer: reports streamed to
// channels rebuild outputs that are bit-identical to the same request run alone, whatever else
// was submitted concurrently from other threads; refusals, a full queue and aborts.
#include "server/async_engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <filesystem>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "../../tests/tiny_model.h"
#include "core/error.h"
#include "core/test_support.h"
#include "engine/llm_engine.h"
#include "server/metrics.h"

namespace ditto {
namespace {

using testing::TempDir;

std::string tiny_model_with_tokenizer(const TempDir& dir) {
  write_tiny_model(dir, "qwen3");
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    std::filesystem::copy_file(std::string(DITTO_QWEN3_TOKENIZER_DIR) + "/" + f, dir.file(f));
  return dir.path().string();
}

struct Req {
  std::vector<int32_t> prompt;
  SamplingParams params;
};

std::vector<Req> make_requests() {
  std::mt19937 rng(3);
  std::vector<Req> out;
  for (int i = 0; i < 12; ++i) {
    Req r;
    r.prompt.resize(static_cast<size_t>(1 + (i * 29) % 90));
    for (int32_t& t : r.prompt) t = static_cast<int32_t>(rng() % 300);
    SamplingParams& p = r.params;
    p.max_tokens = 5 + (i * 7) % 23;
    p.ignore_eos = true;
    p.temperature = i % 3 == 0 ? 0.0f : 0.9f;
    p.seed = 100 + i;
    if (i % 4 == 1) p.n = 2;
    if (i % 5 == 2) p.logprobs = 3;
    if (i % 6 == 3) p.prompt_logprobs = 1;
    // Half stream (a report per step), half wait for the whole output: the route is the same.
    p.output_kind = i % 2 == 0 ? RequestOutputKind::kDelta : RequestOutputKind::kFinalOnly;
    out.push_back(r);
  }
  return out;
}

// Runs `requests[i]` for every i in `which` through `engine`, each from its own thread, and
// returns the rebuilt outputs (or the errors) by index.
std::map<size_t, RequestOutput> run(AsyncEngine& engine, const std::vector<Req>& requests,
                                    const std::vector<size_t>& which, const std::string& tag) {
  std::map<size_t, RequestOutput> out;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (size_t i : which) {
    threads.emplace_back([&, i] {
      auto channel = std::make_shared<OutputChannel>();
      engine.submit(tag + std::to_string(i), requests[i].prompt, requests[i].params, "", channel, 0);
      RequestOutput acc;
      bool done = false;
      while (!done) {
        for (OutputChannel::Item& item : channel->pop(std::chrono::milliseconds(100))) {
          ASSERT_TRUE(item.error.empty()) << item.error;
          if (!item.report) continue;
          done = item.report->finished;
          append_delta(acc, std::move(*item.report));
        }
      }
      std::lock_guard lock(mu);
      out[i] = std::move(acc);
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

void expect_same(const RequestOutput& a, const RequestOutput& b, const std::string& label) {
  ASSERT_EQ(a.outputs.size(), b.outputs.size()) << label;
  EXPECT_EQ(a.prompt_token_ids, b.prompt_token_ids) << label;
  ASSERT_EQ(a.prompt_logprobs.size(), b.prompt_logprobs.size()) << label;
  for (size_t i = 0; i < a.prompt_logprobs.size(); ++i) {
    ASSERT_EQ(a.prompt_logprobs[i].has_value(), b.prompt_logprobs[i].has_value()) << label;
    if (a.prompt_logprobs[i]) {
      EXPECT_EQ(std::bit_cast<uint32_t>(a.prompt_logprobs[i]->token.logprob),
                std::bit_cast<uint32_t>(b.prompt_logprobs[i]->token.logprob))
          << label << " prompt token " << i;
    }
  }
  for (size_t c = 0; c < a.outputs.size(); ++c) {
    const CompletionOutput& x = a.outputs[c];
    const CompletionOutput& y = b.outputs[c];
    EXPECT_EQ(x.token_ids, y.token_ids) << label << " choice " << c;
    EXPECT_EQ(x.text, y.text) << label << " choice " << c;
    EXPECT_EQ(x.finish_reason, y.finish_reason) << label << " choice " << c;
    EXPECT_EQ(std::bit_cast<uint64_t>(x.cumulative_logprob), std::bit_cast<uint64_t>(y.cumulative_logprob)) << label;
    ASSERT_EQ(x.logprobs.size(), y.logprobs.size()) << label;
    for (size_t t = 0; t < x.logprobs.size(); ++t) {
      EXPECT_EQ(std::bit_cast<uint32_t>(x.logprobs[t].token.logprob),
                std::bit_cast<uint32_t>(y.logprobs[t].token.logprob))
          << label << " choice " << c << " token " << t;
      ASSERT_EQ(x.logprobs[t].top_logprobs.size(), y.logprobs[t].top_logprobs.size());
      for (size_t k = 0; k < x.logprobs[t].top_logprobs.size(); ++k)
        EXPECT_EQ(x.logprobs[t].top_logprobs[k].token_id, y.logprobs[t].top_logprobs[k].token_id);
    }
  }
}

class AsyncEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    EngineArgs o;
    o.model = tiny_model_with_tokenizer(*dir_);
    o.threads = 2;
    o.kv_cache_memory = 4 << 20;
    llm_ = new LLMEngine(o);
  }
  static void TearDownTestSuite() {
    delete llm_;
    delete dir_;
  }
  static TempDir* dir_;
  static LLMEngine* llm_;
};
TempDir* AsyncEngineTest::dir_ = nullptr;
LLMEngine* AsyncEngineTest::llm_ = nullptr;

TEST_F(AsyncEngineTest, ConcurrentClientsGetTheBitsOfTheRequestAlone) {
  const std::vector<Req> requests = make_requests();
  ServerMetrics metrics("tiny");
  AsyncEngine engine(*llm_, {}, metrics);
  std::map<size_t, RequestOutput> alone;
  for (size_t i = 0; i < requests.size(); ++i) alone[i] = run(engine, requests, {i}, "alone-").at(i);
  std::vector<size_t> all(requests.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  for (int round = 0; round < 2; ++round) {
    const std::map<size_t, RequestOutput> together =
        run(engine, requests, all, "together" + std::to_string(round) + "-");
    int64_t tokens = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
      expect_same(alone.at(i), together.at(i), "request " + std::to_string(i) + " round " + std::to_string(round));
      for (const CompletionOutput& c : together.at(i).outputs) tokens += static_cast<int64_t>(c.token_ids.size());
    }
    EXPECT_GT(tokens, 150);
  }
  EXPECT_EQ(engine.num_unfinished(), 0);
  const std::string text = metrics.render();
  EXPECT_NE(text.find("ditto:time_to_first_token_seconds_count{model_name=\"tiny\"} 36"), std::string::npos) << text;
  EXPECT_NE(text.find("ditto:request_success_total{model_name=\"tiny\",finished_reason=\"length\"} 36"),
            std::string::npos);
}

// The sum of the samples named `name` (any labels) in an exposition text.
double sample_sum(const std::string& text, const std::string& name) {
  double total = 0.0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(name + "{", 0) == 0 || line.rfind(name + " ", 0) == 0)
      total += std::stod(line.substr(line.rfind(' ')));
  return total;
}

// vLLM's test_metrics_counts on the engine thread: requests one after another, each counted once in
// every per-request histogram with the engine's own numbers (issue 30).
TEST_F(AsyncEngineTest, PerRequestMetricsCountWhatTheEngineDid) {
  ServerMetrics metrics("tiny");
  AsyncEngine engine(*llm_, {}, metrics);
  Req r;
  r.prompt = {3, 1, 4, 1, 5, 9, 2};
  r.params.max_tokens = 5;
  r.params.ignore_eos = true;
  r.params.temperature = 0.0f;
  const int num_requests = 3;
  for (int i = 0; i < num_requests; ++i) run(engine, {r}, {0}, "seq" + std::to_string(i));
  const std::string t = metrics.render();
  const double n = num_requests;
  for (const char* family :
       {"vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds", "vllm:request_inference_time_seconds",
        "vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds",
        "vllm:request_time_per_output_token_seconds", "vllm:request_num_preemptions", "vllm:request_params_n"})
    EXPECT_EQ(sample_sum(t, std::string(family) + "_count"), n) << family << "\n" << t;
  EXPECT_EQ(sample_sum(t, "vllm:request_prompt_tokens_sum"), n * 7);
  EXPECT_EQ(sample_sum(t, "vllm:request_generation_tokens_sum"), n * 5);
  EXPECT_EQ(sample_sum(t, "vllm:request_params_max_tokens_sum"), n * 5);
  EXPECT_EQ(sample_sum(t, "vllm:inter_token_latency_seconds_count"), n * 4);
  // One prefill step (the prompt and its first token), then four decode steps, per request.
  EXPECT_EQ(sample_sum(t, "vllm:iteration_tokens_total_sum"), n * (7 + 5));
  EXPECT_EQ(sample_sum(t, "vllm:iteration_tokens_total_count"), n * 5);
  EXPECT_EQ(sample_sum(t, "vllm:request_num_preemptions_sum"), 0);
  // Measured, not configured: every phase took time, and the phases add up.
  const double prefill = sample_sum(t, "vllm:request_prefill_time_seconds_sum");
  const double decode = sample_sum(t, "vllm:request_decode_time_seconds_sum");
  EXPECT_GT(prefill, 0.0);
  EXPECT_GT(decode, 0.0);
  EXPECT_NEAR(sample_sum(t, "vllm:request_inference_time_seconds_sum"), prefill + decode, 1e-9);
  EXPECT_GE(sample_sum(t, "vllm:e2e_request_latency_seconds_sum"),
            sample_sum(t, "vllm:request_inference_time_seconds_sum") +
                sample_sum(t, "vllm:request_queue_time_seconds_sum") - 1e-9);
  // 4 MiB of KV cache over the tiny model's 4 KiB blocks of 16 tokens; 4096-token context.
  EXPECT_NE(t.find("kv_cache_size_tokens=\"16384\""), std::string::npos) << t;
  EXPECT_NE(t.find("kv_cache_max_concurrency=\"4\""), std::string::npos);
  EXPECT_EQ(sample_sum(t, "vllm:num_requests_waiting_by_reason"), 0);
}

// A KV cache of 7 blocks and four requests that each grow to 6: the scheduler preempts, and the
// counter and the per-request histogram say how often.
TEST_F(AsyncEngineTest, PreemptionsAreCountedPerEngineAndPerRequest) {
  TempDir dir;
  EngineArgs o;
  o.model = tiny_model_with_tokenizer(dir);
  o.threads = 2;
  o.kv_cache_memory = 7 * 4096;  // 2 layers × K and V × 16 tokens × 2 heads × 16 dims × 2 bytes a block
  LLMEngine llm(o);
  ServerMetrics metrics("tiny");
  AsyncEngine engine(llm, {}, metrics);
  std::vector<Req> requests(4);
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].prompt = {static_cast<int32_t>(10 + i), 11, 12, 13, 14, 15, 16, 17, 18, 19};
    requests[i].params.max_tokens = 80;
    requests[i].params.ignore_eos = true;
    requests[i].params.seed = static_cast<uint64_t>(i);
  }
  run(engine, requests, {0, 1, 2, 3}, "grow");
  const std::string t = metrics.render();
  const double preemptions = sample_sum(t, "vllm:num_preemptions_total");
  EXPECT_GT(preemptions, 0) << t;
  EXPECT_EQ(sample_sum(t, "ditto:num_preemptions_total"), preemptions);
  EXPECT_EQ(sample_sum(t, "vllm:request_num_preemptions_sum"), preemptions);
  EXPECT_EQ(sample_sum(t, "vllm:request_num_preemptions_count"), 4);
  EXPECT_NE(t.find("num_gpu_blocks=\"7\""), std::string::npos);
}

// Stop strings: the streamed text never shows bytes a stop string later cuts.
TEST_F(AsyncEngineTest, StreamedTextNeverShowsWhatAStopStringCuts) {
  ServerMetrics metrics("tiny");
  AsyncEngine engine(*llm_, {}, metrics);
  Req r;
  r.prompt = {10, 20, 30, 40};
  r.params.temperature = 0.0f;
  r.params.max_tokens = 40;
  r.params.ignore_eos = true;
  r.params.output_kind = RequestOutputKind::kDelta;
  const std::string full = run(engine, {r}, {0}, "full").at(0).outputs[0].text;
  ASSERT_GE(full.size(), 12u);
  // A stop string of 6 bytes from the middle (whole UTF-8 characters).
  size_t from = full.size() / 2;
  while (from > 0 && (static_cast<unsigned char>(full[from]) & 0xC0) == 0x80) --from;
  size_t to = std::min(full.size(), from + 6);
  while (to < full.size() && (static_cast<unsigned char>(full[to]) & 0xC0) == 0x80) ++to;
  const std::string stop = full.substr(from, to - from);
  r.params.stop = {stop};
  const std::string expected = full.substr(0, full.find(stop));

  auto channel = std::make_shared<OutputChannel>();
  engine.submit("stop", r.prompt, r.params, "", channel, 0);
  std::string streamed;
  bool done = false;
  RequestOutput acc;
  while (!done) {
    for (OutputChannel::Item& item : channel->pop(std::chrono::milliseconds(100))) {
      if (!item.report) continue;
      done = item.report->finished;
      streamed += item.report->outputs[0].text;
      EXPECT_EQ(expected.compare(0, streamed.size(), streamed), 0) << "streamed text went past the stop: " << streamed;
      append_delta(acc, std::move(*item.report));
    }
  }
  EXPECT_EQ(streamed, expected);
  EXPECT_EQ(acc.outputs[0].finish_reason, "stop");
  EXPECT_EQ(acc.outputs[0].stop_string, stop);
}

TEST_F(AsyncEngineTest, RefusedRequestGetsItsErrorAndOthersComplete) {
  ServerMetrics metrics("tiny");
  AsyncEngine engine(*llm_, {}, metrics);
  auto channel = std::make_shared<OutputChannel>();
  SamplingParams p;
  p.max_tokens = 3;
  engine.submit("bad", {5, 999}, p, "", channel, 0);  // 999 is outside the vocabulary of 300
  engine.submit("good", {5, 6}, p, "", channel, 1);
  std::string error;
  bool good_done = false;
  while (!good_done) {
    for (OutputChannel::Item& item : channel->pop(std::chrono::milliseconds(100))) {
      if (!item.error.empty()) {
        EXPECT_EQ(item.slot, 0u);
        error = item.error;
      }
      if (item.report && item.slot == 1) good_done = item.report->finished;
    }
  }
  EXPECT_NE(error.find("out of vocabulary"), std::string::npos) << error;
  EXPECT_EQ(engine.num_unfinished(), 0);
}

TEST_F(AsyncEngineTest, FullQueueIsRefusedAndAbortFreesTheCache) {
  ServerMetrics metrics("tiny");
  EngineArgs small = llm_->args();
  small.max_num_seqs = 4;
  llm_->set_engine_args(small);
  AsyncEngineConfig config;
  config.max_queued_requests = 2;
  AsyncEngine engine(*llm_, config, metrics);
  small.max_num_seqs = 256;
  llm_->set_engine_args(small);
  auto channel = std::make_shared<OutputChannel>();
  SamplingParams p;
  p.max_tokens = 3000;
  p.ignore_eos = true;
  // 4 places in the running batch and 2 in the queue: the first 6 submitted back to back are
  // taken, and flooding must hit the limit.
  int refused = 0;
  std::vector<std::string> ids;
  for (int i = 0; i < 50; ++i) {
    try {
      engine.submit('r' + std::to_string(i), {1, 2, 3}, p, "", channel, static_cast<size_t>(i));
      ids.push_back('r' + std::to_string(i));
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted);
      EXPECT_NE(std::string(e.what()).find("--max-queued-requests 2"), std::string::npos) << e.what();
      ++refused;
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_GE(ids.size(), 6u);
  for (const std::string& id : ids) engine.abort(id);
  size_t aborted = 0;
  while (aborted < ids.size()) {
    for (OutputChannel::Item& item : channel->pop(std::chrono::milliseconds(100))) {
      ASSERT_TRUE(item.error.empty()) << item.error;
      if (item.report && item.report->finished) {
        EXPECT_EQ(item.report->outputs[0].finish_reason, "abort");
        ++aborted;
      }
    }
  }
  EXPECT_EQ(engine.num_unfinished(), 0);
  // Every block is free again (cached prefix blocks count as free).
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_NE(metrics.render().find("ditto:kv_cache_usage_perc{model_name=\"tiny\"} 0\n"), std::string::npos)
      << metrics.render();
}

}  // namespace
}  // namespace ditto

namespace ditto {
namespace {

TEST_F(AsyncEngineTest, AbortAllEndsEverythingAndRefusesNewRequests) {
  ServerMetrics metrics("tiny");
  AsyncEngine engine(*llm_, {}, metrics);
  auto channel = std::make_shared<OutputChannel>();
  SamplingParams p;
  p.max_tokens = 3000;
  p.ignore_eos = true;
  p.output_kind = RequestOutputKind::kDelta;  // reports while it runs
  for (size_t i = 0; i < 4; ++i) engine.submit("long" + std::to_string(i), {1, 2, 3}, p, "", channel, i);
  bool started = false;
  while (!started)
    for (OutputChannel::Item& item : channel->pop(std::chrono::milliseconds(100)))
      started = started || item.report.has_value();
  engine.abort_all();
  size_t aborted = 0;
  while (aborted < 4)
    for (OutputChannel::Item& item : channel->pop(std::chrono::milliseconds(100)))
      if (item.report && item.report->finished) {
        EXPECT_EQ(item.report->outputs[0].finish_reason, "abort");
        EXPECT_LT(item.report->outputs[0].token_ids.size(), 3000u);
        ++aborted;
      }
  EXPECT_EQ(engine.num_unfinished(), 0);
  try {
    engine.submit("late", {1}, p, "", channel, 9);
    ADD_FAILURE() << "a request after abort_all was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted);
  }
}

// --log-format json: the engine thread's restart line after a failed step is JSON too (issue 30),
// the failed request gets an internal error, and the rebuilt engine serves the next one.
TEST_F(AsyncEngineTest, FailedStepIsLoggedInTheLogFormatAndTheEngineRestarts) {
  ServerMetrics metrics("tiny");
  AsyncEngineConfig config;
  config.log_format = "json";
  auto fail_once = std::make_shared<std::atomic<bool>>(true);
  config.logits_hook = [fail_once](float*, int64_t, int64_t) {
    if (fail_once->exchange(false)) throw std::runtime_error("injected fault");
  };
  ::testing::internal::CaptureStderr();
  std::string error;
  bool second_finished = false;
  {
    AsyncEngine engine(*llm_, config, metrics);
    SamplingParams p;
    p.max_tokens = 3;
    p.ignore_eos = true;
    auto first = std::make_shared<OutputChannel>();
    engine.submit("first", {1, 2, 3}, p, "", first, 0);
    while (error.empty())
      for (OutputChannel::Item& item : first->pop(std::chrono::milliseconds(100)))
        if (!item.error.empty()) {
          error = item.error;
          EXPECT_TRUE(item.internal_error);
        }
    auto second = std::make_shared<OutputChannel>();
    engine.submit("second", {1, 2, 3}, p, "", second, 0);
    while (!second_finished)
      for (OutputChannel::Item& item : second->pop(std::chrono::milliseconds(100))) {
        ASSERT_TRUE(item.error.empty()) << item.error;
        second_finished = second_finished || (item.report && item.report->finished);
      }
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(error.find("injected fault"), std::string::npos) << error;
  bool found = false;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(j.is_discarded()) << "not JSON: " << line;
    if (j.value("level", "") == "error" && j.value("message", "").find("restarting the engine") != std::string::npos) {
      found = true;
      EXPECT_NE(j.value("message", "").find("injected fault"), std::string::npos) << line;
      EXPECT_TRUE(j.contains("time")) << line;
    }
  }
  EXPECT_TRUE(found) << log;
}

}  // namespace
}  // namespace ditto
