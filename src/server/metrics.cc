#include "server/metrics.h"

#include <algorithm>
#include <charconv>
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

void header(std::string& out, const std::string& name, const char* type, const char* help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
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

ServerMetrics::ServerMetrics(std::string model_name)
    : model_name_(std::move(model_name)),
      ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
             1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}),
      itl_({0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}),
      e2e_({0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
            30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}) {}

void ServerMetrics::record_http_status(int status) {
  std::lock_guard lock(mu_);
  ++http_status_[status];
}

void ServerMetrics::record_request_finished(const std::string& reason) {
  std::lock_guard lock(mu_);
  ++finished_[reason];
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

void ServerMetrics::observe_e2e_latency(double seconds) {
  std::lock_guard lock(mu_);
  e2e_.observe(seconds);
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

void ServerMetrics::set_spec_decode(int64_t num_drafts, int64_t num_draft_tokens, int64_t num_accepted_tokens) {
  std::lock_guard lock(mu_);
  spec_drafts_ = num_drafts;
  spec_draft_tokens_ = num_draft_tokens;
  spec_accepted_tokens_ = num_accepted_tokens;
}

std::string ServerMetrics::labels() const { return "model_name=\"" + escape_label(model_name_) + "\""; }

void ServerMetrics::render_family(std::string& out, const std::string& p, bool ditto_only) const {
  const std::string l = labels();
  auto gauge = [&](const std::string& name, const char* help, const std::string& value) {
    header(out, name, "gauge", help);
    out += name + "{" + l + "} " + value + "\n";
  };
  auto counter = [&](const std::string& name, const char* help, int64_t value) {
    header(out, name, "counter", help);
    out += name + "{" + l + "} " + std::to_string(value) + "\n";
  };
  gauge(p + "num_requests_running", "Sequences in the engine's running batch.", std::to_string(running_));
  gauge(p + "num_requests_waiting", "Sequences waiting to be scheduled.", std::to_string(waiting_));
  gauge(p + "kv_cache_usage_perc", "Fraction of KV cache blocks in use (1 = full).", number(kv_cache_usage_));
  counter(p + "prompt_tokens_total", "Prompt tokens of accepted requests.", prompt_tokens_);
  counter(p + "generation_tokens_total", "Generated tokens.", generation_tokens_);
  counter(p + "prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.", prefix_query_tokens_);
  counter(p + "prefix_cache_hits_total", "Prompt tokens found in the prefix cache.", prefix_hit_tokens_);
  if (ditto_only)
    gauge(p + "prefix_cache_hit_rate", "prefix_cache_hits_total / prefix_cache_queries_total (0 before any query).",
          number(prefix_query_tokens_ > 0
                     ? static_cast<double>(prefix_hit_tokens_) / static_cast<double>(prefix_query_tokens_)
                     : 0.0));
  counter(p + "spec_decode_num_drafts_total", "Speculative verifications (a sequence's step with guesses).",
          spec_drafts_);
  counter(p + "spec_decode_num_draft_tokens_total", "Tokens guessed by the speculative proposer.", spec_draft_tokens_);
  counter(p + "spec_decode_num_accepted_tokens_total",
          "Guessed tokens accepted (equal to the token the model sampled there).", spec_accepted_tokens_);
  if (ditto_only)
    gauge(p + "spec_decode_acceptance_rate",
          "spec_decode_num_accepted_tokens_total / spec_decode_num_draft_tokens_total (0 before any guess).",
          number(spec_draft_tokens_ > 0
                     ? static_cast<double>(spec_accepted_tokens_) / static_cast<double>(spec_draft_tokens_)
                     : 0.0));
  header(out, p + "request_success_total", "counter", "Finished engine requests by finish reason.");
  for (const char* reason : {"stop", "length", "abort", "error"}) {
    const auto found = finished_.find(reason);
    out += p + "request_success_total{" + l + ",finished_reason=\"" + reason + "\"} " +
           std::to_string(found == finished_.end() ? 0 : found->second) + "\n";
  }
  if (ditto_only) {
    header(out, p + "http_requests_total", "counter", "HTTP responses by status code.");
    for (const auto& [status, count] : http_status_)
      out += p + "http_requests_total{" + l + ",status=\"" + std::to_string(status) + "\"} " + std::to_string(count) +
             "\n";
  }
  header(out, p + "time_to_first_token_seconds", "histogram", "Seconds from arrival to the first generated token.");
  ttft_.render(out, p + "time_to_first_token_seconds", l);
  header(out, p + "inter_token_latency_seconds", "histogram", "Seconds between a request's successive tokens.");
  itl_.render(out, p + "inter_token_latency_seconds", l);
  header(out, p + "e2e_request_latency_seconds", "histogram", "Seconds from arrival to the last token.");
  e2e_.render(out, p + "e2e_request_latency_seconds", l);
}

std::string ServerMetrics::render() const {
  std::lock_guard lock(mu_);
  std::string out;
  render_family(out, "ditto:", /*ditto_only=*/true);
  // The same series under vLLM's names, for those vLLM has, so that its Grafana dashboards and
  // autoscalers find them.
  render_family(out, "vllm:", /*ditto_only=*/false);
  return out;
}

}  // namespace ditto
