/**
 * The contract, live: one request sent alone, then again inside a burst of other requests; its
 * answers compared bit for bit. Pure functions here; the view is contract_view.ts.
 */

/** What a chat completion (or the streamed chunks of one) gave, token by token. */
export interface Answer {
  /** sampled token ids, in order (the server's `token_ids`, asked with `return_token_ids`) */
  tokenIds: number[];
  /** each token's logprob as the server sent it (a float32 printed so that it reads back exactly) */
  logprobs: number[];
  /** each token's text (`logprobs.content[i].token`) */
  tokens: string[];
  /** each token's UTF-8 bytes (`logprobs.content[i].bytes`; a token may hold part of a character) */
  tokenBytes: number[][];
  text: string;
  finishReason: string | null;
  /** the seed the server used (its `seed` field), if it said */
  seed: number | null;
}

/** Chat completion response and chunk fields the page reads (OpenAI's shape plus vLLM's `token_ids`). */
export interface ChoiceLogprobs {
  content?: { token: string; logprob: number; bytes?: number[] | null }[] | null;
}
export interface ChatChoice {
  message?: { content?: string | null };
  delta?: { content?: string | null };
  logprobs?: ChoiceLogprobs | null;
  token_ids?: number[] | null;
  finish_reason?: string | null;
}
export interface ChatResponse {
  choices: ChatChoice[];
  seed?: number;
  usage?: { prompt_tokens: number; completion_tokens: number } | null;
}

/** An empty answer, to be filled by `addChoice`. */
export function emptyAnswer(): Answer {
  return { tokenIds: [], logprobs: [], tokens: [], tokenBytes: [], text: "", finishReason: null, seed: null };
}

/**
 * Adds one response's (or one streamed chunk's) first choice to `answer`.
 * @throws Error when the choice's token ids and logprobs disagree in count (the comparison needs both)
 */
export function addChoice(answer: Answer, response: ChatResponse): void {
  if (response.seed !== undefined && response.seed !== null) answer.seed = response.seed;
  const choice = response.choices[0];
  if (!choice) return;
  answer.text += choice.message?.content ?? choice.delta?.content ?? "";
  const ids = choice.token_ids ?? [];
  const entries = choice.logprobs?.content ?? [];
  if (ids.length !== entries.length)
    throw new Error(`the server sent ${ids.length} token ids but ${entries.length} logprobs in one choice`);
  answer.tokenIds.push(...ids);
  for (const e of entries) {
    answer.logprobs.push(e.logprob);
    answer.tokens.push(e.token);
    answer.tokenBytes.push(e.bytes ?? []);
  }
  if (choice.finish_reason) answer.finishReason = choice.finish_reason;
}

/** The answer of a whole (not streamed) chat completion response. */
export function answerOf(response: ChatResponse): Answer {
  const a = emptyAnswer();
  addChoice(a, response);
  return a;
}

const f64 = new Float64Array(1);
const bits = new BigUint64Array(f64.buffer);
/** The 64 bits of a number: equal bits, equal values (and -0 ≠ 0, NaN payloads told apart). */
export function bitsOf(x: number): bigint {
  f64[0] = x;
  return bits[0];
}

/** The outcome of comparing two answers. */
export interface Comparison {
  identical: boolean;
  /** the first token position where they differ (id or logprob bits), or null when identical */
  firstDivergence: number | null;
  /** per position of the longer answer: true where id and logprob bits are equal */
  same: boolean[];
  /** what differed, in words */
  reason: string;
}

/**
 * Compares two answers bit for bit: token ids, and the logprob values' bits, position by position,
 * then the lengths and finish reasons.
 */
export function compareAnswers(a: Answer, b: Answer): Comparison {
  const n = Math.max(a.tokenIds.length, b.tokenIds.length);
  const same: boolean[] = [];
  let first: number | null = null;
  let reason = "";
  for (let i = 0; i < n; ++i) {
    const idEqual = i < a.tokenIds.length && i < b.tokenIds.length && a.tokenIds[i] === b.tokenIds[i];
    const lpEqual =
      i < a.logprobs.length && i < b.logprobs.length && bitsOf(a.logprobs[i]) === bitsOf(b.logprobs[i]);
    same.push(idEqual && lpEqual);
    if (first === null && !(idEqual && lpEqual)) {
      first = i;
      if (i >= a.tokenIds.length || i >= b.tokenIds.length) reason = `one answer ends at token ${i}`;
      else if (!idEqual) reason = `token ${i}: id ${a.tokenIds[i]} vs ${b.tokenIds[i]}`;
      else reason = `token ${i}: same id, logprob ${a.logprobs[i]} vs ${b.logprobs[i]}`;
    }
  }
  if (first === null && a.finishReason !== b.finishReason) {
    first = n;
    reason = `finish reason ${a.finishReason} vs ${b.finishReason}`;
  }
  return { identical: first === null, firstDivergence: first, same, reason: first === null ? "" : reason };
}

/**
 * A token as a chip shows it: its text, with newlines as ⏎; a token that holds only part of a
 * UTF-8 character (its text has U+FFFD) as its bytes in hex, e.g. "‹f0 9f›".
 */
export function tokenLabel(text: string, bytes: number[]): string {
  if (text.includes("\uFFFD") && bytes.length > 0)
    return "‹" + bytes.map((b) => b.toString(16).padStart(2, "0")).join(" ") + "›";
  return text.replace(/\n/g, "⏎");
}

/** A logprob as a chip shows it: 4 decimals, or 2 significant digits when it is that close to 0. */
export function formatLogprob(x: number): string {
  if (x === 0) return "0";
  return Math.abs(x) < 1e-3 ? x.toExponential(1) : x.toFixed(4);
}

/** mulberry32: a small seeded PRNG (uniform in [0, 1)), so a burst can be replayed from its seed. */
export function mulberry32(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The sampling parameters the page sends (OpenAI's and vLLM's names). */
export interface SamplingFields {
  temperature: number;
  top_p: number;
  top_k: number;
  seed: number | null;
  max_tokens: number;
}

/**
 * One HTTP request of a burst: several prompts in one /v1/completions request (a browser opens at
 * most six connections to a server, so N requests one by one would never run together), sharing
 * one set of sampling parameters.
 */
export interface BurstGroup {
  prompts: string[];
  params: SamplingFields;
  stream: boolean;
}

const WORDS = (
  "the a model answer question token batch kernel order same bits cache prefix decode prefill " +
  "server request stream seed sample logit reduce float matrix thread queue river mountain " +
  "history music garden ocean planet language number story city winter light"
).split(" ");

/**
 * N other requests with random lengths and parameters, drawn from `rng`, in `groups` HTTP requests:
 * prompts of 3 to 120 words; per group a temperature of 0 to 1.2, top_p, top_k, seed, 4 to 48
 * tokens, streamed or not.
 */
export function makeBurst(n: number, groups: number, rng: () => number): BurstGroup[] {
  const pick = <T>(xs: T[]): T => xs[Math.floor(rng() * xs.length)];
  const out: BurstGroup[] = [];
  const count = Math.min(groups, n);
  for (let g = 0; g < count; ++g) {
    const size = Math.floor((n * (g + 1)) / count) - Math.floor((n * g) / count);
    const prompts = Array.from({ length: size }, () => {
      const words = 3 + Math.floor(rng() * rng() * 118);
      return "Write about: " + Array.from({ length: words }, () => pick(WORDS)).join(" ");
    });
    out.push({
      prompts,
      params: {
        temperature: pick([0, 0.3, 0.7, 1.0, 1.2]),
        top_p: pick([1, 0.95, 0.8]),
        top_k: pick([-1, 20, 50]),
        seed: Math.floor(rng() * 2 ** 31),
        max_tokens: 4 + Math.floor(rng() * 45),
      },
      stream: rng() < 0.5,
    });
  }
  return out;
}

/** The /v1/completions body of one group of a burst. */
export function groupBody(model: string, g: BurstGroup): Record<string, unknown> {
  const body: Record<string, unknown> = { model, prompt: g.prompts, ...g.params, stream: g.stream };
  if (g.params.seed === null) delete body.seed;
  return body;
}

/** The chat completion body of one request of the contract view (ids and logprobs asked for). */
export function chatBody(model: string, prompt: string, p: SamplingFields, stream: boolean): Record<string, unknown> {
  const body: Record<string, unknown> = {
    model,
    messages: [{ role: "user", content: prompt }],
    temperature: p.temperature,
    top_p: p.top_p,
    top_k: p.top_k,
    max_tokens: p.max_tokens,
    logprobs: true,
    return_token_ids: true,
    stream,
  };
  if (p.seed !== null) body.seed = p.seed;
  if (stream) body.stream_options = { include_usage: true };
  return body;
}
