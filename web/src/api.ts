/**
 * The page's client of ditto's OpenAI-compatible routes: every URL is relative to the page (so it
 * works under --root-path), every request carries the API key when the page has one.
 */
import { SseParser } from "./sse";

/** An error answer of the server (OpenAI's error object), or a failure to reach it. */
export class ApiError extends Error {
  /**
   * @param status HTTP status (0 when the server could not be reached)
   * @param param the request field the server named as wrong, if any
   */
  constructor(
    message: string,
    readonly status: number,
    readonly param: string | null = null,
  ) {
    super(message);
  }
}

/** Reads the message and `param` of an OpenAI-shaped error body; falls back to the status line. */
export async function errorFrom(response: Response): Promise<ApiError> {
  let message = `${response.status} ${response.statusText}`;
  let param: string | null = null;
  try {
    const body = (await response.json()) as { error?: { message?: string; param?: string | null } };
    if (body.error?.message) message = body.error.message;
    param = body.error?.param ?? null;
  } catch {
    // not JSON: keep the status line
  }
  return new ApiError(message, response.status, param);
}

/** The routes the page calls, with the key it holds (null: the server needs none). */
export class Api {
  constructor(public key: string | null = null) {}

  private headers(json: boolean): Record<string, string> {
    const h: Record<string, string> = {};
    if (json) h["Content-Type"] = "application/json";
    if (this.key) h["Authorization"] = `Bearer ${this.key}`;
    return h;
  }

  private async send(path: string, body: unknown, signal?: AbortSignal): Promise<Response> {
    let response: Response;
    try {
      response = await fetch(path, {
        method: body === undefined ? "GET" : "POST",
        headers: this.headers(body !== undefined),
        body: body === undefined ? undefined : JSON.stringify(body),
        signal,
      });
    } catch (e) {
      if (e instanceof DOMException && e.name === "AbortError") throw e;
      throw new ApiError(`cannot reach the server: ${String(e)}`, 0);
    }
    if (!response.ok) throw await errorFrom(response);
    return response;
  }

  /** GET or POST (when `body` is given) a JSON route; throws ApiError on an error status. */
  async json<T>(path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
    return (await (await this.send(path, body, signal)).json()) as T;
  }

  /** GET a text route (e.g. `metrics`). */
  async text(path: string, signal?: AbortSignal): Promise<string> {
    return (await this.send(path, undefined, signal)).text();
  }

  /**
   * POSTs a streaming request and yields each event's JSON object until `[DONE]`.
   * @throws ApiError on an error status, or when an event is an error object
   */
  async *stream<T>(path: string, body: unknown, signal?: AbortSignal): AsyncGenerator<T> {
    const response = await this.send(path, body, signal);
    if (!response.body) throw new ApiError("the server sent no stream", response.status);
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    const parser = new SseParser();
    for (;;) {
      const { value, done } = await reader.read();
      const payloads = done ? parser.finish() : parser.push(decoder.decode(value, { stream: true }));
      for (const data of payloads) {
        if (data === "[DONE]") return;
        const event = JSON.parse(data) as { error?: { message?: string } };
        if (event.error) throw new ApiError(event.error.message ?? "error in stream", response.status);
        yield event as T;
      }
      if (done) return;
    }
  }
}
