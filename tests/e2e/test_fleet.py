"""A fleet: two `ditto serve` replicas on different instruction-set paths (DITTO_ISA) behind nginx,
configured by examples/fleet/nginx.conf (only its ports changed). The same requests sent through
nginx again and again are answered by both replicas with the same bits: completions and chats,
seeded sampling with n > 1, logprobs, streamed or not.
"""
import http.client
import json
import os
import pathlib
import re
import shutil
import subprocess
import threading

import pytest

from conftest import REPO, run_ditto

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
pytestmark = pytest.mark.skipif(NGINX is None, reason="nginx missing: scripts/install-deps.sh installs it")


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Replica:
    def __init__(self, ditto_bin, model, isa):
        self.isa = isa
        self.proc = subprocess.Popen([ditto_bin, "serve", model, "--port", "0", "--threads", "1",
                                      "--served-model-name", "fleet"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=dict(os.environ, DITTO_ISA=isa))
        line = self.proc.stdout.readline()
        m = re.search(r"listening on http://[\d.]+:(\d+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"replica ({isa}) did not start: {line}{self.proc.stderr.read()}")
        self.port = int(m.group(1))
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def isa_paths(ditto_bin):
    """Two different instruction-set paths this CPU can run: the best and the next one down."""
    best = re.search(r"^isa (\w+)", run_ditto(ditto_bin, "--version").stdout, re.M).group(1)
    return {"avx512": ("avx512", "avx2"), "avx2": ("avx2", "scalar")}.get(best, ("scalar", "scalar"))


@pytest.fixture(scope="module")
def fleet(ditto_bin, tmp_path_factory):
    root = tmp_path_factory.mktemp("fleet")
    model = root / "model"
    run_ditto(ditto_bin, "make-test-model", "--preset", "qwen3-0.6b", "--num-hidden-layers", "2", "--seed", "5",
              "--out", model)
    replicas = [Replica(ditto_bin, model, isa) for isa in isa_paths(ditto_bin)]
    conf = (REPO / "examples" / "fleet" / "nginx.conf").read_text()
    port = free_port()
    conf = conf.replace("127.0.0.1:8001", f"127.0.0.1:{replicas[0].port}")
    conf = conf.replace("127.0.0.1:8002", f"127.0.0.1:{replicas[1].port}")
    conf = conf.replace("listen 127.0.0.1:8000", f"listen 127.0.0.1:{port}")
    (root / "nginx.conf").write_text(conf)
    (root / "logs").mkdir()
    globals_ = "pid nginx.pid; daemon off;" + (" user root;" if os.geteuid() == 0 else "")
    nginx = subprocess.Popen([NGINX, "-p", str(root), "-c", str(root / "nginx.conf"), "-g", globals_],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    import time
    for _ in range(100):  # until nginx accepts connections
        try:
            http.client.HTTPConnection("127.0.0.1", port, timeout=1).request("GET", "/health")
            break
        except OSError:
            if nginx.poll() is not None:
                raise RuntimeError("nginx did not start: " + nginx.stderr.read())
            time.sleep(0.1)
    yield port, replicas
    nginx.terminate()
    nginx.wait(timeout=30)
    for r in replicas:
        r.close()


def post(port, path, body):
    """Returns (replica address, status, body bytes) of one request through nginx."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    payload = resp.read()
    conn.close()
    return resp.getheader("X-Ditto-Replica"), resp.status, payload


def comparable(path, body, payload):
    """What must be identical: the response without its per-request id and creation time."""
    def strip(obj):
        obj = json.loads(obj)
        obj.pop("id", None)
        obj.pop("created", None)
        return obj
    if body.get("stream"):
        events = [e[len("data: "):] for e in payload.decode().split("\n\n") if e.startswith("data: ")]
        return [e if e == "[DONE]" else strip(e) for e in events]
    return strip(payload)


REQUESTS = [
    ("/v1/completions", {"model": "fleet", "prompt": "The quick brown fox", "max_tokens": 16, "temperature": 0.9,
                         "seed": 1, "n": 2, "logprobs": 3}),
    ("/v1/completions", {"model": "fleet", "prompt": "Once upon a time", "max_tokens": 12, "temperature": 0,
                         "seed": 3, "logprobs": 1, "stream": True}),
    ("/v1/chat/completions", {"model": "fleet", "messages": [{"role": "user", "content": "Say something."}],
                              "max_tokens": 14, "temperature": 1.0, "top_p": 0.9, "seed": 42, "logprobs": True,
                              "top_logprobs": 2}),
    ("/v1/chat/completions", {"model": "fleet", "messages": [{"role": "user", "content": "Count to five."}],
                              "max_tokens": 10, "temperature": 0.7, "seed": 7, "stream": True}),
]


def test_every_replica_answers_with_the_same_bits(fleet):
    port, replicas = fleet
    served = set()
    for path, body in REQUESTS:
        answers = []
        for _ in range(4):  # round robin: each replica at least once
            replica, status, payload = post(port, path, body)
            assert status == 200, payload
            served.add(replica)
            answers.append((replica, comparable(path, body, payload)))
        replicas_here = {r for r, _ in answers}
        assert len(replicas_here) == 2, f"{path}: only {replicas_here} answered"
        for replica, answer in answers[1:]:
            assert answer == answers[0][1], f"{path}: {replica} answered differently from {answers[0][0]}"
    assert served == {f"127.0.0.1:{r.port}" for r in replicas}


def test_concurrent_requests_through_the_balancer_match_the_sequential_answers(fleet):
    port, _ = fleet
    expected = {i: comparable(p, b, post(port, p, b)[2]) for i, (p, b) in enumerate(REQUESTS)}
    results, errors = [], []

    def client(i):
        p, b = REQUESTS[i % len(REQUESTS)]
        try:
            _, status, payload = post(port, p, b)
            results.append((i % len(REQUESTS), status, comparable(p, b, payload)))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == 16
    for i, status, answer in results:
        assert status == 200 and answer == expected[i], f"request {i} differs under load"
