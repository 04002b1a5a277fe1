// The server's engine thread. HTTP threads submit requests over a queue and read each request's
// reports (request_output.h: one per step for kDelta, the whole output for kFinalOnly) from an
// OutputChannel; one thread owns the Engine and runs its step loop. Because every request is
// computed exactly as if it were alone (docs/INVARIANCE.md), the interleaving of submissions never
// changes a bit of any answer.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ditto/request_output.h"
#include "ditto/sampling_params.h"
#include "engine/engine.h"
#include "engine/input_processor.h"
#include "server/metrics.h"

namespace ditto {

class Engine;
class LLMEngine;

// Reports for the engine requests of one HTTP request (a completions call with a list of prompts
// holds several; `slot` says which). Thread-safe: the engine thread pushes, one reader pops.
class OutputChannel {
 public:
  struct Item {
    size_t slot = 0;
    bool accepted = false;                // the engine took the request (comes before its reports)
    std::optional<RequestOutput> report;  // an engine report (report->finished on the last one)
    std::string error;                    // the request was refused or failed: why
    bool internal_error = false;          // the error is the engine's fault (HTTP 500), not the request's
  };

  void push(Item item);
  // Waits up to `timeout` for items and takes every queued one (none on timeout).
  std::vector<Item> pop(std::chrono::milliseconds timeout);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> items_;
};

struct AsyncEngineConfig {
  // Sequences (a request counts its n) that could not start running at once — submitted or
  // waiting in the scheduler, beyond the free places of the running batch — beyond which submit()
  // refuses new requests (the server's HTTP 503).
  int64_t max_queued_requests = 1024;
  // Memory an idle engine gives back (Engine::release_idle_memory): once idle for release_after,
  // the activation buffers and the KV pages of free blocks outside the prefix cache; once idle for
  // drop_prefix_cache_after, the prefix cache too (a later request recomputes what it would have
  // found), so an idle server returns to its size before the burst.
  std::chrono::milliseconds release_after{1000};
  std::chrono::milliseconds drop_prefix_cache_after{30000};
  // The server's --log-format ("text" or "json"): the engine thread's own lines (a failed step
  // and the restart) go through log_event (server/server_log.h) in it.
  std::string log_format = "text";
  // Test double (null in real use): every engine made here gets it (EngineConfig::logits_hook);
  // one that throws makes a step fail, as an engine fault would.
  EngineConfig::LogitsHook logits_hook;
};

class AsyncEngine {
 public:
  // Starts the engine thread over llm.make_engine(). `llm` and `metrics` must outlive this.
  AsyncEngine(const LLMEngine& llm, const AsyncEngineConfig& config, ServerMetrics& metrics);
  // Aborts whatever runs and joins the engine thread.
  ~AsyncEngine();
  AsyncEngine(const AsyncEngine&) = delete;
  AsyncEngine& operator=(const AsyncEngine&) = delete;

  // Queues a request that came through the front door (the LLMEngine's input_processor()).
  // Its reports (of its params.output_kind), or an Item with `error` when the engine
  // refuses it (a request_id already running), go to `channel` under `slot`. Throws
  // Error(kResourceExhausted) when max_queued_requests are already queued or when shutting down.
  void submit(EngineRequest request, std::shared_ptr<OutputChannel> channel, size_t slot);
  // Token ids, checked by the engine's own front door (Engine::add_request) on the engine thread:
  // a refusal comes as an Item with `error`.
  void submit(const std::string& request_id, std::vector<int32_t> prompt_token_ids, SamplingParams params,
              std::string prompt_text, std::shared_ptr<OutputChannel> channel, size_t slot);

  // Stops a request (its KV blocks are freed; its last report has finish_reason "abort").
  // Unknown or finished ids are ignored. Callable from any thread.
  void abort(const std::string& request_id);

  // Stops every request whose id is `id` or starts with `id` + "-" (a response's id names its
  // prompts' requests "ID-0", "ID-1", ...); "" stops every request the engine holds. Unlike
  // abort_all(), new requests are still taken. Callable from any thread.
  void abort_group(const std::string& id);

  // Shutting down: aborts every request the engine holds and refuses new ones (submit throws
  // Error(kResourceExhausted)). Callable from any thread.
  void abort_all();

  // Requests submitted and not yet finished (queued, waiting or running).
  int64_t num_unfinished() const;

  // vLLM's pause_generation: stops the engine at a step boundary and returns once it is stopped.
  // Requests submitted while paused wait (queued, not refused) until resume(). `mode`:
  //   "abort": every request the engine holds ends now (finish_reason "abort"), then it stops;
  //   "wait":  it admits nothing new and runs what it holds to the end, then stops;
  //   "keep":  it stops where it is; the requests it holds resume with resume(), on whatever
  //            weights are then loaded (their outputs say which tokens came from which version).
  // Throws Error(kInvalidArgument) naming mode for another value. Pausing twice is a no-op.
  // Callable from any thread except the engine's.
  void pause(const std::string& mode);
  // vLLM's resume_generation: the engine runs again. A no-op when not paused.
  void resume();
  bool is_paused() const;
  // Runs fn while the engine thread is stopped at a step boundary (paused, or held just for fn),
  // so fn may change the model's weights (LLMEngine::finish_weight_update). Rethrows what fn throws.
  void run_stopped(const std::function<void()>& fn);
  // With the engine stopped (run_stopped): gives back its KV pages, activation buffers and prefix
  // cache (Engine::release_idle_memory). Only for an engine that holds no request.
  void release_memory_stopped();
  // The engine's own: requests it holds (running or waiting, kept ones included).
  bool engine_has_unfinished_stopped() const;

  // Empties the engine's prefix cache (Engine::release_idle_memory with drop_prefix_cache) before
  // it admits anything submitted after this call. Returns false, dropping nothing, while requests
  // are unfinished. Callable from any thread.
  bool reset_prefix_cache();

 private:
  struct Submission {
    EngineRequest request;
    bool processed = false;  // came through the front door already
    std::shared_ptr<OutputChannel> channel;
    size_t slot = 0;
    std::chrono::steady_clock::time_point arrival;
  };
  struct Route {
    std::shared_ptr<OutputChannel> channel;
    size_t slot = 0;
    // For the metrics: finish_reason over the reports so far, the rest as measured so far (its
    // prompt tokens, n, max_tokens, arrival, scheduled, first and last token, preemptions).
    FinishedRequest stats;
  };

  void enqueue(EngineRequest request, bool processed, std::shared_ptr<OutputChannel> channel, size_t slot);
  // With mu_ held: refuses the unadmitted submissions that will never run (all of them once
  // abort_all() was called; those group_aborts_ names), each with an error on its channel.
  void fail_pending_locked();
  void loop();
  void admit(Submission& s);
  // Token counts and latencies of the last step (every output kind: the engine's last_step_tokens).
  // `step_start`: when the step began (a request it ran first was scheduled then).
  void observe_progress(std::chrono::steady_clock::time_point step_start, std::chrono::steady_clock::time_point now);
  void deliver(RequestOutput&& report, std::chrono::steady_clock::time_point now);
  void fail_all(const std::string& why);
  void publish_gauges();

  const LLMEngine& llm_;
  const int64_t max_num_seqs_;  // the engine's, as built
  AsyncEngineConfig config_;
  ServerMetrics& metrics_;
  std::unique_ptr<Engine> engine_;  // engine thread only
  int64_t preemptions_seen_ = 0;    // engine_'s scheduler's count already added to the metrics

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Submission> pending_;
  int64_t pending_sequences_ = 0;  // Σ n over pending_
  std::vector<std::string> aborts_;
  std::vector<std::string> group_aborts_;  // abort_group's ids, for the engine thread
  int64_t waiting_in_engine_ = 0;          // the scheduler's waiting sequences after the last step
  int64_t free_running_ = 0;               // max_num_seqs minus the running sequences after the last step
  int64_t unfinished_ = 0;                 // submitted, not yet finished or refused
  bool stop_ = false;
  bool abort_all_ = false;                   // set by abort_all(): new submissions are refused
  bool abort_all_pending_ = false;           // the engine thread has yet to abort what it holds
  bool reset_prefix_cache_pending_ = false;  // set by reset_prefix_cache(), for the engine thread
  // Pausing (pause, run_stopped): the engine thread stops at a step boundary while holds > 0.
  int park_holds_ = 0;
  bool user_paused_ = false;           // pause() holds one of park_holds_
  bool parked_ = false;                // the engine thread is stopped (set by it)
  bool draining_ = false;              // pause("wait"): admit nothing, run the rest to the end
  bool drained_ = false;               // ... and it has (set by the engine thread)
  bool abort_engine_pending_ = false;  // pause("abort"): abort what the engine holds
  std::condition_variable parked_cv_;

  std::unordered_map<std::string, Route> routes_;  // engine thread only
  std::thread thread_;
};

}  // namespace ditto
