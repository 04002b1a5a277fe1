#!/usr/bin/env python3
"""The soak: `ditto serve` under a bounded loopback load with abuse mixed in, checked for lost
requests, changed answers and memory that is not given back (issue 17).

CLIENTS client threads (64) run for SECONDS (600), each drawing its next action from a seeded mix:
completions and chat requests from a fixed pool (greedy and seeded sampling, n up to 2, logprobs,
stop strings), streamed or not; streams aborted after a few events; connections dropped halfway
through a request; bodies over --max-request-body-bytes; malformed JSON, wrong types, unknown
models, out-of-range parameters; half-sent requests left to stall; the small GET routes.

Checks, printed as a report and as JSON (--report):
  lost        requests neither answered as expected nor cleanly refused (a well-formed request that
              got a reset, a timeout, a truncated or malformed reply, or an unexpected status; a bad
              request that did not get its 4xx error object) — must be 0;
  mismatches  answers to a pool request that differ from its first answer (streamed answers are
              assembled and compared with the unstreamed ones: text, token ids, logprobs, finish
              reasons) — must be 0;
  memory      the server's RSS after the load within 10 % of the warm baseline, taken after every
              pool request was answered once alone and the whole mix ran for --warm-seconds (30);
              both are read once the server has been idle for 35 s (it gives the KV cache's pages
              back after 1 s idle, its prefix cache after 30 s).
Exit status 1 when any check fails. Standard library only.
"""
import argparse
import http.client
import json
import os
import random
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
from serve_client import NAME, Server, assemble, canonical, stream_events  # noqa: E402

TEXT = ("The committee met on Tuesday to review the harbour plans. Ships had grown longer, the quay had not, "
        "and the old crane still lifted only forty tonnes. Ana proposed dredging the eastern basin; Tomas "
        "wanted a second pier. Nobody mentioned the budget until the tea arrived.")
QUESTIONS = ["Summarise the text in one sentence.", "Who wanted a second pier?", "What could the crane lift?",
             "Continue the story.", "List three nouns from the text.", "Translate the first sentence into French."]
MAX_BODY = 1 << 20  # the server's --max-request-body-bytes in the soak


def make_pool(rng):
    """The fixed requests whose answers are compared: (path, body)."""
    pool = []
    for i in range(24):
        q = QUESTIONS[i % len(QUESTIONS)]
        body = {"model": NAME, "max_tokens": rng.randint(8, 40), "seed": 100 + i}
        if i % 4 == 0:
            body["temperature"] = 0
        elif i % 4 == 1:
            body.update(temperature=0.8, top_p=0.9, n=2)
        elif i % 4 == 2:
            body.update(temperature=1.0, top_k=40, presence_penalty=0.3, stop=["\n\n", "."])
        else:
            body.update(temperature=0.7, min_p=0.05, repetition_penalty=1.1)
        if i % 2 == 0:
            body["messages"] = [{"role": "system", "content": "Answer briefly."},
                                {"role": "user", "content": TEXT + "\n\n" + q}]
            body.update(logprobs=True, top_logprobs=2)
            pool.append(("/v1/chat/completions", body))
        else:
            body.update(prompt=TEXT + "\nQuestion: " + q + "\nAnswer:", logprobs=2)
            pool.append(("/v1/completions", body))
    return pool


# Bodies refused by /v1/completions, with their status.
MALFORMED = [
    (b"{not json", 400),
    (json.dumps({"model": NAME, "prompt": "x", "temperature": "hot"}).encode(), 400),
    (json.dumps({"model": "gpt-4", "prompt": "x"}).encode(), 404),
    (json.dumps({"model": NAME, "prompt": "x", "n": 100000}).encode(), 400),
    (json.dumps({"model": NAME, "prompt": "x", "max_tokens": 10 ** 9}).encode(), 400),
    (json.dumps({"model": NAME, "prompt": [10 ** 9]}).encode(), 400),
    (json.dumps({"model": NAME, "prompt": [[1, 2], "x", 5]}).encode(), 400),
    (json.dumps([1, 2, 3]).encode(), 400),
    (b'{"model": "' + NAME.encode() + b'", "prompt": "x", "logprobs": 1e999}', 400),
    (b"[" * 100000, 400),
]
# And by /v1/chat/completions.
MALFORMED_CHAT = [
    (b"{not json", 400),
    (json.dumps({"model": NAME, "messages": "hi"}).encode(), 400),
    (json.dumps({"model": NAME, "messages": [{"content": "no role"}]}).encode(), 400),
    (json.dumps({"model": NAME, "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}).encode(), 400),
    (json.dumps({"model": "gpt-4", "messages": [{"role": "user", "content": "x"}]}).encode(), 404),
    (json.dumps({"model": NAME, "messages": [{"role": "user", "content": "x"}], "top_logprobs": 99}).encode(), 400),
]


def first_difference(want, got):
    """Where two canonical answers ({choice: (text, tokens, logprobs, top, finish)}) first differ."""
    for k in sorted(set(want) | set(got)):
        if want.get(k) == got.get(k):
            continue
        if k not in want or k not in got:
            side, other = ("the first answer", got) if k not in want else ("this answer", want)
            return f"choice {k} missing in {side}: choices {sorted(want)} vs {sorted(got)}, other {str(other[k])[:200]!r}"
        for field, a, b in zip(("text", "tokens", "logprobs", "top_logprobs", "finish_reason"), want[k], got[k]):
            if a == b:
                continue
            if isinstance(a, list) and isinstance(b, list):
                i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                return f"choice {k} {field}[{i}]: {a[i] if i < len(a) else None!r} vs {b[i] if i < len(b) else None!r}"
            return f"choice {k} {field}: {str(a)[:80]!r} vs {str(b)[:80]!r}"
    return "?"


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.lost = []
        self.mismatches = []
        self.first = {}

    def count(self, kind, outcome):
        with self.lock:
            self.counts.setdefault(kind, {}).setdefault(outcome, 0)
            self.counts[kind][outcome] += 1

    def lose(self, kind, detail):
        self.count(kind, "lost")
        with self.lock:
            if len(self.lost) < 50:
                self.lost.append(f"{kind}: {detail}")

    def compare(self, key, answer, detail):
        with self.lock:
            want = self.first.setdefault(key, answer)
            if want != answer and len(self.mismatches) < 50:
                self.mismatches.append(detail + ": " + first_difference(want, answer))
            return want == answer


def post(server, path, raw, timeout=120):
    conn = http.client.HTTPConnection(server.host, server.port, timeout=timeout)
    try:
        conn.request("POST", path, body=raw, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def error_object(payload):
    e = json.loads(payload)["error"]
    return isinstance(e.get("message"), str) and e["message"]


def do_pool(server, tally, pool, i, stream, phase="load"):
    path, body = pool[i]
    kind = "stream" if stream else "request"
    try:
        if stream:
            status, events = stream_events(server, path, dict(body, stream=True))
            if status == 503:
                return tally.count(kind, "refused 503")
            if status != 200:
                return tally.lose(kind, f"pool {i}: status {status} {events[:200]!r}")
            answer = canonical(path, assemble(path, events))[0]
        else:
            status, payload = post(server, path, json.dumps(body).encode())
            if status == 503:
                return tally.count(kind, "refused 503")
            if status != 200:
                return tally.lose(kind, f"pool {i}: status {status} {payload[:200]!r}")
            answer = canonical(path, json.loads(payload))[0]
    except Exception as e:  # a reset, a timeout, a malformed reply: lost
        return tally.lose(kind, f"pool {i}: {e!r}")
    tally.count(kind, "answered")
    if not tally.compare(i, answer, f"pool {i} ({path}, stream={stream}, {phase})"):
        tally.count(kind, "MISMATCH")


def do_abort(server, tally, pool, rng):
    path, body = pool[rng.randrange(len(pool))]
    try:
        status, _ = stream_events(server, path, dict(body, stream=True, max_tokens=2000, ignore_eos=True),
                                stop_after=rng.randint(1, 5))
        tally.count("abort mid-stream", "done" if status == 200 else f"status {status}")
    except Exception as e:
        tally.lose("abort mid-stream", repr(e))


def do_disconnect(server, tally, rng):
    body = json.dumps({"model": NAME, "prompt": TEXT, "max_tokens": 20}).encode()
    head = (b"POST /v1/completions HTTP/1.1\r\nHost: soak\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n")
    data = (head + body)[:rng.randint(0, len(head) + len(body) - 1)]
    try:
        s = socket.create_connection((server.host, server.port), timeout=30)
        s.sendall(data)
        s.close()
        tally.count("disconnect mid-request", "done")
    except OSError as e:
        tally.lose("disconnect mid-request", repr(e))


def do_oversized(server, tally):
    raw = b'{"model": "' + NAME.encode() + b'", "prompt": "' + b"a" * (MAX_BODY + 4096) + b'"}'
    try:
        status, payload = post(server, "/v1/completions", raw)
        if status == 413 and error_object(payload):
            tally.count("oversized body", "refused 413")
        else:
            tally.lose("oversized body", f"status {status} {payload[:200]!r}")
    except (BrokenPipeError, ConnectionResetError):
        tally.count("oversized body", "refused (closed while sending)")  # refused before reading it all
    except Exception as e:
        tally.lose("oversized body", repr(e))


def do_malformed(server, tally, rng):
    chat = rng.random() < 0.3
    cases = MALFORMED_CHAT if chat else MALFORMED
    raw, want = cases[rng.randrange(len(cases))]
    path = "/v1/chat/completions" if chat else "/v1/completions"
    try:
        status, payload = post(server, path, raw)
        if status == want and error_object(payload):
            tally.count("malformed", f"refused {status}")
        else:
            tally.lose("malformed", f"{raw[:60]!r} -> {status} {payload[:200]!r} (want {want})")
    except Exception as e:
        tally.lose("malformed", repr(e))


def do_stall(server, tally):
    """Half a request, then silence: the server must drop it after --timeout (not hold it)."""
    try:
        s = socket.create_connection((server.host, server.port), timeout=30)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: soak\r\nContent-Length: 100\r\n\r\n{\"prompt\"")
        t0 = time.time()
        try:
            reply = s.recv(4096)
        except ConnectionResetError:
            reply = b""
        s.close()
        if reply == b"" or reply.startswith(b"HTTP/1.1 4"):
            tally.count("stalled request", "dropped after %d s" % round(time.time() - t0))
        else:
            tally.lose("stalled request", repr(reply[:100]))
    except Exception as e:
        tally.lose("stalled request", repr(e))


def do_get(server, tally, rng):
    path = rng.choice(["/health", "/v1/models", "/metrics", "/version"])
    try:
        status, payload = server.request("GET", path, timeout=60)
        if status == 200:
            tally.count("GET", "answered")
        else:
            tally.lose("GET", f"{path}: {status}")
    except Exception as e:
        tally.lose("GET", f"{path}: {e!r}")


ACTIONS = [("request", 36), ("stream", 24), ("abort", 8), ("disconnect", 6), ("oversized", 3), ("malformed", 15),
           ("stall", 2), ("get", 6)]


def client(server, tally, pool, seed, deadline):
    rng = random.Random(seed)
    names = [a for a, _ in ACTIONS]
    weights = [w for _, w in ACTIONS]
    while time.time() < deadline:
        action = rng.choices(names, weights)[0]
        if action == "request":
            do_pool(server, tally, pool, rng.randrange(len(pool)), stream=False)
        elif action == "stream":
            do_pool(server, tally, pool, rng.randrange(len(pool)), stream=True)
        elif action == "abort":
            do_abort(server, tally, pool, rng)
        elif action == "disconnect":
            do_disconnect(server, tally, rng)
        elif action == "oversized":
            do_oversized(server, tally)
        elif action == "malformed":
            do_malformed(server, tally, rng)
        elif action == "stall":
            do_stall(server, tally)
        else:
            do_get(server, tally, rng)


def run_clients(server, tally, pool, clients, seed, seconds):
    """`clients` threads running the mix for `seconds`; returns the seconds it took."""
    t0 = time.time()
    threads = [threading.Thread(target=client, args=(server, tally, pool, seed * 7919 + c, t0 + seconds))
               for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.time() - t0


def mappings(server):
    """RSS in KiB per mapping of the server process: {(address range, name): kib}."""
    out, key = {}, None
    with open(f"/proc/{server.server_pid()}/smaps") as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
                key = (head[0], head[5] if len(head) > 5 else "[anon]")
            elif head[0] == "Rss:":
                out[key] = int(head[1])
    return out


def settle(server, idle_seconds=35, seconds=120):
    """Waits until the engine is idle, then `idle_seconds` (the server gives KV pages back after 1 s
    idle, and drops its prefix cache after 30 s), then until the RSS stops falling; returns the RSS
    in KiB."""
    deadline = time.time() + seconds
    while time.time() < deadline and server.metric("ditto:num_requests_running") > 0:
        time.sleep(0.5)
    time.sleep(idle_seconds)
    last = server.rss_kib()
    while time.time() < deadline:
        time.sleep(2)
        now = server.rss_kib()
        if now >= last - 1024:
            return now
        last = now
    return server.rss_kib()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ditto", default=os.environ.get("DITTO_BIN", "build/tools/ditto"))
    ap.add_argument("--model", default="models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--warm-seconds", type=float, default=30, help="the mix before the baseline")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--server-args", default="", help="extra `ditto serve` flags")
    ap.add_argument("--report", help="write the report as JSON here")
    args = ap.parse_args()

    server = Server("--timeout", "5", "--max-request-body-bytes", str(MAX_BODY), *args.server_args.split(),
                    ditto=args.ditto, model=args.model)
    tally = Tally()
    try:
        pool = make_pool(random.Random(args.seed))
        # First answers: every pool request alone on an idle server, half of them streamed.
        for i in range(len(pool)):
            do_pool(server, tally, pool, i, stream=i % 2 == 1, phase="alone")
        # Warm: the whole mix at full concurrency for --warm-seconds, so that every buffer bounded
        # by the engine's step (--max-num-batched-tokens) and by the connections has reached its
        # size; then the baseline.
        run_clients(server, tally, pool, args.clients, args.seed + 1, args.warm_seconds)
        baseline = settle(server)
        maps_before = mappings(server)
        elapsed = run_clients(server, tally, pool, args.clients, args.seed, args.seconds)
        after = settle(server)
        maps_after = mappings(server)
        grown = sorted(((maps_after.get(k, 0) - maps_before.get(k, 0), k) for k in set(maps_before) | set(maps_after)),
                       reverse=True)[:6]
        # The server is whole: every pool request once more, compared with its first answer.
        for i in range(len(pool)):
            do_pool(server, tally, pool, i, stream=i % 2 == 0, phase="final")
        alive = server.proc.poll() is None
    finally:
        server.close()

    total = sum(sum(v.values()) for v in tally.counts.values())
    lost = sum(v.get("lost", 0) for v in tally.counts.values())
    mismatches = sum(v.get("MISMATCH", 0) for v in tally.counts.values())
    ratio = after / baseline
    report = {"clients": args.clients, "seconds": round(elapsed, 1), "model": args.model, "requests": total,
              "by_kind": tally.counts, "lost": lost, "mismatches": mismatches, "distinct_pool_answers": len(tally.first),
              "rss_kib_baseline": baseline, "rss_kib_after": after, "rss_ratio": round(ratio, 4),
              "server_alive": alive, "lost_examples": tally.lost[:10], "mismatch_examples": tally.mismatches[:10]}
    print(f"soak: {args.clients} clients, {elapsed:.0f} s, {total} requests on {args.model}")
    for kind in sorted(tally.counts):
        print(f"  {kind:24s} " + ", ".join(f"{k} {v}" for k, v in sorted(tally.counts[kind].items())))
    print(f"  lost {lost}, mismatches {mismatches}")
    print(f"  memory: warm baseline {baseline / 1024:.1f} MiB, after the load {after / 1024:.1f} MiB "
          f"(ratio {ratio:.3f}, limit 1.10)")
    if ratio > 1.10:
        print("  mappings that grew most: " + "; ".join(f"{name} {rng} +{d / 1024:.1f} MiB" for d, (rng, name) in grown))
    for line in tally.lost[:10] + tally.mismatches[:10]:
        print("  ! " + line)
    if args.report:
        with open(args.report, "w") as f:
            json.dump(report, f, indent=1)
    ok = lost == 0 and mismatches == 0 and ratio <= 1.10 and alive
    print("soak: " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
