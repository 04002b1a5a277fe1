// The public AsyncLLM (include/ditto/async_llm.h): the server's engine thread (AsyncEngine) behind
// the public types. Requests enter through the LLM's front door on the caller's thread; each gets
// an OutputChannel of its own, read by its RequestStream.
#include "ditto/async_llm.h"

#include <chrono>
#include <limits>
#include <utility>

#include "core/error.h"
#include "engine/llm_engine.h"
#include "engine/output_processor.h"
#include "server/async_engine.h"
#include "server/metrics.h"

namespace ditto {

RequestStream::RequestStream(std::string request_id, bool cumulative)
    : request_id_(std::move(request_id)), cumulative_(cumulative), channel_(std::make_shared<OutputChannel>()) {}

bool RequestStream::finished() const {
  std::lock_guard lock(mu_);
  return finished_;
}

std::vector<RequestOutput> RequestStream::get(std::chrono::milliseconds timeout) {
  std::lock_guard lock(mu_);
  std::vector<RequestOutput> out;
  if (finished_) return out;
  for (OutputChannel::Item& item : channel_->pop(timeout)) {
    if (!item.error.empty()) {
      finished_ = true;
      throw Error(item.internal_error ? ErrorCode::kInternal : ErrorCode::kInvalidArgument,
                  "request '" + request_id_ + "': " + item.error);
    }
    if (!item.report) continue;  // `accepted`: the engine took it
    finished_ = item.report->finished;
    if (!cumulative_) {
      out.push_back(std::move(*item.report));
      continue;
    }
    append_delta(whole_, std::move(*item.report));
    out.push_back(whole_);
  }
  return out;
}

namespace {

AsyncEngineConfig embedded_config() {
  AsyncEngineConfig c;
  // An embedding framework queues as it likes (vLLM's AsyncLLM has no queue bound) and keeps
  // its prefix cache while idle; only buffers and uncached KV pages go back after a second.
  c.max_queued_requests = std::numeric_limits<int64_t>::max() / 4;
  c.drop_prefix_cache_after = std::chrono::hours(24 * 365);
  return c;
}

}  // namespace

AsyncLLM::AsyncLLM(LLM& llm)
    : llm_(llm),
      metrics_(std::make_unique<ServerMetrics>(llm.model_info().model_dir)),
      engine_(std::make_unique<AsyncEngine>(*llm.engine_, embedded_config(), *metrics_)) {}

AsyncLLM::~AsyncLLM() {
  engine_->abort_all();
  engine_.reset();  // joins the engine thread; open streams get "shutting down"
}

std::shared_ptr<RequestStream> AsyncLLM::add_request(const std::string& request_id, const PromptInput& prompt,
                                                     const SamplingParams& params, bool cumulative,
                                                     MaxTokensRule rule) {
  SamplingParams p = params;
  if (cumulative) p.output_kind = RequestOutputKind::kDelta;
  EngineRequest r = llm_.engine_->input_processor().process(prompt, std::move(p), rule);
  r.request_id = request_id;
  std::shared_ptr<RequestStream> stream(new RequestStream(request_id, cumulative));
  engine_->submit(std::move(r), stream->channel_, 0);
  return stream;
}

void AsyncLLM::abort(const std::string& request_id) { engine_->abort(request_id); }

bool AsyncLLM::reset_prefix_cache() { return engine_->reset_prefix_cache(); }

void AsyncLLM::pause_generation(const std::string& mode) { engine_->pause(mode); }

void AsyncLLM::resume_generation() { engine_->resume(); }

bool AsyncLLM::is_paused() const { return engine_->is_paused(); }

void AsyncLLM::finish_weight_update(const std::string& weight_version) {
  engine_->run_stopped([&] { llm_.finish_weight_update(weight_version); });
}

int64_t AsyncLLM::num_unfinished() const { return engine_->num_unfinished(); }

}  // namespace ditto
