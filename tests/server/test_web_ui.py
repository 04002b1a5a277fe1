"""The web page `ditto serve` shows at / (issue 34), in a real browser: Debian's Chromium driven by
Playwright, against a real `ditto serve` on SmolLM2-135M-Instruct.

- the chat streams an answer (several chunks, the seed and token counts shown) and Stop stops one;
- the contract view with N = 16 reads "identical"; its negative control (the copies ask another
  question) reads "different"; and with the server's answers untouched but one logprob of the copy
  changed by one bit on its way to the page, it reads "different": the verdict is computed from the
  bits the page received, not printed;
- the server view plots /metrics;
- under --api-key the page asks for the key, refuses a wrong one and works with the right one;
  --disable-web-ui serves no page;
- the page makes no request to any host but the server (every other request is aborted and fails
  the test);
- `ditto check-invariance --quick --html` (with the negative control) writes a report that opens in
  the browser with no other request, showing every row of the run with its counts and verdict and
  a plot for each failing row.

Screenshots are kept in <build>/web-ui-screenshots/ (build: DITTO_BIN's folder's parent). Runs with
build/venv's Python (`make python-package` installs playwright there; scripts/install-deps.sh
installs /usr/bin/chromium).
"""
import json
import math
import os
import pathlib
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from serve_client import DITTO, NAME, Server

sync_api = pytest.importorskip("playwright.sync_api")

ROOT = pathlib.Path(__file__).resolve().parents[2]
SMOLLM2 = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
SHOTS = pathlib.Path(DITTO).resolve().parents[1] / "web-ui-screenshots"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
VERDICT = "#contract-verdict[data-verdict=identical], #contract-verdict[data-verdict=different], " \
          "#contract-verdict[data-verdict=error]"


@pytest.fixture(scope="module")
def server():
    if not SMOLLM2.exists():
        pytest.skip("models/SmolLM2-135M-Instruct.Q4_1.gguf missing: scripts/install-deps.sh fetches it")
    s = Server("--max-num-seqs", "64", model=str(SMOLLM2))
    yield s
    s.close()


@pytest.fixture(scope="module")
def browser():
    assert os.path.exists(CHROMIUM), "no chromium: scripts/install-deps.sh installs Debian's chromium"
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


class Page:
    """A fresh browser context on one server whose every request to another host is aborted and noted."""

    def __init__(self, browser, server):
        self.origin = f"http://{server.host}:{server.port}"
        self.context = browser.new_context(viewport={"width": 1200, "height": 860})
        self.foreign = []
        self.requests = []
        self.context.route("**/*", self._guard)
        self.page = self.context.new_page()
        self.errors = []
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

    def _guard(self, route):
        url = route.request.url
        if not url.startswith(self.origin + "/"):
            self.foreign.append(url)
            return route.abort()
        self.requests.append((route.request.method, url, route.request.post_data))
        return route.continue_()

    def open(self, tab="chat"):
        self.page.goto(f"{self.origin}/#{tab}")
        return self.page

    def shot(self, name):
        self.page.screenshot(path=str(SHOTS / name), full_page=True)

    def close(self):
        self.context.close()
        assert self.foreign == [], f"the page asked other hosts: {self.foreign}"
        assert self.errors == [], f"the page threw: {self.errors}"


@pytest.fixture
def page(browser, server):
    p = Page(browser, server)
    yield p
    p.close()


def wait_until(check, seconds=30.0, what="the page"):
    """Polls `check()` from Python (the page's Content-Security-Policy forbids evaluated strings)."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"{what} did not happen within {seconds} s"
        time.sleep(0.1)


def set_fields(page, **fields):
    for name, value in fields.items():
        page.fill(f"#{name.replace('_', '-')}", str(value))


def test_chat_streams_an_answer_and_stop_stops_one(page):
    p = page.open("chat")
    p.wait_for_selector(f"body[data-connected=true]", timeout=30000)
    assert p.inner_text("#model-name") == NAME
    set_fields(p, chat_temperature=0, chat_max_tokens=24)
    p.fill("#chat-input", "What is the capital of France?")
    p.click("#chat-send")
    answer = p.wait_for_selector(".message.assistant[data-state=done]", timeout=120000)
    assert answer.query_selector(".content").inner_text().strip()
    assert int(answer.get_attribute("data-chunks")) >= 3, "the answer arrived in one piece, not streamed"
    meta = answer.query_selector(".meta").inner_text()
    assert "seed " in meta and "completion tokens" in meta and "tokens/s" in meta, meta
    chat_bodies = [json.loads(b) for m, u, b in page.requests if u.endswith("/v1/chat/completions")]
    assert chat_bodies[-1]["stream"] is True and chat_bodies[-1]["max_tokens"] == 24
    page.shot("chat.png")

    set_fields(p, chat_max_tokens=2000)
    p.fill("#chat-input", "Write a long story about a river.")
    p.click("#chat-send")
    p.wait_for_selector(".message.assistant:nth-of-type(4)[data-chunks]", timeout=120000)
    p.click("#chat-stop")
    stopped = p.wait_for_selector(".message.assistant[data-state=stopped]", timeout=30000)
    assert "stopped" in stopped.query_selector(".meta").inner_text()


def test_new_chat_while_an_answer_streams_starts_an_empty_conversation(page):
    p = page.open("chat")
    p.wait_for_selector("body[data-connected=true]", timeout=30000)
    set_fields(p, chat_max_tokens=2000)
    p.fill("#chat-input", "Write a long story about the ocean.")
    p.click("#chat-send")
    p.wait_for_selector(".message.assistant[data-chunks]", timeout=120000)
    p.click("#chat-clear")
    wait_until(lambda: p.is_enabled("#chat-send"), what="the stream aborted")
    set_fields(p, chat_max_tokens=4)
    p.fill("#chat-input", "Hi")
    p.click("#chat-send")
    p.wait_for_selector(".message.assistant[data-state=done]", timeout=60000)
    chats = [json.loads(b) for m, u, b in page.requests if u.endswith("/v1/chat/completions")]
    assert chats[-1]["messages"] == [{"role": "user", "content": "Hi"}]


def test_chat_shows_reasoning_apart_and_tool_calls(page):
    """The chunks of a reasoning model with a tool call (vLLM's shapes), fed to the page as the
    server's stream: the reasoning goes in its own block, the call is shown with its arguments."""
    def chunk(delta, finish=None):
        return {"id": "c", "object": "chat.completion.chunk", "seed": 7,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    events = [chunk({"role": "assistant", "content": ""}),
              chunk({"reasoning_content": "The user wants "}), chunk({"reasoning_content": "the weather."}),
              chunk({"content": "Let me look."}),
              chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                     "function": {"name": "get_weather", "arguments": ""}}]}),
              chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]}),
              chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}, "tool_calls"),
              {"id": "c", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 12}}]
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    sent = []

    def answer_with_the_chunks(route):
        sent.append(json.loads(route.request.post_data))
        route.fulfill(status=200, content_type="text/event-stream", body=body)
    page.page.route("**/v1/chat/completions", answer_with_the_chunks)
    p = page.open("chat")
    p.wait_for_selector("body[data-connected=true]", timeout=30000)
    p.fill("#chat-tools", json.dumps([{"type": "function", "function": {"name": "get_weather"}}]))
    p.fill("#chat-input", "Weather in Paris?")
    p.click("#chat-send")
    answer = p.wait_for_selector(".message.assistant[data-state=done]", timeout=30000)
    assert answer.query_selector(".reasoning-text").text_content() == "The user wants the weather."
    assert answer.query_selector(".content").inner_text() == "Let me look."
    assert answer.query_selector(".tool-call").inner_text() == 'get_weather({"city": "Paris"})'
    meta = answer.query_selector(".meta").inner_text()
    assert "seed 7" in meta and "9 prompt + 12 completion tokens" in meta and "tool_calls" in meta, meta
    assert sent[0]["tools"][0]["function"]["name"] == "get_weather" and sent[0]["tool_choice"] == "auto"


def run_contract(p, n=16, negative=False):
    set_fields(p, contract_n=n, contract_max_tokens=24, contract_temperature=0.8, contract_seed=1234)
    if negative:
        p.check("#contract-negative")
    else:
        p.uncheck("#contract-negative")
    p.click("#contract-run")
    return p.wait_for_selector(VERDICT, timeout=300000)


def test_contract_with_16_others_is_identical(page):
    p = page.open("contract")
    p.wait_for_selector("body[data-connected=true]", timeout=30000)
    verdict = run_contract(p)
    assert verdict.get_attribute("data-verdict") == "identical", verdict.inner_text()
    rows = p.query_selector_all("#contract-table tbody tr")
    assert [r.get_attribute("data-verdict") for r in rows] == ["", "identical", "identical"]
    assert len(p.query_selector_all("#contract-alone .token")) == 24
    assert len(p.query_selector_all("#contract-burst .token.differs")) == 0
    # The burst really ran beside the copies: 16 others went out, and the server said how many ran.
    completions = [json.loads(b) for m, u, b in page.requests if u.endswith("/v1/completions")]
    assert sum(len(c["prompt"]) for c in completions) == 16
    assert "requests at once" in p.inner_text("#contract-table caption")
    page.shot("contract-identical.png")


def test_contract_negative_control_is_different(page):
    p = page.open("contract")
    p.wait_for_selector("body[data-connected=true]", timeout=30000)
    verdict = run_contract(p, negative=True)
    assert verdict.get_attribute("data-verdict") == "different", verdict.inner_text()
    assert "negative control" in verdict.inner_text()
    page.shot("contract-different.png")


def test_contract_verdict_is_computed_from_the_bits(page):
    """One logprob of the burst's not-streamed copy is changed by one ulp on its way to the page."""
    plain_chats = []

    def flip(route):
        body = json.loads(route.request.post_data)
        response = route.fetch()
        if body.get("stream") or body.get("seed") != 1234:
            return route.fulfill(response=response)
        plain_chats.append(body)
        if len(plain_chats) < 2:  # the first is the request alone
            return route.fulfill(response=response)
        answer = response.json()
        entry = answer["choices"][0]["logprobs"]["content"][5]
        entry["logprob"] = math.nextafter(entry["logprob"], 0.0)
        return route.fulfill(response=response, body=json.dumps(answer))

    page.page.route("**/v1/chat/completions", flip)
    p = page.open("contract")
    p.wait_for_selector("body[data-connected=true]", timeout=30000)
    verdict = run_contract(p, n=4)
    assert len(plain_chats) == 2
    assert verdict.get_attribute("data-verdict") == "different", verdict.inner_text()
    assert "token 5: same id, logprob" in verdict.inner_text()
    rows = p.query_selector_all("#contract-table tbody tr")
    assert [r.get_attribute("data-verdict") for r in rows] == ["", "identical", "different"]


def test_contract_seed_minus_one_is_the_servers_seed(page):
    """vLLM's seed -1 means none: the copies take the seed the server chose for the request alone."""
    p = page.open("contract")
    p.wait_for_selector("body[data-connected=true]", timeout=30000)
    set_fields(p, contract_n=2, contract_max_tokens=8, contract_temperature=0.9, contract_seed=-1)
    p.click("#contract-run")
    verdict = p.wait_for_selector(VERDICT, timeout=120000)
    assert verdict.get_attribute("data-verdict") == "identical", verdict.inner_text()
    seeds = {r.query_selector_all("td")[2].inner_text() for r in p.query_selector_all("#contract-table tbody tr")}
    assert len(seeds) == 1 and int(seeds.pop()) >= 0


def test_a_failed_contract_run_leaves_nothing_running(page):
    """A copy refused (503) ends the run with the server's message, and stops the /metrics reader."""
    def refuse_the_streamed_copy(route):
        body = json.loads(route.request.post_data)
        if body.get("stream") and body.get("seed") == 1234:
            return route.fulfill(status=503, content_type="application/json", body=json.dumps(
                {"error": {"message": "the server is at capacity", "type": "ServiceUnavailableError",
                           "param": None, "code": 503}}))
        return route.continue_()
    page.page.route("**/v1/chat/completions", refuse_the_streamed_copy)
    metrics = []
    page.page.on("request", lambda r: metrics.append(time.monotonic()) if r.url.endswith("/metrics") else None)
    p = page.open("contract")
    p.wait_for_selector("body[data-connected=true]", timeout=30000)
    verdict = run_contract(p, n=4)
    assert verdict.get_attribute("data-verdict") == "error"
    assert "the server is at capacity" in verdict.inner_text()
    ended = time.monotonic()
    time.sleep(1.5)
    assert [t for t in metrics if t > ended + 0.3] == [], "the /metrics reader still runs"


def test_server_view_plots_the_metrics(page):
    p = page.open("server")
    # Six charts; the prefix-cache hit rate has no line while nothing is looked up.
    wait_until(lambda: len(p.query_selector_all("#server-charts svg.chart polyline")) >= 5,
               what="five plotted series")
    assert len(p.query_selector_all("#server-charts svg.chart")) == 6
    assert "running" in p.inner_text("#server-summary")
    titles = [t.text_content() for t in p.query_selector_all("#server-charts .chart-title")]
    assert any(t.startswith("KV cache in use") for t in titles), titles
    assert any(t.startswith("generated tokens/s") for t in titles), titles
    page.shot("server.png")


def test_api_key_the_page_asks_for_it(browser):
    if not SMOLLM2.exists():
        pytest.skip("models/SmolLM2-135M-Instruct.Q4_1.gguf missing")
    s = Server("--api-key", "sesame", model=str(SMOLLM2))
    try:
        page = Page(browser, s)
        p = page.open("chat")
        p.wait_for_selector("#key-dialog:not([hidden])", timeout=30000)
        page.shot("api-key.png")
        p.fill("#key-input", "wrong")
        p.click("#key-submit")
        wait_until(lambda: "refused" in p.inner_text("#key-error"), what="the wrong key refused")
        assert p.is_visible("#key-dialog")
        p.fill("#key-input", "sesame")
        p.click("#key-submit")
        p.wait_for_selector("body[data-connected=true]", timeout=30000)
        assert p.is_hidden("#key-dialog")
        set_fields(p, chat_max_tokens=4)
        p.fill("#chat-input", "Hi")
        p.click("#chat-send")
        p.wait_for_selector(".message.assistant[data-state=done]", timeout=60000)
        page.close()
        # Nothing else became public: the routes the page calls still need the key.
        for path in ("/v1/models", "/metrics"):
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(f"http://{s.host}:{s.port}{path}")
            assert e.value.code == 401, path
    finally:
        s.close()


def test_disable_web_ui_serves_no_page():
    if not SMOLLM2.exists():
        pytest.skip("models/SmolLM2-135M-Instruct.Q4_1.gguf missing")
    s = Server("--disable-web-ui", model=str(SMOLLM2))
    try:
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"http://{s.host}:{s.port}/")
        assert e.value.code == 404
    finally:
        s.close()


def test_check_invariance_html_report_opens_and_shows_every_row(browser, tmp_path):
    """`ditto check-invariance --quick --html` with the negative control: the report opens in the
    browser with no network at all, shows every row of the same run's JSON with its counts and
    verdict, and a divergence plot for each failing row."""
    model = tmp_path / "m"
    subprocess.run([DITTO, "make-test-model", "--preset", "qwen3-0.6b", "--num-hidden-layers", "2", "--seed", "3",
                    "--out", str(model)], check=True, capture_output=True)
    report = tmp_path / "report.html"
    proc = subprocess.run([DITTO, "check-invariance", "--model", str(model), "--quick", "--inject-fault",
                           "batch-size", "--json", "--html", str(report)], capture_output=True, text=True)
    assert proc.returncode == 1, proc.stderr  # the injected fault must be caught
    rows = json.loads(proc.stdout)["rows"]
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    requests = []
    context.route("**/*", lambda route: (requests.append(route.request.url), route.continue_()))
    p = context.new_page()
    p.goto(report.as_uri())
    shown = p.query_selector_all("#contract-rows tr.contract-row")
    assert [r.get_attribute("data-row") for r in shown] == [r["row"] for r in rows]
    for tr, r in zip(shown, rows):
        assert int(tr.get_attribute("data-mismatches")) == r["mismatches"], r["row"]
        assert tr.get_attribute("data-verdict") == ("pass" if r["mismatches"] == 0 else "fail"), r["row"]
        assert tr.is_visible()
    failing = [r["row"] for r in rows if r["mismatches"] > 0]
    assert failing, "the negative control failed no row"
    plots = p.query_selector_all("svg.divergence-plot")
    assert sorted(s.get_attribute("data-row") for s in plots) == sorted(failing)
    assert all(s.is_visible() for s in plots)
    assert p.get_attribute("#verdict", "data-verdict") == "fail"
    p.screenshot(path=str(SHOTS / "check-invariance-report.png"), full_page=True)
    context.close()
    assert requests == [report.as_uri()], f"the report asked for more than itself: {requests}"


def test_the_python_packages_ditto_serves_the_same_page(server):
    """`pip install` ships the page too: the package's `ditto` (beside this Python) serves the same bytes."""
    packaged = pathlib.Path(sys.executable).parent / "ditto"
    if not packaged.exists():
        pytest.skip(f"no {packaged}: run with the Python package's environment (make test-python)")
    s = Server(ditto=str(packaged), model=str(SMOLLM2))
    try:
        pages = [urllib.request.urlopen(f"http://{x.host}:{x.port}/").read() for x in (s, server)]
        assert b"<title>ditto</title>" in pages[0]
        assert pages[0] == pages[1]
    finally:
        s.close()
