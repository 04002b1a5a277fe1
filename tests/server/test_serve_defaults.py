"""Defaults set once, at the front door (issue 29): a request that leaves sampling fields out is
sampled with the model's generation_config.json values (vLLM's --generation-config auto) — exactly
like one that sets them — and `--generation-config vllm` restores SamplingParams' own defaults; a
seed the server draws is below 2^53 (a JSON number every client reads back exactly) and sending it
back repeats the answer bit for bit.

The test model's generation_config.json is Qwen3's: temperature 0.6, top_p 0.95, top_k 20.
The client and its environment (DITTO_BIN, DITTO_TEST_MODEL) are serve_client.py's.
"""
import json
import os
import subprocess

from serve_client import DITTO, MODEL, NAME, Server, canonical

MODEL_DEFAULTS = {"temperature": 0.6, "top_p": 0.95, "top_k": 20}
PLAIN_DEFAULTS = {"temperature": 1.0, "top_p": 1.0, "top_k": 0}


def ask(server, path, fields):
    if path == "/v1/completions":
        body = {"model": NAME, "prompt": "The weather today is", "max_tokens": 24, "logprobs": 1, **fields}
    else:
        body = {"model": NAME, "messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 24,
                "logprobs": True, **fields}
    status, resp = server.post(path, body)
    assert status == 200, resp
    return resp


def test_the_models_generation_config_is_the_default_and_vllm_restores_plain_ones():
    with open(os.path.join(MODEL, "generation_config.json")) as f:
        config = json.load(f)
    assert {k: config[k] for k in MODEL_DEFAULTS} == MODEL_DEFAULTS
    auto = Server()
    plain = Server("--generation-config", "vllm")
    try:
        for path in ("/v1/completions", "/v1/chat/completions"):
            left_out = canonical(path, ask(auto, path, {"seed": 7}))
            assert left_out == canonical(path, ask(auto, path, {"seed": 7, **MODEL_DEFAULTS}))
            # The check can fail: with the plain defaults the same seed samples another answer.
            assert left_out != canonical(path, ask(auto, path, {"seed": 7, **PLAIN_DEFAULTS}))
            assert canonical(path, ask(plain, path, {"seed": 7})) == canonical(path, ask(plain, path,
                                                                                          {"seed": 7, **PLAIN_DEFAULTS}))
            # A request's own value wins over the model's.
            assert canonical(path, ask(auto, path, {"seed": 7, "temperature": 0})) == \
                canonical(path, ask(plain, path, {"seed": 7, "temperature": 0}))
    finally:
        auto.close()
        plain.close()


def test_a_drawn_seed_is_below_2_53_and_sent_back_repeats_the_answer():
    server = Server()
    try:
        for path in ("/v1/completions", "/v1/chat/completions"):
            seeds = set()
            for _ in range(4):
                resp = ask(server, path, {})
                seed = resp["seed"]
                assert isinstance(seed, int) and 0 <= seed < 2**53, seed
                seeds.add(seed)
                # Through a double and back, as JavaScript or jq would send it.
                again = ask(server, path, {"seed": int(float(seed))})
                assert again["seed"] == seed
                assert canonical(path, again) == canonical(path, resp)
            assert len(seeds) > 1  # drawn per request
    finally:
        server.close()


def test_a_bad_generation_config_stops_the_server_naming_it(tmp_path):
    folder = tmp_path / "gen"
    folder.mkdir()
    (folder / "generation_config.json").write_text(json.dumps({"top_p": 1.5}))
    for value, words in ((str(folder), ["generation_config.json", "top_p"]),
                         (str(tmp_path / "missing"), ["generation_config", "missing"])):
        proc = subprocess.run([DITTO, "serve", MODEL, "--port", "0", "--generation-config", value],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode != 0
        for w in words:
            assert w in proc.stderr, proc.stderr
