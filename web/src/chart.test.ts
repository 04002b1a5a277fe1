import { describe, expect, it } from "vitest";
import { formatValue, lineChart } from "./chart";

const o = { title: "tokens/s <x>", unit: " tok/s", width: 300, height: 100, minTop: 1, spanSeconds: 10 };

describe("lineChart", () => {
  it("draws the points inside the plot, the latest value in the title, text escaped", () => {
    const svg = lineChart(
      [
        { t: 0, v: 1 },
        { t: 5, v: 4 },
        { t: 10, v: 2 },
      ],
      o,
    );
    expect(svg).toContain("tokens/s &lt;x&gt;: 2 tok/s");
    const points = /points="([^"]+)"/.exec(svg)![1].split(" ").map((p) => p.split(",").map(Number));
    expect(points.length).toBe(3);
    for (const [x, y] of points) {
      expect(x).toBeGreaterThanOrEqual(40);
      expect(x).toBeLessThanOrEqual(292);
      expect(y).toBeGreaterThanOrEqual(22);
      expect(y).toBeLessThanOrEqual(84);
    }
    expect(points[1][1]).toBeLessThan(points[2][1]); // 4 is drawn above 2
  });

  it("breaks the line at missing values and leaves out points older than the span", () => {
    const svg = lineChart(
      [
        { t: -50, v: 9 },
        { t: 1, v: 1 },
        { t: 2, v: 1 },
        { t: 3, v: null },
        { t: 4, v: 1 },
        { t: 5, v: 1 },
      ],
      o,
    );
    expect(svg.match(/<polyline/g)!.length).toBe(2);
    expect(svg).not.toContain(">9<");
  });

  it("draws a point alone between gaps as a dot, and caps the axis at maxTop", () => {
    const svg = lineChart(
      [
        { t: 1, v: null },
        { t: 2, v: 40 },
        { t: 3, v: null },
      ],
      { ...o, minTop: 100, maxTop: 100 },
    );
    expect(svg).not.toContain("<polyline");
    expect(svg.match(/<circle class="dot"/g)!.length).toBe(1);
    expect(svg).toContain(">100<");
    expect(svg).not.toContain(">105<");
  });

  it("formats values", () => {
    expect(formatValue(3)).toBe("3");
    expect(formatValue(0.123456)).toBe("0.123");
    expect(formatValue(1234.5)).toBe("1235");
  });
});
