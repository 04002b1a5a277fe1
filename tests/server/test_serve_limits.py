"""The limits a public `ditto serve` needs: connections held at once, tokens per request, idle
connections closed, and SIGTERM draining requests in flight within --shutdown-timeout (issue 17).

The client and its environment (DITTO_BIN, DITTO_TEST_MODEL) are serve_client.py's.
"""
import json
import signal
import socket
import threading
import time

import pytest
from serve_client import NAME, Server, raw_exchange, stream_events


def partial_request(server):
    """A connection that sent half a request: the server holds it until --timeout."""
    s = socket.create_connection((server.host, server.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"prompt\"")
    return s


def test_connections_beyond_the_limit_get_503_and_the_others_are_served():
    s = Server("--max-connections", "2", "--timeout", "10")
    try:
        held = [partial_request(s), partial_request(s)]
        time.sleep(0.3)
        status, reply, _ = raw_exchange(s, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status == 503, reply[:300]
        body = json.loads(reply.split(b"\r\n\r\n", 1)[1])
        assert "--max-connections" in body["error"]["message"], body
        assert b"Retry-After: 1" in reply
        for c in held:
            c.close()
        # The held connections' threads notice the hang-up, at the latest when --timeout (10 s) ends
        # their read; a busy machine (a sanitizer build beside other jobs) may take that long.
        deadline = time.time() + 25
        while True:
            status, _ = s.request("GET", "/health")
            if status == 200 or time.time() > deadline:
                break
            time.sleep(0.1)
        assert status == 200
        status, resp = s.post("/v1/completions", {"model": NAME, "prompt": "hi", "max_tokens": 2})
        assert status == 200, resp
    finally:
        s.close()


def test_tokens_per_request_are_bounded_and_the_field_named():
    s = Server("--max-tokens-per-request", "200")
    try:
        status, resp = s.post("/v1/completions", {"model": NAME, "prompt": "hello", "max_tokens": 150})
        assert status == 200, resp
        status, resp = s.post("/v1/completions", {"model": NAME, "prompt": "hello", "max_tokens": 250})
        assert status == 400 and resp["error"]["param"] == "max_tokens", resp
        assert "--max-tokens-per-request 200" in resp["error"]["message"], resp
        status, resp = s.post("/v1/completions", {"model": NAME, "prompt": "hello", "max_tokens": 60, "n": 4})
        assert status == 400 and resp["error"]["param"] == "n", resp
        status, resp = s.post("/v1/completions", {"model": NAME, "prompt": ["hello"] * 4, "max_tokens": 60})
        assert status == 400 and resp["error"]["param"] == "prompt", resp
        # A chat without max_tokens asks for the rest of the context: named as such.
        status, resp = s.post("/v1/chat/completions", {"model": NAME, "messages": [{"role": "user", "content": "hi"}]})
        assert status == 400 and resp["error"]["param"] == "max_tokens", resp
        assert "rest of the context" in resp["error"]["message"], resp
    finally:
        s.close()


def test_idle_connections_are_closed():
    s = Server("--timeout", "30")
    try:
        c = socket.create_connection((s.host, s.port))
        c.settimeout(30)
        t0 = time.time()
        assert c.recv(4096) == b""  # closed by the server, nothing sent
        assert time.time() - t0 < 10, time.time() - t0  # keep-alive timeout 5 s
        c.close()
        # A keep-alive connection left idle after a response is closed the same way.
        c = socket.create_connection((s.host, s.port))
        c.settimeout(30)
        c.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        reply = c.recv(4096)
        assert reply.startswith(b"HTTP/1.1 200"), reply
        t0 = time.time()
        while c.recv(4096):
            pass
        assert time.time() - t0 < 10
        c.close()
    finally:
        s.close()


def stream_in_background(server, body):
    """Starts a streamed completion on a thread; returns (thread, first event seen, result dict
    that gets "events")."""
    first = threading.Event()
    result = {}

    def run():
        result["status"], result["events"] = stream_events(server, "/v1/completions", body,
                                                           on_event=lambda e: first.set())

    t = threading.Thread(target=run)
    t.start()
    return t, first, result


def stream_then_sigterm(server, body):
    """Starts a streamed completion, sends SIGTERM at its first event; returns (thread, result, the
    time of the signal)."""
    t, first, result = stream_in_background(server, body)
    assert first.wait(60)
    signalled = time.time()
    server.proc.send_signal(signal.SIGTERM)
    return t, result, signalled


def finish_reasons(events):
    return [c["finish_reason"] for e in events if e != "[DONE]" for c in e["choices"] if c.get("finish_reason")]


# --shutdown-timeout 60 (vLLM's flag): the stream in flight finishes ("length") while new requests
# get 503; 2: a stream that would run for minutes is aborted about 2 s after the signal; 0: at once.
@pytest.mark.parametrize("timeout, max_tokens, reason", [(60, 48, "length"), (2, 20000, "abort"), (0, 20000, "abort")])
def test_sigterm_drains_requests_in_flight_within_timeout(timeout, max_tokens, reason):
    s = Server("--shutdown-timeout", str(timeout))
    try:
        body = {"model": NAME, "prompt": "count", "max_tokens": max_tokens, "ignore_eos": True, "stream": True}
        t, result, signalled = stream_then_sigterm(s, body)
        if timeout > 0:
            time.sleep(0.5)
            status, reply, _ = raw_exchange(s, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert status == 503 and b"shutting down" in reply, reply[:300]  # load balancers look elsewhere
        t.join(120)
        assert result["status"] == 200 and result["events"][-1] == "[DONE]", result
        assert finish_reasons(result["events"]) == [reason], result["events"][-2:]
        assert s.proc.wait(timeout=60) == 0
        assert time.time() - signalled < timeout + 15, time.time() - signalled
        assert any("draining" in line for line in s.stderr), s.stderr[-5:]
    finally:
        if s.proc.poll() is None:
            s.proc.kill()


def test_a_second_server_on_a_busy_port_stops_naming_it():
    """Two servers never share a port (issue 30): the second stops at start with the operating
    system's reason, as vLLM and llama-server do, and the first keeps every request."""
    import subprocess
    from serve_client import DITTO, MODEL
    s = Server()
    try:
        second = subprocess.run([DITTO, "serve", MODEL, "--port", str(s.port), "--threads", "1"],
                                capture_output=True, text=True, timeout=300)
        assert second.returncode != 0, second.stdout
        assert "listening" not in second.stdout, second.stdout
        assert f"cannot listen on 0.0.0.0:{s.port}: Address already in use" in second.stderr, second.stderr
        for _ in range(10):
            status, resp = s.request("GET", "/v1/models")
            assert status == 200 and json.loads(resp)["data"][0]["id"] == NAME, resp
    finally:
        s.close()
