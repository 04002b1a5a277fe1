#!/usr/bin/env python3
"""A bounded load generator for OpenAI-compatible servers (ditto serve, llama-server, vLLM).

NUM_CLIENTS threads take the next of NUM_REQUESTS fixed requests until none is left, so the
run ends by itself. Every request streams
(POST /v1/completions or /v1/chat/completions, "stream": true, usage requested) and asks for
exactly OUTPUT_TOKENS tokens ("max_tokens" with "ignore_eos": true). Prompts are made of common
English words that are one token each in the Qwen3 and Llama 3 vocabularies, so a prompt of n
words is about n tokens; lengths are drawn uniformly from PROMPT_TOKENS * (1 +- PROMPT_SPREAD)
with --seed, and the server's usage counts are what the report uses.

Measured, all from this run: requests/s, output and total tokens/s over the wall time from the
first request sent to the last response finished; time to first token (request sent to the
first chunk carrying text); inter-token latency (gaps between consecutive chunks carrying text);
time per output token ((last chunk - first chunk) / (completion_tokens - 1)); end-to-end
latency; errors. Standard library only (threads + http.client): run with /usr/bin/python3.

  bench/serve.py --base-url http://127.0.0.1:8000 --model bench --num-clients 16 \
      --num-requests 64 --prompt-tokens 128 --output-tokens 32 [--chat] [--json]
"""

import argparse
import http.client
import json
import random
import sys
import threading
import time
import urllib.parse

# One token each, after a space, in Qwen3's and Llama 3's byte-level BPE vocabularies (checked
# with `ditto tokenize` and against Llama 3.1's tokenizer.json); the pre-tokenizer splits at
# spaces, so neighbouring words never merge.
WORDS = (
    "time year people way day man thing woman life child world school state family student group "
    "country problem hand part place case week company system program question work government "
    "number night point home water room mother area money story fact month lot right study book "
    "eye job word business issue side kind head house service friend father power hour game line "
    "end member law car city community name president team minute idea kid body information back "
    "parent face others level office door health person art war history party result change "
    "morning reason research girl guy moment air teacher force education foot boy age policy "
    "process music market sense nation plan college interest death experience effect use class "
    "control care field development role effort rate heart drug show leader light voice wife "
    "police mind price report decision son view relationship town road arm difference value "
    "building action model season society tax director position player record paper space ground "
    "form event official matter center couple site project activity star table need court oil "
    "situation cost industry figure street image phone data picture practice piece land product "
    "doctor wall patient worker news test movie north love support technology step baby computer "
    "type attention film tree source organization hair window evidence population truth song "
    "river garden stone bridge ocean"
).split()


def make_requests(args):
    """The fixed request mix: (prompt text, seed) for each of num_requests, from --seed only.
    Prompts are independent random word sequences: they share no prefix longer than a word or
    two, so no server gets prefix-cache hits between them."""
    rng = random.Random(args.seed)
    lo = max(1, round(args.prompt_tokens * (1 - args.prompt_spread)))
    hi = max(lo, round(args.prompt_tokens * (1 + args.prompt_spread)))
    requests = []
    for i in range(args.num_requests + args.warmup):
        n = rng.randint(lo, hi)
        requests.append((" ".join(rng.choice(WORDS) for _ in range(n)), args.seed * 1000003 + i))
    return requests[args.warmup:], requests[:args.warmup]


def byte_level_bytes():
    """GPT-2's byte-to-character table, inverted: character of a byte-level BPE token -> byte.
    Printable bytes stand for themselves; the others map to U+0100 onwards, in byte order."""
    printable = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF]
    others = [b for b in range(256) if b not in printable]
    table = {chr(b): b for b in printable}
    table.update({chr(256 + n): b for n, b in enumerate(others)})
    return table


def partial_utf8_tokens(tokenizer_json):
    """Ids of the byte-level BPE tokens whose bytes are not complete UTF-8 on their own."""
    with open(tokenizer_json, encoding="utf-8") as f:
        model = json.load(f)["model"]
    to_byte = byte_level_bytes()
    ids = []
    for text, i in model["vocab"].items():
        try:
            bytes(to_byte[c] for c in text).decode("utf-8")
        except (UnicodeDecodeError, KeyError):
            ids.append(i)
    return sorted(ids)


def request_body(args, prompt, seed):
    body = {
        "model": args.model,
        "max_tokens": args.output_tokens,
        "ignore_eos": True,  # vLLM's and llama-server's name; the output length is then fixed
        "temperature": args.temperature,
        "seed": seed,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if args.logit_bias:
        body["logit_bias"] = args.logit_bias
    if args.chat:
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return json.dumps(body).encode()


class Result:
    __slots__ = ("sent", "chunk_times", "done", "prompt_tokens", "completion_tokens", "error")

    def __init__(self):
        self.sent = 0.0
        self.chunk_times = []  # perf_counter() at each parsed chunk that carried text
        self.done = 0.0
        self.prompt_tokens = None
        self.completion_tokens = None
        self.error = None


def chunk_text(event, chat):
    choices = event.get("choices") or []
    if not choices:
        return ""
    if chat:
        delta = choices[0].get("delta") or {}
        return (delta.get("content") or "") + (delta.get("reasoning_content") or "")
    return choices[0].get("text") or ""


def stream_one(conn, path, body, chat, result):
    """Sends one request on conn and reads its SSE stream into result; raises on transport errors."""
    result.sent = time.perf_counter()
    conn.request("POST", path, body=body, headers={
        "Content-Type": "application/json", "Accept": "text/event-stream"})
    resp = conn.getresponse()
    if resp.status != 200:
        result.error = "HTTP %d: %s" % (resp.status, resp.read()[:300].decode("utf-8", "replace"))
        return
    buf = b""
    finished = False
    while not finished:
        data = resp.read1(65536)
        if not data:
            break
        now = time.perf_counter()
        buf += data
        # Events are "data: {...}" lines; blank lines, comments (":") and other fields are skipped.
        *lines, buf = buf.split(b"\n")
        for line in lines:
            line = line.rstrip(b"\r")
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                finished = True
                break
            event = json.loads(payload)
            if "error" in event:
                result.error = "stream error: " + json.dumps(event["error"])[:300]
                finished = True
                break
            if chunk_text(event, chat):
                result.chunk_times.append(now)
            usage = event.get("usage")
            if usage:
                result.prompt_tokens = usage.get("prompt_tokens")
                result.completion_tokens = usage.get("completion_tokens")
    if not finished and result.error is None:
        result.error = "stream ended without data: [DONE]"
    result.done = time.perf_counter()


def run_clients(args, requests):
    """Runs requests on num_clients threads; returns (results in request order, start, end)."""
    url = urllib.parse.urlsplit(args.base_url)
    path = (url.path.rstrip("/") or "") + ("/v1/chat/completions" if args.chat else "/v1/completions")
    bodies = [request_body(args, prompt, seed) for prompt, seed in requests]
    results = [Result() for _ in bodies]
    next_index = [0]
    lock = threading.Lock()

    def client():
        # A new connection per request: llama-server closes a connection after a streamed
        # response although it announces keep-alive. Connecting on loopback costs ~0.1 ms, and is
        # inside each request's timing.
        while True:
            with lock:
                i = next_index[0]
                if i >= len(bodies):
                    break
                next_index[0] += 1
            conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=args.timeout)
            try:
                stream_one(conn, path, bodies[i], args.chat, results[i])
            except (OSError, http.client.HTTPException, ValueError) as e:
                results[i].error = "%s: %s" % (type(e).__name__, e)
                results[i].done = time.perf_counter()
            finally:
                conn.close()

    threads = [threading.Thread(target=client, daemon=True)
               for _ in range(min(args.num_clients, len(bodies)))]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, start, time.perf_counter()


def percentile(values, q):
    """The q-th percentile (0-100) with linear interpolation between order statistics (NumPy's
    default); None for no values."""
    if not values:
        return None
    v = sorted(values)
    pos = (len(v) - 1) * q / 100.0
    i = int(pos)
    j = min(i + 1, len(v) - 1)
    return v[i] + (v[j] - v[i]) * (pos - i)


def ms(x):
    return None if x is None else round(x * 1000.0, 2)


def summarize(args, results, start, end):
    ok = [r for r in results if r.error is None]
    errors = [r.error for r in results if r.error is not None]
    seconds = end - start
    # Output tokens: the server's usage count, or the chunks with text where usage is missing.
    usage_missing = sum(1 for r in ok if r.completion_tokens is None)
    output_tokens = sum(r.completion_tokens if r.completion_tokens is not None else len(r.chunk_times)
                        for r in ok)
    prompt_tokens = sum(r.prompt_tokens or 0 for r in ok)
    ttft = [r.chunk_times[0] - r.sent for r in ok if r.chunk_times]
    itl = [b - a for r in ok for a, b in zip(r.chunk_times, r.chunk_times[1:])]
    tpot = [(r.chunk_times[-1] - r.chunk_times[0]) / (r.completion_tokens - 1) for r in ok
            if r.chunk_times and r.completion_tokens and r.completion_tokens > 1]
    e2e = [r.done - r.sent for r in ok]
    return {
        "base_url": args.base_url,
        "endpoint": "/v1/chat/completions" if args.chat else "/v1/completions",
        "model": args.model,
        "num_clients": args.num_clients,
        "num_requests": args.num_requests,
        "prompt_tokens_target": args.prompt_tokens,
        "prompt_spread": args.prompt_spread,
        "output_tokens_target": args.output_tokens,
        "temperature": args.temperature,
        "seed": args.seed,
        "logit_bias_tokens": len(args.logit_bias or {}),
        "seconds": round(seconds, 3),
        "completed": len(ok),
        "errors": len(errors),
        "error_examples": errors[:3],
        "prompt_tokens": prompt_tokens,
        "prompt_tokens_mean": round(prompt_tokens / len(ok), 1) if ok else None,
        "output_tokens": output_tokens,
        "output_tokens_from_chunks": usage_missing,  # requests without usage: chunks were counted
        "output_length_mismatches": sum(1 for r in ok if r.completion_tokens is not None
                                        and r.completion_tokens != args.output_tokens),
        "content_chunks": sum(len(r.chunk_times) for r in ok),
        "requests_per_s": round(len(ok) / seconds, 3),
        "output_tokens_per_s": round(output_tokens / seconds, 2),
        "total_tokens_per_s": round((prompt_tokens + output_tokens) / seconds, 2),
        "ttft_ms_p50": ms(percentile(ttft, 50)),
        "ttft_ms_p99": ms(percentile(ttft, 99)),
        "itl_ms_p50": ms(percentile(itl, 50)),
        "itl_ms_p99": ms(percentile(itl, 99)),
        "tpot_ms_p50": ms(percentile(tpot, 50)),
        "tpot_ms_p99": ms(percentile(tpot, 99)),
        "e2e_ms_p50": ms(percentile(e2e, 50)),
        "e2e_ms_p99": ms(percentile(e2e, 99)),
    }


def print_table(s):
    print("%s%s  model %s: %d clients, %d requests (prompt ~%d tokens, output %d tokens)" % (
        s["base_url"], s["endpoint"], s["model"], s["num_clients"], s["num_requests"],
        s["prompt_tokens_target"], s["output_tokens_target"]))
    print("completed        %10d in %.2f s, %d errors%s" % (
        s["completed"], s["seconds"], s["errors"],
        "" if not s["errors"] else " (first: %s)" % s["error_examples"][0]))
    print("tokens           %10d prompt (mean %s), %d output (%d of other length than asked)" % (
        s["prompt_tokens"], s["prompt_tokens_mean"], s["output_tokens"], s["output_length_mismatches"]))
    print("requests/s       %10.3f" % s["requests_per_s"])
    print("output tokens/s  %10.2f" % s["output_tokens_per_s"])
    print("total tokens/s   %10.2f" % s["total_tokens_per_s"])
    for name, key in (("TTFT", "ttft"), ("ITL", "itl"), ("TPOT", "tpot"), ("E2E", "e2e")):
        print("%-16s %10s ms p50 %10s ms p99" % (name, s[key + "_ms_p50"], s[key + "_ms_p99"]))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8000")
    p.add_argument("--model", default="bench", help="the request's \"model\" field")
    p.add_argument("--chat", action="store_true", help="POST /v1/chat/completions instead of /v1/completions")
    p.add_argument("--num-clients", type=int, default=16, help="concurrent clients (threads)")
    p.add_argument("--num-requests", type=int, default=64, help="requests in all; the run ends after them")
    p.add_argument("--prompt-tokens", type=int, default=128, help="mean prompt length, tokens (words)")
    p.add_argument("--prompt-spread", type=float, default=0.25,
                   help="prompt lengths are uniform in prompt_tokens * (1 +- spread)")
    p.add_argument("--output-tokens", type=int, default=32, help="max_tokens of every request (ignore_eos)")
    p.add_argument("--temperature", type=float, default=0.8, help="sampling temperature (seeded per request)")
    p.add_argument("--seed", type=int, default=0, help="seed of the request mix")
    p.add_argument("--warmup", type=int, default=1, help="untimed requests sent one by one before the run")
    p.add_argument("--timeout", type=float, default=600.0, help="socket timeout per request, seconds")
    p.add_argument("--exclude-partial-utf8-tokens", metavar="TOKENIZER_JSON",
                   help="logit_bias -100 on every token of this byte-level BPE tokenizer.json whose "
                   "bytes are not complete UTF-8, so that all output is valid UTF-8 (llama-server "
                   "aborts a stream whose text is not; see bench/serve.md)")
    p.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    args = p.parse_args()
    if args.num_clients < 1 or args.num_requests < 1 or args.prompt_tokens < 1 or args.output_tokens < 1:
        p.error("--num-clients, --num-requests, --prompt-tokens and --output-tokens must be at least 1")
    if not 0 <= args.prompt_spread < 1:
        p.error("--prompt-spread must be in [0, 1)")

    args.logit_bias = None
    if args.exclude_partial_utf8_tokens:
        args.logit_bias = {str(i): -100 for i in partial_utf8_tokens(args.exclude_partial_utf8_tokens)}
    requests, warmup = make_requests(args)
    if warmup:
        warm_args = argparse.Namespace(**{**vars(args), "num_clients": 1})
        results, _, _ = run_clients(warm_args, warmup)
        bad = [r.error for r in results if r.error]
        if bad:  # the server answered; the run's own requests show whether errors persist
            print("serve.py: warm-up request failed: %s" % bad[0], file=sys.stderr)
    summary = summarize(args, *run_clients(args, requests))
    summary["client_cpu_s"] = round(time.process_time(), 3)  # this process's CPU, start to here
    if args.json:
        print(json.dumps(summary))
    else:
        print_table(summary)
    return 1 if summary["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
