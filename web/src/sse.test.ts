import { describe, expect, it } from "vitest";
import { SseParser } from "./sse";

describe("SseParser", () => {
  it("yields each event's data, whatever the pieces the stream arrives in", () => {
    const stream = 'data: {"a":1}\n\ndata: {"b":2}\r\n\r\n: keep-alive\n\ndata: [DONE]\n\n';
    for (const size of [1, 2, 3, 7, stream.length]) {
      const p = new SseParser();
      const got: string[] = [];
      for (let i = 0; i < stream.length; i += size) got.push(...p.push(stream.slice(i, i + size)));
      got.push(...p.finish());
      expect(got, `pieces of ${size}`).toEqual(['{"a":1}', '{"b":2}', "[DONE]"]);
    }
  });

  it("joins multi-line data, ignores other fields and takes a last event without its blank line", () => {
    const p = new SseParser();
    expect(p.push("event: x\nid: 3\ndata: one\ndata:two\n\n")).toEqual(["one\ntwo"]);
    expect(p.push("data: tail")).toEqual([]);
    expect(p.finish()).toEqual(["tail"]);
    expect(p.finish()).toEqual([]);
  });
});
