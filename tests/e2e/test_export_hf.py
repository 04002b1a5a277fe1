"""`ditto export-hf` on the real models: SmolLM2-135M-Instruct (Llama; Q4_1 matrices, a Q8_0 tied
embedding) and Gemma 3 270M (Q4_K_M: Q5_0, Q8_0, Q4_K, Q6_K; norms stored as 1 + w).

- every tensor equals the GGUF's dequantized value as the independent float64 reader of
  tests/reference (gguf_checkpoint.GGUFTensors, written from llama.cpp's conventions) gives it:
  float32 exactly (every dequantized value rounded once to float32; Gemma's norms as that minus 1),
  bfloat16 its round-to-nearest-even;
- the directory loads: the tokenizer gives the same ids as the GGUF's on texts and on the chat
  template, the chat template renders the same text;
- a greedy continuation agrees with the GGUF's for its first AGREE_TOKENS tokens, and teacher-forced
  logprobs of the GGUF's greedy sequence differ by at most TOL_LOGPROB. The gap is not the export's
  (its tensors are checked exactly above): on a GGUF file ditto multiplies quantized weight blocks by
  activations quantized to 8 bits per 32-value block (docs/NUMERICS.md), on the directory float
  weights by bf16-rounded activations. Measured (2026-12-06, 27-28 positions): SmolLM2 float32 max
  0.243 mean 0.037, bfloat16 max 0.285 mean 0.044; Gemma 3 bfloat16 max 0.184 mean 0.036;
- what cannot be exported is refused by name.
"""
import json
import pathlib
import sys

import numpy as np
import pytest

from conftest import REPO, run_ditto

sys.path.insert(0, str(REPO / "tests" / "reference"))
import gguf_checkpoint  # noqa: E402
from gguf_reader import GGUFFile  # noqa: E402

SMOLLM2 = REPO / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA3 = REPO / "models" / "gemma-3-270m-q4_k_m.gguf"
TEXTS = ["Hello, world!", "  Two spaces, tabs\tand ünïcödé — 1234567 + 89 = ?", "<|im_start|>user\nHi<|im_end|>"]
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 17 + 25?"}]
# Teacher-forced logprob max and mean |Δ| between the export and the GGUF on the GGUF's greedy
# sequence (measured values in the docstring; the test prints this run's).
TOL_LOGPROB = 0.4
TOL_LOGPROB_MEAN = 0.08
AGREE_TOKENS = 8


def need(path: pathlib.Path) -> str:
    if not path.exists():
        pytest.skip(f"{path} missing (scripts/install-deps.sh)")
    return str(path)


def read_safetensors(path: pathlib.Path) -> dict:
    """name -> (dtype string, numpy array of the raw values: float32 or uint16 bf16 bits)."""
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        raw = data[8 + n + b:8 + n + end]
        dtype = {"F32": "<f4", "BF16": "<u2"}[e["dtype"]]
        out[name] = (e["dtype"], np.frombuffer(raw, dtype=dtype).reshape(e["shape"]))
    return out


def bf16_bits(x: np.ndarray) -> np.ndarray:
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


@pytest.fixture(scope="module")
def exports(ditto_bin, tmp_path_factory):
    """(model name, dtype) -> exported directory, made on first use."""
    made = {}

    def get(gguf: pathlib.Path, dtype: str) -> pathlib.Path:
        key = (gguf.name, dtype)
        if key not in made:
            out = tmp_path_factory.mktemp("hf") / f"{gguf.stem}-{dtype}"
            proc = run_ditto(ditto_bin, "export-hf", "--model", need(gguf), "--out", out, "--dtype", dtype)
            assert f"wrote {out}" in proc.stdout
            made[key] = out
        return made[key]

    return get


def gguf_tensors(gguf: pathlib.Path) -> gguf_checkpoint.GGUFTensors:
    g = GGUFFile(str(gguf))
    c = gguf_checkpoint.config_fields(g)
    return gguf_checkpoint.GGUFTensors(g, c["arch"], c["num_attention_heads"], c["num_key_value_heads"],
                                       c["head_dim"])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("gguf", [SMOLLM2, GEMMA3], ids=["smollm2", "gemma3"])
def test_tensors_are_the_dequantized_gguf(exports, gguf, dtype):
    if gguf == GEMMA3 and dtype == "float32":
        pytest.skip("Gemma 3 float32 (1 GB) is covered by its bf16 export and the unit tests")
    out = exports(gguf, dtype)
    config = json.loads((out / "config.json").read_text())
    assert config["torch_dtype"] == dtype
    tensors = read_safetensors(out / "model.safetensors")
    ref = gguf_tensors(gguf)
    gemma = config["model_type"].startswith("gemma")
    assert len(tensors) > 0
    for name, (st_dtype, values) in tensors.items():
        assert st_dtype == ("F32" if dtype == "float32" else "BF16"), name
        want = ref.f64(name).astype(np.float32)  # exact values, rounded once
        if gemma and name.endswith("norm.weight"):
            want = want - np.float32(1.0)  # llama.cpp stores 1 + w; Hugging Face keeps w
        assert values.shape == want.shape, name
        if dtype == "float32":
            assert np.array_equal(values.view(np.uint32), want.view(np.uint32)), name
        else:
            assert np.array_equal(values, bf16_bits(want)), name
    if not gemma:
        assert config["architectures"] == ["LlamaForCausalLM"] and config["tie_word_embeddings"] is True
        assert "lm_head.weight" not in tensors


@pytest.mark.parametrize("gguf", [SMOLLM2, GEMMA3], ids=["smollm2", "gemma3"])
def test_tokenizer_and_chat_template_match_the_gguf(ditto_bin, exports, gguf):
    out = exports(gguf, "bfloat16")
    lines = "".join(json.dumps({"text": t}) + "\n" for t in TEXTS)
    ids = [run_ditto(ditto_bin, "tokenize", "--model", m, "--input", "-", input_text=lines).stdout
           for m in (need(gguf), out)]
    assert ids[0] == ids[1] and ids[0].count("\n") == len(TEXTS)
    if gguf == SMOLLM2:  # Gemma 3 270M is a base model: its GGUF has a template, but chat is not its use
        chat = json.dumps({"messages": MESSAGES, "add_generation_prompt": True}) + "\n"
        rendered = [run_ditto(ditto_bin, "render-chat", "--model", m, "--input", "-", input_text=chat).stdout
                    for m in (need(gguf), out)]
        assert rendered[0] == rendered[1] and "What is 17 + 25?" in rendered[0]
    generation = json.loads((out / "generation_config.json").read_text())
    assert isinstance(generation["eos_token_id"], list) and generation["eos_token_id"]


def greedy(ditto_bin, model, prompt, max_tokens=16) -> list:
    proc = run_ditto(ditto_bin, "generate", "--model", model, "--prompt", prompt, "--max-tokens", max_tokens,
                     "--temperature", 0, "--json", "--quiet")
    return json.loads(proc.stdout.splitlines()[0])["token_ids"]


def scores(ditto_bin, model, ids) -> np.ndarray:
    proc = run_ditto(ditto_bin, "score", "--model", model, "--token-ids", ",".join(map(str, ids)), "--json")
    return np.array([json.loads(line)["logprob"] for line in proc.stdout.splitlines()], dtype=np.float64)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("gguf", [SMOLLM2, GEMMA3], ids=["smollm2", "gemma3"])
def test_greedy_continuation_agrees_with_the_gguf(ditto_bin, exports, gguf, dtype):
    if gguf == GEMMA3 and dtype == "float32":
        pytest.skip("Gemma 3 float32 (1 GB) is covered by its bf16 export and the unit tests")
    out = exports(gguf, dtype)
    prompt = "The capital of France is Paris. The capital of Germany is"
    from_gguf = greedy(ditto_bin, need(gguf), prompt)
    from_dir = greedy(ditto_bin, str(out), prompt)
    assert from_dir[:AGREE_TOKENS] == from_gguf[:AGREE_TOKENS], (from_gguf, from_dir)
    prompt_ids = json.loads(run_ditto(ditto_bin, "tokenize", "--model", need(gguf), "--text", prompt).stdout)["ids"]
    sequence = prompt_ids + from_gguf
    delta = np.abs(scores(ditto_bin, need(gguf), sequence) - scores(ditto_bin, str(out), sequence))
    print(f"{gguf.name} {dtype}: teacher-forced logprob max |Δ| {delta.max():.4g}, mean {delta.mean():.4g} "
          f"over {len(delta)} positions")
    assert delta.max() < TOL_LOGPROB and delta.mean() < TOL_LOGPROB_MEAN, (delta.max(), delta.mean())


def test_refusals(ditto_bin, exports, tmp_path):
    out = exports(SMOLLM2, "bfloat16")
    proc = run_ditto(ditto_bin, "export-hf", "--model", out, "--out", tmp_path / "x", check=False)
    assert proc.returncode != 0 and "is not a GGUF file" in proc.stderr
    proc = run_ditto(ditto_bin, "export-hf", "--model", need(SMOLLM2), "--out", tmp_path / "x", "--dtype", "float16",
                     check=False)
    assert proc.returncode != 0 and "--dtype 'float16'" in proc.stderr
    assert not (tmp_path / "x").exists()
