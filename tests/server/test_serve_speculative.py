"""`ditto serve --speculative-config`: every answer — completions and chat, streamed and not,
greedy and seeded sampling with n > 1, logprobs, stop strings, max_tokens — is the same bits as a
server without speculation gives, while clients run concurrently; /metrics counts the guesses;
a bad config stops the server at start with the key named (issue 18).

The client and its environment (DITTO_BIN, DITTO_TEST_MODEL) are serve_client.py's.
"""
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest
from serve_client import DITTO, MODEL, NAME, Server, assemble, canonical

COPY = ("Repeat after me: one two three four five six seven eight, one two three four five six seven eight, "
        "one two three four")


def requests():
    out = []
    for k, prompt in enumerate([COPY, "The quick brown fox", "def add(a, b):\n    return a + b\n\ndef add("]):
        base = {"model": NAME, "prompt": prompt, "max_tokens": 24 + 4 * k, "logprobs": 2}
        out.append(("/v1/completions", dict(base, temperature=0)))
        out.append(("/v1/completions", dict(base, temperature=0.8, seed=10 + k, n=2)))
        out.append(("/v1/completions", dict(base, temperature=0, stop=["four", "\n\n"], max_tokens=40)))
        out.append(("/v1/chat/completions", {"model": NAME, "messages": [{"role": "user", "content": prompt}],
                                             "max_tokens": 20, "temperature": 0.7, "seed": k, "logprobs": True,
                                             "top_logprobs": 2}))
    return out


def answers(server, stream):
    def one(item):
        path, body = item
        if stream:
            return canonical(path, assemble(path, server.stream(path, dict(body, stream=True,
                                                                            stream_options={"include_usage": True}))))
        status, resp = server.post(path, body)
        assert status == 200, resp
        return canonical(path, resp)
    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(one, requests()))


@pytest.fixture(scope="module")
def plain():
    s = Server()
    try:
        yield answers(s, stream=False)
    finally:
        s.close()


@pytest.mark.parametrize("config", [
    '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 1, "prompt_lookup_max": 3}',
    '{"model": "%s", "num_speculative_tokens": 3}' % MODEL])
def test_answers_are_the_bits_of_a_server_without_speculation(plain, config):
    s = Server("--speculative-config", config)
    try:
        assert answers(s, stream=False) == plain
        assert answers(s, stream=True) == plain
        drafted = s.metric("ditto:spec_decode_num_draft_tokens_total")
        accepted = s.metric("ditto:spec_decode_num_accepted_tokens_total")
        assert 0 < accepted <= drafted, (accepted, drafted)
        assert s.metric("ditto:spec_decode_num_drafts_total") > 0
        assert s.metric("ditto:spec_decode_acceptance_rate") == pytest.approx(accepted / drafted)
    finally:
        s.close()


@pytest.mark.parametrize("config, named", [
    ('{"method": "ngram", "num_speculative_tokens": 99}', "num_speculative_tokens"),
    ('{"method": "medusa", "num_speculative_tokens": 2}', "method"),
    ('{"model": "/nonexistent/draft", "num_speculative_tokens": 2}', "/nonexistent/draft"),
    ("ngram", "speculative_config")])
def test_a_bad_config_is_refused_at_start_by_name(config, named):
    proc = subprocess.run([DITTO, "serve", MODEL, "--port", "0", "--speculative-config", config],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert named in proc.stderr, proc.stderr
