"""A client of `ditto serve` for the server's tests and the soak (tests/soak/soak.py): starts a server on
a free port, sends requests (JSON, raw bytes, server-sent events), reads its memory and metrics, and
reduces responses to what the invariance contract covers. Standard library only.

DITTO_BIN is the ditto binary, DITTO_TEST_MODEL the model. DITTO_SERVE_LAUNCHER (e.g. "mpirun -np
2") and DITTO_SERVE_ARGS (e.g. "--tensor-parallel-size 2") start the server split over MPI ranks;
DITTO_SERVE_THREADS sets --threads (default 2).
"""
import http.client
import json
import os
import re
import socket
import subprocess
import threading
import time

DITTO = os.environ.get("DITTO_BIN", "build/tools/ditto")
MODEL = os.environ.get("DITTO_TEST_MODEL", "build/test_models/qwen3-0.6b-2l-sharded")
NAME = "ditto-test"


class Server:
    def __init__(self, *args, ditto=None, model=None):
        launcher = os.environ.get("DITTO_SERVE_LAUNCHER", "").split()
        self.proc = subprocess.Popen([*launcher, ditto or DITTO, "serve", model or MODEL, "--port", "0",
                                      "--served-model-name", NAME,
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


def stream_events(server, path, body, stop_after=None, on_event=None, timeout=120):
    """(status, events) of a streamed request, events parsed as they arrive (JSON, and the final
    "[DONE]"); on_event(event) is called for each; with stop_after, hangs up after that many and
    returns (200, None). A refused request gives (status, its body)."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=timeout)
    try:
        conn.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            return resp.status, resp.read()
        events, buf = [], b""
        while True:
            chunk = resp.read1(65536)
            if not chunk:
                break
            buf += chunk
            while b"\n\n" in buf:
                event, buf = buf.split(b"\n\n", 1)
                if not event.startswith(b"data: "):
                    raise ValueError("not an SSE data line: %r" % event[:80])
                data = event[6:].decode()
                events.append(data if data == "[DONE]" else json.loads(data))
                if on_event is not None:
                    on_event(events[-1])
                if stop_after is not None and len(events) >= stop_after:
                    return 200, None
        if buf.strip():
            raise ValueError("stream ended inside an event")
        return 200, events
    finally:
        conn.close()
