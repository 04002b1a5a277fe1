#!/usr/bin/env python3
"""Embedding throughput: ditto serve vs llama-server --embeddings on the same GGUF file, in one run.

Both servers get the same POST /v1/embeddings requests: NUM_REQUESTS requests of BATCH documents
each (a document is DOC_TOKENS * (1 +- 0.5) words that are one token each in Qwen3's vocabulary),
sent by CLIENTS threads at once. Each server is started, warmed up with one request, timed over
the whole set, then stopped, ROUNDS times alternating (ditto, llama.cpp, ditto, ...), so both see
the same machine load; the median round counts. Throughput is the servers' own usage.prompt_tokens
summed, over the wall time from the first request sent to the last answer read. The embeddings of
the two engines are compared too (cosine per document; LAST pooling, L2-normalized): the same
model, so they agree to within the two engines' roundings.

llama-server runs with --embeddings --pooling last, -t THREADS, -np CLIENTS·BATCH parallel slots
(each document of a batch is one slot's task), a context of that many slots' documents, and
-b = -ub = 2048 (a causal LAST-pooled embedding must fit one micro-batch). ditto serve runs with
--threads THREADS and its defaults; its pooling comes from the file's {arch}.pooling_type key.

  bench/embed.py --gguf FILE.gguf [--llama-server PATH] [--ditto build/tools/ditto] [--json]

Standard library only: run with /usr/bin/python3.
"""

import argparse
import http.client
import json
import math
import os
import random
import socket
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve import WORDS  # noqa: E402  one token each in Qwen3's vocabulary

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LLAMA_BIN = os.path.expanduser("~/.cache/ditto-bench/llama.cpp-node-llama-cpp-3.21.1/build/bin")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, proc, seconds=600):
    end = time.time() + seconds
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError("server not ready")


def post(port, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    c.request("POST", "/v1/embeddings", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {data[:500]!r}")
    return json.loads(data)


def documents(args):
    rng = random.Random(args.seed)
    words = list(WORDS)
    docs = []
    for _ in range(args.num_requests * args.batch):
        n = max(4, int(args.doc_tokens * (0.5 + rng.random())))
        docs.append(" ".join(rng.choice(words) for _ in range(n)))
    return [docs[i * args.batch:(i + 1) * args.batch] for i in range(args.num_requests)]


def timed_run(port, batches, clients):
    results = [None] * len(batches)
    next_index = [0]
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                i = next_index[0]
                next_index[0] += 1
            if i >= len(batches):
                return
            results[i] = post(port, {"model": "bench", "input": batches[i]})

    start = time.time()
    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.time() - start
    tokens = sum(r["usage"]["prompt_tokens"] for r in results)
    vectors = [d["embedding"] for r in results for d in sorted(r["data"], key=lambda d: d["index"])]
    return tokens / seconds, tokens, seconds, vectors


def serve(cmd, port, batches, clients, log):
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_ready(port, proc)
        post(port, {"model": "bench", "input": batches[0][:1]})  # warm-up
        return timed_run(port, batches, clients)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gguf", required=True)
    p.add_argument("--ditto", default=os.path.join(REPO, "build", "tools", "ditto"))
    p.add_argument("--llama-server", default=os.path.join(LLAMA_BIN, "llama-server"))
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--num-requests", type=int, default=8)
    p.add_argument("--batch", type=int, default=16, help="documents per request")
    p.add_argument("--clients", type=int, default=2)
    p.add_argument("--doc-tokens", type=int, default=128)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--llama-parallel", type=int, default=0,
                   help="llama-server -np (default: clients x batch, every document of a burst in a slot)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()

    batches = documents(args)
    slots = args.llama_parallel or args.clients * args.batch
    longest = max(len(d.split()) for b in batches for d in b) + 8
    rows = {"ditto": [], "llama.cpp": []}
    vectors = {}
    with open(os.path.join("/tmp", "bench-embed-servers.log"), "w") as log:
        for r in range(args.rounds):
            for name in ("ditto", "llama.cpp"):
                port = free_port()
                if name == "ditto":
                    cmd = [args.ditto, "serve", args.gguf, "--port", str(port), "--threads", str(args.threads),
                           "--served-model-name", "bench"]
                else:
                    cmd = [args.llama_server, "-m", args.gguf, "--embeddings", "--pooling", "last", "--port",
                           str(port), "-t", str(args.threads), "-np", str(slots), "-c", str(slots * longest),
                           "-b", "2048", "-ub", "2048", "--no-webui"]
                tps, tokens, seconds, vecs = serve(cmd, port, batches, args.clients, log)
                rows[name].append((tps, tokens, seconds))
                vectors[name] = vecs
                if not args.json:
                    print(f"round {r + 1} {name:9s}: {tokens} tokens in {seconds:.2f} s = {tps:.1f} tokens/s",
                          flush=True)
    med = {k: statistics.median(t for t, _, _ in v) for k, v in rows.items()}
    cosines = [cosine(a, b) for a, b in zip(vectors["ditto"], vectors["llama.cpp"])]
    report = {
        "gguf": os.path.basename(args.gguf),
        "documents": args.num_requests * args.batch,
        "tokens": rows["ditto"][0][1],
        "llama_cpp_tokens": rows["llama.cpp"][0][1],
        "ditto_tokens_per_s": med["ditto"],
        "llama_cpp_tokens_per_s": med["llama.cpp"],
        "ratio": med["ditto"] / med["llama.cpp"],
        "min_cosine": min(cosines),
        "mean_cosine": sum(cosines) / len(cosines),
    }
    if args.json:
        print(json.dumps(report))
    else:
        print(f"ditto {report['ditto_tokens_per_s']:.1f} tokens/s, llama.cpp {report['llama_cpp_tokens_per_s']:.1f} "
              f"tokens/s (medians of {args.rounds}): ratio {report['ratio']:.2f}x; embeddings agree: cosine "
              f"min {report['min_cosine']:.6f}, mean {report['mean_cosine']:.6f} over {len(cosines)} documents")


if __name__ == "__main__":
    main()
