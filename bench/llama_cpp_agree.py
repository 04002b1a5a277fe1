"""Do ditto and llama.cpp agree on the same GGUF file? Tokenization and greedy completions.

Called by `bench/llama_cpp.sh agree GGUF` (see bench/llama_cpp.md, "agree"). Both engines load the
one file: ditto (`ditto tokenize / render-chat / generate / score --model FILE.gguf`) and
llama.cpp (bench/llama_cpp_probe.cc over libllama). Prints one JSON report on stdout and a short
summary on stderr; exits 1 when a tokenization differs or a divergence is wide.

1. Tokenization of every prompt of --prompts (JSON lines {"name", "text"}): `ditto tokenize`
   (special tokens in the text encoded, the model's own add-special-tokens setting) against
   llama_tokenize(add_special = tokenizer.ggml.add_bos_token, parse_special = true); also the
   chat-rendered texts (below), both without added special tokens. Every difference is listed with
   both id lists and the first differing position.
2. Greedy completions, --max-tokens each, of every prompt as a completion (ditto's ids of the text)
   and as chat (the text as one user message, rendered by `ditto render-chat` with the file's
   tokenizer.chat_template and a generation prompt, tokenized without added special tokens as
   transformers' apply_chat_template does). Both engines get the same prompt ids, so only the model
   differs. Both take the argmax and do not stop at end-of-generation tokens (ditto's `ignore_eos`:
   EOS is an ordinary token; the probe never stops), so every stream is --max-tokens long. At the
   first step where two streams part:
     ditto_gap      = ditto's logprob of its token - its logprob of llama.cpp's token
     llama_cpp_gap  = llama.cpp's logprob of its token - its logprob of ditto's token
   (ditto's from `ditto score --logprobs-out` over the shared prefix, bit-identical to what its
   generate saw; llama.cpp's from the logits its own greedy decode used, the probe's `generate`).
   Both are >= 0. gap = the larger; margin_disagreement = their sum, how far the two engines
   disagree on the margin between the two tokens.
   Classes: near_tie (gap < --near-tie, 0.05 nats); wide (margin_disagreement above the noise
   bound: a bug until shown otherwise); within_noise otherwise. The noise bound is measured, not
   assumed: both engines' full log-softmax rows over every shared prefix (llama.cpp's by the
   probe's `score`, one batched decode) give, at each teacher-forced position, the same margin
   disagreement for ditto's top two tokens; the bound is --noise-factor (2) times its
   --noise-quantile (0.99) over all those positions, at least --wide-floor (0.1) -- twice, because
   streams part exactly where the engines disagree most. Two more yardsticks: llama.cpp against
   itself (its margin at the divergence in its one-token-a-decode generation vs in its batched
   score of the same ids; ditto's two are bit-identical, which the report checks), and, with
   --reference, the float64 reference (tests/reference/reference.py) on the exactly dequantized
   weights in three variants (REFERENCE_VARIANTS: exact; int8-rounded activations, as both
   engines compute; that plus ditto's bf16 KV cache): which token the exact model prefers at each
   divergence and by how much, and over every teacher-forced position how far each engine is from
   the exact model and how far each approximation alone moves the margins.
3. Stopping: ditto with its default stop (its end-of-sequence ids) against llama.cpp's stream
   cut at its first end-of-generation token (llama_vocab_is_eog, which also ends generation at
   texts such as <|endoftext|>): how many stopped outputs are identical, and why the others differ.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def run(cmd, stdin=None):
    p = subprocess.run(cmd, input=stdin, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"error: llama_cpp_agree: {' '.join(cmd[:3])} ... exited {p.returncode}:\n{p.stderr[-2000:]}")
    return p.stdout


def jsonl(text):
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def dumps(objs):
    return "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objs)


def first_difference(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def percentiles(values, qs=(50, 90, 99, 100)):
    if len(values) == 0:
        return {}
    return {("max" if q == 100 else f"p{q}"): round(float(np.percentile(values, q)), 4) for q in qs}


class Engines:
    """The two engines' command lines on one GGUF; `work` holds the transient row files."""

    def __init__(self, ditto, probe, gguf, threads, work):
        self.ditto, self.probe, self.gguf, self.threads, self.work = ditto, probe, gguf, threads, work

    def ditto_tokenize(self, texts, add_special_tokens=True):
        flag = [] if add_special_tokens else ["--no-add-special-tokens"]
        out = run([self.ditto, "tokenize", "--model", self.gguf, "--input", "-"] + flag,
                  dumps({"text": t} for t in texts))
        return [r["ids"] for r in jsonl(out)]

    def llama_tokenize(self, texts, add_special=None):
        lines = [{"text": t} if add_special is None else {"text": t, "add_special": add_special} for t in texts]
        return [r["ids"] for r in jsonl(run([self.probe, "tokenize", self.gguf], dumps(lines)))]

    def has_chat_template(self):
        """False for a file without tokenizer.chat_template (a base model): the chat half is skipped."""
        lines = dumps([{"messages": [{"role": "user", "content": "x"}], "add_generation_prompt": True}])
        p = subprocess.run([self.ditto, "render-chat", "--model", self.gguf, "--input", "-"], input=lines,
                           capture_output=True, text=True)
        return p.returncode == 0 or "no chat template" not in p.stderr

    def render_chat(self, texts):
        lines = [{"messages": [{"role": "user", "content": t}], "add_generation_prompt": True} for t in texts]
        out = run([self.ditto, "render-chat", "--model", self.gguf, "--input", "-"], dumps(lines))
        return [r["prompt"] for r in jsonl(out)]

    def pieces(self, ids):
        if not ids:
            return []
        out = run([self.ditto, "detokenize", "--model", self.gguf, "--input", "-"], dumps({"ids": [i]} for i in ids))
        return [r["text"] for r in jsonl(out)]

    def ditto_generate(self, prompts, max_tokens, ignore_eos, logprobs=None):
        reqs = [{"prompt_token_ids": ids, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": ignore_eos}
                for ids in prompts]
        if logprobs is not None:
            for r in reqs:
                r["logprobs"] = logprobs
        out = run([self.ditto, "generate", "--model", self.gguf, "--threads", str(self.threads),
                   "--prompts", "-"], dumps(reqs))
        by_id = {int(r["request_id"]): r["outputs"][0] for r in jsonl(out)}
        return [by_id[i] for i in range(len(prompts))]

    def llama_generate(self, prompts, refs, max_tokens):
        lines = [{"ids": p, "ref": r} for p, r in zip(prompts, refs)]
        return jsonl(run([self.probe, "generate", self.gguf, str(max_tokens), str(self.threads)], dumps(lines)))

    def llama_vocab(self):
        return json.loads(run([self.probe, "vocab", self.gguf]))

    def ditto_rows(self, seqs, vocab):
        """ditto's log-softmax rows of each sequence, [len(seq), vocab] float64 each."""
        path = os.path.join(self.work, "ditto_rows.f32")
        result = []
        for start in range(0, len(seqs), 8):  # 8 sequences a call keeps the rows file modest
            chunk = seqs[start:start + 8]
            cmd = [self.ditto, "score", "--model", self.gguf, "--threads", str(self.threads), "--logprobs-out", path]
            for s in chunk:
                cmd += ["--token-ids", ",".join(map(str, s))]
            run(cmd)
            rows = np.fromfile(path, dtype=np.float32).reshape(-1, vocab)
            if rows.shape[0] != sum(len(s) for s in chunk):
                sys.exit(f"error: llama_cpp_agree: ditto score wrote {rows.shape[0]} rows")
            offset = 0
            for s in chunk:
                result.append(rows[offset:offset + len(s)].astype(np.float64))
                offset += len(s)
        if seqs:
            os.remove(path)
        return result

    def llama_rows(self, seq, vocab):
        """llama.cpp's log-softmax rows of one sequence (the probe's score: one batched decode)."""
        path = os.path.join(self.work, "llama_rows.f32")
        run([self.probe, "score", self.gguf, ",".join(map(str, seq)), path])
        rows = np.fromfile(path, dtype=np.float32).reshape(-1, vocab).astype(np.float64)
        os.remove(path)
        return rows


def compare_tokenization(names, texts, ditto_ids, llama_ids):
    diffs = []
    for name, text, a, b in zip(names, texts, ditto_ids, llama_ids):
        if a != b:
            diffs.append({"name": name, "text": text, "first_difference": first_difference(a, b),
                          "ditto": a, "llama_cpp": b})
    return {"prompts": len(texts), "identical": len(texts) - len(diffs), "differences": diffs}


def prefix_noise(d_rows, l_rows):
    """Per teacher-forced position: how far the engines disagree on the margin between ditto's top
    two tokens, and on ditto's top token's logprob."""
    top2 = np.argsort(d_rows, axis=1)[:, -2:]
    i = np.arange(d_rows.shape[0])
    t1, t2 = top2[:, 1], top2[:, 0]
    margin = np.abs((d_rows[i, t1] - d_rows[i, t2]) - (l_rows[i, t1] - l_rows[i, t2]))
    return margin, np.abs(d_rows[i, t1] - l_rows[i, t1])


def divergence(c, d_rows, l_rows):
    """The numbers at the first step where ditto's and llama.cpp's streams part."""
    k = c["k"]
    d_tok, l_tok = c["ditto_tokens"][k], c["llama_tokens"][k]
    d, l_scored = d_rows[-1], l_rows[-1]
    top_l = c["llama_top2"][k]  # [id1, lp1, id2, lp2] from llama.cpp's own greedy decode
    ditto_gap = float(d[d_tok] - d[l_tok])
    llama_gap = float(top_l[1] - c["llama_ref_logprob"][k])
    llama_scored_gap = float(l_scored[l_tok] - l_scored[d_tok])
    d_top2 = np.argsort(d)[-2:][::-1]
    margin, top1 = prefix_noise(d_rows[:-1], l_rows[:-1])  # the rows before the divergence
    kl = (np.exp(d_rows) * (d_rows - l_rows)).sum(axis=1)
    return {
        "position": k,  # index into the generated tokens
        "ditto_token": d_tok, "llama_cpp_token": l_tok,
        "ditto_gap": round(ditto_gap, 4), "llama_cpp_gap": round(llama_gap, 4),
        "gap": round(max(ditto_gap, llama_gap), 4), "margin_disagreement": round(ditto_gap + llama_gap, 4),
        "ditto_top2": [[int(t), round(float(d[t]), 4)] for t in d_top2],
        "llama_cpp_top2": [[top_l[0], round(top_l[1], 4)], [top_l[2], round(top_l[3], 4)]],
        # The same position through the probe's batched score; llama.cpp is not batch-invariant,
        # so this margin differs from its generation's: how far it disagrees with itself.
        "llama_cpp_scored_gap": round(llama_scored_gap, 4),
        "llama_cpp_self_disagreement": round(abs(llama_gap - llama_scored_gap), 4),
        # ditto is: its generate's logprob equals its score's, bit for bit.
        "ditto_generate_equals_score": bool(np.float32(c["ditto_logprobs"][k]) == np.float32(d[d_tok])),
        "prefix_tokens": len(c["shared"]),
        "prefix_max_margin_disagreement": round(float(margin.max()), 4) if len(margin) else 0.0,
        "prefix_max_top1_diff": round(float(top1.max()), 4) if len(top1) else 0.0,
        "prefix_max_abs_diff": round(float(np.abs(d_rows - l_rows).max()), 4),  # any token, tails too
        "prefix_max_kl": float(f"{kl.max():.3g}"),
    }, margin, top1


# The float64 reference's variants (tests/reference/reference.py, GGUF weights dequantized exactly):
# the exact model; with activations rounded to int8 per block before every quantized matmul (what
# both engines do); and that plus a bf16 KV cache, ditto's numerics (docs/NUMERICS.md; llama.cpp
# keeps an f16 KV cache, 3 bits more, closer to exact).
REFERENCE_VARIANTS = {
    "exact": {},
    "int8_activations": {"quantize_activations": True},
    "ditto_numerics": {"quantize_activations": True, "kv_cache_dtype": "bfloat16"},
}


def top2_margins(rows, t1, t2):
    i = np.arange(rows.shape[0])
    return rows[i, t1] - rows[i, t2]


def reference_check(reference, gguf, c, d_rows, l_rows, pooled):
    """The reference's margin between the two tokens at the divergence, and (pooled over every
    teacher-forced position of the prefix, on ditto's top two tokens there) how far each engine's
    margin is from each variant's and how far the variants' approximations move it."""
    ref = dict(zip(REFERENCE_VARIANTS, reference.log_softmax_variants(gguf, c["shared"],
                                                                      list(REFERENCE_VARIANTS.values()))))
    dv = c["divergence"]
    d_tok, l_tok = dv["ditto_token"], dv["llama_cpp_token"]
    dv["reference"] = {f"margin_{name}": round(float(r[-1][d_tok] - r[-1][l_tok]), 4) for name, r in ref.items()}
    exact = ref["exact"][-1]
    dv["reference"]["exact_prefers"] = "ditto" if exact[d_tok] > exact[l_tok] else "llama.cpp"
    dv["reference"]["exact_top1_is_either"] = int(exact.argmax()) in (d_tok, l_tok)
    top2 = np.argsort(d_rows, axis=1)[:, -2:]
    t1, t2 = top2[:, 1], top2[:, 0]
    m = {name: top2_margins(r, t1, t2) for name, r in ref.items()}
    m["ditto"], m["llama_cpp"] = top2_margins(d_rows, t1, t2), top2_margins(l_rows, t1, t2)
    for key, a, b in (("ditto_vs_exact", "ditto", "exact"), ("llama_cpp_vs_exact", "llama_cpp", "exact"),
                      ("ditto_vs_ditto_numerics", "ditto", "ditto_numerics"),
                      ("llama_cpp_vs_int8_activations", "llama_cpp", "int8_activations"),
                      ("int8_activations_vs_exact", "int8_activations", "exact"),
                      ("bf16_kv_cache_effect", "ditto_numerics", "int8_activations")):
        pooled.setdefault(key, []).append(np.abs(m[a] - m[b]))


def stop_check(cases, stopped, eog_llama):
    """ditto's default stop against llama.cpp's stream cut at its first end-of-generation token."""
    same, diffs = 0, []
    for c, s in zip(cases, stopped):
        l_cut = c["llama_tokens"][:c["llama_eog"] + 1] if c["llama_eog"] >= 0 else c["llama_tokens"]
        d_cut = s["token_ids"]
        if d_cut == l_cut:
            same += 1
            continue
        k = first_difference(d_cut, l_cut)  # both cuts keep the token they stopped at
        if k == len(l_cut) and l_cut[-1] in eog_llama:
            why = f"llama.cpp stops at token {l_cut[-1]}, ditto does not"
        elif k == len(d_cut) and s["finish_reason"] == "stop":
            why = f"ditto stops at token {d_cut[-1]}, llama.cpp does not"
        else:
            why = "the streams part before either stops"
        diffs.append({"kind": c["kind"], "name": c["name"], "why": why,
                      "ditto_tokens": len(d_cut), "llama_cpp_tokens": len(l_cut)})
    return {"identical": same, "of": len(cases), "differences": diffs}


def agree(engines, args):
    prompts = [json.loads(line) for line in open(args.prompts, encoding="utf-8") if line.strip()]
    names, texts = [p["name"] for p in prompts], [p["text"] for p in prompts]
    vocab_info = engines.llama_vocab()
    vocab = vocab_info["n_vocab"]
    timings = {}

    t = time.time()
    ditto_ids = engines.ditto_tokenize(texts)
    tokenization = compare_tokenization(names, texts, ditto_ids, engines.llama_tokenize(texts))
    kinds = ("completion", "chat") if engines.has_chat_template() else ("completion",)
    chat_texts = engines.render_chat(texts) if "chat" in kinds else []
    chat_ids = engines.ditto_tokenize(chat_texts, add_special_tokens=False) if chat_texts else []
    chat_tokenization = compare_tokenization(names if chat_texts else [], chat_texts, chat_ids,
                                             engines.llama_tokenize(chat_texts, add_special=False) if chat_texts
                                             else [])
    timings["tokenize"] = round(time.time() - t, 1)

    cases = []
    for kind, all_ids in (("completion", ditto_ids), ("chat", chat_ids))[:len(kinds)]:
        for name, ids in zip(names, all_ids):
            if not ids:
                sys.exit(f"error: llama_cpp_agree: prompt {name!r} has no tokens to generate from")
            cases.append({"kind": kind, "name": name, "prompt_ids": ids})
    prompt_ids = [c["prompt_ids"] for c in cases]
    t = time.time()
    for c, o in zip(cases, engines.ditto_generate(prompt_ids, args.max_tokens, ignore_eos=True, logprobs=0)):
        c["ditto_tokens"] = o["token_ids"]
        c["ditto_logprobs"] = [step["logprob"] for step in o["logprobs"]]
    stopped = engines.ditto_generate(prompt_ids, args.max_tokens, ignore_eos=False)
    timings["ditto_generate"] = round(time.time() - t, 1)
    t = time.time()
    for c, o in zip(cases, engines.llama_generate(prompt_ids, [c["ditto_tokens"] for c in cases], args.max_tokens)):
        c["llama_tokens"], c["llama_top2"] = o["token_ids"], o["top2"]
        c["llama_ref_logprob"], c["llama_eog"] = o["ref_logprob"], o["eog"]
    timings["llama_cpp_generate"] = round(time.time() - t, 1)

    # Divergences: both engines' rows over each shared prefix (prompt + agreed tokens).
    t = time.time()
    parted = [c for c in cases if c["ditto_tokens"] != c["llama_tokens"]]
    for c in parted:
        c["k"] = first_difference(c["ditto_tokens"], c["llama_tokens"])
        c["shared"] = c["prompt_ids"] + c["ditto_tokens"][:c["k"]]
    d_rows_all = engines.ditto_rows([c["shared"] for c in parted], vocab)
    reference, pooled, t_ref = None, {}, 0.0
    if args.reference:
        sys.path.insert(0, args.reference)
        import reference  # tests/reference/reference.py
    margins, top1s = [], []
    for c, d_rows in zip(parted, d_rows_all):
        l_rows = engines.llama_rows(c["shared"], vocab)
        c["divergence"], margin, top1 = divergence(c, d_rows, l_rows)
        margins.append(margin)
        top1s.append(top1)
        if reference is not None:
            t_case = time.time()
            reference_check(reference, args.gguf, c, d_rows, l_rows, pooled)
            t_ref += time.time() - t_case
    timings["score_divergences"] = round(time.time() - t - t_ref, 1)
    if reference is not None:
        timings["reference"] = round(t_ref, 1)
    margins = np.concatenate(margins) if margins else np.zeros(0)
    top1s = np.concatenate(top1s) if top1s else np.zeros(0)
    noise_bound = max(args.wide_floor, args.noise_factor * float(np.quantile(margins, args.noise_quantile))
                      if len(margins) else 0.0)

    pieces = engines.pieces([tok for c in parted for tok in (c["divergence"]["ditto_token"],
                                                             c["divergence"]["llama_cpp_token"])])
    div_list = []
    for i, c in enumerate(parted):
        dv = c["divergence"]
        dv["class"] = ("near_tie" if dv["gap"] < args.near_tie else
                       "wide" if dv["margin_disagreement"] > noise_bound else "within_noise")
        div_list.append({"kind": c["kind"], "name": c["name"], "class": dv.pop("class"), **dv,
                         "ditto_piece": pieces[2 * i], "llama_cpp_piece": pieces[2 * i + 1],
                         "prompt_ids": c["prompt_ids"], "ditto_tokens": c["ditto_tokens"],
                         "llama_cpp_tokens": c["llama_tokens"]})
    completions = {"max_tokens": args.max_tokens, "kinds": list(kinds)}
    for kind in kinds:
        ks = [d for d in div_list if d["kind"] == kind]
        n = sum(c["kind"] == kind for c in cases)
        completions[kind] = {"prompts": n, "identical": n - len(ks),
                             **{cl: sum(d["class"] == cl for d in ks) for cl in ("near_tie", "within_noise", "wide")}}
    completions["gap"] = percentiles([d["gap"] for d in div_list], (0, 10, 25, 50, 75, 90, 100))
    edges = (0, 0.05, 0.1, 0.2, 0.5, 1.0)
    completions["gap_histogram"] = {f"[{lo},{hi})": sum(lo <= d["gap"] < hi for d in div_list)
                                    for lo, hi in zip(edges, edges[1:])}
    completions["gap_histogram"][">=1.0"] = sum(d["gap"] >= 1.0 for d in div_list)
    completions["margin_disagreement"] = percentiles([d["margin_disagreement"] for d in div_list])
    completions["noise"] = {
        "teacher_forced_positions": int(len(margins)),
        "margin_disagreement": percentiles(margins),  # ditto's top two, both engines' rows
        "top1_logprob_diff": percentiles(top1s),
        "llama_cpp_self_disagreement": percentiles([d["llama_cpp_self_disagreement"] for d in div_list]),
        "quantile": args.noise_quantile, "factor": args.noise_factor, "wide_floor": args.wide_floor,
        "bound": round(noise_bound, 4),
        "near_tie": args.near_tie,
    }
    if reference is not None and div_list:
        r = [d["reference"] for d in div_list]
        completions["reference"] = {
            "exact_prefers_ditto": sum(x["exact_prefers"] == "ditto" for x in r),
            "exact_prefers_llama_cpp": sum(x["exact_prefers"] == "llama.cpp" for x in r),
            "exact_top1_is_neither": sum(not x["exact_top1_is_either"] for x in r),
            "abs_margin_exact": percentiles([abs(x["margin_exact"]) for x in r]),
            # Over every teacher-forced position, |margin difference| on ditto's top two tokens.
            "teacher_forced": {k: percentiles(np.concatenate(v)) for k, v in pooled.items()},
        }
    completions["divergences"] = div_list

    stopping = stop_check(cases, stopped, set(vocab_info["eog_ids"]))
    # ditto's stop ids are not printed by any command: the ones it was seen stopping at.
    stopping["ditto_stopped_at"] = sorted({s["token_ids"][-1] for s in stopped
                                           if s["finish_reason"] == "stop" and s["token_ids"]})
    stopping["gguf_eos_eot_eom_ids"] = vocab_info["gguf_eos_eot_eom_ids"]
    stopping["llama_cpp_eog_ids"] = vocab_info["eog_ids"]
    stopping["llama_cpp_eog_pieces"] = engines.pieces(vocab_info["eog_ids"])

    ok = (not tokenization["differences"] and not chat_tokenization["differences"]
          and all(d["class"] != "wide" for d in div_list))
    return {
        "gguf": args.gguf, "engine": args.engine, "ok": ok,
        "settings": {
            "ditto_tokenize": "ditto tokenize: special tokens in the text encoded, the model's add-special-tokens",
            "llama_cpp_tokenize": f"llama_tokenize(add_special={str(vocab_info['add_bos']).lower()} "
                                  "(tokenizer.ggml.add_bos_token), parse_special=true)",
            "chat": "ditto render-chat (one user message, add_generation_prompt), then ditto tokenize "
                    "--no-add-special-tokens; llama.cpp tokenizes the same text with add_special=false",
            "generation": f"the same prompt ids to both; argmax, {args.max_tokens} tokens, no stop at EOS "
                          "(ditto: temperature 0, ignore_eos, through its batching engine; llama.cpp: the "
                          "probe's generate, the prompt in one decode then a token a decode, f16 KV cache)",
            "threads": args.threads,
        },
        "tokenization": tokenization,
        "chat_tokenization": chat_tokenization,
        "completions": completions,
        "stopping": stopping,
        "timings_s": timings,
    }


def summary(report):
    t, g, n = report["tokenization"], report["completions"], report["completions"]["noise"]
    out = [f"agree: {report['gguf']} ({report['engine']})",
           f"  tokenization identical: {t['identical']}/{t['prompts']} texts, "
           f"{report['chat_tokenization']['identical']}/{report['chat_tokenization']['prompts']} chat-rendered"]
    for d in t["differences"] + report["chat_tokenization"]["differences"]:
        k = d["first_difference"]
        out.append(f"    DIFFERS {d['name']}: from id {k}: ditto {d['ditto'][k:k + 6]} llama.cpp {d['llama_cpp'][k:k + 6]}")
    for kind in g["kinds"]:
        s = g[kind]
        out.append(f"  {kind}s identical ({g['max_tokens']} tokens): {s['identical']}/{s['prompts']}; the others part at"
                   f" {s['near_tie']} near ties, {s['within_noise']} within noise, {s['wide']} wide")
    if g["divergences"]:
        h = ", ".join(f"{k} {v}" for k, v in g["gap_histogram"].items())
        out.append(f"  gap at the first difference (nats): median {g['gap']['p50']}, max {g['gap']['max']}; {h}")
        out.append(f"  noise: margin disagreement at {n['teacher_forced_positions']} teacher-forced positions: median "
                   f"{n['margin_disagreement']['p50']}, p99 {n['margin_disagreement']['p99']}, max "
                   f"{n['margin_disagreement']['max']}; llama.cpp vs itself (decode vs batched score): max "
                   f"{n['llama_cpp_self_disagreement']['max']}; wide above {n['bound']}")
    if "reference" in g:
        r, tf = g["reference"], g["reference"]["teacher_forced"]
        out.append(f"  float64 reference: the exact model prefers ditto's token at {r['exact_prefers_ditto']}, "
                   f"llama.cpp's at {r['exact_prefers_llama_cpp']} divergences, by |margin| median "
                   f"{r['abs_margin_exact']['p50']}, max {r['abs_margin_exact']['max']}")
        out.append(f"    teacher-forced margin distance, median / p99: ditto-exact {tf['ditto_vs_exact']['p50']} / "
                   f"{tf['ditto_vs_exact']['p99']}, llama.cpp-exact {tf['llama_cpp_vs_exact']['p50']} / "
                   f"{tf['llama_cpp_vs_exact']['p99']}; int8 activations alone {tf['int8_activations_vs_exact']['p50']} / "
                   f"{tf['int8_activations_vs_exact']['p99']}, bf16 KV cache alone {tf['bf16_kv_cache_effect']['p50']} / "
                   f"{tf['bf16_kv_cache_effect']['p99']}")
    shown = sorted(g["divergences"], key=lambda d: -d["margin_disagreement"])
    shown = [d for d in shown if d["class"] == "wide"] or shown[:3]
    for d in shown:
        flag = "WIDE, LOOK HERE: " if d["class"] == "wide" else "largest: "
        out.append(f"    {flag}{d['kind']} {d['name']} step {d['position']}: ditto {d['ditto_token']} "
                   f"{d['ditto_piece']!r} vs llama.cpp {d['llama_cpp_token']} {d['llama_cpp_piece']!r}; gaps "
                   f"{d['ditto_gap']} / {d['llama_cpp_gap']} (llama.cpp batched: {d['llama_cpp_scored_gap']})")
    st = report["stopping"]
    why = {}
    for d in st["differences"]:
        why[d["why"]] = why.get(d["why"], 0) + 1
    out.append(f"  stopped outputs identical: {st['identical']}/{st['of']} {why or ''}; ditto seen stopping at"
               f" {st['ditto_stopped_at']}, llama.cpp's end-of-generation ids {st['llama_cpp_eog_ids']}"
               f" {st['llama_cpp_eog_pieces']}")
    out.append(f"  {'ok' if report['ok'] else 'NOT OK'} in {report['seconds']} s")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--ditto", required=True, help="ditto binary")
    ap.add_argument("--probe", required=True, help="llama_cpp_probe binary")
    ap.add_argument("--prompts", required=True, help='JSON lines {"name", "text"}')
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--near-tie", type=float, default=0.05)
    ap.add_argument("--noise-quantile", type=float, default=0.99)
    ap.add_argument("--noise-factor", type=float, default=2.0)
    ap.add_argument("--wide-floor", type=float, default=0.1)
    ap.add_argument("--reference", help="tests/reference: also ask the float64 reference at each divergence")
    ap.add_argument("--engine", default="llama.cpp", help="llama.cpp's version, for the report")
    args = ap.parse_args()
    t0 = time.time()
    with tempfile.TemporaryDirectory() as work:
        report = agree(Engines(args.ditto, args.probe, args.gguf, args.threads, work), args)
    report["seconds"] = round(time.time() - t0, 1)
    print(json.dumps(report, ensure_ascii=False, indent=1))
    print(summary(report), file=sys.stderr)
    sys.exit(0 if report["ok"] else 1)


if __name__ == "__main__":
    main()
