#include "server/metrics.h"

#include <gtest/gtest.h>

namespace ditto {
namespace {

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
}

TEST(MetricsTest, RendersCountersGaugesAndHistograms) {
  ServerMetrics m("qwen \"3\"");
  m.record_http_status(200);
  m.record_http_status(200);
  m.record_http_status(400);
  m.record_request_finished("stop");
  m.record_request_finished("abort");
  m.add_prompt_tokens(12);
  m.add_generation_tokens(30);
  m.observe_time_to_first_token(0.2);
  m.observe_inter_token_latency(0.03);
  m.set_engine_state(3, 4, 0.25, 100, 40);
  m.set_spec_decode(5, 20, 15);
  const std::string t = m.render();
  const std::string l = "model_name=\"qwen \\\"3\\\"\"";
  EXPECT_TRUE(has_line(t, "ditto:num_requests_running{" + l + "} 3")) << t;
  EXPECT_TRUE(has_line(t, "ditto:num_requests_waiting{" + l + "} 4"));
  EXPECT_TRUE(has_line(t, "ditto:kv_cache_usage_perc{" + l + "} 0.25"));
  EXPECT_TRUE(has_line(t, "ditto:prompt_tokens_total{" + l + "} 12"));
  EXPECT_TRUE(has_line(t, "ditto:generation_tokens_total{" + l + "} 30"));
  EXPECT_TRUE(has_line(t, "ditto:prefix_cache_hit_rate{" + l + "} 0.4"));
  EXPECT_TRUE(has_line(t, "ditto:request_success_total{" + l + ",finished_reason=\"stop\"} 1"));
  EXPECT_TRUE(has_line(t, "ditto:request_success_total{" + l + ",finished_reason=\"length\"} 0"));
  EXPECT_TRUE(has_line(t, "ditto:http_requests_total{" + l + ",status=\"200\"} 2"));
  EXPECT_TRUE(has_line(t, "ditto:http_requests_total{" + l + ",status=\"400\"} 1"));
  EXPECT_TRUE(has_line(t, "ditto:time_to_first_token_seconds_count{" + l + "} 1"));
  EXPECT_TRUE(has_line(t, "ditto:time_to_first_token_seconds_bucket{" + l + ",le=\"0.25\"} 1"));
  EXPECT_TRUE(has_line(t, "ditto:time_to_first_token_seconds_bucket{" + l + ",le=\"0.1\"} 0"));
  EXPECT_TRUE(has_line(t, "ditto:inter_token_latency_seconds_count{" + l + "} 1"));
  EXPECT_TRUE(has_line(t, "# TYPE ditto:time_to_first_token_seconds histogram"));
  EXPECT_TRUE(has_line(t, "ditto:spec_decode_num_drafts_total{" + l + "} 5"));
  EXPECT_TRUE(has_line(t, "ditto:spec_decode_num_draft_tokens_total{" + l + "} 20"));
  EXPECT_TRUE(has_line(t, "ditto:spec_decode_num_accepted_tokens_total{" + l + "} 15"));
  EXPECT_TRUE(has_line(t, "ditto:spec_decode_acceptance_rate{" + l + "} 0.75"));
  // vLLM's names for the series vLLM has (issue 30), the same values; ditto's own rates and HTTP
  // statuses only under ditto:.
  EXPECT_TRUE(has_line(t, "vllm:num_requests_running{" + l + "} 3"));
  EXPECT_TRUE(has_line(t, "vllm:kv_cache_usage_perc{" + l + "} 0.25"));
  EXPECT_TRUE(has_line(t, "vllm:prompt_tokens_total{" + l + "} 12"));
  EXPECT_TRUE(has_line(t, "vllm:generation_tokens_total{" + l + "} 30"));
  EXPECT_TRUE(has_line(t, "vllm:request_success_total{" + l + ",finished_reason=\"stop\"} 1"));
  EXPECT_TRUE(has_line(t, "vllm:prefix_cache_hits_total{" + l + "} 40"));
  EXPECT_TRUE(has_line(t, "vllm:spec_decode_num_accepted_tokens_total{" + l + "} 15"));
  EXPECT_TRUE(has_line(t, "vllm:time_to_first_token_seconds_count{" + l + "} 1"));
  EXPECT_TRUE(has_line(t, "# TYPE vllm:e2e_request_latency_seconds histogram"));
  EXPECT_EQ(t.find("vllm:prefix_cache_hit_rate"), std::string::npos);
  EXPECT_EQ(t.find("vllm:http_requests_total"), std::string::npos);
}

}  // namespace
}  // namespace ditto
