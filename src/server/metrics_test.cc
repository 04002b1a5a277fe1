#include "server/metrics.h"

#include <gtest/gtest.h>

namespace ditto {
namespace {

using Clock = std::chrono::steady_clock;

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

TEST(MetricsTest, HistogramBucketsAreCumulative) {
  Histogram h({0.1, 1.0});
  for (double v : {0.05, 0.1, 0.5, 3.0}) h.observe(v);
  std::string out;
  h.render(out, "x", "a=\"b\"");
  EXPECT_EQ(out,
            "x_bucket{a=\"b\",le=\"0.1\"} 2\n"
            "x_bucket{a=\"b\",le=\"1\"} 3\n"
            "x_bucket{a=\"b\",le=\"+Inf\"} 4\n"
            "x_sum{a=\"b\"} 3.65\n"
            "x_count{a=\"b\"} 4\n");
  EXPECT_EQ(h.cumulative_count(0), 2);
  EXPECT_EQ(h.cumulative_count(2), 4);
}

TEST(MetricsTest, Buckets125AreVllms) {
  EXPECT_EQ(buckets_1_2_5(100), (std::vector<double>{1, 2, 5, 10, 20, 50, 100}));
  EXPECT_EQ(buckets_1_2_5(1024), (std::vector<double>{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}));
}

HttpExchange exchange(const std::string& method, const std::string& handler, int status) {
  HttpExchange x;
  x.method = method;
  x.handler = handler;
  x.status = status;
  x.request_bytes = 100;
  x.response_bytes = 40;
  x.seconds = 0.2;
  return x;
}

TEST(MetricsTest, RendersCountersGaugesAndHistograms) {
  ServerMetrics m("qwen \"3\"");
  m.record_http(exchange("POST", "/v1/completions", 200));
  m.record_http(exchange("POST", "/v1/completions", 200));
  m.record_http(exchange("POST", "/v1/completions", 400));
  m.record_request_failed();
  m.add_prompt_tokens(12);
  m.add_generation_tokens(30);
  m.observe_time_to_first_token(0.2);
  m.observe_inter_token_latency(0.03);
  m.set_engine_state(3, 4, 0.25, 100, 40);
  m.set_spec_decode(5, 20, 15);
  m.add_preemptions(2);
  m.add_preemptions(1);
  m.observe_iteration_tokens(9);
  m.observe_iteration_tokens(1);
  m.set_cache_config({16, 100, 400, true, 1 << 20});
  const std::string t = m.render();
  const std::string l = "model_name=\"qwen \\\"3\\\"\"";
  EXPECT_TRUE(has_line(t, "ditto:num_requests_running{" + l + "} 3")) << t;
  EXPECT_TRUE(has_line(t, "ditto:num_requests_waiting{" + l + "} 4"));
  EXPECT_TRUE(has_line(t, "ditto:kv_cache_usage_perc{" + l + "} 0.25"));
  EXPECT_TRUE(has_line(t, "ditto:prompt_tokens_total{" + l + "} 12"));
  EXPECT_TRUE(has_line(t, "ditto:generation_tokens_total{" + l + "} 30"));
  EXPECT_TRUE(has_line(t, "ditto:prefix_cache_hit_rate{" + l + "} 0.4"));
  EXPECT_TRUE(has_line(t, "ditto:request_success_total{" + l + ",finished_reason=\"error\"} 1"));
  EXPECT_TRUE(has_line(t, "ditto:request_success_total{" + l + ",finished_reason=\"length\"} 0"));
  EXPECT_TRUE(has_line(t, "ditto:http_requests_total{" + l + ",status=\"200\"} 2"));
  EXPECT_TRUE(has_line(t, "ditto:http_requests_total{" + l + ",status=\"400\"} 1"));
  EXPECT_TRUE(has_line(t, "ditto:time_to_first_token_seconds_count{" + l + "} 1"));
  EXPECT_TRUE(has_line(t, "ditto:time_to_first_token_seconds_bucket{" + l + ",le=\"0.25\"} 1"));
  EXPECT_TRUE(has_line(t, "ditto:time_to_first_token_seconds_bucket{" + l + ",le=\"0.1\"} 0"));
  EXPECT_TRUE(has_line(t, "ditto:inter_token_latency_seconds_count{" + l + "} 1"));
  EXPECT_TRUE(has_line(t, "# TYPE ditto:time_to_first_token_seconds histogram"));
  EXPECT_TRUE(has_line(t, "# TYPE ditto:prompt_tokens_total counter"));
  EXPECT_TRUE(has_line(t, "ditto:spec_decode_num_drafts_total{" + l + "} 5"));
  EXPECT_TRUE(has_line(t, "ditto:spec_decode_num_draft_tokens_total{" + l + "} 20"));
  EXPECT_TRUE(has_line(t, "ditto:spec_decode_num_accepted_tokens_total{" + l + "} 15"));
  EXPECT_TRUE(has_line(t, "ditto:spec_decode_acceptance_rate{" + l + "} 0.75"));
  // vLLM's names for the series vLLM has (issue 30), the same values; ditto's own rates and HTTP
  // statuses only under ditto:.
  EXPECT_TRUE(has_line(t, "vllm:num_requests_running{" + l + "} 3"));
  EXPECT_TRUE(has_line(t, "vllm:num_requests_waiting_by_reason{" + l + ",reason=\"capacity\"} 4"));
  EXPECT_TRUE(has_line(t, "vllm:num_requests_waiting_by_reason{" + l + ",reason=\"deferred\"} 0"));
  EXPECT_TRUE(has_line(t, "vllm:kv_cache_usage_perc{" + l + "} 0.25"));
  EXPECT_TRUE(has_line(t, "vllm:prompt_tokens_total{" + l + "} 12"));
  EXPECT_TRUE(has_line(t, "vllm:generation_tokens_total{" + l + "} 30"));
  EXPECT_TRUE(has_line(t, "vllm:num_preemptions_total{" + l + "} 3"));
  EXPECT_TRUE(has_line(t, "vllm:iteration_tokens_total_count{" + l + "} 2"));
  EXPECT_TRUE(has_line(t, "vllm:iteration_tokens_total_sum{" + l + "} 10"));
  EXPECT_TRUE(has_line(t, "vllm:iteration_tokens_total_bucket{" + l + ",le=\"1\"} 1"));
  EXPECT_TRUE(has_line(t, "vllm:request_success_total{" + l + ",finished_reason=\"error\"} 1"));
  EXPECT_TRUE(has_line(t, "vllm:prefix_cache_hits_total{" + l + "} 40"));
  EXPECT_TRUE(has_line(t, "vllm:spec_decode_num_accepted_tokens_total{" + l + "} 15"));
  EXPECT_TRUE(has_line(t, "vllm:time_to_first_token_seconds_count{" + l + "} 1"));
  EXPECT_TRUE(has_line(t, "# TYPE vllm:e2e_request_latency_seconds histogram"));
  // 100 blocks of 16 tokens; 1600 / max_model_len 400 requests of the longest fit at once.
  EXPECT_TRUE(has_line(t,
                       "vllm:cache_config_info{block_size=\"16\",cache_dtype=\"bfloat16\",enable_prefix_caching="
                       "\"True\",kv_cache_max_concurrency=\"4\",kv_cache_memory_bytes=\"1048576\","
                       "kv_cache_size_tokens=\"1600\",num_gpu_blocks=\"100\"} 1"))
      << t;
  // build_1_2_5_buckets(max_model_len) for the token-count histograms.
  EXPECT_TRUE(has_line(t, "vllm:request_prompt_tokens_bucket{" + l + ",le=\"200\"} 0"));
  EXPECT_EQ(t.find("vllm:request_prompt_tokens_bucket{" + l + ",le=\"500\"}"), std::string::npos);
  EXPECT_EQ(t.find("vllm:prefix_cache_hit_rate"), std::string::npos);
  EXPECT_EQ(t.find("vllm:http_requests_total"), std::string::npos);
}

TEST(MetricsTest, FinishedRequestsFillVllmsPerRequestHistograms) {
  ServerMetrics m("m");
  m.set_cache_config({16, 64, 1024, true, 0});
  const Clock::time_point t0{};
  FinishedRequest r;
  r.finish_reason = "length";
  r.prompt_tokens = 7;
  r.generation_tokens = 10;
  r.n = 2;
  r.max_tokens = 5;
  r.num_preemptions = 1;
  r.num_token_intervals = 4;
  r.arrival = t0;
  r.scheduled = t0 + std::chrono::milliseconds(500);
  r.first_token = t0 + std::chrono::milliseconds(1500);
  r.last_token = t0 + std::chrono::milliseconds(3500);
  r.finished = t0 + std::chrono::milliseconds(3500);
  m.record_finished_request(r);
  // Aborted while waiting: it queued all its life and ran no phase.
  FinishedRequest a;
  a.finish_reason = "abort";
  a.arrival = t0;
  a.finished = t0 + std::chrono::milliseconds(250);
  m.record_finished_request(a);
  const std::string t = m.render();
  const std::string l = "model_name=\"m\"";
  EXPECT_TRUE(has_line(t, "vllm:request_success_total{" + l + ",finished_reason=\"length\"} 1")) << t;
  EXPECT_TRUE(has_line(t, "vllm:request_success_total{" + l + ",finished_reason=\"abort\"} 1"));
  EXPECT_TRUE(has_line(t, "vllm:e2e_request_latency_seconds_sum{" + l + "} 3.75"));
  EXPECT_TRUE(has_line(t, "vllm:request_queue_time_seconds_sum{" + l + "} 0.75"));
  EXPECT_TRUE(has_line(t, "vllm:request_queue_time_seconds_count{" + l + "} 2"));
  EXPECT_TRUE(has_line(t, "vllm:request_prefill_time_seconds_sum{" + l + "} 1"));
  EXPECT_TRUE(has_line(t, "vllm:request_prefill_time_seconds_count{" + l + "} 1"));
  EXPECT_TRUE(has_line(t, "vllm:request_decode_time_seconds_sum{" + l + "} 2"));
  EXPECT_TRUE(has_line(t, "vllm:request_inference_time_seconds_sum{" + l + "} 3"));
  EXPECT_TRUE(has_line(t, "vllm:request_time_per_output_token_seconds_sum{" + l + "} 0.5"));
  EXPECT_TRUE(has_line(t, "vllm:request_num_preemptions_sum{" + l + "} 1"));
  EXPECT_TRUE(has_line(t, "vllm:request_num_preemptions_count{" + l + "} 2"));
  EXPECT_TRUE(has_line(t, "vllm:request_prompt_tokens_sum{" + l + "} 7"));
  EXPECT_TRUE(has_line(t, "vllm:request_generation_tokens_sum{" + l + "} 10"));
  EXPECT_TRUE(has_line(t, "vllm:request_params_max_tokens_sum{" + l + "} 5"));
  EXPECT_TRUE(has_line(t, "vllm:request_params_n_sum{" + l + "} 3"));
  EXPECT_TRUE(has_line(t, "vllm:request_params_n_bucket{" + l + ",le=\"2\"} 2"));
}

TEST(MetricsTest, HttpExchangesAreCountedAsTheInstrumentatorAndVllmsMiddlewareCount) {
  ServerMetrics m("m");
  m.record_http(exchange("POST", "/v1/chat/completions", 200));
  m.record_http(exchange("POST", "/v1/chat/completions", 400));  // refused at the front door
  HttpExchange late = exchange("POST", "/v1/completions", 500);
  late.generation_started = true;  // the engine's step failed
  m.record_http(late);
  HttpExchange broken = exchange("POST", "/v1/completions", 200);
  broken.stream_failed = true;
  m.record_http(broken);
  HttpExchange left = exchange("POST", "/v1/completions", 200);
  left.client_closed = true;  // a stream's client hung up
  m.record_http(left);
  m.record_http(exchange("POST", "/v1/completions", 499));  // a whole response nobody waited for
  m.record_http(exchange("GET", "", 404));                  // no route: not a request for the model
  m.record_http(exchange("GET", "/health", 200));           // a probe: not instrumented
  m.record_http(exchange("GET", "/metrics", 200));
  const std::string t = m.render();
  const std::string l = "model_name=\"m\"";
  EXPECT_TRUE(has_line(t, "http_requests_total{handler=\"/v1/chat/completions\",method=\"POST\",status=\"2xx\"} 1"))
      << t;
  EXPECT_TRUE(has_line(t, "http_requests_total{handler=\"/v1/chat/completions\",method=\"POST\",status=\"4xx\"} 1"));
  EXPECT_TRUE(has_line(t, "http_requests_total{handler=\"/v1/completions\",method=\"POST\",status=\"5xx\"} 1"));
  EXPECT_TRUE(has_line(t, "http_requests_total{handler=\"/v1/completions\",method=\"POST\",status=\"2xx\"} 2"));
  EXPECT_TRUE(has_line(t, "http_requests_total{handler=\"none\",method=\"GET\",status=\"4xx\"} 1"));
  EXPECT_EQ(t.find("handler=\"/health\""), std::string::npos);
  EXPECT_EQ(t.find("handler=\"/metrics\""), std::string::npos);
  EXPECT_TRUE(has_line(t, "http_request_size_bytes_sum{handler=\"/v1/chat/completions\"} 200"));
  EXPECT_TRUE(has_line(t, "http_response_size_bytes_count{handler=\"/v1/completions\"} 4"));
  EXPECT_TRUE(has_line(t, "http_request_duration_seconds_bucket{handler=\"none\",method=\"GET\",le=\"0.5\"} 1"));
  EXPECT_TRUE(has_line(t, "http_request_duration_highr_seconds_count 7"));
  EXPECT_TRUE(has_line(t, "vllm:request_failure_total{" + l + ",stage=\"input_processing\",code=\"400\"} 1"));
  EXPECT_TRUE(has_line(t, "vllm:request_failure_total{" + l + ",stage=\"non_streaming\",code=\"500\"} 1"));
  EXPECT_TRUE(has_line(t, "vllm:request_failure_total{" + l + ",stage=\"streaming\",code=\"500\"} 1"));
  EXPECT_EQ(t.find("code=\"404\""), std::string::npos);
  EXPECT_EQ(t.find("code=\"499\""), std::string::npos);
  EXPECT_TRUE(has_line(t, "vllm:http_requests_client_disconnected_total 2"));
  EXPECT_TRUE(has_line(t, "ditto:http_requests_total{" + l + ",status=\"499\"} 2"));
}

// vLLM's test_metrics_filter: ?name[]= selects samples (a histogram by its _bucket/_sum/_count
// names, a counter by NAME_total); no match is an empty body.
TEST(MetricsTest, NamesFilterSamples) {
  ServerMetrics m("m");
  m.observe_time_to_first_token(0.3);
  m.add_prompt_tokens(5);
  const std::string t = m.render(MetricsFormat::kText, {"vllm:num_requests_waiting", "vllm:prompt_tokens_total",
                                                        "vllm:time_to_first_token_seconds_sum"});
  EXPECT_EQ(t,
            "# HELP vllm:num_requests_waiting Sequences waiting to be scheduled.\n"
            "# TYPE vllm:num_requests_waiting gauge\n"
            "vllm:num_requests_waiting{model_name=\"m\"} 0\n"
            "# HELP vllm:prompt_tokens_total Prompt tokens of accepted requests.\n"
            "# TYPE vllm:prompt_tokens_total counter\n"
            "vllm:prompt_tokens_total{model_name=\"m\"} 5\n"
            "# HELP vllm:time_to_first_token_seconds Seconds from arrival to the first generated token.\n"
            "# TYPE vllm:time_to_first_token_seconds histogram\n"
            "vllm:time_to_first_token_seconds_sum{model_name=\"m\"} 0.3\n");
  EXPECT_EQ(m.render(MetricsFormat::kText, {"vllm:time_to_first_token_seconds"}), "");
  EXPECT_EQ(m.render(MetricsFormat::kText, {"vllm:does_not_exist"}), "");
  EXPECT_EQ(m.render(MetricsFormat::kOpenMetrics, {"vllm:does_not_exist"}), "# EOF\n");
}

TEST(MetricsTest, OpenMetricsIsNegotiatedAndEndsWithEof) {
  EXPECT_EQ(metrics_format_for(""), MetricsFormat::kText);
  EXPECT_EQ(metrics_format_for("*/*"), MetricsFormat::kText);
  EXPECT_EQ(metrics_format_for("application/openmetrics-text; version=1.0.0"), MetricsFormat::kOpenMetrics);
  EXPECT_EQ(metrics_format_for("text/plain;q=0.5, application/openmetrics-text;version=1.0.0;q=0.9"),
            MetricsFormat::kOpenMetrics);
  EXPECT_EQ(metrics_format_for("application/openmetrics-text; version=0.0.1"), MetricsFormat::kText);
  EXPECT_EQ(std::string(metrics_content_type(MetricsFormat::kOpenMetrics)),
            "application/openmetrics-text; version=1.0.0; charset=utf-8");
  ServerMetrics m("m");
  m.add_prompt_tokens(5);
  const std::string t = m.render(MetricsFormat::kOpenMetrics);
  ASSERT_GE(t.size(), 6u);
  EXPECT_EQ(t.substr(t.size() - 6), "# EOF\n");
  // OpenMetrics names a counter's family without _total; its sample keeps it.
  EXPECT_TRUE(has_line(t, "# TYPE vllm:prompt_tokens counter")) << t;
  EXPECT_TRUE(has_line(t, "vllm:prompt_tokens_total{model_name=\"m\"} 5"));
}

}  // namespace
}  // namespace ditto
