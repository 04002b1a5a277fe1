// The server's counters, gauges and histograms, rendered for /metrics in the Prometheus text
// exposition format (version 0.0.4: https://prometheus.io/docs/instrumenting/exposition_formats/)
// or in OpenMetrics 1.0.0 (https://github.com/prometheus/OpenMetrics/blob/main/specification/OpenMetrics.md).
// Engine and request series are named as vLLM's (vllm/v1/metrics/loggers.py) under both ditto:
// and vllm:, with vLLM's labels and buckets, so that vLLM's Grafana dashboards and autoscalers find
// them; the HTTP series are prometheus-fastapi-instrumentator's (which vLLM's server exposes)
// unprefixed. Every value is measured (AsyncEngine, the HTTP logger), none is configured.
// Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace ditto {

// A cumulative histogram: counts of observations ≤ each upper bound, plus +Inf, sum and count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // Appends `name`_bucket{le="..."}, `name`_sum and `name`_count lines with `labels` ("k=\"v\"").
  void render(std::string& out, const std::string& name, const std::string& labels) const;
  int64_t count() const { return count_; }
  double sum() const { return sum_; }
  const std::vector<double>& upper_bounds() const { return bounds_; }
  // Observations ≤ upper_bounds()[i] (cumulative); i == upper_bounds().size() is +Inf.
  int64_t cumulative_count(size_t i) const;

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bound, not cumulative; last entry is +Inf
  double sum_ = 0.0;
  int64_t count_ = 0;
};

// vLLM's build_1_2_5_buckets(max_value): 1, 2, 5, 10, 20, 50, … up to max_value.
std::vector<double> buckets_1_2_5(int64_t max_value);

// The KV cache as configured, for vllm:cache_config_info (a gauge of 1 whose labels say it).
struct CacheConfigInfo {
  int64_t block_size = 0;     // tokens per block
  int64_t num_blocks = 0;     // vLLM's num_gpu_blocks
  int64_t max_model_len = 0;  // tokens; kv_cache_max_concurrency = num_blocks * block_size / this
  bool enable_prefix_caching = false;
  int64_t kv_cache_memory_bytes = 0;
};

// One engine request at its end, as the engine thread saw it. Times are the engine thread's
// steady clock: arrival (submitted to the AsyncEngine), scheduled (the start of the first step that
// ran its tokens), first and last token (the end of the step that sampled them), finished.
struct FinishedRequest {
  std::string finish_reason;  // "stop", "length" or "abort" (over every choice: abort > length > stop)
  int64_t prompt_tokens = 0;
  int64_t generation_tokens = 0;    // every choice's
  int64_t n = 1;                    // the request's n
  int64_t max_tokens = 0;           // params.max_tokens as the front door settled it
  int64_t num_preemptions = 0;      // of its sequences, together
  int64_t num_token_intervals = 0;  // steps that sampled tokens after the first one
  std::chrono::steady_clock::time_point arrival;
  std::optional<std::chrono::steady_clock::time_point> scheduled;
  std::optional<std::chrono::steady_clock::time_point> first_token;
  std::optional<std::chrono::steady_clock::time_point> last_token;
  std::chrono::steady_clock::time_point finished;
};

// One HTTP exchange at its end (the server's logger).
struct HttpExchange {
  std::string method;
  std::string handler;              // the route's path; "" when no route matched ("none")
  int status = 0;                   // as sent in the header
  bool client_closed = false;       // a stream's client left before its end (logged 499)
  bool generation_started = false;  // the engine took the request (vLLM's mark_generation_started)
  bool stream_failed = false;       // a 200 stream that ended with an error event
  int64_t request_bytes = 0;        // the request's Content-Length
  int64_t response_bytes = 0;       // the body's length (0 for a stream)
  double seconds = 0.0;             // from its first byte read to its last byte written
};

// The format /metrics answers in: Prometheus text 0.0.4, or OpenMetrics when the Accept header asks.
enum class MetricsFormat { kText, kOpenMetrics };
// The format for an Accept header (OpenMetrics for "application/openmetrics-text" at version 1.0.0
// or none given, as prometheus_client chooses) and its Content-Type.
MetricsFormat metrics_format_for(const std::string& accept);
const char* metrics_content_type(MetricsFormat format);

class ServerMetrics {
 public:
  explicit ServerMetrics(std::string model_name);

  // An HTTP exchange ended: the instrumentator's series (http_requests_total{handler,method,status},
  // sizes, durations), ditto:http_requests_total{status} (499 for a closed client), request
  // failures by stage and code, client disconnects.
  void record_http(const HttpExchange& x);
  // An engine request failed ("error": refused by the engine's front door, or its step failed).
  void record_request_failed();
  // An engine request finished: request_success_total{finished_reason}, e2e latency, and the
  // per-request histograms (tokens, params, queue / prefill / decode / inference time, preemptions).
  void record_finished_request(const FinishedRequest& r);
  void add_prompt_tokens(int64_t n);
  void add_generation_tokens(int64_t n);
  // Seconds from arrival to the first generated token / between a request's successive tokens
  // (a step that produced one token for each of n choices counts one interval).
  void observe_time_to_first_token(double seconds);
  void observe_inter_token_latency(double seconds);
  // One engine step: the prompt tokens of the requests that got their first token in it plus the
  // tokens it sampled (vLLM's iteration_tokens_total).
  void observe_iteration_tokens(int64_t tokens);
  // Sequences the scheduler preempted (a running total across engine restarts).
  void add_preemptions(int64_t n);
  // Engine state after the latest step. prefix_* are running totals in tokens.
  void set_engine_state(int64_t running, int64_t waiting, double kv_cache_usage, int64_t prefix_query_tokens,
                        int64_t prefix_hit_tokens);
  void set_cache_config(const CacheConfigInfo& info);

  // Speculative decoding's running totals (vLLM's spec_decode counters): verifications with
  // guesses, tokens guessed, guesses accepted.
  void set_spec_decode(int64_t num_drafts, int64_t num_draft_tokens, int64_t num_accepted_tokens);

  // The exposition: every series as ditto:NAME, those vLLM has also as vllm:NAME, then the HTTP
  // series. With `names` (vLLM's ?name[]=…), only the samples of those names (a histogram's are
  // NAME_bucket, NAME_sum, NAME_count; a counter's NAME_total), and nothing at all — not even "# EOF"
  // — for text when none matches.
  std::string render(MetricsFormat format = MetricsFormat::kText, const std::vector<std::string>& names = {}) const;

 private:
  struct Sample {
    std::string name;
    std::string labels;  // k="v",… (escaped), may be empty
    std::string value;
  };
  struct Family {
    std::string name;  // a counter's without _total (OpenMetrics' family name)
    std::string type;  // counter, gauge, histogram, summary
    std::string help;
    std::vector<Sample> samples;
  };
  // The families under `prefix` ("ditto:" or "vllm:"); ditto_only adds those vLLM has not (hit and
  // acceptance rates, HTTP statuses). The caller holds mu_.
  void collect_engine(std::vector<Family>& out, const std::string& prefix, bool ditto_only) const;
  void collect_http(std::vector<Family>& out) const;

  std::string model_name_;
  int64_t max_model_len_ = 0;
  mutable std::mutex mu_;
  std::map<int, int64_t> http_status_;
  std::map<std::string, int64_t> finished_;
  int64_t prompt_tokens_ = 0;
  int64_t generation_tokens_ = 0;
  int64_t running_ = 0;
  int64_t waiting_ = 0;
  double kv_cache_usage_ = 0.0;
  int64_t prefix_query_tokens_ = 0;
  int64_t prefix_hit_tokens_ = 0;
  int64_t preemptions_ = 0;
  int64_t spec_drafts_ = 0;
  int64_t spec_draft_tokens_ = 0;
  int64_t spec_accepted_tokens_ = 0;
  std::optional<CacheConfigInfo> cache_config_;
  std::map<std::pair<std::string, int>, int64_t> failures_;  // (stage, code)
  int64_t client_disconnects_ = 0;
  Histogram ttft_;
  Histogram itl_;
  Histogram e2e_;
  Histogram iteration_tokens_;
  Histogram queue_time_;
  Histogram inference_time_;
  Histogram prefill_time_;
  Histogram decode_time_;
  Histogram time_per_output_token_;
  Histogram num_preemptions_;
  Histogram params_n_;
  // By max_model_len (buckets_1_2_5): made by set_cache_config, which knows it.
  std::optional<Histogram> prompt_tokens_hist_;
  std::optional<Histogram> generation_tokens_hist_;
  std::optional<Histogram> params_max_tokens_;
  // prometheus-fastapi-instrumentator's default series.
  std::map<std::tuple<std::string, std::string, std::string>, int64_t> http_requests_;  // handler, method, 2xx
  std::map<std::string, std::pair<int64_t, double>> http_request_size_;                 // handler: count, sum
  std::map<std::string, std::pair<int64_t, double>> http_response_size_;
  std::map<std::pair<std::string, std::string>, Histogram> http_duration_;  // handler, method
  Histogram http_duration_highr_;
};

}  // namespace ditto
