"""Operating `ditto serve` (issue 30): system_fingerprint in every body and chunk, a function of
the weights; vLLM's chat echo, stream_options.continuous_usage_stats, parallel_tool_calls,
per-request chat_template (--trust-request-chat-template) and /tokenize with
continue_final_message; a stream whose client hangs up logged as 499 with its finish reason, every
line JSON with --log-format json.

The client and its environment (DITTO_BIN, DITTO_TEST_MODEL) are serve_client.py's.
"""
import json
import os
import re
import time

import pytest

from serve_client import MODEL, NAME, Server, stream_events

CHAT = "/v1/chat/completions"
TEMPLATE = ("{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
            "{% if add_generation_prompt %}[assistant] {% endif %}")
CONTINUED = [{"role": "user", "content": "Tell me a story"}, {"role": "assistant", "content": "Once upon"}]


@pytest.fixture(scope="module")
def server():
    s = Server("--log-format", "json", "--enable-auto-tool-choice", "--tool-call-parser", "hermes")
    yield s
    s.close()


def fingerprints(server):
    """The system_fingerprint of a completion, a chat and every chunk of a stream."""
    seen = set()
    status, body = server.post("/v1/completions", {"model": NAME, "prompt": "Hi", "max_tokens": 2})
    assert status == 200, body
    seen.add(body["system_fingerprint"])
    status, body = server.post(CHAT, {"model": NAME, "messages": [{"role": "user", "content": "Hi"}],
                                      "max_tokens": 2})
    assert status == 200, body
    seen.add(body["system_fingerprint"])
    events = server.stream(CHAT, {"model": NAME, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2,
                                  "stream": True, "stream_options": {"include_usage": True}})
    seen.update(e["system_fingerprint"] for e in events if e != "[DONE]")
    assert len(seen) == 1, seen
    return seen.pop()


def modified_copy(model, out):
    """`model` (a safetensors directory) with one weight byte changed: its other files linked, its
    last shard copied with the last byte (tensor data, not the header) flipped."""
    os.makedirs(out)
    shards = sorted(f for f in os.listdir(model) if f.endswith(".safetensors"))
    for f in os.listdir(model):
        if f != shards[-1]:
            os.symlink(os.path.join(model, f), os.path.join(out, f))
    data = bytearray(open(os.path.join(model, shards[-1]), "rb").read())
    data[-1] ^= 1
    open(os.path.join(out, shards[-1]), "wb").write(data)
    return out


def test_system_fingerprint_is_the_weights_across_restarts(server, tmp_path):
    fp = fingerprints(server)
    assert re.fullmatch(r"fp_[0-9a-f]{16}", fp), fp
    # The start-up line names it and what hashing the weights cost.
    start = [json.loads(line) for line in server.stderr if "system_fingerprint" in line]
    assert start and fp in start[0]["message"] and "hashed in" in start[0]["message"], server.stderr[:10]
    again = Server()
    try:
        assert fingerprints(again) == fp  # a restart, another log format: the same bits, the same fingerprint
    finally:
        again.close()
    if not os.path.isdir(MODEL):
        pytest.skip("the changed-weights check copies a safetensors directory")
    other = Server(model=modified_copy(MODEL, str(tmp_path / "changed")))
    try:
        assert fingerprints(other) != fp
    finally:
        other.close()


def chat(server, **fields):
    status, body = server.post(CHAT, {"model": NAME, "max_tokens": 4, "temperature": 0, **fields})
    assert status == 200, body
    return body


def test_chat_echo_repeats_the_continued_message_streamed_and_not(server):
    plain = chat(server, messages=CONTINUED, continue_final_message=True)["choices"][0]["message"]["content"]
    echoed = chat(server, messages=CONTINUED, continue_final_message=True, echo=True)
    assert echoed["choices"][0]["message"] == {**echoed["choices"][0]["message"], "role": "assistant",
                                               "content": "Once upon" + plain}
    events = server.stream(CHAT, {"model": NAME, "messages": CONTINUED, "continue_final_message": True, "echo": True,
                                  "max_tokens": 4, "temperature": 0, "stream": True})
    deltas = [e["choices"][0]["delta"] for e in events if e != "[DONE]" and e["choices"]]
    assert deltas[0] == {"role": "assistant", "content": ""} and deltas[1] == {"content": "Once upon"}, deltas[:3]
    assert "".join(d.get("content") or "" for d in deltas) == "Once upon" + plain
    # A user message last: a new assistant turn, nothing to echo (vLLM's rule).
    user = [{"role": "user", "content": "Hi"}]
    assert chat(server, messages=user, echo=True)["choices"][0]["message"]["content"] == \
        chat(server, messages=user)["choices"][0]["message"]["content"]


def test_continuous_usage_stats_put_the_usage_so_far_in_every_chunk(server):
    for path, head in ((CHAT, {"messages": [{"role": "user", "content": "Hi"}]}),
                      ("/v1/completions", {"prompt": "The capital of France is"})):
        events = server.stream(path, {"model": NAME, **head, "max_tokens": 5, "temperature": 0, "ignore_eos": True,
                                      "stream": True,
                                      "stream_options": {"include_usage": True, "continuous_usage_stats": True}})
        chunks = [e for e in events if e != "[DONE]"]
        assert all(isinstance(e.get("usage"), dict) for e in chunks), chunks
        final = chunks[-1]
        assert final["choices"] == [] and final["usage"]["completion_tokens"] == 5
        counts = [e["usage"]["completion_tokens"] for e in chunks[:-1]]
        assert counts == sorted(counts) and counts[-1] == 5, counts
        assert {e["usage"]["prompt_tokens"] for e in chunks} == {final["usage"]["prompt_tokens"]}


def test_parallel_tool_calls_false_is_accepted_and_returns_at_most_one_call(server):
    tools = [{"type": "function", "function": {"name": f, "parameters": {"type": "object", "properties": {}}}}
             for f in ("a", "b")]
    body = chat(server, messages=[{"role": "user", "content": "Call a and b"}], tools=tools,
                parallel_tool_calls=False, max_tokens=8)
    # A random-weights model seldom calls a tool; the unit test (FormatterTest,
    # ParallelToolCallsFalseReturnsTheFirstCallOnly) checks the cut on two real calls.
    assert len(body["choices"][0]["message"].get("tool_calls") or []) <= 1


def test_a_request_chat_template_needs_the_trust_flag(server):
    messages = [{"role": "user", "content": "Hi there"}]
    status, body = server.post(CHAT, {"model": NAME, "messages": messages, "max_tokens": 2,
                                      "chat_template": TEMPLATE})
    assert status == 400 and body["error"]["param"] == "chat_template", body
    assert "--trust-request-chat-template" in body["error"]["message"]
    status, body = server.post("/tokenize", {"model": NAME, "messages": messages, "chat_template": TEMPLATE})
    assert status == 400 and body["error"]["param"] == "chat_template", body
    trusted = Server("--trust-request-chat-template")
    try:
        status, own = trusted.post("/tokenize", {"model": NAME, "messages": messages, "chat_template": TEMPLATE})
        assert status == 200, own
        status, text = trusted.post("/tokenize", {"model": NAME, "prompt": "[user] Hi there\n[assistant] ",
                                                  "add_special_tokens": False})
        assert own["tokens"] == text["tokens"]
        status, reply = trusted.post(CHAT, {"model": NAME, "messages": messages, "max_tokens": 2,
                                            "chat_template": TEMPLATE})
        assert status == 200, reply
        assert reply["usage"]["prompt_tokens"] == len(text["tokens"])
        status, bad = trusted.post(CHAT, {"model": NAME, "messages": messages, "chat_template": "{% if %}"})
        assert status == 400 and bad["error"]["param"] == "chat_template", bad
    finally:
        trusted.close()


def test_tokenize_messages_honours_continue_final_message(server):
    def tokens(**fields):
        status, body = server.post("/tokenize", {"model": NAME, "messages": CONTINUED, **fields})
        assert status == 200, body
        return body["tokens"]

    continued = tokens(continue_final_message=True)
    closed = tokens(add_generation_prompt=False)
    # The continued prompt stops right after the assistant's words; the closed one ends its turn.
    assert len(continued) < len(closed) and closed[:len(continued)] == continued
    status, text = server.post("/detokenize", {"model": NAME, "tokens": continued})
    assert text["prompt"].endswith("Once upon"), text
    # The same tokens a chat completion continues from.
    assert chat(server, messages=CONTINUED, continue_final_message=True)["usage"]["prompt_tokens"] == len(continued)
    status, body = server.post("/tokenize", {"model": NAME, "messages": CONTINUED, "continue_final_message": True,
                                             "add_generation_prompt": True})
    assert status == 400 and body["error"]["param"] == "continue_final_message", body


def access_lines(server, request_id, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        for line in list(server.stderr):
            if request_id in line and '"status"' in line:
                return json.loads(line)
        time.sleep(0.1)
    raise AssertionError("no access line for " + request_id + ": " + "".join(server.stderr[-5:]))


def test_a_stream_whose_client_hangs_up_is_logged_499_with_its_finish_reason(server):
    seen = []
    status, _ = stream_events(server, "/v1/completions",
                              {"model": NAME, "prompt": "Once upon a time", "max_tokens": 2000, "ignore_eos": True,
                               "stream": True}, stop_after=1, on_event=seen.append)
    assert status == 200 and seen
    line = access_lines(server, seen[0]["id"])
    assert line["status"] == 499 and line["finish_reason"] == "abort", line
    assert line["completion_tokens"] < 2000 and "disconnected" in line["error"], line
    # A stream read to its end is still a 200 with its own finish reason.
    events = server.stream("/v1/completions", {"model": NAME, "prompt": "Hi", "max_tokens": 3, "ignore_eos": True,
                                               "stream": True})
    line = access_lines(server, events[0]["id"])
    assert line["status"] == 200 and line["finish_reason"] == "length", line
    # The hang-up counts as 499 in /metrics too.
    status, text = server.request("GET", "/metrics")
    assert re.search(r'http_requests_total\{[^}]*status="499"\} [1-9]', text.decode()), \
        [l for l in text.decode().splitlines() if "499" in l]
    # --log-format json: every line the server wrote is JSON.
    for line in list(server.stderr):
        json.loads(line)
