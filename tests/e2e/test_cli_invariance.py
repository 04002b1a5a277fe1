"""`ditto score` and `ditto generate` give a sequence the same bits whatever else is in the batch,
whatever the thread count and KV block size. JSON floats are printed as the shortest decimal that
round-trips, so equal strings mean equal float32 bits; --logprobs-out rows are compared as bytes."""
import json

import numpy as np
import pytest

from conftest import run_ditto

A = "151643,785,3974,13876,38835,34208,916,279,15678,5562,13,576,3974,13876,38835,34208,916,279,15678,5562,13,100,2000,30000,150000,77,88,99,1234,4321,9876,11,12,13,14"
B = "9707,11,1879,0"
C = ",".join(str((i * 7919) % 151643) for i in range(1, 60))


@pytest.fixture(scope="module")
def model(ditto_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("qwen3") / "m"
    run_ditto(ditto_bin, "make-test-model", "--preset", "qwen3-0.6b", "--num-hidden-layers", "2",
              "--seed", "3", "--out", out)
    return out


def score_lines(ditto_bin, model, seqs, *extra):
    args = ["score", "--model", model, "--json", *extra]
    for s in seqs:
        args += ["--token-ids", s]
    out = run_ditto(ditto_bin, *args).stdout.splitlines()
    by_seq = {}
    for line in out:
        obj = json.loads(line)
        seq = obj.pop("sequence")
        by_seq.setdefault(seq, []).append(json.dumps(obj, sort_keys=True))
    return by_seq, out


def test_score_alone_equals_score_in_batch(ditto_bin, model):
    alone, _ = score_lines(ditto_bin, model, [A])
    assert len(alone[0]) == len(A.split(",")) - 1
    together, _ = score_lines(ditto_bin, model, [B, A, C])
    assert together[1] == alone[0]
    last, _ = score_lines(ditto_bin, model, [C, B, A])
    assert last[2] == alone[0]


def test_score_threads_and_block_size_do_not_change_bits(ditto_bin, model):
    base, _ = score_lines(ditto_bin, model, [A, B], "--threads", "1")
    for extra in (["--threads", "2"], ["--threads", "3", "--block-size", "5"], ["--block-size", "64"]):
        assert score_lines(ditto_bin, model, [A, B], *extra)[0] == base, extra


def test_full_logprob_rows_are_bitwise_equal(ditto_bin, model, tmp_path):
    vocab = 151936
    n_a, n_b = len(A.split(",")), len(B.split(","))
    run_ditto(ditto_bin, "score", "--model", model, "--token-ids", A, "--logprobs-out", tmp_path / "alone.f32")
    run_ditto(ditto_bin, "score", "--model", model, "--token-ids", B, "--token-ids", A,
              "--logprobs-out", tmp_path / "batch.f32")
    alone = np.fromfile(tmp_path / "alone.f32", dtype="<f4").reshape(n_a, vocab)
    batch = np.fromfile(tmp_path / "batch.f32", dtype="<f4").reshape(n_b + n_a, vocab)
    assert alone.tobytes() == batch[n_b:].tobytes()
    # Rows are log-probabilities: they exponentiate to 1.
    np.testing.assert_allclose(np.exp(alone.astype(np.float64)).sum(axis=1), 1.0, rtol=1e-5)


def test_generate_alone_equals_generate_in_batch(ditto_bin, model):
    def gen(*prompts, extra=()):
        args = ["generate", "--model", model, "--max-tokens", "12", "--json", *extra]
        for p in prompts:
            args += ["--prompt-token-ids", p]
        return [json.loads(l) for l in run_ditto(ditto_bin, *args).stdout.splitlines()]

    alone = gen(A)[0]
    assert len(alone["token_ids"]) == 12 and alone["finish_reason"] == "length"
    batch = gen(B, C, A, extra=("--threads", "1"))
    assert batch[2]["token_ids"] == alone["token_ids"]
    assert gen(A, extra=("--threads", "2", "--block-size", "7"))[0]["token_ids"] == alone["token_ids"]


@pytest.mark.parametrize("config", [
    '{"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_min": 1, "prompt_lookup_max": 3}',
    "draft"])
def test_generate_with_speculative_decoding_equals_without(ditto_bin, model, config):
    """--speculative-config changes no token of greedy or seeded sampled generation, in a batch
    (the draft is the model itself)."""
    if config == "draft":
        config = json.dumps({"model": str(model), "num_speculative_tokens": 3})

    def gen(*extra):
        args = ["generate", "--model", model, "--max-tokens", "40", "--json", "--prompt-token-ids", A,
                "--prompt-token-ids", B, *extra]
        return [json.loads(l) for l in run_ditto(ditto_bin, *args).stdout.splitlines()]

    for sampling in ((), ("--temperature", "0.8", "--seed", "5")):
        plain = gen(*sampling)
        assert len(plain) == 2 and all(len(g["token_ids"]) == 40 for g in plain)
        assert gen(*sampling, "--speculative-config", config) == plain


def test_greedy_generation_follows_score(ditto_bin, model):
    """Decode and prefill agree: each generated token is the argmax that `score` reports for the
    finished sequence, with the same logprob bits (contract row 9 at temperature 0)."""
    gen = json.loads(run_ditto(ditto_bin, "generate", "--model", model, "--max-tokens", "6", "--json",
                               "--prompt-token-ids", B).stdout)
    full = B + "," + ",".join(map(str, gen["token_ids"]))
    lines, _ = score_lines(ditto_bin, model, [full])
    scored = [json.loads(l) for l in lines[0]][len(B.split(",")) - 1:]
    assert [s["token_id"] for s in scored] == gen["token_ids"]
    for s in scored:
        assert s["top_token_id"] == s["token_id"] and s["top_logprob"] == s["logprob"]


def test_text_and_chat_prompts(ditto_bin, model, tmp_path):
    """A text prompt is its tokenization (with the tokenizer's special tokens); a chat prompt is
    its rendered template (encoded without adding any); outputs are the same bits in a batch;
    the text is the decoded token ids without the stop token."""
    text = "Batch invariance: the same question, the same answer — 同じ答え. 🙂"
    ids = json.loads(run_ditto(ditto_bin, "tokenize", "--model", model, "--text", text).stdout)["ids"]
    by_text = json.loads(run_ditto(ditto_bin, "generate", "--model", model, "--max-tokens", "8", "--json",
                                   "--prompt", text).stdout)
    by_ids = json.loads(run_ditto(ditto_bin, "generate", "--model", model, "--max-tokens", "8", "--json",
                                  "--prompt-token-ids", ",".join(map(str, ids))).stdout)
    assert by_text["token_ids"] == by_ids["token_ids"]
    decoded = run_ditto(ditto_bin, "detokenize", "--model", model, "--skip-special-tokens", "--input", "-",
                        input_text=json.dumps({"ids": by_text["token_ids"]}) + "\n")
    assert by_text["text"] == json.loads(decoded.stdout)["text"]

    chat = json.dumps([{"role": "system", "content": "Be brief."}, {"role": "user", "content": text}])
    kwargs = json.dumps({"enable_thinking": False})
    conv = tmp_path / "conv.jsonl"
    conv.write_text(json.dumps({"messages": json.loads(chat), "add_generation_prompt": True,
                                "enable_thinking": False}) + "\n")
    rendered = json.loads(run_ditto(ditto_bin, "render-chat", "--model", model, "--input", conv).stdout)["prompt"]
    assert rendered.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    chat_ids = json.loads(run_ditto(ditto_bin, "tokenize", "--model", model, "--no-add-special-tokens",
                                    "--text", rendered).stdout)["ids"]
    alone = json.loads(run_ditto(ditto_bin, "generate", "--model", model, "--max-tokens", "8", "--json",
                                 "--chat", chat, "--chat-template-kwargs", kwargs).stdout)
    from_ids = json.loads(run_ditto(ditto_bin, "generate", "--model", model, "--max-tokens", "8", "--json",
                                    "--prompt-token-ids", ",".join(map(str, chat_ids))).stdout)
    assert alone["token_ids"] == from_ids["token_ids"]
    batch = [json.loads(l) for l in run_ditto(
        ditto_bin, "generate", "--model", model, "--max-tokens", "8", "--json", "--threads", "1",
        "--chat", json.dumps([{"role": "user", "content": "hi"}]), "--chat", chat,
        "--chat-template-kwargs", kwargs).stdout.splitlines()]
    assert batch[1]["token_ids"] == alone["token_ids"] and batch[1]["text"] == alone["text"]
