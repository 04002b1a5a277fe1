"""Structured outputs through `ditto serve` (issue 33) on the real SmolLM2-135M-Instruct: the official
`openai` client's response_format (json_schema, json_object), vLLM's structured_outputs and guided_*
fields, and tool_choice "required" and named, streamed and not (the streamed chunks reassemble to the
non-streamed answer, the same bits); every JSON output validates against its schema (Python's
jsonschema); bad input is a 400 naming the field, quickly, with the server serving on; and 64
clients mixing constrained requests of different schemas with plain ones each get the bits of the
same request sent alone.

Runs with build/venv's Python (`make python-package` installs openai and jsonschema there); the
client and its environment (DITTO_BIN) are serve_client.py's. Skipped without the model
(scripts/install-deps.sh fetches it).
"""
import json
import pathlib
import random
import re
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from serve_client import NAME, Server, assemble, canonical

openai = pytest.importorskip("openai")
jsonschema = pytest.importorskip("jsonschema")

SMOLLM2 = pathlib.Path(__file__).resolve().parents[2] / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"

PERSON = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 24},
                         "age": {"type": "integer", "minimum": 0, "maximum": 120},
                         "city": {"type": "string", "enum": ["Paris", "Tokyo", "Lima"]}},
          "required": ["name", "age", "city"], "additionalProperties": False}
POINTS = {"type": "object",
          "properties": {"points": {"type": "array", "minItems": 2, "maxItems": 3,
                                    "items": {"type": "object",
                                              "properties": {"x": {"type": "integer", "minimum": -9, "maximum": 9},
                                                             "y": {"type": "integer", "minimum": -9, "maximum": 9}},
                                              "required": ["x", "y"], "additionalProperties": False}}},
          "required": ["points"], "additionalProperties": False}
FLAG = {"type": "object", "properties": {"ok": {"type": "boolean"}, "code": {"type": "string", "pattern": "^[A-Z]{3}$"}},
        "required": ["ok", "code"], "additionalProperties": False}
SCHEMAS = [PERSON, POINTS, FLAG]

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city.",
        "parameters": {"type": "object",
                       "properties": {"city": {"type": "string", "maxLength": 20},
                                      "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                       "required": ["city", "unit"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "add", "description": "Adds two numbers.",
        "parameters": {"type": "object",
                       "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 999},
                                      "b": {"type": "integer", "minimum": 0, "maximum": 999}},
                       "required": ["a", "b"], "additionalProperties": False}}},
]
TOOL_SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


@pytest.fixture(scope="module")
def server():
    if not SMOLLM2.exists():
        pytest.skip("models/SmolLM2-135M-Instruct.Q4_1.gguf missing: scripts/install-deps.sh fetches it")
    s = Server("--max-num-seqs", "64", model=str(SMOLLM2))
    yield s
    s.close()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=f"http://{server.host}:{server.port}/v1", api_key="none", max_retries=0)


def messages(text):
    return [{"role": "user", "content": text}]


def validate(schema, text):
    value = json.loads(text)
    jsonschema.validate(value, schema)
    return value


def stream_text(client, **kwargs):
    """The streamed answer's content, logprobs and finish reason, reassembled."""
    content, logprobs, finish = "", [], None
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        for c in chunk.choices:
            content += c.delta.content or ""
            if c.logprobs and c.logprobs.content:
                logprobs += [(e.token, e.logprob) for e in c.logprobs.content]
            if c.finish_reason:
                finish = c.finish_reason
    return content, logprobs, finish


def whole_text(client, **kwargs):
    r = client.chat.completions.create(**kwargs)
    c = r.choices[0]
    lp = [(e.token, e.logprob) for e in c.logprobs.content] if c.logprobs else []
    return c.message.content, lp, c.finish_reason


def test_response_format_json_schema_streamed_and_not(client):
    for schema, prompt in ((PERSON, "Describe a person as JSON."), (POINTS, "Give two points."),
                           (FLAG, "Give a status flag.")):
        for temperature, seed in ((0, None), (0.8, 7)):
            kwargs = dict(model=NAME, messages=messages(prompt), max_tokens=120, temperature=temperature, seed=seed,
                          logprobs=True, top_logprobs=2,
                          response_format={"type": "json_schema",
                                           "json_schema": {"name": "answer", "schema": schema, "strict": True}})
            text, lp, finish = whole_text(client, **kwargs)
            assert finish == "stop", (schema, text)
            validate(schema, text)
            assert stream_text(client, **kwargs) == (text, lp, finish)
    # strict false constrains too.
    text, _, _ = whole_text(client, model=NAME, messages=messages("A person?"), max_tokens=120, temperature=0,
                            response_format={"type": "json_schema",
                                             "json_schema": {"name": "p", "schema": PERSON, "strict": False}})
    validate(PERSON, text)


def test_response_format_json_object(client):
    text, _, finish = whole_text(client, model=NAME, messages=messages("Reply with a JSON object about a cat."),
                                 max_tokens=200, temperature=0, response_format={"type": "json_object"})
    if finish == "stop":
        assert isinstance(json.loads(text), dict), text
    else:  # cut by max_tokens: still the start of an object
        assert text.lstrip().startswith("{"), text


def test_structured_outputs_and_guided_fields(client, server):
    base = dict(model=NAME, messages=messages("Is the sky blue? Answer."), max_tokens=40, temperature=0)
    text, _, _ = whole_text(client, **base, extra_body={"structured_outputs": {"choice": ["yes", "no", "maybe"]}})
    assert text in ("yes", "no", "maybe")
    assert whole_text(client, **base, extra_body={"guided_choice": ["yes", "no", "maybe"]})[0] == text
    text, _, _ = whole_text(client, **base, extra_body={"structured_outputs": {"regex": "[A-Z][a-z]{2,8}!"}})
    assert re.fullmatch("[A-Z][a-z]{2,8}!", text), text
    assert whole_text(client, **base, extra_body={"guided_regex": "[A-Z][a-z]{2,8}!"})[0] == text
    text, _, _ = whole_text(client, **base, extra_body={"structured_outputs": {"json": FLAG}})
    validate(FLAG, text)
    assert whole_text(client, **base, extra_body={"guided_json": FLAG})[0] == text
    # Lark grammar (llguidance's dialect).
    grammar = 'start: "The answer is " ANSWER "."\nANSWER: "yes" | "no"'
    text, _, _ = whole_text(client, **base, extra_body={"structured_outputs": {"grammar": grammar}})
    assert text in ("The answer is yes.", "The answer is no."), text
    # /v1/completions takes response_format too; streamed text is the same.
    body = {"model": NAME, "prompt": "A person in JSON:", "max_tokens": 100, "temperature": 0, "logprobs": 1,
            "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}}}
    status, resp = server.post(COMPLETIONS, body)
    assert status == 200, resp
    validate(PERSON, resp["choices"][0]["text"])
    streamed = assemble(COMPLETIONS, server.stream(COMPLETIONS, dict(body, stream=True)))
    assert canonical(COMPLETIONS, streamed)[0] == canonical(COMPLETIONS, resp)[0]


def reassemble_tool_calls(client, **kwargs):
    """The streamed tool calls, their argument deltas joined; and the finish reason."""
    calls, finish = {}, None
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        for c in chunk.choices:
            for t in c.delta.tool_calls or []:
                call = calls.setdefault(t.index, {"id": None, "name": None, "arguments": ""})
                call["id"] = t.id or call["id"]
                if t.function:
                    call["name"] = t.function.name or call["name"]
                    call["arguments"] += t.function.arguments or ""
            if c.finish_reason:
                finish = c.finish_reason
    return [calls[k] for k in sorted(calls)], finish


def test_tool_choice_named(client):
    kwargs = dict(model=NAME, messages=messages("What is the weather in Paris?"), tools=TOOLS, max_tokens=80,
                  temperature=0, tool_choice={"type": "function", "function": {"name": "get_weather"}})
    r = client.chat.completions.create(**kwargs)
    c = r.choices[0]
    assert c.finish_reason == "stop"  # vLLM's (and OpenAI's) for a named function
    assert not c.message.content
    assert len(c.message.tool_calls) == 1
    call = c.message.tool_calls[0]
    assert call.type == "function" and call.function.name == "get_weather" and call.id
    validate(TOOL_SCHEMAS["get_weather"], call.function.arguments)
    streamed, finish = reassemble_tool_calls(client, **kwargs)
    assert finish == "stop"
    assert len(streamed) == 1 and streamed[0]["id"]  # each response's ids are its own
    assert (streamed[0]["name"], streamed[0]["arguments"]) == ("get_weather", call.function.arguments)


def test_tool_choice_required(client):
    for prompt in ("What is the weather in Tokyo?", "Add 2 and 40."):
        kwargs = dict(model=NAME, messages=messages(prompt), tools=TOOLS, max_tokens=150, temperature=0,
                      tool_choice="required")
        c = client.chat.completions.create(**kwargs).choices[0]
        assert c.finish_reason == "tool_calls", c
        assert c.message.tool_calls, c
        for call in c.message.tool_calls:
            assert call.function.name in TOOL_SCHEMAS
            validate(TOOL_SCHEMAS[call.function.name], call.function.arguments)
        streamed, finish = reassemble_tool_calls(client, **kwargs)
        assert finish == "tool_calls"
        assert [(s["name"], s["arguments"]) for s in streamed] == \
            [(t.function.name, t.function.arguments) for t in c.message.tool_calls]


def expect_400(server, body, param, *words, path=CHAT, seconds=5.0):
    """`body` a dict, or the body's JSON text (deeper than Python's json can write)."""
    t0 = time.time()
    if isinstance(body, str):
        status, payload = server.request("POST", path, raw=body.encode())
        resp = json.loads(payload)
    else:
        status, resp = server.post(path, body)
    took = time.time() - t0
    assert status == 400, resp
    assert resp["error"]["param"] == param, resp
    for w in words:
        assert w in resp["error"]["message"], resp
    assert took < seconds, (param, took)
    return resp["error"]["message"]


def nested(levels):
    schema = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def nested_text(levels):
    """A schema nested `levels` objects deep, as JSON text."""
    return '{"type": "object", "properties": {"a": ' * levels + '{"type": "string"}' + "}}" * levels


def test_bad_input_is_a_400_naming_the_field(server, client):
    base = {"model": NAME, "messages": messages("hi"), "max_tokens": 5}

    def fmt(schema):
        return dict(base, response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}})

    field = "response_format.json_schema.schema"
    expect_400(server, fmt({"type": "object", "properties": {"a": {"type": "no-such-type"}}}), field)
    expect_400(server, fmt({"type": "object", "properties": 5}), field)
    expect_400(server, fmt({"type": "string", "format": "no-such-format", "contentSchema": {"x": 1}}), field)
    expect_400(server, dict(base, response_format={"type": "json_schema", "json_schema": {"name": "x"}}), field)
    expect_400(server, dict(base, response_format={"type": "xml"}), "response_format.type")
    expect_400(server, dict(base, response_format={"type": "structural_tag", "structures": [], "triggers": []}),
               "response_format", "structural tags are not supported")
    expect_400(server, dict(base, response_format={"type": "json_object"}, guided_regex="a+"), "response_format")
    expect_400(server, dict(base, structured_outputs={"regex": "([a-z"}), "structured_outputs.regex")
    expect_400(server, dict(base, guided_regex="([a-z"), "guided_regex")
    expect_400(server, dict(base, structured_outputs={"grammar": 'start: ("a"'}), "structured_outputs.grammar")
    expect_400(server, dict(base, guided_grammar='root ::= "a" | "b"'), "guided_grammar", "GBNF")
    expect_400(server, dict(base, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "nope"}}),
               "tool_choice", "nope")
    expect_400(server, dict(base, tools=[{"type": "function", "function": {
        "name": "f", "parameters": {"type": "object", "properties": {"a": {"type": 7}}}}}], tool_choice="required"),
        "tools")
    # Nested 10,000 levels: refused while the body is parsed, naming the field.
    deep = json.dumps(fmt({})).replace('"schema": {}', '"schema": ' + nested_text(10000))
    expect_400(server, deep, "response_format", "nested deeper than")
    # Nested 200 levels (a body the parser takes): the engine's limit of 100.
    expect_400(server, fmt(nested(200)), field, "nested deeper than 100")
    # A 1 MB schema (20,000 properties): answered quickly either way.
    big = {"type": "object", "properties": {f"property_{i:05d}": {"type": "integer"} for i in range(20000)}}
    body = fmt(big)
    assert len(json.dumps(body)) > 600_000
    t0 = time.time()
    status, resp = server.post(CHAT, body)
    assert time.time() - t0 < 10, time.time() - t0
    assert status in (200, 400), resp
    if status == 400:
        assert resp["error"]["param"] == field, resp
    # The openai client sees the same 400 as an exception with the body.
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=NAME, messages=messages("hi"), max_tokens=5,
                                       response_format={"type": "json_schema", "json_schema": {
                                           "name": "x", "schema": {"type": "object", "properties": 5}}})
    assert e.value.body["param"] == field
    # And the server still serves everyone else.
    status, resp = server.post(CHAT, dict(base, response_format={"type": "json_object"}, max_tokens=60, temperature=0))
    assert status == 200, resp


def load_requests():
    """32 constrained requests (three JSON schemas, a regex, a choice, json_object; chat and
    completions, greedy and seeded) and 32 plain ones, half of each streamed."""
    rng = random.Random(33)
    prompts = ["Describe a person.", "Give some points.", "Status?", "Name a color.", "Tell me a story about a fox.",
               "What is 2+2?", "Write a haiku.", "List three fruits."]
    reqs = []
    for i in range(64):
        body = {"model": NAME, "max_tokens": rng.randint(12, 40), "logprobs": True, "top_logprobs": 2,
                "return_token_ids": True}
        if i % 3 == 0:
            body.update(temperature=0)
        else:
            body.update(temperature=round(rng.uniform(0.5, 1.2), 2), seed=100 + i, top_p=0.95)
        if i % 2 == 0:  # constrained
            kind = (i // 2) % 6
            if kind < 3:
                body["response_format"] = {"type": "json_schema",
                                           "json_schema": {"name": f"s{kind}", "schema": SCHEMAS[kind]}}
                body["max_tokens"] = 100
            elif kind == 3:
                body["structured_outputs"] = {"regex": "[A-Z][a-z]{1,6}( [a-z]{1,6}){0,3}\\."}
            elif kind == 4:
                body["guided_choice"] = ["red", "green", "blue", "a shade of grey"]
            else:
                body["response_format"] = {"type": "json_object"}
        path = CHAT if i % 4 != 3 else COMPLETIONS
        if path == CHAT:
            body["messages"] = messages(rng.choice(prompts))
        else:
            body["prompt"] = rng.choice(prompts)
            body["logprobs"] = 2
            del body["top_logprobs"]
        reqs.append((path, body, i % 4 in (1, 2)))
    return reqs


def answer(server, path, body, stream):
    if stream:
        events = server.stream(path, dict(body, stream=True))
        ids = [t for e in events[:-1] for c in e["choices"] for t in (c.get("token_ids") or [])]
        return canonical(path, assemble(path, events))[0], ids
    status, resp = server.post(path, body)
    assert status == 200, resp
    return canonical(path, resp)[0], [t for c in resp["choices"] for t in c["token_ids"]]


def test_64_clients_mixed_constrained_and_plain_each_the_bits_alone(server):
    reqs = load_requests()
    alone = [answer(server, path, body, stream) for path, body, stream in reqs]
    order = list(range(len(reqs)))
    random.Random(5).shuffle(order)
    with ThreadPoolExecutor(64) as pool:
        futures = {i: pool.submit(answer, server, *reqs[i]) for i in order}
        together = {i: f.result() for i, f in futures.items()}
    mismatches = [i for i in range(len(reqs)) if together[i] != alone[i]]
    assert not mismatches, [(reqs[i][1], alone[i], together[i]) for i in mismatches[:2]]
    # The constrained outputs hold to their constraints.
    for (path, body, _), (out, _) in zip(reqs, alone):
        text, finish = out[0][0], out[0][-1]
        if "response_format" in body and finish == "stop":
            rf = body["response_format"]
            value = json.loads(text)
            if rf["type"] == "json_schema":
                jsonschema.validate(value, rf["json_schema"]["schema"])
        if "guided_choice" in body:
            assert text in body["guided_choice"], text
        if "structured_outputs" in body and finish == "stop":
            assert re.fullmatch(body["structured_outputs"]["regex"], text), text
