"""The reasoning parsers on the real Qwen3 chat template (issue 30): `reasoning` (and
`reasoning_content`, its older name) and `content` as vLLM's qwen3 and deepseek_r1 parsers give
them, streamed and not, with enable_thinking on and off and with a Qwen3-*-Thinking-2507 style
template that opens <think> in the prompt.

vLLM's rules (vllm/reasoning/qwen3_reasoning_parser.py since PR #35230, deepseek_r1_reasoning_parser.py
and basic_parsers.py): the model's own <think> is dropped, the text before the first </think> is
reasoning and the text after it content (null when empty); without </think> the whole output is
reasoning (cut by max_tokens mid-thought), except that qwen3 with chat_template_kwargs
{"enable_thinking": false} has no reasoning at all. deepseek_r1 has no such switch.

The test model has random weights, so each test forces its output: only the tokens of the
intended reply are allowed, the first is biased up, and bad_words ban every token but the next
one after each (forced_fields). The client and its environment (DITTO_BIN, DITTO_TEST_MODEL) are
serve_client.py's.
"""
import json
import os
import subprocess

import pytest

from serve_client import DITTO, MODEL, NAME, Server

MESSAGES = [{"role": "user", "content": "What is the capital of France?"}]
# "<think> Well Paris</think> It is." as distinct single tokens: tags, words that start with a
# space, and a full stop, so that each pair of them tokenizes back into the two (forced_fields).
THOUGHT_THEN_ANSWER = ["<think>", " Well", " Paris", "</think>", " It", " is", "."]


@pytest.fixture(scope="module")
def qwen3():
    s = Server("--reasoning-parser", "qwen3")
    yield s
    s.close()


@pytest.fixture(scope="module")
def deepseek_r1():
    s = Server("--reasoning-parser", "deepseek_r1")
    yield s
    s.close()


@pytest.fixture(scope="module")
def thinking_2507(tmp_path_factory):
    """The model's own template with the generation prompt of Qwen3-*-Thinking-2507, which opens
    <think> for the model."""
    with open(os.path.join(MODEL, "tokenizer_config.json")) as f:
        template = json.load(f)["chat_template"]
    at = template.rindex("{%- if add_generation_prompt %}")
    template = (template[:at] +
                "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n<think>\\n' }}\n{%- endif %}\n")
    path = tmp_path_factory.mktemp("template") / "thinking_2507.jinja"
    path.write_text(template)
    s = Server("--reasoning-parser", "qwen3", "--chat-template", str(path))
    yield s
    s.close()


def token_id(server, text):
    status, r = server.post("/tokenize", {"model": NAME, "prompt": text, "add_special_tokens": False})
    assert status == 200 and len(r["tokens"]) == 1, (text, r)
    return r["tokens"][0]


def rendered_prompt(server, **kwargs):
    status, r = server.post("/tokenize", {"model": NAME, "messages": MESSAGES, **kwargs})
    assert status == 200, r
    status, text = server.post("/detokenize", {"model": NAME, "tokens": r["tokens"]})
    assert status == 200, text
    return text["prompt"]


def forced_fields(server, pieces):
    """Request fields under which greedy decoding writes exactly `pieces` (distinct tokens),
    whatever the weights, and the token ids it must write."""
    ids = [token_id(server, p) for p in pieces]
    assert len(set(ids)) == len(ids), pieces
    bad_words = [a + b for i, a in enumerate(pieces[:-1]) for b in pieces if b != pieces[i + 1]]
    return {"allowed_token_ids": ids, "logit_bias": {str(ids[0]): 100}, "bad_words": bad_words,
            "max_tokens": len(ids), "temperature": 0, "return_token_ids": True}, ids


def chat(server, pieces, **fields):
    """(message, streamed) for a chat whose reply is forced to `pieces`: the non-streamed message,
    and the streamed deltas' reasoning and content concatenated (None where no delta had any)."""
    forced, ids = forced_fields(server, pieces)
    body = {"model": NAME, "messages": MESSAGES, **forced, **fields}
    status, whole = server.post("/v1/chat/completions", body)
    assert status == 200, whole
    choice = whole["choices"][0]
    assert choice["token_ids"] == ids, "the reply was not the forced one"
    message = choice["message"]
    assert message["reasoning_content"] == message["reasoning"]  # the older name, while clients migrate

    events = server.stream("/v1/chat/completions", {**body, "stream": True})
    streamed = {"reasoning": None, "content": None}
    token_ids = []
    for e in events[:-1]:
        for c in e["choices"]:
            token_ids += c.get("token_ids") or []
            delta = c["delta"]
            assert delta.get("reasoning_content") == delta.get("reasoning"), delta
            for key in ("reasoning", "content"):
                if delta.get(key):
                    streamed[key] = (streamed[key] or "") + delta[key]
    assert token_ids == ids
    return message, streamed


def expect(message, streamed, reasoning, content):
    assert (message["reasoning"], message["content"]) == (reasoning, content)
    assert (streamed["reasoning"], streamed["content"]) == (reasoning, content)


def test_qwen3_enable_thinking_on_the_model_opens_think(qwen3):
    assert rendered_prompt(qwen3).endswith("<|im_start|>assistant\n")  # the template leaves <think> to the model
    message, streamed = chat(qwen3, THOUGHT_THEN_ANSWER)
    expect(message, streamed, " Well Paris", " It is.")


def test_qwen3_enable_thinking_off_is_all_content(qwen3):
    off = {"chat_template_kwargs": {"enable_thinking": False}}
    assert rendered_prompt(qwen3, **off).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    message, streamed = chat(qwen3, [" It", " is", " Paris", "."], **off)
    expect(message, streamed, None, " It is Paris.")
    assert "reasoning" in message  # the field is there, null


def test_include_reasoning_false_leaves_the_reasoning_out(qwen3):
    """vLLM's include_reasoning: false drops the reasoning from the message and the stream; the
    content and the usage (reasoning_tokens included) stay as they were."""
    message, streamed = chat(qwen3, THOUGHT_THEN_ANSWER, include_reasoning=False)
    expect(message, streamed, None, " It is.")
    forced, _ = forced_fields(qwen3, THOUGHT_THEN_ANSWER)
    body = {"model": NAME, "messages": MESSAGES, **forced}
    with_reasoning = qwen3.post("/v1/chat/completions", body)[1]
    without = qwen3.post("/v1/chat/completions", {**body, "include_reasoning": False})[1]
    assert without["usage"] == with_reasoning["usage"]
    assert without["usage"]["completion_tokens_details"]["reasoning_tokens"] > 0


def test_separate_reasoning_false_puts_the_reasoning_back_in_the_content(qwen3):
    message, streamed = chat(qwen3, THOUGHT_THEN_ANSWER, separate_reasoning=False)
    expect(message, streamed, None, " Well Paris It is.")
    status, err = qwen3.post("/v1/chat/completions", {"model": NAME, "messages": MESSAGES, "separate_reasoning": "x"})
    assert status == 400 and err["error"]["param"] == "separate_reasoning", err


def test_a_stream_opens_with_the_role_alone_and_counts_reasoning_as_it_goes(qwen3):
    """vLLM's first chunk holds only the role; continuous usage carries the reasoning tokens so far."""
    forced, ids = forced_fields(qwen3, THOUGHT_THEN_ANSWER)
    events = qwen3.stream("/v1/chat/completions", {
        "model": NAME, "messages": MESSAGES, **forced, "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True}})
    chunks = [e for e in events if e != "[DONE]" and e["choices"]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[0]["usage"]["completion_tokens"] == 0
    assert all("role" not in c["choices"][0]["delta"] for c in chunks[1:])
    reasoning = [c["usage"]["completion_tokens_details"]["reasoning_tokens"] for c in chunks]
    assert reasoning == sorted(reasoning) and reasoning[-1] > 0
    final = [e for e in events if e != "[DONE]" and not e["choices"]][-1]
    assert final["usage"]["completion_tokens_details"]["reasoning_tokens"] == reasoning[-1]


def test_qwen3_a_reply_cut_before_the_end_of_thinking_is_all_reasoning(qwen3):
    message, streamed = chat(qwen3, ["<think>", " Well", " Paris"])  # max_tokens stops it
    expect(message, streamed, " Well Paris", None)
    message, streamed = chat(qwen3, [" Well", " Paris"])  # no tag at all: still reasoning
    expect(message, streamed, " Well Paris", None)


def test_deepseek_r1_has_no_switch(deepseek_r1):
    message, streamed = chat(deepseek_r1, THOUGHT_THEN_ANSWER)
    expect(message, streamed, " Well Paris", " It is.")
    for kwargs in ({}, {"chat_template_kwargs": {"enable_thinking": False}}):
        message, streamed = chat(deepseek_r1, [" It", " is", " Paris", "."], **kwargs)
        expect(message, streamed, " It is Paris.", None)  # no </think>: all reasoning, even with thinking off


def test_a_template_that_opens_think_in_the_prompt(thinking_2507):
    assert rendered_prompt(thinking_2507).endswith("<|im_start|>assistant\n<think>\n")
    message, streamed = chat(thinking_2507, THOUGHT_THEN_ANSWER[1:])  # the reply has no opening tag
    expect(message, streamed, " Well Paris", " It is.")
    message, streamed = chat(thinking_2507, [" Well", " Paris"])
    expect(message, streamed, " Well Paris", None)


def test_unknown_parser_names_are_refused_at_start():
    for flag, name, known in (("--tool-call-parser", "mistral", "hermes, llama3_json or qwen3_coder"),
                              ("--reasoning-parser", "granite", "qwen3 or deepseek_r1")):
        proc = subprocess.run([DITTO, "serve", MODEL, "--port", "0", flag, name], capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode != 0 and "listening" not in proc.stdout
        assert f"{flag} must be {known}, got '{name}'" in proc.stderr, proc.stderr
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
    for name in ("hermes", "llama3_json", "qwen3_coder"):
        s = Server("--enable-auto-tool-choice", "--tool-call-parser", name)
        try:
            forced, _ = forced_fields(s, [" It", " is", "."])
            status, r = s.post("/v1/chat/completions", {"model": NAME, "messages": MESSAGES, "tools": tools, **forced})
            assert status == 200, (name, r)
            message = r["choices"][0]["message"]
            assert (message["content"], message["tool_calls"]) == (" It is.", []), (name, message)
        finally:
            s.close()
