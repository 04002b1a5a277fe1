/** The server tab: /metrics read every second and plotted over the last five minutes. */
import { Api, ApiError } from "./api";
import { ChartOptions, lineChart } from "./chart";
import { byId } from "./dom";
import { History, parsePrometheus, Point, sampleOf } from "./metrics";

const SPAN_SECONDS = 300;

const CHARTS: {
  title: string;
  unit: string;
  minTop: number;
  maxTop?: number;
  value: (p: Point) => number | null;
}[] = [
  { title: "requests running", unit: "", minTop: 1, value: (p) => p.running },
  { title: "requests waiting", unit: "", minTop: 1, value: (p) => p.waiting },
  { title: "KV cache in use", unit: "%", minTop: 1, maxTop: 100, value: (p) => p.kvUsagePercent },
  {
    title: "prefix-cache hits",
    unit: "%",
    minTop: 100,
    maxTop: 100,
    value: (p) => (p.prefixHitRate === null ? null : p.prefixHitRate * 100),
  },
  { title: "generated tokens/s", unit: "", minTop: 1, value: (p) => p.generationTokensPerSecond },
  { title: "prompt tokens/s", unit: "", minTop: 1, value: (p) => p.promptTokensPerSecond },
];

export class ServerView {
  private readonly history = new History(SPAN_SECONDS + 10);
  private timer: number | undefined;

  constructor(
    private readonly api: Api,
    private readonly onUnauthorized: () => void,
  ) {}

  /** Starts reading /metrics every second (idempotent; again after a 401 stopped it). */
  start(): void {
    if (this.timer === undefined) {
      void this.tick();
      this.timer = window.setInterval(() => void this.tick(), 1000);
    }
  }

  private async tick(): Promise<void> {
    try {
      const sample = sampleOf(performance.now() / 1000, parsePrometheus(await this.api.text("metrics")));
      this.history.add(sample);
      this.render();
    } catch (e) {
      byId("server-summary").textContent = `cannot read /metrics: ${e instanceof Error ? e.message : String(e)}`;
      if (e instanceof ApiError && e.status === 401) {
        window.clearInterval(this.timer);
        this.timer = undefined;
        this.onUnauthorized();
      }
    }
  }

  private render(): void {
    const points = this.history.all();
    const last = points[points.length - 1];
    if (!last) return;
    byId("server-summary").textContent =
      `${last.running} running, ${last.waiting} waiting, KV cache ${last.kvUsagePercent.toFixed(1)} % in use, ` +
      `${last.generationTokensPerSecond.toFixed(1)} generated tokens/s (read from /metrics every second)`;
    const o: Omit<ChartOptions, "title" | "unit" | "minTop"> = { width: 360, height: 150, spanSeconds: SPAN_SECONDS };
    byId("server-charts").innerHTML = CHARTS.map((c) =>
      lineChart(
        points.map((p) => ({ t: p.t, v: c.value(p) })),
        { ...o, title: c.title, unit: c.unit, minTop: c.minTop, maxTop: c.maxTop },
      ),
    ).join("");
  }
}
