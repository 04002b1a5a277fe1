"""`ditto serve` under load: every response is the bits of the same request sent alone to an idle
server (text, token ids, logprobs), streamed or not; bad input and misbehaving clients get clear
errors or clean aborts while everyone else is served; the server's memory returns to its level
after warm-up.

The client and its environment (DITTO_BIN, DITTO_TEST_MODEL, DITTO_SERVE_LAUNCHER, ...) are
serve_client.py's.
"""
import http.client
import json
import os
import random
import re
import socket
import threading
import time

import pytest
from serve_client import NAME, Server, assemble, canonical, raw_exchange

WORDS = ("the quick brown fox jumps over a lazy dog while seven wizards quietly judge "
         "boxing matches in Zürich under café lights 東京 and Αθήνα").split()


@pytest.fixture(scope="module")
def server():
    s = Server("--max-num-seqs", "64", "--timeout", "5")
    yield s
    s.close()


def prompt_text(rng, n_words):
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


def make_requests(count=64):
    """A fixed mix: completions and chat, prompts of 1-300 words, greedy and seeded sampling with
    every filter and penalty, n up to 3, stop strings, logprobs, echo."""
    rng = random.Random(1234)
    reqs = []
    for i in range(count):
        p = {"max_tokens": rng.randint(6, 20), "seed": 1000 + i, "logprobs_wanted": True}
        kind = i % 8
        if kind == 0:
            p.update(temperature=0)
        elif kind == 1:
            p.update(temperature=0.8, top_p=0.9)
        elif kind == 2:
            p.update(temperature=1.0, top_k=20, n=2)
        elif kind == 3:
            p.update(temperature=0.7, min_p=0.05, presence_penalty=0.5, frequency_penalty=0.3)
        elif kind == 4:
            p.update(temperature=1.1, repetition_penalty=1.2, n=3)
        elif kind == 5:
            p.update(temperature=0.9, stop=[" the", "ing"], ignore_eos=True)
        elif kind == 6:
            p.update(temperature=0.6, min_tokens=3)
        else:
            p.update(temperature=0)
        n_words = [1, 3, 12, 40, 120, 300][i % 6]
        chat = i % 3 == 1
        body = {"model": NAME, "return_tokens_as_token_ids": True}
        body.update({k: v for k, v in p.items() if k != "logprobs_wanted"})
        if chat:
            body["messages"] = [{"role": "user", "content": prompt_text(rng, n_words)}]
            body["logprobs"] = True
            body["top_logprobs"] = 2
            reqs.append(("/v1/chat/completions", body))
        else:
            body["prompt"] = prompt_text(rng, n_words)
            body["logprobs"] = 2
            body["echo"] = i % 5 == 0
            reqs.append(("/v1/completions", body))
    return reqs


def run_all(server, reqs, stream_of):
    """Sends every request at once, one thread each; returns canonical results by index."""
    results = [None] * len(reqs)
    errors = []

    def worker(i):
        path, body = reqs[i]
        try:
            if stream_of(i):
                b = dict(body, stream=True, stream_options={"include_usage": True})
                results[i] = canonical(path, assemble(path, server.stream(path, b)))
            else:
                status, resp = server.post(path, body)
                assert status == 200, resp
                results[i] = canonical(path, resp)
        except Exception as e:  # reported below with the request index
            errors.append((i, repr(e)))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(reqs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


# Under ThreadSanitizer (make test-sanitize SANITIZE=thread) every memory access is checked and the
# server runs ~10x slower: 16 concurrent clients there, 64 otherwise.
LOAD_CLIENTS = 16 if os.environ.get("DITTO_SANITIZER") == "thread" else 64


def test_every_response_under_load_is_the_request_alone(server):
    reqs = make_requests(LOAD_CLIENTS)
    alone = []
    for path, body in reqs:
        status, resp = server.post(path, body)
        assert status == 200, resp
        alone.append(canonical(path, resp))
    tokens = sum(len(c[1]) for a, _ in alone for c in a.values())
    assert tokens > 12 * len(reqs), tokens
    assert any(c[4] == "stop" for a, _ in alone for c in a.values())
    # LOAD_CLIENTS concurrent clients, half streaming; then the same with streaming swapped, so each request
    # is compared both ways.
    for parity in (0, 1):
        loaded = run_all(server, reqs, lambda i: i % 2 == parity)
        for i, (want, got) in enumerate(zip(alone, loaded)):
            assert got == want, f"request {i} ({reqs[i][0]}, stream={i % 2 == parity}) differs under load"


def test_prompt_finished_before_the_last_is_accepted_keeps_its_answer(server):
    # A request of many prompts is submitted one prompt at a time; with max_tokens 1 the first
    # prompts finish in the engine's first step, often before the last prompt is accepted. Their
    # answers must still be in the response (they were once dropped: "choice 0 missing").
    prompts = [f"Chapter {k} begins:" for k in range(32)]
    want = None
    for rep in range(6):
        body = {"model": NAME, "prompt": prompts, "max_tokens": 1, "temperature": 0, "logprobs": 1}
        if rep % 2:
            got = canonical("/v1/completions", assemble("/v1/completions", server.stream("/v1/completions",
                                                                                         dict(body, stream=True))))[0]
        else:
            status, resp = server.post("/v1/completions", body)
            assert status == 200, resp
            got = canonical("/v1/completions", resp)[0]
        assert sorted(got) == list(range(32)), f"repetition {rep}: choices {sorted(got)}"
        assert all(len(c[1]) == 1 and c[4] in ("length", "stop") for c in got.values()), got
        want = want or got
        assert got == want, f"repetition {rep} differs from the first"


def test_bad_input_and_misbehaving_clients(server):
    # Warm up at full concurrency, then take the memory baseline.
    reqs = make_requests(16)
    run_all(server, reqs, lambda i: i % 2 == 0)
    baseline = server.rss_kib()
    good_path, good_body = "/v1/completions", {"model": NAME, "prompt": "hello there", "max_tokens": 8,
                                                "temperature": 0}
    status, want = server.post(good_path, good_body)
    assert status == 200

    cases = [
        (b"{not json", 400, None),
        (json.dumps({"prompt": "x", "temperature": "hot"}).encode(), 400, "temperature"),
        (json.dumps({"prompt": "x", "model": "gpt-4"}).encode(), 404, "model"),
        (json.dumps({"prompt": "x", "n": 1000}).encode(), 400, "n"),
        (json.dumps({"prompt": "x", "max_tokens": 10 ** 6}).encode(), 400, "max_tokens"),
        (json.dumps({"prompt": [[1, 2], "x", 5]}).encode(), 400, "prompt"),
        (json.dumps({"prompt": [151936000]}).encode(), 400, "prompt"),
    ]
    for _ in range(3):
        for raw, status, param in cases:
            got, payload = server.request("POST", "/v1/completions", raw=raw)
            assert got == status, (raw[:80], got, payload[:200])
            err = json.loads(payload)["error"]
            assert err["message"]
            if param:
                assert err["param"] == param, (raw[:80], err)
    # A 50 MB body: 413 with an OpenAI error object.
    big = b'{"prompt": "' + b"a" * (50 << 20) + b'"}'
    try:
        got, payload = server.request("POST", "/v1/completions", raw=big)
        assert got == 413, got
        assert json.loads(payload)["error"]["message"]
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server may close the connection before reading the whole body; it must survive

    # A stalled client (half a request, then silence) and a client that disconnects mid-stream,
    # while a normal request is served.
    stalled = socket.create_connection((server.host, server.port))
    stalled.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"prompt\"")
    hang_up = socket.create_connection((server.host, server.port))
    body = json.dumps({"model": NAME, "prompt": "stream forever", "max_tokens": 5000, "ignore_eos": True,
                       "stream": True}).encode()
    hang_up.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    received = b""
    while b"data: " not in received:
        chunk = hang_up.recv(4096)
        assert chunk, "stream closed before its first event"
        received += chunk
    aborts_before = server.metric('ditto:request_success_total{model_name="%s",finished_reason="abort"}' % NAME)
    hang_up.close()
    status, got = server.post(good_path, good_body)
    assert status == 200 and got["choices"] == want["choices"]
    deadline = time.time() + 30
    while time.time() < deadline:
        aborted = server.metric('ditto:request_success_total{model_name="%s",finished_reason="abort"}' % NAME)
        if aborted > aborts_before and server.metric("ditto:num_requests_running") == 0:
            break
        time.sleep(0.2)
    assert aborted > aborts_before, "the disconnected stream was not aborted"
    assert server.metric("ditto:num_requests_running") == 0
    assert server.metric("ditto:kv_cache_usage_perc") == 0
    # Dropped after --timeout 5 (closed, or answered with a 4xx); never held forever.
    stalled.settimeout(20)
    t0 = time.time()
    try:
        dropped = stalled.recv(4096)
    except ConnectionResetError:
        dropped = b""
    assert dropped == b"" or dropped.startswith(b"HTTP/1.1 4"), dropped[:100]
    assert time.time() - t0 < 15
    stalled.close()

    # Everyone else is still served, bit for bit, and memory is back near its warmed-up level.
    status, got = server.post(good_path, good_body)
    assert status == 200 and got["choices"] == want["choices"]
    run_all(server, reqs, lambda i: i % 2 == 1)
    after = server.rss_kib()
    if not os.environ.get("DITTO_SANITIZER"):  # a sanitizer's shadow memory is in the RSS (make test-sanitize)
        assert after <= baseline * 1.10 + 20 * 1024, (baseline, after)


def test_http_framing_methods_and_message_shapes(server):
    # Framing is judged from the headers, at once: no waiting for a body that will not come.
    for head, status in [
        (b"Content-Length: 900000000\r\n", 413),  # over --max-request-body-bytes
        (b"Content-Length: -5\r\n", 400),
        (b"Content-Length: 5\r\nContent-Length: 31\r\n", 400),
        (b"", 411),  # POST with neither a length nor a chunked body
    ]:
        got, reply, seconds = raw_exchange(server, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + head + b"\r\n{")
        assert got == status, (head, reply[:300])
        assert seconds is not None and seconds < 3, (head, seconds)
        assert b'"error"' in reply, reply
    # A known route with the wrong method: 405 naming the allowed one.
    status, payload = server.request("GET", "/v1/completions")
    assert status == 405 and b"use POST" in payload
    status, payload = server.request("DELETE", "/v1/models")
    assert status == 405

    # Chat messages in OpenAI's shapes: text parts, and a tool-call round trip with null content.
    base = {"model": NAME, "max_tokens": 4, "temperature": 0}
    parts = dict(base, messages=[{"role": "user", "content": [{"type": "text", "text": "Hello"},
                                                              {"type": "text", "text": "there"}]}])
    plain = dict(base, messages=[{"role": "user", "content": "Hello\nthere"}])
    s1, r1 = server.post("/v1/chat/completions", parts)
    s2, r2 = server.post("/v1/chat/completions", plain)
    assert s1 == 200 and s2 == 200, (r1, r2)
    assert r1["usage"] == r2["usage"] and r1["choices"] == r2["choices"]
    tools = [{"type": "function", "function": {"name": "add", "description": "Add two numbers",
                                               "parameters": {"type": "object", "properties": {"a": {"type": "number"}}}}}]
    # tool_choice "none": the tools stay in the prompt (vLLM's default) on a server without a tool parser.
    round_trip = dict(base, tools=tools, tool_choice="none", messages=[
        {"role": "user", "content": "add 1"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{\"a\": 1}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "1"}])
    status, resp = server.post("/v1/chat/completions", round_trip)
    assert status == 200, resp
    status, tok = server.post("/tokenize", {"messages": round_trip["messages"], "tools": tools})
    assert status == 200 and tok["count"] == resp["usage"]["prompt_tokens"]
    bad = dict(base, messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}])
    status, resp = server.post("/v1/chat/completions", bad)
    assert status == 400 and resp["error"]["param"] == "messages" and "text only" in resp["error"]["message"]
    status, resp = server.post("/v1/chat/completions", dict(base, messages=[
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]}]))
    assert status == 400 and "tool_calls[0]" in resp["error"]["message"]


def test_api_key_scheme_is_case_insensitive():
    s = Server("--api-key", "sekret")
    try:
        for auth, status in [(None, 401), ("Bearer wrong", 401), ("Bearer sekret", 200), ("bearer sekret", 200),
                             ("BEARER sekret", 200), ("Bearer SEKRET", 401)]:
            conn = http.client.HTTPConnection(s.host, s.port, timeout=30)
            conn.request("GET", "/v1/models", headers={"Authorization": auth} if auth else {})
            resp = conn.getresponse()
            body = resp.read()
            conn.close()
            assert resp.status == status, (auth, resp.status, body)
        status, _ = s.request("GET", "/health")
        assert status == 200  # open without a key
    finally:
        s.close()


def wait_for_line(server, pattern, timeout=10):
    """The first stderr line of `server` matching `pattern` (the access log is written after the response)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for line in list(server.stderr):
            if re.search(pattern, line):
                return line
        time.sleep(0.05)
    raise AssertionError(f"no stderr line matches {pattern!r}; got:\n" + "".join(server.stderr[-20:]))


def test_access_log_names_every_request_and_every_error(server):
    status, resp = server.post("/v1/completions", {"model": NAME, "prompt": "access log", "max_tokens": 3,
                                                   "seed": 1, "ignore_eos": True})
    assert status == 200
    line = wait_for_line(server, re.escape(resp["id"]))
    assert '"POST /v1/completions" 200' in line
    assert f"prompt_tokens={resp['usage']['prompt_tokens']} completion_tokens=3 finish_reason=length" in line
    assert re.search(r"latency_ms=\d+\.\d", line), line
    status, resp = server.post("/v1/completions", {"model": NAME, "prompt": "x", "max_tokens": -7})
    assert status == 400
    line = wait_for_line(server, r"max_tokens must be at least 1, got -7")
    assert '"POST /v1/completions" 400' in line and "error=" in line


def test_access_log_as_json_lines_or_disabled():
    s = Server("--log-format", "json")
    try:
        status, resp = s.post("/v1/chat/completions", {"model": NAME, "max_tokens": 2, "seed": 3, "ignore_eos": True,
                                                        "messages": [{"role": "user", "content": "hi"}]})
        assert status == 200
        entry = json.loads(wait_for_line(s, r'^\{.*' + re.escape(resp["id"])))
        assert entry["path"] == "/v1/chat/completions" and entry["status"] == 200 and entry["method"] == "POST"
        assert entry["completion_tokens"] == 2 and entry["finish_reason"] == "length" and entry["latency_ms"] >= 0
        assert entry["prompt_tokens"] == resp["usage"]["prompt_tokens"]
        status, _ = s.request("POST", "/v1/chat/completions", raw=b"{not json")
        assert status == 400
        entry = json.loads(wait_for_line(s, r'^\{.*"status": ?400'))
        assert "request body" in entry["error"], entry
    finally:
        s.close()
    s = Server("--disable-log-requests")
    try:
        assert s.post("/v1/completions", {"model": NAME, "prompt": "quiet", "max_tokens": 1})[0] == 200
        time.sleep(0.5)
        assert not [line for line in s.stderr if "/v1/completions" in line], s.stderr
    finally:
        s.close()
