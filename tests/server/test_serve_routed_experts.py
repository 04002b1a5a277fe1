"""`ditto serve --enable-return-routed-experts` (vLLM's routing replay): each choice of
/v1/completions and /v1/chat/completions carries routed_experts, the base64 text of a NumPy .npy
array [prompt + output tokens - 1, MoE layers, num_experts_per_tok] (uint8 up to 256 experts), as
vLLM's server sends it. vLLM streams none; ditto puts the whole array on the choice's finishing
chunk, so streamed and non-streamed answers carry the same ints, alone or under concurrent load.
A dense model with the flag stops the server at start, the flag named.

The client and its environment (DITTO_BIN, DITTO_TEST_MODEL: a dense model) are serve_client.py's.
"""
import base64
import io
import subprocess
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from serve_client import DITTO, MODEL, NAME, Server


@pytest.fixture(scope="module")
def moe(tmp_path_factory):
    out = tmp_path_factory.mktemp("moe") / "qwen3-30b-a3b-2l"
    subprocess.run([DITTO, "make-test-model", "--preset", "qwen3-30b-a3b", "--num-hidden-layers", "2",
                    "--num-experts", "16", "--seed", "4", "--out", str(out)], check=True, capture_output=True,
                   timeout=900)
    return str(out)


@pytest.fixture(scope="module")
def server(moe):
    s = Server("--enable-return-routed-experts", "--kv-cache-memory", "256MiB", model=moe)
    try:
        yield s
    finally:
        s.close()


def decode(text):
    return np.load(io.BytesIO(base64.b64decode(text)), allow_pickle=False)


REQUESTS = [
    ("/v1/completions", {"model": NAME, "prompt": "The quick brown fox", "max_tokens": 7, "temperature": 0.8,
                         "seed": 4, "n": 2, "ignore_eos": True, "return_token_ids": True}),
    ("/v1/completions", {"model": NAME, "prompt": [785, 3974, 13876, 38835] * 5, "max_tokens": 5, "temperature": 0,
                         "ignore_eos": True, "return_token_ids": True}),
    ("/v1/chat/completions", {"model": NAME, "messages": [{"role": "user", "content": "Hi there"}], "max_tokens": 6,
                              "temperature": 0.7, "seed": 1, "ignore_eos": True, "return_token_ids": True}),
]


def answer(server, path, body, stream):
    """{choice index: (token ids, routed experts)} of one request, and its prompt's length."""
    if not stream:
        status, resp = server.post(path, body)
        assert status == 200, resp
        prompt = resp["choices"][0].get("prompt_token_ids") or resp.get("prompt_token_ids")
        return {c["index"]: (c["token_ids"], decode(c["routed_experts"])) for c in resp["choices"]}, len(prompt)
    events = server.stream(path, dict(body, stream=True))
    tokens, routed, prompt = {}, {}, None
    for e in events[:-1]:
        prompt = prompt or e.get("prompt_token_ids")
        for c in e["choices"]:
            prompt = prompt or c.get("prompt_token_ids")
            tokens.setdefault(c["index"], []).extend(c.get("token_ids") or [])
            if "routed_experts" in c:
                assert c["finish_reason"] is not None and c["index"] not in routed, "sent once, when finishing"
                routed[c["index"]] = decode(c["routed_experts"])
    return {k: (tokens[k], routed[k]) for k in tokens}, len(prompt)


def test_shape_and_the_same_ints_streamed_or_not_alone_or_together(server):
    alone = [answer(server, path, body, stream=False) for path, body in REQUESTS]
    for choices, prompt_len in alone:
        for token_ids, r in choices.values():
            assert r.dtype == np.uint8 and r.shape == (prompt_len + len(token_ids) - 1, 2, 8)
            assert r.max() < 16
    jobs = [(path, body, stream) for stream in (False, True) for path, body in REQUESTS] * 2
    with ThreadPoolExecutor(8) as pool:
        loaded = list(pool.map(lambda j: answer(server, *j), jobs))
    for k, (choices, prompt_len) in enumerate(loaded):
        want, want_len = alone[k % len(REQUESTS)]
        assert prompt_len == want_len
        assert choices.keys() == want.keys()
        for i in want:
            assert choices[i][0] == want[i][0]
            assert np.array_equal(choices[i][1], want[i][1]), (jobs[k][0], jobs[k][2], i)


def test_off_without_the_flag_and_refused_on_a_dense_model(moe):
    s = Server("--kv-cache-memory", "256MiB", model=moe)
    try:
        status, resp = s.post(*REQUESTS[1])
        assert status == 200 and "routed_experts" not in resp["choices"][0]
    finally:
        s.close()
    p = subprocess.run([DITTO, "serve", MODEL, "--port", "0", "--enable-return-routed-experts"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode != 0
    assert "enable_return_routed_experts" in p.stderr and "no MoE layers" in p.stderr, p.stderr
