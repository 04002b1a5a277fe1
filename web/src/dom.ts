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

/** A number field's value, or `fallback` when it is empty; throws naming the field when it is not a number. */
export function numberField(id: string, fallback: number | null): number | null {
  const input = byId<HTMLInputElement>(id);
  if (input.value.trim() === "") return fallback;
  const v = Number(input.value);
  if (!Number.isFinite(v)) throw new Error(`${input.id.replace(/^\w+-/, "")} must be a number`);
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
