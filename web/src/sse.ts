/**
 * Server-sent events (the `text/event-stream` framing of the HTML Living Standard, §9.2) as the
 * OpenAI routes stream them: `data: <json>` lines, events separated by a blank line, the stream
 * ended by `data: [DONE]`.
 */

/** Splits a byte stream, decoded to text in arbitrary pieces, into the `data` payloads of its events. */
export class SseParser {
  private buffer = "";
  private data: string[] = [];

  /**
   * Feeds the next piece of the stream.
   * @param chunk text as it arrived (may end mid-line or mid-event)
   * @returns the data payloads of the events completed by this piece, in order (multi-line data
   *          joined with "\n", as the standard says)
   */
  push(chunk: string): string[] {
    this.buffer += chunk;
    const events: string[] = [];
    for (;;) {
      const end = this.buffer.search(/\r\n|\r|\n/);
      if (end < 0) break;
      const newline = this.buffer.startsWith("\r\n", end) ? 2 : 1;
      const line = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + newline);
      if (line === "") {
        if (this.data.length > 0) events.push(this.data.join("\n"));
        this.data = [];
      } else if (line.startsWith(":")) {
        // a comment (keep-alive)
      } else {
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "data") this.data.push(value);
      }
    }
    return events;
  }

  /** The payload of a last event the stream ended without a blank line after, if any. */
  finish(): string[] {
    const rest = this.push("\n\n");
    this.buffer = "";
    return rest;
  }
}
