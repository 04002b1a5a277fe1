"""Compares llama.cpp on a GGUF written by `ditto export-gguf` with ditto on the model directory.

Called by bench/llama_cpp.sh validate. Inputs: both engines' full log-softmax rows for the same
token ids ([positions, vocab] little-endian float32: `ditto score --logprobs-out` and
`llama_cpp_probe score`), and both engines' token ids for every text of a JSON-lines corpus.
Prints one JSON object and exits 1 when the GGUF looks wrong:

- logprobs: max_abs_diff over every (position, token) must stay below --max-abs-diff (default
  0.1). Both engines keep bf16 weights and float32 activations but round differently (llama.cpp
  rounds activations to bf16 for its BF16 dot products and keeps an f16 KV cache), which moves
  log-probabilities by a few hundredths; a wrong tensor layout (e.g. Llama's q/k rows left
  unpermuted) moves them by whole units after the first position.
- MoE (--moe-routing, the output of bench/moe_routing.py): an engine that picks the (k+1)-th
  expert where the k-th and (k+1)-th router logits nearly tie changes that token's output by a
  tenth or so, legitimately. The logprob check then passes when each engine stays below
  --max-abs-diff from the float64 reference routed as that engine routed.
- tokenization: every text must get the same ids, except for differences with a known cause in
  llama.cpp itself, counted per cause: it does not apply tokenizer.json's normalizer (Qwen's NFC);
  it makes the text of end-of-generation tokens such as "</s>" special even where the vocabulary
  has it as a normal token (src/llama-vocab.cpp); its Unicode tables may classify characters newer
  than Python's unicodedata differently.
"""

import argparse
import json
import sys
import unicodedata

import numpy as np

# Token texts llama.cpp turns into end-of-generation control tokens whatever the GGUF says
# (src/llama-vocab.cpp, the special_eog_ids loop), and FIM texts it recognises by name.
LLAMA_CPP_FORCED_SPECIAL = [
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
]


def compare_logprobs(ditto_path, llama_path, vocab):
    a = np.fromfile(ditto_path, dtype=np.float32).reshape(-1, vocab).astype(np.float64)
    b = np.fromfile(llama_path, dtype=np.float32).reshape(-1, vocab).astype(np.float64)
    if a.shape != b.shape:
        sys.exit(f"error: llama_cpp_compare: ditto has {a.shape} rows, llama.cpp {b.shape}")
    diff = np.abs(a - b)
    kl = (np.exp(a) * (a - b)).sum(axis=1)  # KL(ditto || llama.cpp) per position, nats
    # Where the top tokens differ: how close ditto's best two were (a near-tie flips on rounding).
    top2 = np.sort(a, axis=1)[:, -2:]
    flips = [{"position": int(p), "ditto_top2_margin": float(top2[p, 1] - top2[p, 0])}
             for p in np.nonzero(a.argmax(axis=1) != b.argmax(axis=1))[0]]
    return {
        "positions": int(a.shape[0]),
        "vocab": vocab,
        "max_abs_diff": float(diff.max()),
        "max_abs_diff_position_0": float(diff[0].max()),  # no attention over other tokens
        "mean_abs_diff": float(diff.mean()),
        "max_kl": float(kl.max()),
        "top1_agreement": float((a.argmax(axis=1) == b.argmax(axis=1)).mean()),
        "top1_disagreements": flips,
        "logprob_std": float(a.std(axis=1).mean()),  # the scale the differences are small against
    }


def cause(text, vocab_texts):
    if unicodedata.normalize("NFC", text) != text:
        return "llama.cpp does not normalize (NFC)"
    if any(t in text and t in vocab_texts for t in LLAMA_CPP_FORCED_SPECIAL):
        return "llama.cpp forces an end-of-generation text special"
    if any(unicodedata.category(ch) == "Cn" for ch in text):
        return f"characters newer than Unicode {unicodedata.unidata_version}"
    return "unexplained"


def compare_tokens(corpus, ditto_ids, llama_ids, vocab_texts):
    texts = [json.loads(line)["text"] for line in open(corpus, encoding="utf-8") if line.strip()]
    a = [json.loads(line)["ids"] for line in open(ditto_ids)]
    b = [json.loads(line)["ids"] for line in open(llama_ids)]
    if not len(texts) == len(a) == len(b):
        sys.exit(f"error: llama_cpp_compare: {len(texts)} texts, {len(a)} ditto, {len(b)} llama.cpp lines")
    by_cause, examples = {}, []
    for text, x, y in zip(texts, a, b):
        if x == y:
            continue
        c = cause(text, vocab_texts)
        by_cause[c] = by_cause.get(c, 0) + 1
        if c == "unexplained" or by_cause[c] <= 2:  # two examples of each cause
            k = next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
            examples.append({"text": text[:60], "cause": c, "first_difference": k,
                             "ditto": str(x[k:k + 6]), "llama_cpp": str(y[k:k + 6])})
    differing = sum(by_cause.values())
    return {"texts": len(texts), "identical": len(texts) - differing, "differing": differing,
            "by_cause": by_cause, "examples": examples}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--ditto-rows", required=True)
    ap.add_argument("--llama-rows", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--ditto-ids", required=True)
    ap.add_argument("--llama-ids", required=True)
    ap.add_argument("--max-abs-diff", type=float, default=0.1)
    ap.add_argument("--moe-routing", help="bench/moe_routing.py's JSON (MoE models)")
    args = ap.parse_args()
    config = json.load(open(f"{args.model}/config.json"))
    tokenizer = json.load(open(f"{args.model}/tokenizer.json", encoding="utf-8"))
    vocab_texts = set(tokenizer["model"]["vocab"]) | {t["content"] for t in tokenizer["added_tokens"]}
    logprobs = compare_logprobs(args.ditto_rows, args.llama_rows, config["vocab_size"])
    tokens = compare_tokens(args.corpus, args.ditto_ids, args.llama_ids, vocab_texts)
    logprobs_ok = logprobs["max_abs_diff"] < args.max_abs_diff
    routing = None
    if args.moe_routing:
        r = json.load(open(args.moe_routing))
        routing = {k: v for k, v in r.items() if k not in ("model", "per_position")}
        logprobs_ok = logprobs_ok or (
            r["llama_cpp_vs_reference_with_llama_cpp_routing"] < args.max_abs_diff and
            r["ditto_vs_reference_with_inferred_routing"] < args.max_abs_diff)
    ok = logprobs_ok and "unexplained" not in tokens["by_cause"]
    out = {"model": args.model, "gguf": args.gguf, "ok": ok, "logprobs": logprobs}
    if routing is not None:
        out["moe_routing"] = routing
    out["tokenization"] = tokens
    print(json.dumps(out, ensure_ascii=False, indent=1))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
