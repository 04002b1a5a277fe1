/** Small line charts as SVG markup (no library: a polyline, two axes' labels and a title). */

export interface ChartOptions {
  title: string;
  /** the unit shown after the latest value, e.g. "%" or " tok/s" */
  unit: string;
  width: number;
  height: number;
  /** the y axis' top at least this (so an idle series is drawn flat at the bottom, not scaled up) */
  minTop: number;
  /** the y axis' top at most this (100 for a percentage) */
  maxTop?: number;
  /** the x span in seconds the chart shows, ending at the latest point */
  spanSeconds: number;
}

const escapeXml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);

/** Formats a value for a label: integers as is, others with 3 significant digits. */
export function formatValue(v: number): string {
  if (Number.isInteger(v)) return String(v);
  return Math.abs(v) >= 100 ? v.toFixed(0) : v.toPrecision(3);
}

/**
 * An SVG line chart of `(t, v)` points (t in seconds; null values break the line).
 * @returns SVG markup with class "chart" and the latest value in its title
 */
export function lineChart(points: { t: number; v: number | null }[], o: ChartOptions): string {
  const pad = { left: 40, right: 8, top: 22, bottom: 16 };
  const w = o.width - pad.left - pad.right;
  const h = o.height - pad.top - pad.bottom;
  const values = points.map((p) => p.v).filter((v): v is number => v !== null);
  const top = Math.min(Math.max(o.minTop, ...values) * 1.05, o.maxTop ?? Infinity) || 1;
  const tEnd = points.length > 0 ? points[points.length - 1].t : 0;
  const tStart = tEnd - o.spanSeconds;
  const x = (t: number) => pad.left + ((t - tStart) / o.spanSeconds) * w;
  const y = (v: number) => pad.top + h - (v / top) * h;
  // Runs of two or more points are lines; a point alone between gaps is a dot.
  const segments: string[] = [];
  const dots: string[] = [];
  let current: string[] = [];
  const flush = () => {
    if (current.length > 1) segments.push(current.join(" "));
    else if (current.length === 1) dots.push(current[0]);
    current = [];
  };
  for (const p of points) {
    if (p.t < tStart) continue;
    if (p.v === null) {
      flush();
      continue;
    }
    current.push(`${x(p.t).toFixed(1)},${y(Math.min(p.v, top)).toFixed(1)}`);
  }
  flush();
  const latest = values.length > 0 ? formatValue(values[values.length - 1]) + o.unit : "–";
  const lines =
    segments.map((s) => `<polyline class="series" points="${s}"/>`).join("") +
    dots
      .map((d) => {
        const [cx, cy] = d.split(",");
        return `<circle class="dot" cx="${cx}" cy="${cy}" r="2"/>`;
      })
      .join("");
  return (
    `<svg class="chart" viewBox="0 0 ${o.width} ${o.height}" width="${o.width}" height="${o.height}" ` +
    `role="img" aria-label="${escapeXml(o.title)}">` +
    `<text class="chart-title" x="${pad.left}" y="14">${escapeXml(o.title)}: ${escapeXml(latest)}</text>` +
    `<line class="axis" x1="${pad.left}" y1="${pad.top + h}" x2="${pad.left + w}" y2="${pad.top + h}"/>` +
    `<line class="axis" x1="${pad.left}" y1="${pad.top}" x2="${pad.left}" y2="${pad.top + h}"/>` +
    `<text class="tick" x="${pad.left - 4}" y="${pad.top + 4}" text-anchor="end">${formatValue(top)}</text>` +
    `<text class="tick" x="${pad.left - 4}" y="${pad.top + h}" text-anchor="end">0</text>` +
    `<text class="tick" x="${pad.left + w}" y="${o.height - 2}" text-anchor="end">now</text>` +
    `<text class="tick" x="${pad.left}" y="${o.height - 2}">-${o.spanSeconds}s</text>` +
    lines +
    `</svg>`
  );
}
