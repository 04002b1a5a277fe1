// ditto's asynchronous API, shaped like vLLM's AsyncLLM: requests are added from any thread at any
// time, one engine thread steps them all together, and each request's reports come back on a
// stream of its own:
//
//   ditto::LLM llm({.model = "Qwen/Qwen3-8B"});
//   ditto::AsyncLLM engine(llm);
//   std::shared_ptr<ditto::RequestStream> s = engine.add_request("a", {.text = "Hi"}, params);
//   while (!s->finished())
//     for (const ditto::RequestOutput& out : s->get(std::chrono::milliseconds(100))) use(out);
//
// Every output is the bits the same request gets alone, whatever else runs beside it and whenever
// it arrives (docs/INVARIANCE.md). Part of ditto's public C++ API (`ditto::ditto`).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ditto/llm.h"
#include "ditto/prompt_input.h"
#include "ditto/request_output.h"
#include "ditto/sampling_params.h"

namespace ditto {

class AsyncEngine;
class OutputChannel;
class ServerMetrics;

// One request's reports in the order the engine produced them: with params.output_kind kDelta,
// one per engine step that produced something, each holding only what is new
// (request_output.h); kFinalOnly, the finished output alone; cumulative (AsyncLLM::add_request),
// the whole output so far after every such step. The last report has finished set.
// Thread-safety: the engine thread fills it; one thread at a time may call get().
class RequestStream {
 public:
  // Waits up to `timeout` for reports and takes every one that has come, in order; none on
  // timeout, and none once finished() is true. Throws Error when the engine could not run the
  // request: kInvalidArgument for a request_id already running; kInternal when the AsyncLLM shuts
  // down first, or for a failed engine step (the engine restarts; the other requests it held fail
  // the same way). After the error, finished() is true.
  std::vector<RequestOutput> get(std::chrono::milliseconds timeout);
  // The last report was taken, or the request failed.
  bool finished() const;
  const std::string& request_id() const { return request_id_; }

 private:
  friend class AsyncLLM;
  RequestStream(std::string request_id, bool cumulative);

  const std::string request_id_;
  const bool cumulative_;
  std::shared_ptr<OutputChannel> channel_;
  RequestOutput whole_;  // cumulative: the reports so far, appended
  mutable std::mutex mu_;
  bool finished_ = false;
};

class AsyncLLM {
 public:
  // Starts an engine thread over `llm`'s model, tokenizer and engine arguments. The thread's
  // engine is its own (its KV cache and prefix cache beside the one llm.generate() keeps: two
  // caches of EngineArgs::kv_cache_memory each when both are used). `llm` must outlive this
  // AsyncLLM and keep its engine arguments while it lives (LLM::score changes them for its call:
  // not while an AsyncLLM over that LLM runs); llm.generate() may run beside it on another thread.
  // An idle engine gives its activation buffers and uncached KV pages back after a second; its
  // prefix cache stays until reset_prefix_cache().
  explicit AsyncLLM(LLM& llm);
  // Aborts what runs (each open stream fails with kInternal) and joins the engine thread.
  ~AsyncLLM();
  AsyncLLM(const AsyncLLM&) = delete;
  AsyncLLM& operator=(const AsyncLLM&) = delete;

  // Queues a request and returns its stream. The prompt and parameters go through the front door
  // here, on the caller's thread (as LLM::generate's: encoded, checked, defaulted; `rule` settles
  // max_tokens against the context): a bad one throws Error(kInvalidArgument) naming the field,
  // and nothing is queued. cumulative: every report is the whole output so far (vLLM's
  // RequestOutputKind.CUMULATIVE; params.output_kind is then ignored). A request_id already
  // running is refused on the engine thread: the stream's get() throws. Callable from any thread.
  std::shared_ptr<RequestStream> add_request(const std::string& request_id, const PromptInput& prompt,
                                             const SamplingParams& params, bool cumulative = false,
                                             MaxTokensRule rule = MaxTokensRule::kClipToContext);

  // Stops a request: its last report comes with finish_reason "abort" on every unfinished choice.
  // Unknown or finished ids are ignored. Callable from any thread.
  void abort(const std::string& request_id);

  // Empties the engine's prefix cache (vLLM's reset_prefix_cache). Returns false, dropping
  // nothing, while requests are queued or running; true otherwise. Outputs stay the same bits.
  bool reset_prefix_cache();

  // Requests added and not yet finished (queued, waiting or running).
  int64_t num_unfinished() const;

  // vLLM's pause_generation / resume_generation (docs/RL.md): `mode` "abort" ends what runs
  // (finish_reason "abort"), "wait" lets it finish, "keep" stops it where it is, to go on after
  // resume_generation() under whatever weights are loaded then; requests added while paused wait.
  // pause_generation returns once the engine has stopped; it throws Error(kInvalidArgument) naming
  // mode for another value. Callable from any thread.
  void pause_generation(const std::string& mode = "abort");
  void resume_generation();
  bool is_paused() const;
  // The weight update's last call for a model this AsyncLLM runs (LLM::finish_weight_update), with
  // its engine stopped at a step boundary for the moment it takes: requests kept by
  // pause_generation("keep") go on under the new weights, their outputs saying from which token
  // (CompletionOutput::weight_versions). start_weight_update / update_weights go to the LLM.
  void finish_weight_update(const std::string& weight_version = "");

 private:
  LLM& llm_;
  std::unique_ptr<ServerMetrics> metrics_;  // the AsyncEngine's counters (not exported here)
  std::unique_ptr<AsyncEngine> engine_;
};

}  // namespace ditto
