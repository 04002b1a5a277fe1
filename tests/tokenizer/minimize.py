#!/usr/bin/env python3
"""Shrinks strings on which ditto's token ids differ from the JS oracle's to minimal ones.

    /usr/bin/python3 tests/tokenizer/minimize.py --model DIR [--no-add-special-tokens] \
        (--text STRING | --input texts.jsonl) [--limit 20]

For each input string that mismatches, removes ever smaller runs of characters (delta
debugging, one batch of candidates per step, each batch run once through `ditto tokenize` and
js_tokenize.mjs) while the ids still differ, and prints the minimal string (as ascii() and as
code points) with both id lists. DITTO_BIN as in the parity test (default build/tools/ditto).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]


def tokenize_both(model, texts, add, ditto):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8", delete=False) as f:
        for t in texts:
            f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
        path = f.name
    flag = "--add-special-tokens" if add else "--no-add-special-tokens"
    try:
        outs = []
        for cmd in ([ditto, "tokenize", "--model", model, "--input", path, flag],
                    ["node", HERE / "js_tokenize.mjs", "--model", model, "--input", path, flag]):
            proc = subprocess.run([str(c) for c in cmd], capture_output=True, check=True)
            outs.append([json.loads(l)["ids"] for l in proc.stdout.decode().split("\n") if l])
        return outs
    finally:
        os.unlink(path)


def minimize(model, text, add, ditto):
    chars = list(text)
    k = max(1, len(chars) // 2)
    while True:
        candidates = [chars[:i] + chars[i + k:] for i in range(0, len(chars), k)]
        candidates = [c for c in candidates if c]
        hit = None
        per_batch = max(1, 2_000_000 // max(1, len(chars)))  # ~2M characters per run
        for b in range(0, len(candidates), per_batch):
            batch = candidates[b:b + per_batch]
            got, want = tokenize_both(model, ["".join(c) for c in batch], add, ditto)
            hit = next((c for c, g, w in zip(batch, got, want) if g != w), None)
            if hit is not None:
                break
        if hit is not None:
            chars = hit
            k = min(k, max(1, len(chars) // 2))
        elif k > 1:
            k //= 2
        else:
            break
    s = "".join(chars)
    (got,), (want,) = tokenize_both(model, [s], add, ditto)
    return s, got, want


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--no-add-special-tokens", dest="add", action="store_false")
    ap.add_argument("--text")
    ap.add_argument("--input")
    ap.add_argument("--limit", type=int, default=20)
    args = ap.parse_args()
    ditto = os.environ.get("DITTO_BIN", str(REPO / "build" / "tools" / "ditto"))
    if args.text is not None:
        texts = [args.text]
    else:
        with open(args.input, encoding="utf-8") as f:
            texts = [json.loads(l)["text"] for l in f.read().split("\n") if l]
    got, want = tokenize_both(args.model, texts, args.add, ditto)
    bad = [t for t, g, w in zip(texts, got, want) if g != w]
    print(f"{len(bad)} of {len(texts)} strings differ; minimizing up to {args.limit}")
    seen = set()
    for t in sorted(bad, key=len)[:args.limit]:
        s, g, w = minimize(args.model, t, args.add, ditto)
        if s in seen:
            continue
        seen.add(s)
        print(f"{ascii(s)}  code points {' '.join(f'U+{ord(c):04X}' for c in s)}")
        print(f"  ditto {g}\n  js    {w}\n  (from {ascii(t[:80])}{'...' if len(t) > 80 else ''})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
