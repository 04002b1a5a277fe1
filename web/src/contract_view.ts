/** The contract tab: one request alone, then inside a burst; the answers compared bit for bit. */
import { Api, ApiError } from "./api";
import {
  addChoice,
  Answer,
  BurstGroup,
  answerOf,
  chatBody,
  ChatResponse,
  compareAnswers,
  Comparison,
  emptyAnswer,
  formatLogprob,
  makeBurst,
  mulberry32,
  groupBody,
  SamplingFields,
  tokenLabel,
} from "./contract";
import { byId, el, numberField } from "./dom";
import { parsePrometheus, sampleOf } from "./metrics";

/**
 * How many HTTP requests carry the burst's other requests: a browser opens at most six connections
 * to one server; two carry the copies under test and one reads /metrics.
 */
const BURST_CONNECTIONS = 3;

/** The words the negative control adds to the copies' prompt (so their answers must differ). */
export const NEGATIVE_CONTROL_SUFFIX = " Answer in one sentence.";

export class ContractView {
  private running = false;

  constructor(
    private readonly api: Api,
    private readonly model: () => string,
    private readonly refreshModel: () => Promise<void>,
    private readonly onUnauthorized: () => void,
  ) {
    byId("contract-run").addEventListener("click", () => void this.run());
  }

  private status(text: string): void {
    byId("contract-status").textContent = text;
  }

  private async complete(prompt: string, p: SamplingFields, stream: boolean, signal: AbortSignal): Promise<Answer> {
    const body = chatBody(this.model(), prompt, p, stream);
    if (!stream) return answerOf(await this.api.json<ChatResponse>("v1/chat/completions", body, signal));
    const answer = emptyAnswer();
    for await (const chunk of this.api.stream<ChatResponse>("v1/chat/completions", body, signal))
      addChoice(answer, chunk);
    return answer;
  }

  /** Sends one group of the burst and reads its answer to the end. */
  private async completeGroup(g: BurstGroup, signal: AbortSignal): Promise<void> {
    const body = groupBody(this.model(), g);
    if (!g.stream) {
      await this.api.json("v1/completions", body, signal);
      return;
    }
    for await (const chunk of this.api.stream("v1/completions", body, signal)) void chunk;
  }

  /** Reads /metrics every 150 ms until `signal` aborts; returns the most requests seen running. */
  private async peakRunning(signal: AbortSignal): Promise<number> {
    let peak = 0;
    while (!signal.aborted) {
      try {
        peak = Math.max(peak, sampleOf(0, parsePrometheus(await this.api.text("metrics", signal))).running);
      } catch {
        // the verdict does not depend on it
      }
      await new Promise((r) => setTimeout(r, 150));
    }
    return peak;
  }

  /** Runs the comparison with the page's parameters and shows the answers and the verdict. */
  async run(): Promise<void> {
    if (this.running) return;
    this.running = true;
    const verdict = byId("contract-verdict");
    verdict.dataset.verdict = "running";
    verdict.textContent = "";
    byId("contract-alone").replaceChildren();
    byId("contract-burst").replaceChildren();
    byId("contract-table").replaceChildren();
    byId<HTMLButtonElement>("contract-run").disabled = true;
    // Aborts whatever is still in flight when the run ends, by an error or not: the burst's other
    // requests after a copy failed, and the /metrics reader.
    const done = new AbortController();
    try {
      const prompt = byId<HTMLTextAreaElement>("contract-prompt").value;
      const n = numberField("contract-n")!;
      if (!Number.isInteger(n) || n < 0 || n > 256) throw new Error("N must be a whole number from 0 to 256");
      const negative = byId<HTMLInputElement>("contract-negative").checked;
      // A negative seed is vLLM's "none", as an empty field: the server chooses one.
      const seed = numberField("contract-seed");
      const params: SamplingFields = {
        temperature: numberField("contract-temperature")!,
        top_p: numberField("contract-top-p")!,
        top_k: numberField("contract-top-k")!,
        seed: seed !== null && seed >= 0 ? seed : null,
        max_tokens: numberField("contract-max-tokens")!,
      };

      this.status("Sending the request alone…");
      await this.refreshModel();
      const alone = await this.complete(prompt, params, false, done.signal);
      // Without a seed of the page's, the copies use the one the server chose for the request alone.
      const fixed: SamplingFields = { ...params, seed: params.seed ?? alone.seed };
      const copyPrompt = negative ? prompt + NEGATIVE_CONTROL_SUFFIX : prompt;

      const rng = mulberry32((fixed.seed ?? 0) ^ Math.floor(Math.random() * 2 ** 31));
      const groups = makeBurst(n, BURST_CONNECTIONS, rng);
      this.status(`Sending it again, streamed and not, among ${n} other requests…`);
      let failures = 0;
      const polling = new AbortController();
      const peak = this.peakRunning(AbortSignal.any([polling.signal, done.signal]));
      // The others first, then the two copies, so that the copies run among them.
      const others = groups.map((g) =>
        this.completeGroup(g, done.signal).catch(() => {
          failures += g.prompts.length;
        }),
      );
      const copies = [
        this.complete(copyPrompt, fixed, true, done.signal),
        this.complete(copyPrompt, fixed, false, done.signal),
      ];
      const [streamed, plain] = await Promise.all(copies);
      await Promise.all(others);
      polling.abort();
      const peakRunning = await peak;
      this.show(alone, streamed, plain, n, negative, peakRunning, failures, fixed);
      this.status("");
    } catch (e) {
      verdict.dataset.verdict = "error";
      verdict.textContent = `error: ${e instanceof Error ? e.message : String(e)}`;
      this.status("");
      if (e instanceof ApiError && e.status === 401) this.onUnauthorized();
    } finally {
      done.abort();
      this.running = false;
      byId<HTMLButtonElement>("contract-run").disabled = false;
    }
  }

  private show(
    alone: Answer,
    streamed: Answer,
    plain: Answer,
    n: number,
    negative: boolean,
    peakRunning: number,
    failures: number,
    params: SamplingFields,
  ): void {
    const vsStreamed = compareAnswers(alone, streamed);
    const vsPlain = compareAnswers(alone, plain);
    const identical = vsStreamed.identical && vsPlain.identical;
    const verdict = byId("contract-verdict");
    verdict.dataset.verdict = identical ? "identical" : "different";
    const tokens = alone.tokenIds.length + streamed.tokenIds.length + plain.tokenIds.length;
    verdict.replaceChildren(
      el("strong", "", identical ? "identical" : "different"),
      el(
        "span",
        "",
        identical
          ? ` — the answer alone and both answers in the burst have the same ${alone.tokenIds.length} token ids ` +
              `and the same logprob bits (${tokens} tokens compared).`
          : ` — ${firstReason(vsStreamed, vsPlain)}.` +
              (negative ? " This is the negative control: the copies asked a different question." : ""),
      ),
    );
    byId("contract-burst-title").textContent = `In a burst of ${n} others (streamed)`;
    renderTokens(byId("contract-alone"), alone, vsStreamed);
    renderTokens(byId("contract-burst"), streamed, vsStreamed);

    const table = byId<HTMLTableElement>("contract-table");
    const head = table.createTHead().insertRow();
    for (const h of ["answer", "tokens", "seed", "finish", "compared with alone"]) head.append(el("th", "", h));
    const body = table.createTBody();
    const row = (name: string, a: Answer, c: Comparison | null) => {
      const r = body.insertRow();
      r.dataset.verdict = c === null ? "" : c.identical ? "identical" : "different";
      for (const v of [
        name,
        String(a.tokenIds.length),
        String(a.seed ?? params.seed ?? ""),
        a.finishReason ?? "",
        c === null ? "—" : c.identical ? "identical" : `different: ${c.reason}`,
      ])
        r.insertCell().textContent = v;
    };
    row("alone, not streamed", alone, null);
    row(`in the burst, streamed`, streamed, vsStreamed);
    row(`in the burst, not streamed`, plain, vsPlain);
    const foot = el("caption", "", "");
    foot.textContent =
      (n === 0
        ? "No other requests: the copies ran by themselves"
        : `${plural(n, "other request")} with random prompts (3–120 words), in ` +
          `${plural(Math.min(n, BURST_CONNECTIONS), "HTTP request")} with random temperature, top_p, top_k, ` +
          `seed and max_tokens, streamed or not`) +
      (peakRunning > 0 ? `; the server ran up to ${peakRunning} requests at once (from /metrics)` : "") +
      (failures > 0 ? `; ${failures} of them failed` : "") +
      ".";
    table.append(foot);
  }
}

const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? "" : "s"}`;

function firstReason(a: Comparison, b: Comparison): string {
  if (!a.identical) return `streamed in the burst: ${a.reason}`;
  return `not streamed in the burst: ${b.reason}`;
}

/** The answer's tokens as chips (text above, logprob below), the ones that differ marked. */
function renderTokens(box: HTMLElement, a: Answer, c: Comparison): void {
  const chips = a.tokens.map((t, i) => {
    const chip = el("span", c.same[i] ? "token" : "token differs");
    chip.title = `token id ${a.tokenIds[i]}, logprob ${a.logprobs[i]}`;
    chip.append(
      el("span", "text", tokenLabel(t, a.tokenBytes[i] ?? [])),
      el("span", "logprob", formatLogprob(a.logprobs[i])),
    );
    return chip;
  });
  box.replaceChildren(...chips);
}
