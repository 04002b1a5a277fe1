#!/usr/bin/env python3
"""Structured-output cost: decode tokens/s with a JSON Schema constraint vs without, at batch 1 and
batch 32, for ditto serve and (on a GGUF file) llama-server's json_schema, in one run.

Every request is a chat turn asking for an inventory, max_tokens MAX_TOKENS, temperature 0, EOS
ignored; the constrained ones carry SCHEMA, an object whose "items" array has minItems 40, so no
output can finish before max_tokens: constrained and free requests generate the same number of
tokens, and the difference in tokens/s is the constraint's cost (mask computation and masking).
Batch 1 is BATCH1_REQUESTS requests one after another; batch 32 is 32 clients at once, one request
each. Each server is started, warmed up (one free and one constrained request: the grammar
engine's vocabulary is built on first use), timed over the four runs (free / constrained at batch
1 and 32), and stopped; ROUNDS rounds alternate the engines (ditto, llama.cpp, ditto, ...) so
both see the same machine load, and the median round counts. Throughput is the completion tokens
the server reports (usage) over the wall time from the first request to the last answer.

ditto gets the constraint as OpenAI's response_format {"type": "json_schema"} when it accepts it,
else as vLLM's structured_outputs; llama-server as response_format (its json_schema support).
llama-server runs with -t THREADS -np 32 and a context of 32 requests' tokens.

  bench/structured.py --model FILE.gguf|DIR [--no-llama] [--ditto build/tools/ditto] [--json]

Standard library only: run with /usr/bin/python3.
"""

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from embed import LLAMA_BIN, REPO, free_port, wait_ready  # noqa: E402

SCHEMA = {
    "type": "object",
    "properties": {
        "store": {"type": "string", "maxLength": 24},
        "items": {
            "type": "array",
            "minItems": 40,
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "maxLength": 16},
                    "qty": {"type": "integer", "minimum": 0, "maximum": 999},
                    "in_stock": {"type": "boolean"},
                },
                "required": ["name", "qty", "in_stock"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["store", "items"],
    "additionalProperties": False,
}
QUESTION = "List the inventory of a small hardware store as JSON: store name, then items with quantities."


def post(port, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {data[:500]!r}")
    return json.loads(data)


def body(engine, constrained, max_tokens, k, style):
    # The store number leads the message, and every run has its own numbers: no run finds another's
    # prompt in a prefix cache (both engines keep one), so free and constrained runs prefill alike.
    b = {"model": "bench", "messages": [{"role": "user", "content": f"Store {k}. {QUESTION}"}],
         "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}
    if constrained:
        if engine == "ditto" and style == "structured_outputs":
            b["structured_outputs"] = {"json": SCHEMA}
        else:
            b["response_format"] = {"type": "json_schema", "json_schema": {"name": "inventory", "schema": SCHEMA}}
    return b


def timed(port, bodies, clients):
    results = [None] * len(bodies)
    nxt = [0]
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                i = nxt[0]
                nxt[0] += 1
            if i >= len(bodies):
                return
            results[i] = post(port, bodies[i])

    start = time.time()
    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.time() - start
    tokens = sum(r["usage"]["completion_tokens"] for r in results)
    return {"tokens_per_s": tokens / seconds, "tokens": tokens, "seconds": seconds,
            "texts": [r["choices"][0]["message"]["content"] for r in results]}


def run_server(engine, args, log):
    port = free_port()
    if engine == "ditto":
        cmd = [args.ditto, "serve", args.model, "--port", str(port), "--threads", str(args.threads),
               "--served-model-name", "bench"]
    else:
        cmd = [args.llama_server, "-m", args.model, "--port", str(port), "-t", str(args.threads), "-np", "32",
               "-c", str(32 * (args.max_tokens + 96)), "--no-webui"]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_ready(port, proc)
        style = "response_format"
        if engine == "ditto":  # response_format if this ditto takes it, else vLLM's structured_outputs
            try:
                post(port, body(engine, True, 4, -1, style))
            except RuntimeError:
                style = "structured_outputs"
        post(port, body(engine, False, 4, -1, style))
        post(port, body(engine, True, 4, -2, style))
        out = {}
        run = 0
        for batch, n, clients in (("batch1", args.batch1_requests, 1), ("batch32", 32, 32)):
            for constrained in (False, True):
                run += 1
                bodies = [body(engine, constrained, args.max_tokens, 1000 * run + k, style) for k in range(n)]
                out[f"{batch}_{'json' if constrained else 'free'}"] = timed(port, bodies, clients)
        return out
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="a GGUF file (both engines) or a model directory (--no-llama)")
    p.add_argument("--ditto", default=os.path.join(REPO, "build", "tools", "ditto"))
    p.add_argument("--llama-server", default=os.path.join(LLAMA_BIN, "llama-server"))
    p.add_argument("--no-llama", action="store_true", help="ditto only (a model llama.cpp cannot read)")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--max-tokens", type=int, default=96)
    p.add_argument("--batch1-requests", type=int, default=4)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()

    engines = ["ditto"] + ([] if args.no_llama else ["llama.cpp"])
    rounds = {e: [] for e in engines}
    with open("/tmp/bench-structured-servers.log", "w") as log:
        for r in range(args.rounds):
            for e in engines:
                res = run_server(e, args, log)
                rounds[e].append(res)
                if not args.json:
                    print(f"round {r + 1} {e:9s}: " + ", ".join(
                        f"{k} {v['tokens_per_s']:.1f} tok/s" for k, v in res.items()), flush=True)
    report = {"model": os.path.basename(args.model.rstrip("/")), "max_tokens": args.max_tokens}
    for e in engines:
        med = {k: statistics.median(rd[k]["tokens_per_s"] for rd in rounds[e]) for k in rounds[e][0]}
        key = "ditto" if e == "ditto" else "llama_cpp"
        for k, v in med.items():
            report[f"{key}_{k}_tokens_per_s"] = v
        for b in ("batch1", "batch32"):
            report[f"{key}_{b}_overhead"] = 1.0 - med[f"{b}_json"] / med[f"{b}_free"]
        # Every constrained output of the last round must parse (a JSON prefix cut by max_tokens is
        # expected: minItems 40 never lets it close), so count the ones that start as the schema says.
        texts = rounds[e][-1]["batch32_json"]["texts"]
        report[f"{key}_constrained_outputs_start_right"] = sum(t.lstrip().startswith('{') for t in texts)
    if "llama.cpp" in engines:
        for b in ("batch1", "batch32"):
            report[f"{b}_json_ratio"] = report[f"ditto_{b}_json_tokens_per_s"] / report[f"llama_cpp_{b}_json_tokens_per_s"]
    if args.json:
        print(json.dumps(report))
    else:
        for k, v in report.items():
            print(f"{k}: {v:.3f}" if isinstance(v, float) else f"{k}: {v}")


if __name__ == "__main__":
    main()
