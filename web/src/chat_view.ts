/** The chat tab: a conversation over /v1/chat/completions, streamed, with the sampling parameters. */
import { Api, ApiError } from "./api";
import { byId, copyText, el, numberField } from "./dom";

interface Message {
  role: "system" | "user" | "assistant" | "tool";
  content: string;
}

interface ToolCallDelta {
  index?: number;
  id?: string;
  function?: { name?: string; arguments?: string };
}

interface ChatChunk {
  seed?: number;
  choices: {
    delta?: { content?: string | null; reasoning_content?: string | null; reasoning?: string | null; tool_calls?: ToolCallDelta[] };
    finish_reason?: string | null;
  }[];
  usage?: { prompt_tokens: number; completion_tokens: number } | null;
}

/** The chat tab's state and handlers; `onUnauthorized` is called when the server asks for a key. */
export class ChatView {
  private messages: Message[] = [];
  private abort: AbortController | null = null;
  // Counts "New chat" clicks: an answer still streaming when one comes joins no conversation.
  private conversation = 0;

  constructor(
    private readonly api: Api,
    private readonly model: () => string,
    private readonly refreshModel: () => Promise<void>,
    private readonly onUnauthorized: () => void,
  ) {
    byId<HTMLFormElement>("chat-form").addEventListener("submit", (e) => {
      e.preventDefault();
      void this.send();
    });
    byId("chat-input").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey) {
        e.preventDefault();
        void this.send();
      }
    });
    byId("chat-stop").addEventListener("click", () => this.abort?.abort());
    byId("chat-clear").addEventListener("click", () => {
      this.conversation += 1;
      this.abort?.abort();
      this.messages = [];
      byId("chat-log").replaceChildren();
    });
  }

  private body(): Record<string, unknown> {
    const messages: Message[] = [];
    const system = byId<HTMLTextAreaElement>("chat-system").value.trim();
    if (system) messages.push({ role: "system", content: system });
    messages.push(...this.messages);
    const body: Record<string, unknown> = {
      model: this.model(),
      messages,
      stream: true,
      stream_options: { include_usage: true },
      temperature: numberField("chat-temperature"),
      top_p: numberField("chat-top-p"),
      top_k: numberField("chat-top-k"),
      max_tokens: numberField("chat-max-tokens"),
    };
    const seed = numberField("chat-seed");
    if (seed !== null && seed >= 0) body.seed = seed;
    const tools = byId<HTMLTextAreaElement>("chat-tools").value.trim();
    if (tools) {
      try {
        body.tools = JSON.parse(tools);
      } catch (e) {
        throw new Error(`tools is not JSON: ${String(e)}`);
      }
      body.tool_choice = "auto";
    }
    return body;
  }

  /** Sends the input as the next user message and streams the answer into the log. */
  async send(): Promise<void> {
    const input = byId<HTMLTextAreaElement>("chat-input");
    const text = input.value.trim();
    if (!text || this.abort) return;
    const log = byId("chat-log");
    const conversation = this.conversation;
    this.messages.push({ role: "user", content: text });
    input.value = "";
    const user = el("div", "message user");
    user.append(el("div", "role", "you"), el("div", "content", text));
    log.append(user);
    // The question leaves the conversation (shown so, and back in the input to send again) when
    // no answer to it came.
    const withdraw = (why: string) => {
      if (conversation !== this.conversation) return;
      this.messages.pop();
      user.classList.add("withdrawn");
      user.append(el("div", "meta", `${why}: not part of the conversation`));
      if (!input.value) input.value = text;
    };

    const view = new AnswerView(log);
    this.abort = new AbortController();
    byId<HTMLButtonElement>("chat-stop").disabled = false;
    byId<HTMLButtonElement>("chat-send").disabled = true;
    const started = performance.now();
    let firstToken = 0;
    try {
      const body = this.body();
      await this.refreshModel();
      body.model = this.model();
      for await (const chunk of this.api.stream<ChatChunk>("v1/chat/completions", body, this.abort.signal)) {
        if (chunk.seed !== undefined) view.seed = chunk.seed;
        const choice = chunk.choices[0];
        if (choice?.delta) {
          const d = choice.delta;
          const got = (d.content ?? "") + (d.reasoning_content ?? d.reasoning ?? "");
          if (got && !firstToken) firstToken = performance.now();
          view.add(d.content ?? "", d.reasoning_content ?? d.reasoning ?? "", d.tool_calls ?? []);
        }
        if (choice?.finish_reason) view.finishReason = choice.finish_reason;
        if (chunk.usage) view.usage = chunk.usage;
      }
      view.done("done", started, firstToken);
      if (conversation === this.conversation) this.messages.push({ role: "assistant", content: view.content });
    } catch (e) {
      if (e instanceof DOMException && e.name === "AbortError") {
        view.done("stopped", started, firstToken);
        if (!view.content) withdraw("stopped before an answer");
        else if (conversation === this.conversation) this.messages.push({ role: "assistant", content: view.content });
      } else {
        view.fail(e instanceof Error ? e.message : String(e));
        withdraw("no answer");
        if (e instanceof ApiError && e.status === 401) this.onUnauthorized();
      }
    } finally {
      this.abort = null;
      byId<HTMLButtonElement>("chat-stop").disabled = true;
      byId<HTMLButtonElement>("chat-send").disabled = false;
    }
  }
}

/** One assistant answer in the log, updated as its chunks arrive. */
class AnswerView {
  content = "";
  reasoning = "";
  seed: number | null = null;
  finishReason: string | null = null;
  usage: { prompt_tokens: number; completion_tokens: number } | null = null;
  private chunks = 0;
  private readonly root = el("div", "message assistant");
  private readonly reasoningBox = el("details", "reasoning");
  private readonly reasoningText = el("div", "reasoning-text");
  private readonly contentBox = el("div", "content");
  private readonly toolsBox = el("div", "tool-calls");
  private readonly meta = el("div", "meta");
  private readonly tools: { name: string; arguments: string }[] = [];

  constructor(log: HTMLElement) {
    this.root.dataset.state = "streaming";
    this.reasoningBox.append(el("summary", "", "reasoning"), this.reasoningText);
    this.reasoningBox.hidden = true;
    this.reasoningBox.open = true;
    const copy = el("button", "copy", "Copy");
    copy.type = "button";
    copy.addEventListener("click", () => void copyText(this.content));
    this.root.append(el("div", "role", "model"), this.reasoningBox, this.contentBox, this.toolsBox, this.meta, copy);
    log.append(this.root);
  }

  add(content: string, reasoning: string, toolCalls: ToolCallDelta[]): void {
    // Follows the answer while its end is in view; a reader who scrolled away is left there.
    const follow = this.root.getBoundingClientRect().bottom <= window.innerHeight + 40;
    this.chunks += 1;
    this.root.dataset.chunks = String(this.chunks);
    if (reasoning) {
      this.reasoning += reasoning;
      this.reasoningBox.hidden = false;
      this.reasoningText.textContent = this.reasoning;
    }
    if (content) {
      this.content += content;
      this.contentBox.textContent = this.content;
    }
    for (const t of toolCalls) {
      const i = t.index ?? this.tools.length;
      this.tools[i] ??= { name: "", arguments: "" };
      this.tools[i].name += t.function?.name ?? "";
      this.tools[i].arguments += t.function?.arguments ?? "";
    }
    if (toolCalls.length > 0)
      this.toolsBox.replaceChildren(
        ...this.tools.map((t) => el("pre", "tool-call", `${t.name}(${t.arguments})`)),
      );
    if (follow) this.root.scrollIntoView({ block: "end" });
  }

  done(state: "done" | "stopped", started: number, firstToken: number): void {
    this.root.dataset.state = state;
    const parts: string[] = [];
    if (this.seed !== null) parts.push(`seed ${this.seed}`);
    if (this.usage) {
      parts.push(`${this.usage.prompt_tokens} prompt + ${this.usage.completion_tokens} completion tokens`);
      const end = performance.now();
      if (firstToken && this.usage.completion_tokens > 1 && end > firstToken)
        parts.push(`${((this.usage.completion_tokens - 1) / ((end - firstToken) / 1000)).toFixed(1)} tokens/s`);
      parts.push(`first token after ${((firstToken || end) - started).toFixed(0)} ms`);
    }
    if (state === "stopped") parts.push("stopped");
    else if (this.finishReason) parts.push(`finish_reason ${this.finishReason}`);
    this.meta.textContent = parts.join(" · ");
  }

  fail(message: string): void {
    this.root.dataset.state = "error";
    this.meta.textContent = "";
    this.root.append(el("div", "error", message));
  }
}
