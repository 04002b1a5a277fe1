#include "server/metrics.h"

#include <algorithm>
#include <charconv>
#include <set>
#include <utility>

namespace ditto {
namespace {

// The shortest decimal that reads back as `v`.
std::string number(double v) {
  char buf[64];
  const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  return std::string(buf, end);
}

// Label values escape backslash, double quote and newline (the exposition format's rule).
std::string escape_label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

std::string label(const std::string& key, const std::string& value) { return key + "=\"" + escape_label(value) + "\""; }

std::string join_labels(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + "," + b;
}

double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

// vLLM's request latency buckets (e2e, queue, inference, prefill, decode), seconds.
std::vector<double> request_latency_buckets() {
  return {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
          30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
}

// vLLM's inter-token latency buckets (also its time per output token), seconds.
std::vector<double> inter_token_buckets() {
  return {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
}

// The routes prometheus-fastapi-instrumentator leaves out in vLLM (its probes and /metrics):
// neither counted in http_requests_total nor as request failures.
bool uninstrumented(const std::string& handler) {
  static const std::set<std::string> kHandlers = {"/metrics", "/health",  "/health/decode", "/load",
                                                  "/ping",    "/version", "/server_info"};
  return kHandlers.contains(handler);
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const auto at = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  ++counts_[static_cast<size_t>(at)];
  sum_ += value;
  ++count_;
}

int64_t Histogram::cumulative_count(size_t i) const {
  int64_t c = 0;
  for (size_t k = 0; k <= i && k < counts_.size(); ++k) c += counts_[k];
  return c;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
  int64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{" + labels + ",le=\"" + number(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_bucket{" + labels + ",le=\"+Inf\"} " + std::to_string(count_) + "\n";
  out += name + "_sum{" + labels + "} " + number(sum_) + "\n";
  out += name + "_count{" + labels + "} " + std::to_string(count_) + "\n";
}

std::vector<double> buckets_1_2_5(int64_t max_value) {
  std::vector<double> out;
  for (int64_t scale = 1;; scale *= 10)
    for (int64_t m : {1, 2, 5}) {
      if (m * scale > max_value) return out;
      out.push_back(static_cast<double>(m * scale));
    }
}

MetricsFormat metrics_format_for(const std::string& accept) {
  // prometheus_client's choose_encoder: the first listed type that is OpenMetrics 1.0.0 (or has no
  // version) wins; anything else is the text format.
  size_t start = 0;
  while (start <= accept.size()) {
    const size_t end = std::min(accept.find(',', start), accept.size());
    std::string type = accept.substr(start, end - start);
    type.erase(0, type.find_first_not_of(' '));
    if (type.rfind("application/openmetrics-text", 0) == 0) {
      const size_t v = type.find("version=");
      if (v == std::string::npos || type.compare(v + 8, 5, "1.0.0") == 0) return MetricsFormat::kOpenMetrics;
    }
    start = end + 1;
  }
  return MetricsFormat::kText;
}

const char* metrics_content_type(MetricsFormat format) {
  return format == MetricsFormat::kOpenMetrics ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
                                               : "text/plain; version=0.0.4; charset=utf-8";
}

ServerMetrics::ServerMetrics(std::string model_name)
    : model_name_(std::move(model_name)),
      ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
             1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}),
      itl_(inter_token_buckets()),
      e2e_(request_latency_buckets()),
      iteration_tokens_({1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}),
      queue_time_(request_latency_buckets()),
      inference_time_(request_latency_buckets()),
      prefill_time_(request_latency_buckets()),
      decode_time_(request_latency_buckets()),
      time_per_output_token_(inter_token_buckets()),
      num_preemptions_({1, 2, 3, 4, 5, 10, 20}),
      params_n_({1, 2, 5, 10, 20}),
      http_duration_highr_(
          {0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5, 7.5, 10, 30, 60}) {}

void ServerMetrics::record_http(const HttpExchange& x) {
  std::lock_guard lock(mu_);
  ++http_status_[x.client_closed ? 499 : x.status];
  // A client that left: a stream before its end, or a whole response it no longer waited for (499).
  if (x.client_closed || x.status == 499) ++client_disconnects_;
  const bool routed = !x.handler.empty();
  if (routed && uninstrumented(x.handler)) return;
  // Requests for the model that failed in the server (vLLM's request_failures middleware): an error
  // status before the engine took the request, after it did, or a stream that broke off. Unmatched
  // paths are not requests for the model; a client that left is not a failure.
  if (routed && x.status != 499) {
    if (x.stream_failed)
      ++failures_[{"streaming", 500}];
    else if (x.status >= 400)
      ++failures_[{x.generation_started ? "non_streaming" : "input_processing", x.status}];
  }
  const std::string handler = routed ? x.handler : "none";
  ++http_requests_[{handler, x.method, std::to_string(x.status / 100) + "xx"}];
  auto& req = http_request_size_[handler];
  ++req.first;
  req.second += static_cast<double>(x.request_bytes);
  auto& res = http_response_size_[handler];
  ++res.first;
  res.second += static_cast<double>(x.response_bytes);
  http_duration_.try_emplace({handler, x.method}, std::vector<double>{0.1, 0.5, 1}).first->second.observe(x.seconds);
  http_duration_highr_.observe(x.seconds);
}

void ServerMetrics::record_request_failed() {
  std::lock_guard lock(mu_);
  ++finished_["error"];
}

void ServerMetrics::record_finished_request(const FinishedRequest& r) {
  std::lock_guard lock(mu_);
  ++finished_[r.finish_reason];
  e2e_.observe(seconds(r.finished - r.arrival));
  if (prompt_tokens_hist_) {
    prompt_tokens_hist_->observe(static_cast<double>(r.prompt_tokens));
    generation_tokens_hist_->observe(static_cast<double>(r.generation_tokens));
    params_max_tokens_->observe(static_cast<double>(r.max_tokens));
  }
  params_n_.observe(static_cast<double>(r.n));
  num_preemptions_.observe(static_cast<double>(r.num_preemptions));
  // vLLM's phases: waiting (arrival → first scheduled), prefill (→ first token), decode (→ last
  // token), inference (first scheduled → last token). A request aborted before it ran waited its
  // whole life and ran no phase.
  queue_time_.observe(seconds(r.scheduled.value_or(r.finished) - r.arrival));
  if (!r.scheduled) return;
  const auto last = r.last_token.value_or(r.finished);
  inference_time_.observe(seconds(last - *r.scheduled));
  prefill_time_.observe(seconds(r.first_token.value_or(last) - *r.scheduled));
  decode_time_.observe(r.first_token ? seconds(last - *r.first_token) : 0.0);
  if (r.first_token && r.num_token_intervals > 0)
    time_per_output_token_.observe(seconds(last - *r.first_token) / static_cast<double>(r.num_token_intervals));
}

void ServerMetrics::add_prompt_tokens(int64_t n) {
  std::lock_guard lock(mu_);
  prompt_tokens_ += n;
}

void ServerMetrics::add_generation_tokens(int64_t n) {
  std::lock_guard lock(mu_);
  generation_tokens_ += n;
}

void ServerMetrics::observe_time_to_first_token(double seconds) {
  std::lock_guard lock(mu_);
  ttft_.observe(seconds);
}

void ServerMetrics::observe_inter_token_latency(double seconds) {
  std::lock_guard lock(mu_);
  itl_.observe(seconds);
}

void ServerMetrics::observe_iteration_tokens(int64_t tokens) {
  std::lock_guard lock(mu_);
  iteration_tokens_.observe(static_cast<double>(tokens));
}

void ServerMetrics::add_preemptions(int64_t n) {
  std::lock_guard lock(mu_);
  preemptions_ += n;
}

void ServerMetrics::set_engine_state(int64_t running, int64_t waiting, double kv_cache_usage,
                                     int64_t prefix_query_tokens, int64_t prefix_hit_tokens) {
  std::lock_guard lock(mu_);
  running_ = running;
  waiting_ = waiting;
  kv_cache_usage_ = kv_cache_usage;
  prefix_query_tokens_ = prefix_query_tokens;
  prefix_hit_tokens_ = prefix_hit_tokens;
}

void ServerMetrics::set_cache_config(const CacheConfigInfo& info) {
  std::lock_guard lock(mu_);
  cache_config_ = info;
  if (prompt_tokens_hist_ && max_model_len_ == info.max_model_len) return;  // an engine restart: keep counts
  max_model_len_ = info.max_model_len;
  prompt_tokens_hist_.emplace(buckets_1_2_5(info.max_model_len));
  generation_tokens_hist_.emplace(buckets_1_2_5(info.max_model_len));
  params_max_tokens_.emplace(buckets_1_2_5(info.max_model_len));
}

void ServerMetrics::set_spec_decode(int64_t num_drafts, int64_t num_draft_tokens, int64_t num_accepted_tokens) {
  std::lock_guard lock(mu_);
  spec_drafts_ = num_drafts;
  spec_draft_tokens_ = num_draft_tokens;
  spec_accepted_tokens_ = num_accepted_tokens;
}

void ServerMetrics::collect_engine(std::vector<Family>& out, const std::string& p, bool ditto_only) const {
  const std::string l = label("model_name", model_name_);
  auto gauge = [&](const std::string& name, const char* help, const std::string& value) {
    out.push_back({p + name, "gauge", help, {{p + name, l, value}}});
  };
  auto counter = [&](const std::string& name, const char* help, int64_t value) {
    out.push_back({p + name, "counter", help, {{p + name + "_total", l, std::to_string(value)}}});
  };
  auto histogram = [&](const std::string& name, const char* help, const Histogram& h) {
    Family f{p + name, "histogram", help, {}};
    const auto& bounds = h.upper_bounds();
    for (size_t i = 0; i <= bounds.size(); ++i)
      f.samples.push_back({p + name + "_bucket",
                           join_labels(l, label("le", i < bounds.size() ? number(bounds[i]) : "+Inf")),
                           std::to_string(h.cumulative_count(i))});
    f.samples.push_back({p + name + "_sum", l, number(h.sum())});
    f.samples.push_back({p + name + "_count", l, std::to_string(h.count())});
    out.push_back(std::move(f));
  };
  gauge("num_requests_running", "Sequences in the engine's running batch.", std::to_string(running_));
  gauge("num_requests_waiting", "Sequences waiting to be scheduled.", std::to_string(waiting_));
  // vLLM splits its waiting requests into those waiting for room (capacity) and those its scheduler
  // skipped for a transient constraint (deferred: remote KV, a grammar); ditto's scheduler skips none.
  out.push_back(
      {p + "num_requests_waiting_by_reason",
       "gauge",
       "Sequences waiting to be scheduled, by reason (capacity: no room in the batch or KV cache).",
       {{p + "num_requests_waiting_by_reason", join_labels(l, label("reason", "capacity")), std::to_string(waiting_)},
        {p + "num_requests_waiting_by_reason", join_labels(l, label("reason", "deferred")), "0"}}});
  gauge("kv_cache_usage_perc", "Fraction of KV cache blocks in use (1 = full).", number(kv_cache_usage_));
  if (cache_config_) {
    const CacheConfigInfo& c = *cache_config_;
    const int64_t tokens = c.num_blocks * c.block_size;
    std::string labels = label("block_size", std::to_string(c.block_size));
    labels += "," + label("cache_dtype", "bfloat16");
    labels += "," + label("enable_prefix_caching", c.enable_prefix_caching ? "True" : "False");
    labels +=
        "," +
        label("kv_cache_max_concurrency",
              number(c.max_model_len > 0 ? static_cast<double>(tokens) / static_cast<double>(c.max_model_len) : 0.0));
    labels += "," + label("kv_cache_memory_bytes", std::to_string(c.kv_cache_memory_bytes));
    labels += "," + label("kv_cache_size_tokens", std::to_string(tokens));
    labels += "," + label("num_gpu_blocks", std::to_string(c.num_blocks));
    out.push_back({p + "cache_config_info",
                   "gauge",
                   "The KV cache's configuration, in its labels (value 1).",
                   {{p + "cache_config_info", labels, "1"}}});
  }
  counter("prompt_tokens", "Prompt tokens of accepted requests.", prompt_tokens_);
  counter("generation_tokens", "Generated tokens.", generation_tokens_);
  counter("num_preemptions", "Sequences preempted by the scheduler (KV cache full; recomputed later).", preemptions_);
  counter("prefix_cache_queries", "Prompt tokens looked up in the prefix cache.", prefix_query_tokens_);
  counter("prefix_cache_hits", "Prompt tokens found in the prefix cache.", prefix_hit_tokens_);
  if (ditto_only)
    gauge("prefix_cache_hit_rate", "prefix_cache_hits_total / prefix_cache_queries_total (0 before any query).",
          number(prefix_query_tokens_ > 0
                     ? static_cast<double>(prefix_hit_tokens_) / static_cast<double>(prefix_query_tokens_)
                     : 0.0));
  counter("spec_decode_num_drafts", "Speculative verifications (a sequence's step with guesses).", spec_drafts_);
  counter("spec_decode_num_draft_tokens", "Tokens guessed by the speculative proposer.", spec_draft_tokens_);
  counter("spec_decode_num_accepted_tokens", "Guessed tokens accepted (equal to the token the model sampled there).",
          spec_accepted_tokens_);
  if (ditto_only)
    gauge("spec_decode_acceptance_rate",
          "spec_decode_num_accepted_tokens_total / spec_decode_num_draft_tokens_total (0 before any guess).",
          number(spec_draft_tokens_ > 0
                     ? static_cast<double>(spec_accepted_tokens_) / static_cast<double>(spec_draft_tokens_)
                     : 0.0));
  Family success{p + "request_success", "counter", "Finished engine requests by finish reason.", {}};
  for (const char* reason : {"stop", "length", "abort", "error"}) {
    const auto found = finished_.find(reason);
    success.samples.push_back({p + "request_success_total", join_labels(l, label("finished_reason", reason)),
                               std::to_string(found == finished_.end() ? 0 : found->second)});
  }
  out.push_back(std::move(success));
  Family failure{p + "request_failure",
                 "counter",
                 "Requests that failed in the API server, by the stage the failure surfaced in (input_processing, "
                 "non_streaming, streaming) and the HTTP status code of the error.",
                 {}};
  for (const auto& [key, count] : failures_)
    failure.samples.push_back(
        {p + "request_failure_total",
         join_labels(l, label("stage", key.first) + "," + label("code", std::to_string(key.second))),
         std::to_string(count)});
  out.push_back(std::move(failure));
  out.push_back({p + "http_requests_client_disconnected",
                 "counter",
                 "HTTP requests whose client disconnected before the response was complete.",
                 {{p + "http_requests_client_disconnected_total", "", std::to_string(client_disconnects_)}}});
  if (ditto_only) {
    Family status{p + "http_requests", "counter", "HTTP responses by status code (499: the client left).", {}};
    for (const auto& [code, count] : http_status_)
      status.samples.push_back(
          {p + "http_requests_total", join_labels(l, label("status", std::to_string(code))), std::to_string(count)});
    out.push_back(std::move(status));
  }
  histogram("time_to_first_token_seconds", "Seconds from arrival to the first generated token.", ttft_);
  histogram("inter_token_latency_seconds", "Seconds between a request's successive tokens.", itl_);
  histogram("e2e_request_latency_seconds", "Seconds from arrival to the last token.", e2e_);
  histogram("request_queue_time_seconds", "Seconds from arrival to the first step that ran the request.", queue_time_);
  histogram("request_inference_time_seconds", "Seconds from the first step that ran the request to its last token.",
            inference_time_);
  histogram("request_prefill_time_seconds", "Seconds from the first step that ran the request to its first token.",
            prefill_time_);
  histogram("request_decode_time_seconds", "Seconds from a request's first token to its last.", decode_time_);
  histogram("request_time_per_output_token_seconds",
            "A request's mean seconds between successive tokens (decode time / token steps after the first).",
            time_per_output_token_);
  histogram("request_num_preemptions", "Preemptions of a finished request's sequences.", num_preemptions_);
  histogram("iteration_tokens_total",
            "Tokens per engine step: prompts that got their first token in it, and the tokens it sampled.",
            iteration_tokens_);
  if (prompt_tokens_hist_) {
    histogram("request_prompt_tokens", "Prompt tokens of a finished request.", *prompt_tokens_hist_);
    histogram("request_generation_tokens", "Tokens a finished request generated (every choice).",
              *generation_tokens_hist_);
    histogram("request_params_max_tokens", "The max_tokens of a finished request.", *params_max_tokens_);
  }
  histogram("request_params_n", "The n of a finished request.", params_n_);
}

void ServerMetrics::collect_http(std::vector<Family>& out) const {
  Family requests{"http_requests", "counter", "Total number of requests by method, status and handler.", {}};
  for (const auto& [key, count] : http_requests_) {
    const auto& [handler, method, status] = key;
    requests.samples.push_back(
        {"http_requests_total",
         label("handler", handler) + "," + label("method", method) + "," + label("status", status),
         std::to_string(count)});
  }
  out.push_back(std::move(requests));
  auto summary = [&](const char* name, const char* help, const std::map<std::string, std::pair<int64_t, double>>& m) {
    Family f{name, "summary", help, {}};
    for (const auto& [handler, count_sum] : m) {
      f.samples.push_back({std::string(name) + "_count", label("handler", handler), std::to_string(count_sum.first)});
      f.samples.push_back({std::string(name) + "_sum", label("handler", handler), number(count_sum.second)});
    }
    out.push_back(std::move(f));
  };
  summary("http_request_size_bytes",
          "Content length of incoming requests by handler. Only value of header is respected. Otherwise ignored.",
          http_request_size_);
  summary("http_response_size_bytes", "Content length of outgoing responses by handler.", http_response_size_);
  auto histogram = [&](Family& f, const std::string& labels, const Histogram& h) {
    const auto& bounds = h.upper_bounds();
    for (size_t i = 0; i <= bounds.size(); ++i)
      f.samples.push_back({f.name + "_bucket",
                           join_labels(labels, label("le", i < bounds.size() ? number(bounds[i]) : "+Inf")),
                           std::to_string(h.cumulative_count(i))});
    f.samples.push_back({f.name + "_sum", labels, number(h.sum())});
    f.samples.push_back({f.name + "_count", labels, std::to_string(h.count())});
  };
  Family highr{"http_request_duration_highr_seconds",
               "histogram",
               "Latency with many buckets but no API specific labels. Made for more accurate percentile calculations.",
               {}};
  histogram(highr, "", http_duration_highr_);
  out.push_back(std::move(highr));
  Family duration{"http_request_duration_seconds",
                  "histogram",
                  "Latency with only few buckets by handler. Made to be only used if aggregation by handler is "
                  "important.",
                  {}};
  for (const auto& [key, h] : http_duration_)
    histogram(duration, label("handler", key.first) + "," + label("method", key.second), h);
  out.push_back(std::move(duration));
}

std::string ServerMetrics::render(MetricsFormat format, const std::vector<std::string>& names) const {
  std::vector<Family> families;
  {
    std::lock_guard lock(mu_);
    collect_engine(families, "ditto:", /*ditto_only=*/true);
    // The same series under vLLM's names, for those vLLM has.
    collect_engine(families, "vllm:", /*ditto_only=*/false);
    collect_http(families);
  }
  const bool open_metrics = format == MetricsFormat::kOpenMetrics;
  std::string out;
  for (const Family& f : families) {
    std::vector<const Sample*> samples;
    for (const Sample& s : f.samples)
      if (names.empty() || std::find(names.begin(), names.end(), s.name) != names.end()) samples.push_back(&s);
    if (samples.empty() && !names.empty()) continue;
    // The text format names a counter's family by its sample (NAME_total); OpenMetrics by NAME.
    const std::string name = f.type == "counter" && !open_metrics ? f.name + "_total" : f.name;
    out += "# HELP " + name + " " + f.help + "\n# TYPE " + name + " " + f.type + "\n";
    for (const Sample* s : samples)
      out += s->name + (s->labels.empty() ? "" : "{" + s->labels + "}") + " " + s->value + "\n";
  }
  if (open_metrics) out += "# EOF\n";
  return out;
}

}  // namespace ditto
