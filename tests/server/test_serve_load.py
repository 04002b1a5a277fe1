"""`ditto serve` under load: every response is the bits of the same request sent alone to an idle
server (text, token ids, logprobs), streamed or not; bad input and misbehaving clients get clear
errors or clean aborts while everyone else is served; the server's memory returns to its level
after warm-up.

Standard library only (http.client, threads). DITTO_BIN is the ditto binary, DITTO_TEST_MODEL a
generated 2-layer qwen3-0.6b. DITTO_SERVE_LAUNCHER (e.g. "mpirun -np 2") and DITTO_SERVE_ARGS
(e.g. "--tensor-parallel-size 2") run the same tests against a server split over MPI ranks;
DITTO_SERVE_THREADS sets --threads (default 2).
"""
import http.client
import json
import os
import random
import re
import socket
import subprocess
import threading
import time

import pytest

DITTO = os.environ.get("DITTO_BIN", "build/tools/ditto")
MODEL = os.environ.get("DITTO_TEST_MODEL", "build/test_models/qwen3-0.6b-2l-sharded")
NAME = "ditto-test"
WORDS = ("the quick brown fox jumps over a lazy dog while seven wizards quietly judge "
         "boxing matches in Zürich under café lights 東京 and Αθήνα").split()


class Server:
    def __init__(self, *args):
        launcher = os.environ.get("DITTO_SERVE_LAUNCHER", "").split()
        self.proc = subprocess.Popen([*launcher, DITTO, "serve", MODEL, "--port", "0", "--served-model-name", NAME,
                                      "--threads", os.environ.get("DITTO_SERVE_THREADS", "2"), *args,
                                      *os.environ.get("DITTO_SERVE_ARGS", "").split()],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.launched = bool(launcher)
        line = self.proc.stdout.readline()
        m = re.search(r"listening on http://([\d.]+):(\d+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError("server did not start: " + line + self.proc.stderr.read())
        self.host, self.port = m.group(1), int(m.group(2))
        # Drain stderr so the server never blocks on a full pipe.
        self.stderr = []
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()

    def server_pid(self):
        """The process serving HTTP: ditto itself, or under a launcher its child that is MPI rank 0."""
        if not self.launched:
            return self.proc.pid
        for entry in os.listdir("/proc"):
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) != self.proc.pid:
                        continue
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if b"\0OMPI_COMM_WORLD_RANK=0\0" in b"\0" + f.read():
                        return int(entry)
            except (OSError, ValueError, IndexError):
                continue
        raise RuntimeError("no rank 0 under the launcher")

    def rss_kib(self):
        with open(f"/proc/{self.server_pid()}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise

    def request(self, method, path, body=None, raw=None, timeout=600):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        payload = resp.read()
        conn.close()
        return resp.status, payload

    def post(self, path, body):
        status, payload = self.request("POST", path, body)
        return status, json.loads(payload)

    def stream(self, path, body):
        """Returns the list of SSE data payloads (parsed JSON, and the final '[DONE]')."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=600)
        conn.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 200, resp.read()
        assert resp.getheader("Content-Type").startswith("text/event-stream")
        events = []
        for event in resp.read().decode().split("\n\n"):
            if not event:
                continue
            assert event.startswith("data: "), event
            data = event[len("data: "):]
            events.append(data if data == "[DONE]" else json.loads(data))
        conn.close()
        return events

    def metric(self, name):
        status, text = self.request("GET", "/metrics")
        total = 0.0
        found = False
        for line in text.decode().splitlines():
            if line.startswith(name + "{") or line.startswith(name + " "):
                total += float(line.rsplit(" ", 1)[1])
                found = True
        assert found, name
        return total


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


def canonical(path, response):
    """What the contract covers, per choice index: text, token ids, logprobs, finish_reason."""
    out = {}
    for c in response["choices"]:
        if path.endswith("chat/completions"):
            content = c["logprobs"]["content"]
            out[c["index"]] = (c["message"]["content"], [e["token"] for e in content], [e["logprob"] for e in content],
                               [[(t["token"], t["logprob"]) for t in e["top_logprobs"]] for e in content],
                               c["finish_reason"])
        else:
            lp = c["logprobs"]
            out[c["index"]] = (c["text"], lp["tokens"], lp["token_logprobs"],
                               [sorted(t.items()) if t else None for t in lp["top_logprobs"]], c["finish_reason"])
    return out, response["usage"]


def assemble(path, events):
    """Rebuilds a non-streamed response from SSE events."""
    assert events[-1] == "[DONE]"
    chat = path.endswith("chat/completions")
    choices = {}
    usage = None
    for e in events[:-1]:
        if e.get("usage"):
            usage = e["usage"]
        for c in e["choices"]:
            k = c["index"]
            acc = choices.setdefault(k, {"index": k, "text": "", "finish_reason": None,
                                         "logprobs": {"content": []} if chat else
                                         {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}})
            if chat:
                acc["text"] += c["delta"].get("content", "") or ""
                if c.get("logprobs"):
                    acc["logprobs"]["content"] += c["logprobs"]["content"]
            else:
                acc["text"] += c["text"]
                if c.get("logprobs"):
                    for key in ("tokens", "token_logprobs", "top_logprobs"):
                        acc["logprobs"][key] += c["logprobs"][key]
            if c["finish_reason"] is not None:
                assert acc["finish_reason"] is None, "finish_reason sent twice"
                acc["finish_reason"] = c["finish_reason"]
    result = {"choices": [], "usage": usage}
    for k in sorted(choices):
        c = choices[k]
        if chat:
            c["message"] = {"role": "assistant", "content": c.pop("text")}
        result["choices"].append(c)
    return result


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


def test_every_response_under_load_is_the_request_alone(server):
    reqs = make_requests(64)
    alone = []
    for path, body in reqs:
        status, resp = server.post(path, body)
        assert status == 200, resp
        alone.append(canonical(path, resp))
    tokens = sum(len(c[1]) for a, _ in alone for c in a.values())
    assert tokens > 800, tokens
    assert any(c[4] == "stop" for a, _ in alone for c in a.values())
    # 64 concurrent clients, half streaming; then the same with streaming swapped, so each request
    # is compared both ways.
    for parity in (0, 1):
        loaded = run_all(server, reqs, lambda i: i % 2 == parity)
        for i, (want, got) in enumerate(zip(alone, loaded)):
            assert got == want, f"request {i} ({reqs[i][0]}, stream={i % 2 == parity}) differs under load"


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
    assert after <= baseline * 1.10 + 20 * 1024, (baseline, after)


def raw_exchange(server, data, timeout=10):
    """Sends raw bytes, returns (status, the reply up to the server's close or `timeout`, seconds
    until its first byte)."""
    s = socket.create_connection((server.host, server.port))
    s.settimeout(timeout)
    t0 = time.time()
    s.sendall(data)
    reply = b""
    first = None
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            first = first or time.time() - t0
            reply += chunk
    except socket.timeout:
        pass
    finally:
        s.close()
    status = int(reply.split(b" ", 2)[1]) if reply.startswith(b"HTTP/1.1 ") else None
    return status, reply, first


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
    round_trip = dict(base, tools=tools, messages=[
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
