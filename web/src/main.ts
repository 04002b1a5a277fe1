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

/** Shows the key form; `reason` says why (missing or refused key). */
function askForKey(reason?: string): void {
  const dialog = byId("key-dialog");
  dialog.hidden = false;
  byId("key-error").textContent = reason ?? "";
  byId<HTMLInputElement>("key-input").focus();
}

/** Reads the model's name from /v1/models; asks for a key when the server wants one. */
async function connect(): Promise<void> {
  try {
    const models = await api.json<{ data: { id: string }[] }>("v1/models");
    model = models.data[0]?.id ?? "";
    byId("model-name").textContent = model;
    byId("key-dialog").hidden = true;
    document.body.dataset.connected = "true";
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      askForKey(api.key ? "The server refused this key." : undefined);
      return;
    }
    byId("model-name").textContent = e instanceof Error ? e.message : String(e);
  }
}

const onUnauthorized = () => askForKey(api.key ? "The server refused this key." : undefined);
new ChatView(api, () => model, onUnauthorized);
new ContractView(api, () => model, onUnauthorized);
const server = new ServerView(api, onUnauthorized);

for (const b of document.querySelectorAll<HTMLButtonElement>(".tab-button"))
  b.addEventListener("click", () => showTab(b.dataset.tab!));
byId("key-button").addEventListener("click", () => askForKey());
byId<HTMLFormElement>("key-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const key = byId<HTMLInputElement>("key-input").value.trim();
  api.key = key || null;
  if (key) sessionStorage.setItem(KEY_STORAGE, key);
  else sessionStorage.removeItem(KEY_STORAGE);
  void connect();
});

showTab(["chat", "contract", "server"].includes(location.hash.slice(1)) ? location.hash.slice(1) : "chat");
void connect();
