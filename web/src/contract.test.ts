import { describe, expect, it } from "vitest";
import {
  addChoice,
  Answer,
  answerOf,
  bitsOf,
  chatBody,
  compareAnswers,
  emptyAnswer,
  formatLogprob,
  groupBody,
  makeBurst,
  mulberry32,
  tokenLabel,
} from "./contract";

const answer = (ids: number[], logprobs: number[], finish = "length"): Answer => ({
  tokenIds: ids,
  logprobs,
  tokens: ids.map(String),
  tokenBytes: ids.map(() => []),
  text: "",
  finishReason: finish,
  seed: 1,
});

describe("compareAnswers", () => {
  it("calls equal ids and equal logprob bits identical", () => {
    const c = compareAnswers(answer([1, 2, 3], [-0.5, -1.25, -2]), answer([1, 2, 3], [-0.5, -1.25, -2]));
    expect(c).toEqual({ identical: true, firstDivergence: null, same: [true, true, true], reason: "" });
  });

  it("finds the first differing token id", () => {
    const c = compareAnswers(answer([1, 2, 3], [-0.5, -1, -2]), answer([1, 9, 3], [-0.5, -1, -2]));
    expect(c.identical).toBe(false);
    expect(c.firstDivergence).toBe(1);
    expect(c.same).toEqual([true, false, true]);
    expect(c.reason).toContain("id 2 vs 9");
  });

  it("tells logprobs apart by one bit, and -0 from 0", () => {
    const x = -0.4923548698425293;
    const next = new Float64Array(1);
    new BigUint64Array(next.buffer)[0] = bitsOf(x) + 1n;
    const c = compareAnswers(answer([5], [x]), answer([5], [next[0]]));
    expect(c.identical).toBe(false);
    expect(c.reason).toContain("same id, logprob");
    expect(compareAnswers(answer([5], [0]), answer([5], [-0])).identical).toBe(false);
  });

  it("calls a shorter answer or another finish reason different", () => {
    expect(compareAnswers(answer([1, 2], [-1, -1]), answer([1], [-1])).firstDivergence).toBe(1);
    const c = compareAnswers(answer([1], [-1], "stop"), answer([1], [-1], "length"));
    expect(c.identical).toBe(false);
    expect(c.reason).toContain("finish reason");
  });
});

describe("answers from the server's JSON", () => {
  const chunk = (content: string, ids: number[], lps: number[], finish: string | null = null) => ({
    seed: 42,
    choices: [
      {
        delta: { content },
        logprobs: { content: lps.map((l, i) => ({ token: `t${ids[i]}`, logprob: l })) },
        token_ids: ids,
        finish_reason: finish,
      },
    ],
  });

  it("a streamed answer, chunk by chunk, equals the whole response", () => {
    const streamed = emptyAnswer();
    addChoice(streamed, { seed: 42, choices: [{ delta: { content: "" }, token_ids: [] }] });
    addChoice(streamed, chunk("Hel", [10], [-0.25]));
    addChoice(streamed, chunk("lo", [11, 12], [-1.5, -0.125], "stop"));
    addChoice(streamed, { choices: [], usage: { prompt_tokens: 3, completion_tokens: 3 } });
    const whole = answerOf({
      seed: 42,
      choices: [
        {
          message: { content: "Hello" },
          logprobs: { content: [10, 11, 12].map((id, i) => ({ token: `t${id}`, logprob: [-0.25, -1.5, -0.125][i] })) },
          token_ids: [10, 11, 12],
          finish_reason: "stop",
        },
      ],
    });
    expect(streamed).toEqual(whole);
    expect(whole.seed).toBe(42);
    expect(compareAnswers(streamed, whole).identical).toBe(true);
  });

  it("refuses a choice whose ids and logprobs disagree in count", () => {
    expect(() => addChoice(emptyAnswer(), chunk("x", [1, 2], [-1]))).toThrow(/2 token ids but 1 logprobs/);
  });
});

describe("bursts", () => {
  it("are replayed from their seed and spread N prompts over the groups", () => {
    const a = makeBurst(16, 3, mulberry32(7));
    expect(makeBurst(16, 3, mulberry32(7))).toEqual(a);
    expect(makeBurst(16, 3, mulberry32(8))).not.toEqual(a);
    expect(a.map((g) => g.prompts.length)).toEqual([5, 5, 6]);
    for (const g of a) {
      expect(g.params.max_tokens).toBeGreaterThanOrEqual(4);
      expect(g.params.max_tokens).toBeLessThanOrEqual(48);
      for (const p of g.prompts) {
        const words = p.split(" ").length - 2;
        expect(words).toBeGreaterThanOrEqual(3);
        expect(words).toBeLessThanOrEqual(120);
      }
    }
    expect(makeBurst(2, 3, mulberry32(1)).length).toBe(2);
    expect(makeBurst(0, 3, mulberry32(1))).toEqual([]);
  });

  it("mulberry32 draws uniformly in [0, 1)", () => {
    const r = mulberry32(123);
    const xs = Array.from({ length: 10000 }, r);
    expect(Math.min(...xs)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...xs)).toBeLessThan(1);
    const mean = xs.reduce((s, x) => s + x, 0) / xs.length;
    expect(Math.abs(mean - 0.5)).toBeLessThan(0.02);
  });

  it("request bodies ask for token ids and logprobs, and carry the seed only when there is one", () => {
    const p = { temperature: 0.8, top_p: 0.95, top_k: 50, seed: 9, max_tokens: 32 };
    const body = chatBody("m", "hi", p, true);
    expect(body).toMatchObject({ model: "m", logprobs: true, return_token_ids: true, stream: true, seed: 9 });
    expect(body.messages).toEqual([{ role: "user", content: "hi" }]);
    expect("seed" in chatBody("m", "hi", { ...p, seed: null }, false)).toBe(false);
    const g = groupBody("m", { prompts: ["a", "b"], params: { ...p, seed: null }, stream: false });
    expect(g).toMatchObject({ model: "m", prompt: ["a", "b"], temperature: 0.8, stream: false });
    expect("seed" in g).toBe(false);
  });
});

describe("token chips", () => {
  it("show part of a character as its bytes, and newlines as ⏎", () => {
    expect(tokenLabel("\uFFFD", [0xf0, 0x9f])).toBe("‹f0 9f›");
    expect(tokenLabel("a\nb", [97, 10, 98])).toBe("a⏎b");
    expect(tokenLabel("\uFFFD", [])).toBe("\uFFFD");
  });

  it("print a logprob near 0 with its digits, not as -0.0000", () => {
    expect(formatLogprob(-0.00001234)).toBe("-1.2e-5");
    expect(formatLogprob(-1.23456)).toBe("-1.2346");
    expect(formatLogprob(0)).toBe("0");
  });
});
