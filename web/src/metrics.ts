/**
 * The server's state from its Prometheus `/metrics` text (exposition format 0.0.4): the vLLM-named
 * series ditto exports, sampled over time, and the rates between samples.
 */

/**
 * Parses Prometheus text into metric name → value, summing the series of a name over their labels.
 * Comments, histogram buckets and unparsable lines are skipped.
 */
export function parsePrometheus(text: string): Map<string, number> {
  const values = new Map<string, number>();
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const value = Number(m[3]);
    if (Number.isNaN(value) && m[3] !== "NaN") continue;
    values.set(m[1], (values.get(m[1]) ?? 0) + value);
  }
  return values;
}

/** One reading of /metrics. */
export interface Sample {
  /** seconds (performance.now() / 1000 when read) */
  t: number;
  running: number;
  waiting: number;
  /** KV-cache blocks in use, 0..1 */
  kvUsage: number;
  prefixHits: number;
  prefixQueries: number;
  generationTokens: number;
  promptTokens: number;
}

/** The sample in a parsed /metrics (vLLM's names; ditto also exports them as `ditto:`). */
export function sampleOf(t: number, m: Map<string, number>): Sample {
  const get = (name: string) => m.get(`vllm:${name}`) ?? m.get(`ditto:${name}`) ?? 0;
  return {
    t,
    running: get("num_requests_running"),
    waiting: get("num_requests_waiting"),
    kvUsage: get("kv_cache_usage_perc"),
    prefixHits: get("prefix_cache_hits_total"),
    prefixQueries: get("prefix_cache_queries_total"),
    generationTokens: get("generation_tokens_total"),
    promptTokens: get("prompt_tokens_total"),
  };
}

/** What the page plots at one time: gauges as read, counters as rates since the sample before. */
export interface Point {
  t: number;
  running: number;
  waiting: number;
  kvUsagePercent: number;
  /** prefix-cache hits ÷ queries (tokens) over the interval; null when nothing was looked up */
  prefixHitRate: number | null;
  generationTokensPerSecond: number;
  promptTokensPerSecond: number;
}

/** The point between two consecutive samples (a counter that went back, a restart, counts as 0). */
export function pointBetween(before: Sample, now: Sample): Point {
  const dt = Math.max(now.t - before.t, 1e-9);
  const delta = (a: number, b: number) => Math.max(b - a, 0);
  const queries = delta(before.prefixQueries, now.prefixQueries);
  return {
    t: now.t,
    running: now.running,
    waiting: now.waiting,
    kvUsagePercent: now.kvUsage * 100,
    prefixHitRate: queries > 0 ? delta(before.prefixHits, now.prefixHits) / queries : null,
    generationTokensPerSecond: delta(before.generationTokens, now.generationTokens) / dt,
    promptTokensPerSecond: delta(before.promptTokens, now.promptTokens) / dt,
  };
}

/** Keeps the last `capacity` points of a series (a ring, oldest first when read). */
export class History {
  private points: Point[] = [];
  private last: Sample | null = null;
  constructor(readonly capacity: number) {}

  /** Adds a sample; returns the point it makes with the one before (null for the first). */
  add(s: Sample): Point | null {
    const before = this.last;
    this.last = s;
    if (!before) return null;
    const p = pointBetween(before, s);
    this.points.push(p);
    if (this.points.length > this.capacity) this.points.splice(0, this.points.length - this.capacity);
    return p;
  }

  all(): readonly Point[] {
    return this.points;
  }
}
