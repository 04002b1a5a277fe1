"""Tokenization of a large varied corpus by ditto and by llama.cpp on one GGUF file (bench/llama_cpp.sh tokens).

The corpus is tests/tokenizer's (tests/tokenizer/corpus/*.jsonl and test_spm_parity.extra_texts():
control bytes, rare scripts, emoji, whitespace runs, chat tokens). llama.cpp tokenizes through
bench/llama_cpp_probe (llama_tokenize with add_special as the file says and special tokens parsed),
ditto through `ditto tokenize`. Prints the count of identical id lists and the first differences.
"""
import argparse
import json
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "tokenizer"))
import test_spm_parity  # noqa: E402  (the corpus)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--ditto", required=True)
    ap.add_argument("--probe", required=True)
    args = ap.parse_args()
    texts = test_spm_parity.corpus_texts() + test_spm_parity.extra_texts()
    lines = "".join(json.dumps({"text": t}) + "\n" for t in texts)

    def ids(cmd):
        out = subprocess.run(cmd, input=lines, capture_output=True, text=True, check=True).stdout
        return [json.loads(line)["ids"] for line in out.splitlines()]

    llama = ids([args.probe, "tokenize", args.gguf])
    ditto = ids([args.ditto, "tokenize", "--model", args.gguf, "--input", "-"])
    assert len(llama) == len(ditto) == len(texts), (len(llama), len(ditto), len(texts))
    diffs = [(t, a, b) for t, a, b in zip(texts, ditto, llama) if a != b]
    print(f"tokens: {args.gguf}: {len(texts) - len(diffs)}/{len(texts)} texts tokenized identically")
    for t, a, b in diffs[:5]:
        print(f"  differs: {t[:60]!r}: ditto {a[:12]} llama.cpp {b[:12]}")
    sys.exit(1 if diffs else 0)


if __name__ == "__main__":
    main()
