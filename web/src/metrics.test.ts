import { describe, expect, it } from "vitest";
import { History, parsePrometheus, pointBetween, sampleOf } from "./metrics";

const TEXT = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 3
vllm:num_requests_waiting{model_name="m"} 1
vllm:num_requests_waiting_by_reason{model_name="m",reason="capacity"} 1
vllm:kv_cache_usage_perc{model_name="m"} 0.25
vllm:prefix_cache_queries_total{model_name="m"} 200
vllm:prefix_cache_hits_total{model_name="m"} 50
vllm:generation_tokens_total{model_name="m"} 1000
vllm:prompt_tokens_total{model_name="m"} 4000
vllm:time_to_first_token_seconds_bucket{model_name="m",le="0.001"} 0
ditto:num_requests_running{model_name="m"} 3
`;

describe("parsePrometheus", () => {
  it("reads each series and sums a name over its labels", () => {
    const m = parsePrometheus(TEXT);
    expect(m.get("vllm:num_requests_running")).toBe(3);
    expect(m.get("vllm:kv_cache_usage_perc")).toBe(0.25);
    expect(m.get("vllm:num_requests_waiting_by_reason")).toBe(1);
    expect(m.has("# HELP")).toBe(false);
  });

  it("skips lines that are not samples", () => {
    expect(parsePrometheus("garbage line\n{broken} 1\nok 2\n").get("ok")).toBe(2);
  });
});

describe("points between samples", () => {
  it("turns counters into rates and the KV cache into percent", () => {
    const a = sampleOf(10, parsePrometheus(TEXT));
    const b = sampleOf(12, parsePrometheus(TEXT.replace(" 1000", " 1100").replace(" 200\n", " 300\n").replace(" 50\n", " 125\n")));
    const p = pointBetween(a, b);
    expect(p.generationTokensPerSecond).toBe(50);
    expect(p.prefixHitRate).toBe(0.75);
    expect(p.kvUsagePercent).toBe(25);
    expect(p.running).toBe(3);
    expect(pointBetween(a, a).prefixHitRate).toBeNull();
  });

  it("a counter that went back (a restart) counts as zero, not negative", () => {
    const a = sampleOf(0, parsePrometheus("vllm:generation_tokens_total 500\n"));
    const b = sampleOf(1, parsePrometheus("vllm:generation_tokens_total 20\n"));
    expect(pointBetween(a, b).generationTokensPerSecond).toBe(0);
  });

  it("History keeps the last points", () => {
    const h = new History(2);
    expect(h.add(sampleOf(0, new Map()))).toBeNull();
    for (let t = 1; t <= 4; ++t) h.add(sampleOf(t, new Map()));
    expect(h.all().map((p) => p.t)).toEqual([3, 4]);
  });
});
