"""`ditto generate --prompts in.jsonl`: the batching engine end to end. A request's output line is
the same bytes alone and inside a batch of other requests (any order, any token budget, a KV
cache small enough to preempt); bad lines get their own error while the others complete."""
import json
import random

import pytest

from conftest import run_ditto


@pytest.fixture(scope="module")
def model(ditto_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("qwen3jsonl") / "m"
    run_ditto(ditto_bin, "make-test-model", "--preset", "qwen3-0.6b", "--num-hidden-layers", "2",
              "--seed", "5", "--out", out)
    return out


def generate(ditto_bin, model, tmp_path, lines, *extra, failing=0):
    """The output lines; `failing` lines are expected to fail, and then the exit status is 1."""
    src = tmp_path / "in.jsonl"
    src.write_text("".join((l if isinstance(l, str) else json.dumps(l)) + "\n" for l in lines))
    proc = run_ditto(ditto_bin, "generate", "--model", model, "--prompts", src, *extra, check=not failing)
    if failing:
        assert proc.returncode == 1 and f"{failing} request(s) failed" in proc.stderr, (proc.returncode, proc.stderr)
    return [json.loads(l) for l in proc.stdout.splitlines()]


REQUESTS = [
    {"request_id": "a", "prompt": "The future of AI is", "temperature": 0.7, "max_tokens": 12, "seed": 42},
    {"request_id": "b", "prompt": "Machine learning enables", "temperature": 0.9, "top_p": 0.8, "n": 2,
     "max_tokens": 10, "seed": 7, "logprobs": 2},
    {"request_id": "c", "prompt_token_ids": [9707, 11, 1879, 0, 3, 4, 5, 6, 7, 8, 9, 10] * 5,
     "temperature": 0, "max_tokens": 8, "prompt_logprobs": 1, "logprobs": 0},
    {"request_id": "d", "messages": [{"role": "user", "content": "Hello there"}],
     "chat_template_kwargs": {"enable_thinking": False}, "temperature": 1.0, "top_k": 20,
     "min_p": 0.01, "repetition_penalty": 1.1, "presence_penalty": 0.5, "max_tokens": 9, "seed": 3},
]


def test_alone_equals_in_batch_in_any_order_budget_and_cache_size(ditto_bin, model, tmp_path):
    alone = {r["request_id"]: generate(ditto_bin, model, tmp_path, [r])[0] for r in REQUESTS}
    for out in alone.values():
        assert "error" not in out, out
        assert all(len(o["token_ids"]) > 0 for o in out["outputs"])
    rng = random.Random(1)
    filler = [{"request_id": f"f{i}", "prompt": " ".join(["word"] * rng.randint(1, 50)),
               "temperature": rng.random(), "max_tokens": rng.randint(1, 20), "seed": i} for i in range(12)]
    for extra in ([], ["--max-num-batched-tokens", "16"], ["--max-num-batched-tokens", "64"],
                  ["--max-num-batched-tokens", "64", "--long-prefill-token-threshold", "3"],
                  ["--kv-cache-memory", "2MiB", "--block-size", "8"], ["--no-prefix-caching", "--threads", "1"]):
        batch = REQUESTS + filler
        rng.shuffle(batch)
        got = {o["request_id"]: o for o in generate(ditto_bin, model, tmp_path, batch, *extra)}
        for rid, want in alone.items():
            got_r = dict(got[rid])
            if "seed" not in next(r for r in REQUESTS if r["request_id"] == rid):
                got_r["seed"] = want["seed"]  # drawn from the OS: greedy output does not depend on it
            assert json.dumps(got_r, sort_keys=True) == json.dumps(want, sort_keys=True), (rid, extra)


def test_output_fields(ditto_bin, model, tmp_path):
    [b, c] = generate(ditto_bin, model, tmp_path, REQUESTS[1:3])
    assert [o["index"] for o in b["outputs"]] == [0, 1]
    assert b["outputs"][0]["token_ids"] != b["outputs"][1]["token_ids"]  # each choice its own stream
    for o in b["outputs"]:
        assert len(o["logprobs"]) == len(o["token_ids"])
        assert all(len(lp["top_logprobs"]) == 2 for lp in o["logprobs"])
        assert o["finish_reason"] in ("stop", "length")
    assert c["prompt_logprobs"][0] is None
    assert len(c["prompt_logprobs"]) == len(c["prompt_token_ids"])
    assert b["seed"] == 7


def test_decode_logprob_equals_rescored_prompt_logprob(ditto_bin, model, tmp_path):
    [first] = generate(ditto_bin, model, tmp_path, [REQUESTS[2]])
    out = first["outputs"][0]
    rescore = {"prompt_token_ids": first["prompt_token_ids"] + out["token_ids"], "max_tokens": 1,
               "temperature": 0, "prompt_logprobs": 0}
    [again] = generate(ditto_bin, model, tmp_path, [rescore])
    n = len(first["prompt_token_ids"])
    for t, lp in enumerate(out["logprobs"]):
        assert again["prompt_logprobs"][n + t]["logprob"] == lp["logprob"]  # same float32 bits


def test_bad_lines_get_their_own_errors(ditto_bin, model, tmp_path):
    lines = [
        {"prompt": "", "max_tokens": 3},
        {"prompt": "x", "top_p": 1.5},
        {"prompt": "x", "n": 0},
        {"prompt": "x", "max_tokens": 0},
        {"prompt": "x", "max_tokens": -4},
        {"prompt": "x", "colour": "red"},
        {"prompt": "x", "temperature": "hot"},
        {"prompt_token_ids": [1] * 50000},
        "not json",
        {"prompt": "still fine", "max_tokens": 3, "temperature": 0},
        '{"prompt": "x", "temperature": 1e400}',
        {"prompt_token_ids": [4294977003]},
        {"prompt": "x", "seed": 2**63},
        {"prompt": "x", "max_tokens": 1.5},
        {"prompt": "x", "temperature": True},
    ]
    out = generate(ditto_bin, model, tmp_path, lines, failing=13)
    errors = [o.get("error") for o in out]
    assert errors[0] == "line 1: the prompt is empty"
    assert errors[1] == "line 2: top_p must be in (0, 1], got 1.5"
    assert errors[2] == "line 3: n must be in [1, 128], got 0"
    assert errors[3] == "line 4: max_tokens must be at least 1, got 0"
    assert errors[4] == "line 5: max_tokens must be at least 1, got -4"
    assert errors[5] is None  # unknown fields are ignored with a warning, as the server (and vLLM) does
    assert errors[6] == "line 7: field 'temperature' must be a number, got \"hot\""
    assert "max_position_embeddings" in errors[7]
    assert errors[8].startswith("line 9: invalid JSON")
    assert errors[9] is None and len(out[9]["outputs"][0]["token_ids"]) == 3
    assert errors[10].startswith("line 11: invalid JSON") and "1e400" in errors[10]
    assert errors[11] == "line 12: field 'prompt_token_ids' must be an integer in [0, 2147483647], got 4294977003"
    assert errors[12] == ("line 13: field 'seed' must be an integer in [-2^63, 2^63 - 1] (less than or equal to "
                          "9223372036854775807; -1: none), got 9223372036854775808")
    assert errors[13] == "line 14: field 'max_tokens' must be an integer, got 1.5"
    assert errors[14] == "line 15: field 'temperature' must be a number, got true"


def test_result_changing_fields_ditto_lacks_fail_their_line(ditto_bin, model, tmp_path):
    """A vLLM field that would change the result is refused naming it (the server's 400), never
    dropped; at its no-op value it passes (issue 30)."""
    lines = [
        {"prompt": "x", "max_tokens": 2, "use_beam_search": True},
        {"prompt": "x", "max_tokens": 2, "thinking_token_budget": 10},
        {"prompt": "x", "max_tokens": 2, "use_beam_search": False, "bad_words": [], "temperature": 0},
    ]
    out = generate(ditto_bin, model, tmp_path, lines, failing=2)
    assert out[0]["error"].startswith("line 1: field 'use_beam_search' (beam search) is not supported by ditto yet")
    assert out[1]["error"].startswith("line 2: field 'thinking_token_budget' (a thinking budget) is not supported")
    assert "error" not in out[2] and len(out[2]["outputs"][0]["token_ids"]) == 2


def test_vllms_per_row_fields_and_the_servers_fields_in_lines(ditto_bin, model, tmp_path):
    """logit_bias, allowed_token_ids, bad_words and truncate_prompt_tokens work in a line as on the
    server; a server field a line cannot carry (suffix, echo, response_format) fails its line by name
    instead of being dropped with a warning."""
    lines = [
        {"prompt": "x y z", "max_tokens": 3, "temperature": 0, "logit_bias": {"77": 100}},
        {"prompt": "x y z", "max_tokens": 6, "temperature": 1.0, "seed": 2, "allowed_token_ids": [11, 13, 77]},
        {"prompt_token_ids": [1, 2, 3, 4, 5, 6], "max_tokens": 1, "truncate_prompt_tokens": 2},
        {"prompt": "x", "max_tokens": 2, "suffix": "y"},
        {"prompt": "x", "max_tokens": 2, "echo": True},
        {"prompt": "x", "max_tokens": 2, "response_format": {"type": "json_object"}},
        {"prompt": "x", "max_tokens": 2, "response_format": {"type": "text"}, "echo": False, "best_of": 1},
    ]
    out = generate(ditto_bin, model, tmp_path, lines, failing=3)
    assert out[0]["outputs"][0]["token_ids"] == [77, 77, 77]
    assert set(out[1]["outputs"][0]["token_ids"]) <= {11, 13, 77}
    assert out[2]["prompt_token_ids"] == [5, 6]
    for k, name in ((3, "suffix"), (4, "echo"), (5, "response_format")):
        assert out[k]["error"].startswith(f"line {k + 1}: field '{name}' is the server's"), out[k]
    assert "error" not in out[6]


def test_blank_lines_keep_line_numbers_and_bad_paths_are_refused(ditto_bin, model, tmp_path):
    out = generate(ditto_bin, model, tmp_path, ["", "", {"prompt": "a", "max_tokens": -1}], failing=1)
    assert out == [{"request_id": "0", "error": "line 3: max_tokens must be at least 1, got -1"}]
    proc = run_ditto(ditto_bin, "generate", "--model", model, "--prompts", tmp_path, check=False)
    assert proc.returncode == 1 and "is a directory" in proc.stderr
    proc = run_ditto(ditto_bin, "generate", "--model", model, "--prompts", "-", "--max-tokens", "3", check=False)
    assert proc.returncode == 2 and "--max-tokens excludes --prompts" in proc.stderr


def test_stop_strings_cut_the_text_on_characters(ditto_bin, model, tmp_path):
    base = {"prompt": "Once upon a time", "temperature": 0, "max_tokens": 24, "ignore_eos": True}
    [full] = generate(ditto_bin, model, tmp_path, [base])
    text = full["outputs"][0]["text"]
    assert len(text) > 12, text
    stop = text[6:9]  # three characters from the middle (code points, so whole UTF-8 sequences)
    cut = text.find(stop)
    [got, kept] = generate(ditto_bin, model, tmp_path, [dict(base, stop=[stop, "\u2603never"]),
                                                        dict(base, stop=stop, include_stop_str_in_output=True)])
    for out, end in ((got, cut), (kept, cut + len(stop))):
        o = out["outputs"][0]
        assert o["text"] == text[:end]
        assert o["finish_reason"] == "stop" and o["stop_reason"] == stop
        assert o["token_ids"] == full["outputs"][0]["token_ids"][:len(o["token_ids"])]


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return (x ^ (x >> 31)) >> 11  # the top 53 bits


def test_lines_without_a_seed_repeat_by_the_offline_rule(ditto_bin, model, tmp_path):
    """Issue 30: line k without a seed gets the top 53 bits of SplitMix64(seed + k) (--seed, default 0), the rule of
    Python's LLM(seed=0): the same file gives the same text on every run."""
    lines = [{"prompt": "Once upon a time", "temperature": 1.0, "max_tokens": 8},
             {"prompt": "Once upon a time", "temperature": 1.0, "max_tokens": 8, "seed": 5},
             {"prompt": "Once upon a time", "temperature": 1.0, "max_tokens": 8}]
    first = generate(ditto_bin, model, tmp_path, lines)
    assert generate(ditto_bin, model, tmp_path, lines) == first
    assert [r["seed"] for r in first] == [splitmix64(0), 5, splitmix64(2)]
    other = generate(ditto_bin, model, tmp_path, lines, "--seed", "7")
    assert [r["seed"] for r in other] == [splitmix64(7), 5, splitmix64(9)]
    assert other[1] == first[1]
