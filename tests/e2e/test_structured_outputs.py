"""Structured outputs on the real SmolLM2-135M-Instruct (models/SmolLM2-135M-Instruct.Q4_1.gguf),
issue #33's acceptance: 20 JSON schemas of increasing difficulty, each with a chat prompt that
asks for what it describes. Every output finishes ("stop", not "length"), parses, and validates
against its schema with Python's jsonschema (formats checked too); regex outputs fullmatch and
choice outputs are one of the choices. Through the CLI's JSON lines (`ditto generate --prompts`)
here, streamed by `ditto serve` (the same text), and — where the `ditto` Python package is importable (`make test` runs this file a second
time in build/venv) — through Python's LLM.generate, which gives the same bits (token ids, text,
logprobs) as the CLI.

Greedy decoding throughout. What the model needed to finish, recorded honestly (with the first
version of each row, 15 of the 20 finished and all 15 validated; the 5 others ran to max_tokens,
never producing invalid JSON):
- 02, 06, 15: the schemas leave additionalProperties open (JSON Schema's default), and the model
  kept inventing keys ("population_per_family_per_family...") until max_tokens: asked with vLLM's
  disable_additional_properties (OPTIONS below), they finish.
- 12: without maxItems the model listed {"name": "bread", "price": N.5} forever (no option stops
  that); the schema has maxItems 4.
- 19 (recursive $ref): asked "Anna has two children, Ben and Carl; neither has children", the
  model nested Ben and Carl inside each other forever, with or without white space and with
  maxItems; the prompt that says their children lists are empty finishes.
disable_any_whitespace was not needed: no output rambled in white space."""
import concurrent.futures
import http.client
import json
import os
import pathlib
import re
import struct
import subprocess
import threading

import pytest

from conftest import run_ditto

jsonschema = pytest.importorskip("jsonschema")

REPO = pathlib.Path(__file__).resolve().parents[2]
MODEL = REPO / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
MAX_TOKENS = 400
SYSTEM = "You are a helpful assistant. Answer with JSON only."


def chat(user: str) -> str:
    """SmolLM2-Instruct's chat template (ChatML), rendered by hand so that the CLI and Python get
    the very same prompt text."""
    return (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n"
            "<|im_start|>assistant\n")


ADDRESS = {
    "type": "object",
    "properties": {
        "street": {"type": "string", "maxLength": 40},
        "city": {"type": "string", "maxLength": 30},
        "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
    },
    "required": ["street", "city", "zip"],
    "additionalProperties": False,
}

# (name, schema, user prompt), easiest first.
SCHEMAS = [
    ("01_flat_object",
     {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
      "required": ["name", "age"]},
     "Alice is 30 years old. Give her name and age as JSON."),
    ("02_scalars",
     {"type": "object",
      "properties": {"city": {"type": "string"}, "population": {"type": "integer"},
                     "is_capital": {"type": "boolean"}},
      "required": ["city", "population", "is_capital"]},
     "Paris is the capital of France and has about 2100000 inhabitants. Describe the city as JSON."),
    ("03_enum",
     {"type": "object",
      "properties": {"sentiment": {"enum": ["positive", "negative", "neutral"]}},
      "required": ["sentiment"]},
     "What is the sentiment of this review: 'I loved this movie, it was wonderful!'?"),
    ("04_array_min_items",
     {"type": "object",
      "properties": {"colors": {"type": "array", "items": {"type": "string"}, "minItems": 3, "maxItems": 5}},
      "required": ["colors"]},
     "List the three primary colors."),
    ("05_nested_object",
     {"type": "object",
      "properties": {
          "title": {"type": "string"},
          "author": {"type": "object",
                     "properties": {"first_name": {"type": "string"}, "last_name": {"type": "string"}},
                     "required": ["first_name", "last_name"]},
          "year": {"type": "integer"}},
      "required": ["title", "author", "year"]},
     "The novel '1984' was written by George Orwell and published in 1949. Describe the book."),
    ("06_number_bounds",
     {"type": "object",
      "properties": {"temperature_c": {"type": "number", "minimum": -50, "maximum": 60},
                     "humidity_percent": {"type": "integer", "minimum": 0, "maximum": 100}},
      "required": ["temperature_c", "humidity_percent"]},
     "Today in London it is 18.5 degrees Celsius with 72 percent humidity. Report the weather."),
    ("07_exclusive_minimum",
     {"type": "object",
      "properties": {"product": {"type": "string"}, "price": {"type": "number", "exclusiveMinimum": 0},
                     "quantity": {"type": "integer", "minimum": 1, "maximum": 1000}},
      "required": ["product", "price", "quantity"]},
     "I bought 3 notebooks at 2.50 dollars each. Give the product, unit price and quantity."),
    ("08_string_pattern",
     {"type": "object",
      "properties": {"zip_code": {"type": "string", "pattern": "^[0-9]{5}$"},
                     "state": {"type": "string", "pattern": "^[A-Z]{2}$"},
                     "phone": {"type": "string", "pattern": "^[0-9]{3}-[0-9]{3}-[0-9]{4}$"}},
      "required": ["zip_code", "state", "phone"]},
     "The office is in Springfield, IL 62701; call 217-555-0123. Give its zip code, state and phone."),
    ("09_additional_properties_false",
     {"type": "object",
      "properties": {"title": {"type": "string"}, "priority": {"enum": ["low", "medium", "high"]},
                     "done": {"type": "boolean"}},
      "required": ["title", "priority"],
      "additionalProperties": False},
     "Create a high priority task to buy milk that is not done yet."),
    ("10_const",
     {"type": "object",
      "properties": {"type": {"const": "event"}, "name": {"type": "string"},
                     "attendees": {"type": "integer", "minimum": 1}},
      "required": ["type", "name", "attendees"],
      "additionalProperties": False},
     "A birthday party with 12 guests. Describe the event."),
    ("11_any_of",
     {"type": "object",
      "properties": {
          "id": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{3}$"}]},
          "contact": {"anyOf": [
              {"type": "object", "properties": {"email": {"type": "string", "format": "email"}},
               "required": ["email"], "additionalProperties": False},
              {"type": "object", "properties": {"phone": {"type": "string", "pattern": "^[0-9]{10}$"}},
               "required": ["phone"], "additionalProperties": False}]}},
      "required": ["id", "contact"]},
     "Customer ABC-123 can be reached by email at jane@example.com. Give the id and contact."),
    ("12_array_of_objects",
     {"type": "object",
      "properties": {"items": {"type": "array", "minItems": 2, "maxItems": 4,
                               "items": {"type": "object",
                                         "properties": {"name": {"type": "string"},
                                                        "price": {"type": "number", "minimum": 0}},
                                         "required": ["name", "price"], "additionalProperties": False}}},
      "required": ["items"]},
     "My shopping list: apples for 3 dollars and bread for 2 dollars. List the items with prices."),
    ("13_nested_arrays",
     {"type": "object",
      "properties": {"matrix": {"type": "array", "minItems": 2, "maxItems": 3,
                                "items": {"type": "array", "minItems": 2, "maxItems": 2,
                                          "items": {"type": "integer", "minimum": 0, "maximum": 9}}}},
      "required": ["matrix"]},
     "Write the 2 by 2 identity matrix."),
    ("14_defs_ref",
     {"$defs": {"address": ADDRESS},
      "type": "object",
      "properties": {"name": {"type": "string"}, "home": {"$ref": "#/$defs/address"},
                     "work": {"$ref": "#/$defs/address"}},
      "required": ["name", "home", "work"]},
     "Bob lives at 12 Oak Street, Boston 02118 and works at 1 Main Street, Cambridge 02139. "
     "Give his name, home and work addresses."),
    ("15_nullable_and_enum_numbers",
     {"type": "object",
      "properties": {"rating": {"enum": [1, 2, 3, 4, 5]}, "comment": {"type": ["string", "null"]},
                     "recommend": {"type": "boolean"}},
      "required": ["rating", "comment", "recommend"]},
     "Rate the restaurant: the food was great, 5 stars, I would recommend it."),
    ("16_string_lengths_and_format",
     {"type": "object",
      "properties": {"username": {"type": "string", "minLength": 3, "maxLength": 12, "pattern": "^[a-z0-9_]+$"},
                     "email": {"type": "string", "format": "email"},
                     "signup_date": {"type": "string", "format": "date"}},
      "required": ["username", "email", "signup_date"],
      "additionalProperties": False},
     "Register user john_doe with email john@example.com, who signed up on 2024-03-15."),
    ("17_one_of_tagged",
     {"type": "object",
      "properties": {"shape": {"oneOf": [
          {"type": "object", "properties": {"kind": {"const": "circle"}, "radius": {"type": "number", "minimum": 0}},
           "required": ["kind", "radius"], "additionalProperties": False},
          {"type": "object", "properties": {"kind": {"const": "rectangle"},
                                            "width": {"type": "number", "minimum": 0},
                                            "height": {"type": "number", "minimum": 0}},
           "required": ["kind", "width", "height"], "additionalProperties": False}]}},
      "required": ["shape"]},
     "Describe a circle with radius 2.5."),
    ("18_top_level_array",
     {"type": "array", "minItems": 3, "maxItems": 5,
      "items": {"type": "object",
                "properties": {"step": {"type": "integer", "minimum": 1}, "action": {"type": "string"}},
                "required": ["step", "action"], "additionalProperties": False}},
     "Give the steps to make tea: boil water, add the tea bag, wait three minutes."),
    ("19_recursive_ref",
     {"$defs": {"node": {"type": "object",
                         "properties": {"name": {"type": "string"},
                                        "children": {"type": "array", "maxItems": 3,
                                                     "items": {"$ref": "#/$defs/node"}}},
                         "required": ["name", "children"], "additionalProperties": False}},
      "$ref": "#/$defs/node"},
     "Draw a family tree as nested JSON: Anna is the parent; her children are Ben and Carl, who have no "
     "children (empty lists)."),
    ("20_order",
     {"$defs": {"address": ADDRESS,
                "line": {"type": "object",
                         "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{4}$"},
                                        "quantity": {"type": "integer", "minimum": 1, "maximum": 99},
                                        "unit_price": {"type": "number", "exclusiveMinimum": 0, "maximum": 10000}},
                         "required": ["sku", "quantity", "unit_price"], "additionalProperties": False}},
      "type": "object",
      "properties": {
          "order_id": {"type": "string", "pattern": "^ORD-[0-9]{6}$"},
          "status": {"enum": ["pending", "shipped", "delivered", "cancelled"]},
          "customer": {"type": "object",
                       "properties": {"name": {"type": "string", "minLength": 1},
                                      "email": {"type": "string", "format": "email"},
                                      "vip": {"type": "boolean"}},
                       "required": ["name", "email", "vip"], "additionalProperties": False},
          "shipping_address": {"$ref": "#/$defs/address"},
          "lines": {"type": "array", "minItems": 1, "maxItems": 4, "items": {"$ref": "#/$defs/line"}},
          "total": {"type": "number", "minimum": 0},
          "notes": {"anyOf": [{"type": "string", "maxLength": 80}, {"type": "null"}]}},
      "required": ["order_id", "status", "customer", "shipping_address", "lines", "total", "notes"],
      "additionalProperties": False},
     "Order ORD-004521 for Maria Lopez (maria@example.com, a VIP) has shipped to 5 Elm Road, Austin 73301: "
     "2 of item AB1234 at 9.99 each. Give the whole order."),
]

# StructuredOutputsParams options a schema is asked with, by name (the module docstring says why).
OPTIONS = {name: {"disable_additional_properties": True}
           for name in ("02_scalars", "06_number_bounds", "15_nullable_and_enum_numbers")}

REGEXES = [
    ("regex_date", r"[0-9]{4}-[0-9]{2}-[0-9]{2}", "When did the Apollo 11 mission land on the Moon? Give the date."),
    ("regex_phone", r"\([0-9]{3}\) [0-9]{3}-[0-9]{4}", "Write a US phone number."),
    ("regex_sentence", r"The capital of France is [A-Z][a-z]+\.", "What is the capital of France?"),
]
CHOICES = [
    ("choice_sentiment", ["positive", "negative", "neutral"], "Sentiment of 'This is the worst day ever.'?"),
    ("choice_yes_no", ["yes", "no"], "Is the sky blue on a clear day? Answer yes or no."),
    ("choice_animal", ["cat", "dog", "bird", "fish"], "Which animal barks?"),
]


def requests():
    """Every request as a CLI JSON line (the Python side builds the same from it)."""
    out = []
    for name, schema, user in SCHEMAS:
        so = {"json": schema, **OPTIONS.get(name, {})}
        out.append({"request_id": name, "prompt": chat(user), "structured_outputs": so})
    for name, regex, user in REGEXES:
        out.append({"request_id": name, "prompt": chat(user), "structured_outputs": {"regex": regex}})
    for name, choices, user in CHOICES:
        out.append({"request_id": name, "prompt": chat(user), "structured_outputs": {"choice": choices}})
    for r in out:
        r.update(max_tokens=MAX_TOKENS, temperature=0, logprobs=1)
    return out


@pytest.fixture(scope="module")
def model():
    if not MODEL.exists():
        pytest.skip(f"{MODEL.relative_to(REPO)} missing: scripts/install-deps.sh fetches it")
    return MODEL


@pytest.fixture(scope="module")
def cli_outputs(ditto_bin, model, tmp_path_factory):
    """{request_id: the CLI's output line} for every request, in one batch."""
    src = tmp_path_factory.mktemp("so") / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in requests()))
    proc = run_ditto(ditto_bin, "generate", "--model", model, "--prompts", src)
    lines = [json.loads(l) for l in proc.stdout.splitlines()]
    return {l["request_id"]: l for l in lines}


def only_choice(line):
    assert "error" not in line, line
    assert len(line["outputs"]) == 1
    return line["outputs"][0]


def validate(schema, value):
    v = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in v.iter_errors(value)]
    assert not errors, errors


def test_twenty_schemas_each_valid_json_schema():
    assert len(SCHEMAS) == 20 and len({n for n, _, _ in SCHEMAS}) == 20
    for _, schema, _ in SCHEMAS:
        jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("name, schema", [(n, s) for n, s, _ in SCHEMAS], ids=[n for n, _, _ in SCHEMAS])
def test_json_output_finishes_parses_and_validates(cli_outputs, name, schema):
    out = only_choice(cli_outputs[name])
    assert out["finish_reason"] == "stop", (name, out["finish_reason"], out["text"])
    value = json.loads(out["text"])
    validate(schema, value)


@pytest.mark.parametrize("name, regex", [(n, r) for n, r, _ in REGEXES], ids=[n for n, _, _ in REGEXES])
def test_regex_output_matches(cli_outputs, name, regex):
    out = only_choice(cli_outputs[name])
    assert out["finish_reason"] == "stop" and re.fullmatch(regex, out["text"]), out


@pytest.mark.parametrize("name, choices", [(n, c) for n, c, _ in CHOICES], ids=[n for n, _, _ in CHOICES])
def test_choice_output_is_a_choice(cli_outputs, name, choices):
    out = only_choice(cli_outputs[name])
    assert out["finish_reason"] == "stop" and out["text"] in choices, out


def test_cli_refuses_a_bad_constraint_by_name_and_runs_the_other_lines(ditto_bin, model, tmp_path):
    lines = [{"request_id": "bad_keyword", "prompt": chat("Hi"), "structured_outputs": {"json": {"uniqueItems": True}}},
             {"request_id": "bad_regex", "prompt": chat("Hi"), "guided_regex": "(unclosed"},
             {"request_id": "good", "prompt": chat("Is water wet? Answer yes or no."), "temperature": 0,
              "structured_outputs": {"choice": ["yes", "no"]}}]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(l) + "\n" for l in lines))
    proc = run_ditto(ditto_bin, "generate", "--model", model, "--prompts", src, check=False)
    assert proc.returncode == 1 and "2 request(s) failed" in proc.stderr, proc.stderr
    out = {j["request_id"]: j for j in map(json.loads, proc.stdout.splitlines())}
    assert "structured_outputs.json" in out["bad_keyword"]["error"] and "uniqueItems" in out["bad_keyword"]["error"]
    assert "guided_regex" in out["bad_regex"]["error"] or "structured_outputs.regex" in out["bad_regex"]["error"]
    assert only_choice(out["good"])["text"] in ("yes", "no")


def f32(x):
    return struct.pack("<f", x)


@pytest.fixture(scope="module")
def server(ditto_bin, model):
    """`ditto serve` on the model; yields its port."""
    proc = subprocess.Popen([ditto_bin, "serve", str(model), "--port", "0", "--kv-cache-memory", "512MiB",
                             "--served-model-name", "m"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    m = re.search(r"listening on http://[\d.]+:(\d+)", line)
    if not m:
        proc.kill()
        raise RuntimeError(f"ditto serve did not start: {line}{proc.stderr.read()}")
    threading.Thread(target=proc.stdout.read, daemon=True).start()
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    yield int(m.group(1))
    proc.terminate()
    proc.wait(timeout=60)


def stream_completion(port, body):
    """POST /v1/completions with stream: the text and token ids the chunks carry, and the finish reason."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/completions", json.dumps({**body, "stream": True}), {"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200, r.read()[:500]
    text, finish = "", None
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        choice = json.loads(line[6:])["choices"][0]
        text += choice.get("text") or ""
        finish = choice.get("finish_reason") or finish
    return text, finish


def test_the_server_streams_the_clis_outputs(cli_outputs, server):
    """Every request of the set streamed by `ditto serve` (vLLM's structured_outputs on
    /v1/completions, four at once): the same text and finish reason as the CLI's line, so every JSON
    output validates streamed too."""
    reqs = {r["request_id"]: r for r in requests()}
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        got = dict(zip(reqs, pool.map(
            lambda r: stream_completion(server, {"model": "m", "prompt": r["prompt"], "max_tokens": r["max_tokens"],
                                                 "temperature": r["temperature"],
                                                 "structured_outputs": r["structured_outputs"]}), reqs.values())))
    schemas = {n: s for n, s, _ in SCHEMAS}
    for rid, (text, finish) in got.items():
        want = only_choice(cli_outputs[rid])
        assert (text, finish) == (want["text"], want["finish_reason"]), rid
        if rid in schemas:
            validate(schemas[rid], json.loads(text))


def test_python_llm_generate_gives_the_cli_bits(cli_outputs, model):
    """The same requests through Python's LLM.generate (StructuredOutputsParams): the same token
    ids, text, finish reason and logprobs (as float32 bits) as the CLI's lines."""
    ditto = pytest.importorskip("ditto", reason="the ditto Python package (make test runs this file in build/venv)")
    llm = ditto.LLM(model=str(model), kv_cache_memory="256MiB")
    reqs = requests()
    params = [ditto.SamplingParams(max_tokens=r["max_tokens"], temperature=r["temperature"], logprobs=r["logprobs"],
                                   structured_outputs=ditto.StructuredOutputsParams(**r["structured_outputs"]))
              for r in reqs]
    outs = llm.generate([r["prompt"] for r in reqs], params, use_tqdm=False)
    for r, o in zip(reqs, outs):
        c = o.outputs[0]
        want = only_choice(cli_outputs[r["request_id"]])
        assert (c.text, list(c.token_ids), c.finish_reason) == \
            (want["text"], want["token_ids"], want["finish_reason"]), r["request_id"]
        got = [sorted((t, f32(l.logprob)) for t, l in step.items()) for step in c.logprobs]
        assert got == cli_logprobs(want), r["request_id"]


def cli_logprobs(choice):
    """Each step's sampled and top token ids with their logprobs (float32 bits), as Python's
    CompletionOutput.logprobs holds them."""
    return [sorted({s["token_id"]: f32(s["logprob"]), **{t["token_id"]: f32(t["logprob"]) for t in s["top_logprobs"]}}
                   .items()) for s in choice["logprobs"]]


if os.environ.get("DITTO_SO_PRINT"):  # DITTO_SO_PRINT=1 pytest -s: the outputs, for the record
    @pytest.fixture(scope="module", autouse=True)
    def _print(cli_outputs):
        yield
        for rid, line in cli_outputs.items():
            c = only_choice(line)
            print(f"{rid}: {c['finish_reason']} {len(c['token_ids'])} tokens: {c['text']}")
