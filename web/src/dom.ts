/** Small DOM helpers: typed lookups and element building (text is always set as text, never HTML). */

/** The element with this id; throws when the page lacks it (a build mismatch, not a user error). */
export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const e = document.getElementById(id);
  if (!e) throw new Error(`the page has no element #${id}`);
  return e as T;
}

/** A new element with classes and text content. */
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className = "",
  text = "",
): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text) e.textContent = text;
  return e;
}

/** The request field a page input stands for: "contract-top-p" → "top_p". */
export function fieldName(id: string): string {
  return id.replace(/^[a-z]+-/, "").replace(/-/g, "_");
}

/**
 * A number input's value. Empty: the input's initial value (its `value` attribute), or null when
 * it has none (a seed left to the server). Throws an Error naming the field when the text is not a
 * number (the browser then reports an empty value and `validity.badInput`), or when an integer
 * input (step 1) holds a fraction or a number beyond ±2^53, which JavaScript cannot send exactly.
 */
export function numberField(id: string): number | null {
  const input = byId<HTMLInputElement>(id);
  const name = fieldName(id);
  if (input.validity.badInput) throw new Error(`${name} must be a number`);
  const text = input.value.trim() === "" ? input.defaultValue.trim() : input.value.trim();
  if (text === "") return null;
  const v = Number(text);
  if (!Number.isFinite(v)) throw new Error(`${name} must be a number, got '${text}'`);
  if (input.step === "1" && !Number.isSafeInteger(v))
    throw new Error(`${name} must be a whole number between -2^53 and 2^53, got ${text}`);
  return v;
}

/** Copies text to the clipboard (the Clipboard API, else a selected textarea and execCommand). */
export async function copyText(text: string): Promise<void> {
  try {
    await navigator.clipboard.writeText(text);
    return;
  } catch {
    const area = el("textarea");
    area.value = text;
    document.body.append(area);
    area.select();
    document.execCommand("copy");
    area.remove();
  }
}
