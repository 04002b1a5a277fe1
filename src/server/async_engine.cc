#include "server/async_engine.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <new>
#include <utility>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/llm_engine.h"
#include "server/server_log.h"

namespace ditto {

void OutputChannel::push(Item item) {
  {
    std::lock_guard lock(mu_);
    items_.push_back(std::move(item));
  }
  cv_.notify_one();
}

std::vector<OutputChannel::Item> OutputChannel::pop(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !items_.empty(); });
  std::vector<Item> out(std::make_move_iterator(items_.begin()), std::make_move_iterator(items_.end()));
  items_.clear();
  return out;
}

AsyncEngine::AsyncEngine(const LLMEngine& llm, const AsyncEngineConfig& config, ServerMetrics& metrics)
    : llm_(llm),
      max_num_seqs_(llm.args().max_num_seqs),
      config_(config),
      metrics_(metrics),
      engine_(llm.make_engine(config.logits_hook)) {
  const EngineArgs& args = llm.args();
  metrics_.set_cache_config({engine_->kv_cache().block_size(), engine_->kv_cache().num_blocks(), llm.max_model_len(),
                             args.enable_prefix_caching, args.kv_cache_memory});
  publish_gauges();
  thread_ = std::thread([this] { loop(); });
}

AsyncEngine::~AsyncEngine() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void AsyncEngine::submit(EngineRequest request, std::shared_ptr<OutputChannel> channel, size_t slot) {
  enqueue(std::move(request), /*processed=*/true, std::move(channel), slot);
}

void AsyncEngine::submit(const std::string& request_id, std::vector<int32_t> prompt_token_ids, SamplingParams params,
                         std::string prompt_text, std::shared_ptr<OutputChannel> channel, size_t slot) {
  EngineRequest r;
  r.request_id = request_id;
  r.prompt_token_ids = std::move(prompt_token_ids);
  r.prompt = std::move(prompt_text);
  r.params = std::move(params);
  enqueue(std::move(r), /*processed=*/false, std::move(channel), slot);
}

void AsyncEngine::enqueue(EngineRequest request, bool processed, std::shared_ptr<OutputChannel> channel, size_t slot) {
  const int64_t n = request.params.n;
  {
    std::lock_guard lock(mu_);
    if (abort_all_) throw Error(ErrorCode::kResourceExhausted, "the server is shutting down");
    const int64_t queued = std::max<int64_t>(0, pending_sequences_ + n + waiting_in_engine_ - free_running_);
    if (queued > config_.max_queued_requests)
      throw Error(ErrorCode::kResourceExhausted, "the server is at capacity: " + std::to_string(queued) +
                                                     " requests are queued (--max-queued-requests " +
                                                     std::to_string(config_.max_queued_requests) + "); retry later");
    pending_sequences_ += n;
    pending_.push_back(
        Submission{std::move(request), processed, std::move(channel), slot, std::chrono::steady_clock::now()});
    ++unfinished_;
  }
  cv_.notify_one();
}

void AsyncEngine::abort(const std::string& request_id) {
  {
    std::lock_guard lock(mu_);
    aborts_.push_back(request_id);
  }
  cv_.notify_one();
}

void AsyncEngine::abort_group(const std::string& id) {
  {
    std::lock_guard lock(mu_);
    group_aborts_.push_back(id);
  }
  cv_.notify_one();
}

void AsyncEngine::abort_all() {
  {
    std::lock_guard lock(mu_);
    abort_all_ = abort_all_pending_ = true;
  }
  cv_.notify_one();
}

int64_t AsyncEngine::num_unfinished() const {
  std::lock_guard lock(mu_);
  return unfinished_;
}

bool AsyncEngine::reset_prefix_cache() {
  {
    std::lock_guard lock(mu_);
    if (unfinished_ > 0) return false;
    reset_prefix_cache_pending_ = true;
  }
  cv_.notify_one();
  return true;
}

void AsyncEngine::pause(const std::string& mode) {
  if (mode != "abort" && mode != "wait" && mode != "keep")
    throw_invalid_field("mode", "field 'mode' must be \"abort\", \"wait\" or \"keep\", got \"" + mode + "\"");
  std::unique_lock lock(mu_);
  if (user_paused_) {
    // Already paused: "abort" still ends what the engine holds (requests kept by "keep").
    if (mode == "abort") {
      abort_engine_pending_ = true;
      cv_.notify_all();
      parked_cv_.wait(lock, [&] { return (parked_ && !abort_engine_pending_) || stop_; });
    }
    return;
  }
  if (mode == "wait") {
    draining_ = true;
    drained_ = false;
    cv_.notify_all();
    parked_cv_.wait(lock, [&] { return drained_ || stop_; });
    draining_ = false;
  }
  if (mode == "abort") abort_engine_pending_ = true;
  user_paused_ = true;
  ++park_holds_;
  cv_.notify_all();
  parked_cv_.wait(lock, [&] { return parked_ || stop_; });
}

void AsyncEngine::resume() {
  {
    std::lock_guard lock(mu_);
    if (!user_paused_) return;
    user_paused_ = false;
    --park_holds_;
  }
  cv_.notify_all();
}

bool AsyncEngine::is_paused() const {
  std::lock_guard lock(mu_);
  return user_paused_;
}

void AsyncEngine::run_stopped(const std::function<void()>& fn) {
  {
    std::unique_lock lock(mu_);
    ++park_holds_;
    cv_.notify_all();
    parked_cv_.wait(lock, [&] { return parked_ || stop_; });
  }
  const auto release = [&] {
    {
      std::lock_guard lock(mu_);
      --park_holds_;
    }
    cv_.notify_all();
  };
  try {
    fn();
  } catch (...) {
    release();
    throw;
  }
  release();
}

void AsyncEngine::release_memory_stopped() { engine_->release_idle_memory(/*drop_prefix_cache=*/true); }

bool AsyncEngine::engine_has_unfinished_stopped() const { return engine_->has_unfinished(); }

void AsyncEngine::fail_pending_locked() {
  if (pending_.empty() || (!abort_all_ && group_aborts_.empty())) return;
  const auto named = [&](const std::string& id) {
    for (const std::string& group : group_aborts_)
      if (group.empty() || id == group || (id.size() > group.size() && id.starts_with(group + "-"))) return true;
    return false;
  };
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (!abort_all_ && !named(it->request.request_id)) {
      ++it;
      continue;
    }
    it->channel->push({it->slot, false, std::nullopt,
                       abort_all_ ? "the server is shutting down" : "aborted (/abort_requests) before it started",
                       abort_all_});
    pending_sequences_ -= it->request.params.n;
    --unfinished_;
    it = pending_.erase(it);
  }
}

void AsyncEngine::admit(Submission& s) {
  std::string error;
  bool internal = false;
  try {
    FinishedRequest stats;
    stats.finish_reason = "stop";
    stats.prompt_tokens = static_cast<int64_t>(s.request.prompt_token_ids.size());
    stats.n = s.request.params.n;
    stats.max_tokens = s.request.params.max_tokens;
    stats.arrival = s.arrival;
    const int64_t prompt_tokens = stats.prompt_tokens;
    const std::string id = s.request.request_id;
    if (s.processed) {
      engine_->add(std::move(s.request));
    } else {
      // The engine's front door may cut max_tokens to the context.
      stats.max_tokens = std::min<int64_t>(stats.max_tokens, llm_.max_model_len() - prompt_tokens);
      engine_->add_request(id, std::move(s.request.prompt_token_ids), s.request.params, s.request.prompt);
    }
    routes_[id] = Route{s.channel, s.slot, std::move(stats)};
    metrics_.add_prompt_tokens(prompt_tokens);
    s.channel->push({s.slot, true, std::nullopt, "", false});
    return;
  } catch (const Error& e) {
    error = e.what();
    internal = e.code() == ErrorCode::kInternal;
  } catch (const std::bad_alloc&) {
    error = "out of memory while queueing the request";
    internal = true;
  } catch (const std::exception& e) {
    error = e.what();
    internal = true;
  }
  metrics_.record_request_failed();
  {  // counted before the reader can see the end
    std::lock_guard lock(mu_);
    --unfinished_;
  }
  s.channel->push({s.slot, false, std::nullopt, error, internal});
}

void AsyncEngine::observe_progress(std::chrono::steady_clock::time_point step_start,
                                   std::chrono::steady_clock::time_point now) {
  for (const auto& [id, preemptions] : engine_->last_step_scheduled()) {
    const auto found = routes_.find(id);
    if (found == routes_.end()) continue;
    FinishedRequest& stats = found->second.stats;
    if (!stats.scheduled) stats.scheduled = step_start;
    stats.num_preemptions = preemptions;
  }
  int64_t iteration_tokens = 0;
  for (const auto& [id, tokens] : engine_->last_step_tokens()) {
    const auto found = routes_.find(id);
    if (found == routes_.end()) continue;
    FinishedRequest& stats = found->second.stats;
    metrics_.add_generation_tokens(tokens);
    iteration_tokens += tokens;
    stats.generation_tokens += tokens;
    if (!stats.last_token) {
      metrics_.observe_time_to_first_token(std::chrono::duration<double>(now - stats.arrival).count());
      stats.first_token = now;
      iteration_tokens += stats.prompt_tokens;  // vLLM counts a prompt in the step of its first token
    } else {
      metrics_.observe_inter_token_latency(std::chrono::duration<double>(now - *stats.last_token).count());
      ++stats.num_token_intervals;
    }
    stats.last_token = now;
  }
  metrics_.observe_iteration_tokens(iteration_tokens);
}

void AsyncEngine::deliver(RequestOutput&& report, std::chrono::steady_clock::time_point now) {
  const auto found = routes_.find(report.request_id);
  if (found == routes_.end()) return;
  Route& route = found->second;
  // The request's reason for the metrics: "abort" over "length" over "stop", over all its choices
  // (a kDelta request's choices may finish in different reports).
  std::string& reason = route.stats.finish_reason;
  for (const CompletionOutput& c : report.outputs)
    if (c.finish_reason == "abort" || (c.finish_reason == "length" && reason != "abort")) reason = c.finish_reason;
  const bool finished = report.finished;
  if (finished) {
    route.stats.finished = now;
    metrics_.record_finished_request(route.stats);
  }
  std::shared_ptr<OutputChannel> channel = route.channel;
  const size_t slot = route.slot;
  if (finished) {  // counted before the reader can see the end
    routes_.erase(found);
    std::lock_guard lock(mu_);
    --unfinished_;
  }
  channel->push({slot, false, std::move(report), "", false});
}

void AsyncEngine::fail_all(const std::string& why) {
  {  // counted before the readers can see the end
    std::lock_guard lock(mu_);
    unfinished_ -= static_cast<int64_t>(routes_.size());
  }
  for (auto& [id, route] : routes_) {
    metrics_.record_request_failed();
    route.channel->push({route.slot, false, std::nullopt, why, true});
  }
  routes_.clear();
}

void AsyncEngine::publish_gauges() {
  const int64_t preemptions = engine_->scheduler().num_preemptions();
  metrics_.add_preemptions(preemptions - preemptions_seen_);
  preemptions_seen_ = preemptions;
  const KvCacheManagerStats kv = engine_->kv_cache().stats();
  metrics_.set_engine_state(engine_->scheduler().num_running(), engine_->scheduler().num_waiting(), kv.usage(),
                            kv.prefix_queries_tokens, kv.prefix_hit_tokens);
  const SpeculationStats& spec = engine_->speculation_stats();
  metrics_.set_spec_decode(spec.num_drafts, spec.num_draft_tokens, spec.num_accepted_tokens);
  std::lock_guard lock(mu_);
  waiting_in_engine_ = engine_->scheduler().num_waiting();
  free_running_ = std::max<int64_t>(0, max_num_seqs_ - engine_->scheduler().num_running());
}

void AsyncEngine::loop() {
  // After a burst the idle engine gives memory back in two stages (AsyncEngineConfig).
  std::chrono::steady_clock::time_point idle_since;
  int release_stage = 2;  // 0: nothing released yet, 1: uncached blocks released, 2: done
  for (;;) {
    std::deque<Submission> submissions;
    std::vector<std::string> aborts;
    bool abort_everything = false;
    {
      std::unique_lock lock(mu_);
      // Paused (pause, run_stopped): stop here, between steps, until every hold is released. A
      // pause("abort") first aborts what the engine holds (below), then stops.
      // Submissions that will never run: every one when shutting down, and those /abort_requests
      // names (they wait, unadmitted, while the engine is paused).
      fail_pending_locked();
      if (park_holds_ > 0 && !abort_engine_pending_ && !abort_all_pending_ && group_aborts_.empty()) {
        parked_ = true;
        parked_cv_.notify_all();
        cv_.wait(lock, [&] {
          return stop_ || park_holds_ == 0 || abort_all_pending_ || abort_engine_pending_ || !group_aborts_.empty();
        });
        parked_ = false;
        if (stop_) break;
        continue;
      }
      if (draining_ && !engine_->has_unfinished()) {
        drained_ = true;
        parked_cv_.notify_all();
      }
      const auto has_work = [&] {
        return stop_ || (!pending_.empty() && !draining_ && park_holds_ == 0) || !aborts_.empty() ||
               !group_aborts_.empty() || engine_->has_unfinished() || abort_all_pending_ ||
               reset_prefix_cache_pending_ || (park_holds_ > 0 && !parked_) || (draining_ && !drained_);
      };
      if (release_stage == 2) {
        cv_.wait(lock, has_work);
      } else if (!cv_.wait_until(
                     lock, idle_since + (release_stage == 0 ? config_.release_after : config_.drop_prefix_cache_after),
                     has_work)) {
        lock.unlock();
        engine_->release_idle_memory(/*drop_prefix_cache=*/release_stage == 1);
        ++release_stage;
        continue;
      }
      if (stop_) break;
      if (park_holds_ > 0 && !abort_engine_pending_ && !abort_all_pending_ && group_aborts_.empty())
        continue;                                             // stop above
      if (draining_ && !engine_->has_unfinished()) continue;  // drained: say so above
      if (!draining_ && park_holds_ == 0) {                   // paused or draining: what was submitted waits
        submissions.swap(pending_);
        pending_sequences_ = 0;
      }
      aborts.swap(aborts_);
      for (const std::string& group : group_aborts_)
        for (const auto& [id, route] : routes_)
          if (group.empty() || id == group || (id.size() > group.size() && id.starts_with(group + "-")))
            aborts.push_back(id);
      group_aborts_.clear();
      abort_everything = std::exchange(abort_all_pending_, false) || std::exchange(abort_engine_pending_, false);
      // Asked for while nothing was unfinished, so the engine is idle: it holds no block.
      if (std::exchange(reset_prefix_cache_pending_, false)) engine_->release_idle_memory(/*drop_prefix_cache=*/true);
    }
    for (Submission& s : submissions) admit(s);
    if (abort_everything)
      for (const auto& [id, route] : routes_) aborts.push_back(id);
    for (const std::string& id : aborts) engine_->abort(id);
    if (!engine_->has_unfinished()) {
      publish_gauges();
      continue;
    }
    try {
      const auto step_start = std::chrono::steady_clock::now();
      const int64_t steps_before = engine_->num_steps();
      std::vector<RequestOutput> reports = engine_->step();
      const auto now = std::chrono::steady_clock::now();
      if (engine_->num_steps() > steps_before) observe_progress(step_start, now);
      // The gauges first, so a client that has read its whole answer never sees it still running.
      publish_gauges();
      for (RequestOutput& r : reports) deliver(std::move(r), now);
      if (!engine_->has_unfinished()) {
        idle_since = now;
        release_stage = 0;
      }
    } catch (const std::exception& e) {
      // A failed step leaves the engine's state unknown: fail what it held and start a new one,
      // so the server keeps serving.
      log_event(config_.log_format, "error",
                std::string("engine step failed (") + e.what() + "); failing " + std::to_string(routes_.size()) +
                    " requests and restarting the engine");
      fail_all(std::string("internal error in the engine: ") + e.what());
      engine_.reset();
      engine_ = llm_.make_engine(config_.logits_hook);
      preemptions_seen_ = 0;
    }
    publish_gauges();
  }
  // Shutdown: every request still open gets an error, so no reader waits forever.
  {
    std::lock_guard lock(mu_);
    for (Submission& s : pending_) s.channel->push({s.slot, false, std::nullopt, "the server is shutting down", true});
    pending_.clear();
  }
  fail_all("the server is shutting down");
}

}  // namespace ditto
