/** The page's start: tabs, the API key, the served model's name, and the three views. */
import "./style.css";
import { Api, ApiError } from "./api";
import { ChatView } from "./chat_view";
import { ContractView } from "./contract_view";
import { byId } from "./dom";
import { ServerView } from "./server_view";

const KEY_STORAGE = "ditto-api-key";
const api = new Api(sessionStorage.getItem(KEY_STORAGE));
let model = "";

function showTab(name: string): void {
  for (const b of document.querySelectorAll<HTMLButtonElement>(".tab-button"))
    b.classList.toggle("active", b.dataset.tab === name);
  for (const s of document.querySelectorAll<HTMLElement>(".tab")) s.hidden = s.id !== `tab-${name}`;
  if (name === "server") server.start();
  history.replaceState(null, "", `#${name}`);
}

// Whether the server has asked this page for a key (a 401 seen).
let keyRequired = false;

/**
 * Shows the key form. `required`: the server answered 401 (a missing or refused key), so the form
 * stays until a key works; else the reader opened it to see or change the key.
 */
function askForKey(required: boolean): void {
  if (required) keyRequired = true;
  byId("key-dialog").hidden = false;
  byId("key-reason").textContent = required
    ? "This server needs an API key (it was started with --api-key)."
    : "The API key this page sends with every request (empty: none).";
  byId("key-error").textContent = required && api.key ? "The server refused this key." : "";
  byId<HTMLButtonElement>("key-cancel").hidden = required;
  const input = byId<HTMLInputElement>("key-input");
  input.value = api.key ?? "";
  input.focus();
}

function closeKeyDialog(): void {
  if (!keyRequired) byId("key-dialog").hidden = true;
}

/** Reads the served model's name from /v1/models (a restarted server may serve another name). */
async function refreshModel(): Promise<void> {
  const models = await api.json<{ data: { id: string }[] }>("v1/models");
  model = models.data[0]?.id ?? "";
  byId("model-name").textContent = model;
}

/** Reads the model's name; asks for a key when the server wants one. */
async function connect(): Promise<void> {
  try {
    await refreshModel();
    keyRequired = false;
    byId("key-dialog").hidden = true;
    document.body.dataset.connected = "true";
    if (!byId("tab-server").hidden) server.start();
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      askForKey(true);
      return;
    }
    byId("model-name").textContent = e instanceof Error ? e.message : String(e);
  }
}

const onUnauthorized = () => askForKey(true);
new ChatView(api, () => model, refreshModel, onUnauthorized);
new ContractView(api, () => model, refreshModel, onUnauthorized);
const server = new ServerView(api, onUnauthorized);

for (const b of document.querySelectorAll<HTMLButtonElement>(".tab-button"))
  b.addEventListener("click", () => showTab(b.dataset.tab!));
byId("key-button").addEventListener("click", () => askForKey(keyRequired));
byId("key-cancel").addEventListener("click", closeKeyDialog);
document.addEventListener("keydown", (e) => {
  if (e.key === "Escape") closeKeyDialog();
});
byId<HTMLFormElement>("key-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const key = byId<HTMLInputElement>("key-input").value.trim();
  if (!key && keyRequired) {
    byId("key-error").textContent = "Enter the server's API key.";
    return;
  }
  api.key = key || null;
  if (key) sessionStorage.setItem(KEY_STORAGE, key);
  else sessionStorage.removeItem(KEY_STORAGE);
  void connect();
});

showTab(["chat", "contract", "server"].includes(location.hash.slice(1)) ? location.hash.slice(1) : "chat");
void connect();
