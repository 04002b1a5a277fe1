// The server's counters, gauges and latency histograms, rendered for GET /metrics in the
// Prometheus text exposition format (version 0.0.4:
// https://prometheus.io/docs/instrumenting/exposition_formats/). Names follow vLLM's metrics with
// a `ditto:` prefix. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
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

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bound, not cumulative; last entry is +Inf
  double sum_ = 0.0;
  int64_t count_ = 0;
};

class ServerMetrics {
 public:
  explicit ServerMetrics(std::string model_name);

  // An HTTP response sent, by status code.
  void record_http_status(int status);
  // An engine request finished: reason "stop", "length", "abort" or "error".
  void record_request_finished(const std::string& reason);
  void add_prompt_tokens(int64_t n);
  void add_generation_tokens(int64_t n);
  // Seconds from arrival to the first generated token / between a request's successive tokens
  // (a step that produced one token for each of n choices counts one interval) / arrival to the
  // end.
  void observe_time_to_first_token(double seconds);
  void observe_inter_token_latency(double seconds);
  void observe_e2e_latency(double seconds);
  // Engine state after the latest step. prefix_* are running totals in tokens.
  void set_engine_state(int64_t running, int64_t waiting, double kv_cache_usage, int64_t prefix_query_tokens,
                        int64_t prefix_hit_tokens);

  // Speculative decoding's running totals (vLLM's spec_decode counters): verifications with
  // guesses, tokens guessed, guesses accepted.
  void set_spec_decode(int64_t num_drafts, int64_t num_draft_tokens, int64_t num_accepted_tokens);

  // The whole exposition text: every series as ditto:NAME, and those vLLM has also as vllm:NAME
  // (its dashboards' names: num_requests_running, kv_cache_usage_perc, prompt_tokens_total,
  // request_success_total, time_to_first_token_seconds, ...).
  std::string render() const;

 private:
  std::string labels() const;
  // The series under `prefix` ("ditto:" or "vllm:"); ditto_only adds those vLLM has not (hit and
  // acceptance rates, HTTP statuses). The caller holds mu_.
  void render_family(std::string& out, const std::string& prefix, bool ditto_only) const;

  std::string model_name_;
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
  int64_t spec_drafts_ = 0;
  int64_t spec_draft_tokens_ = 0;
  int64_t spec_accepted_tokens_ = 0;
  Histogram ttft_;
  Histogram itl_;
  Histogram e2e_;
};

}  // namespace ditto
