"""Structured outputs through Python (vLLM's SamplingParams(structured_outputs=StructuredOutputsParams(...))
and its older guided_decoding=GuidedDecodingParams(...)): each kind's output keeps to its
constraint; a constrained request is the same bits (token ids, text, logprobs) alone as in a
shuffled batch with unconstrained requests and requests of other kinds, through LLM.generate,
LLM.chat and AsyncLLM; a constraint the grammar engine refuses raises ValueError naming the field
and the reason before anything runs. The model is a generated 2-layer Qwen3 (random weights, the
real 151,936-token tokenizer), so the outputs are gibberish that keeps to the constraint."""
import asyncio
import json
import random
import re
import struct

import pytest

import ditto
import ditto.llm
from ditto import AsyncLLM, GuidedDecodingParams, SamplingParams, StructuredOutputsParams
from ditto.sampling_params import GuidedDecodingParams as GuidedFromModule
from ditto.sampling_params import StructuredOutputsParams as FromModule

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 6},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "mood": {"enum": ["happy", "sad", "calm"]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "minItems": 1, "maxItems": 2},
    },
    "required": ["name", "age", "mood", "tags"],
    "additionalProperties": False,
}
REGEX = r"[A-Z][a-z]{2,5}-[0-9]{3}"
CHOICES = ["red", "green", "blue", "yellow"]
GRAMMAR = 'start: "The answer is " NUMBER "."\nNUMBER: /[0-9]{1,3}/\n'

# One constrained request of each kind the engine compiles (structural_tag is refused: below).
KINDS = {
    "json": StructuredOutputsParams(json=SCHEMA, disable_any_whitespace=True),
    "json_text": StructuredOutputsParams(json=json.dumps(SCHEMA), disable_any_whitespace=True),
    "json_object": StructuredOutputsParams(json_object=True, disable_any_whitespace=True),
    "regex": StructuredOutputsParams(regex=REGEX),
    "choice": StructuredOutputsParams(choice=CHOICES),
    "grammar": StructuredOutputsParams(grammar=GRAMMAR),
}
PROMPTS = {
    "json": "Describe a person as JSON:",
    "json_text": "Another person, as JSON:",
    "json_object": "Any JSON object:",
    "regex": "A product code:",
    "choice": "Pick a colour:",
    "grammar": "Question: what is 6 times 7?\n",
}


def constrained(kind, seed=7, **kw):
    return SamplingParams(temperature=0.8, seed=seed, max_tokens=48, logprobs=2, structured_outputs=KINDS[kind], **kw)


def bits(out):
    """Everything an output carries, floats as their bit patterns."""
    f = lambda x: struct.pack("<f", x)
    return [(c.index, c.text, tuple(c.token_ids), c.finish_reason, c.stop_reason,
             None if c.cumulative_logprob is None else struct.pack("<d", c.cumulative_logprob),
             None if c.logprobs is None else
             tuple(tuple((t, f(l.logprob), l.rank) for t, l in e.items()) for e in c.logprobs))
            for c in out.outputs]


def check_keeps_to(kind, text, finish_reason):
    if kind == "regex":
        assert finish_reason == "stop" and re.fullmatch(REGEX, text), text
    elif kind == "choice":
        assert finish_reason == "stop" and text in CHOICES, text
    elif kind == "grammar":
        assert finish_reason == "stop" and re.fullmatch(r"The answer is [0-9]{1,3}\.", text), text
    elif finish_reason == "stop":  # a random model may not finish JSON in max_tokens; what it finishes parses
        value = json.loads(text)
        assert isinstance(value, dict)
        if kind in ("json", "json_text"):
            assert set(value) == set(SCHEMA["required"]) and value["mood"] in ("happy", "sad", "calm")
            assert 0 <= value["age"] <= 120 and len(value["name"]) <= 6 and 1 <= len(value["tags"]) <= 2
    else:
        assert finish_reason == "length", finish_reason


def test_imports_match_vllm():
    assert ditto.StructuredOutputsParams is FromModule and ditto.GuidedDecodingParams is GuidedFromModule
    assert issubclass(GuidedDecodingParams, StructuredOutputsParams)
    assert StructuredOutputsParams(regex="a").all_non_structural_tag_constraints_none() is False
    assert GuidedDecodingParams.from_optional() is None
    assert GuidedDecodingParams.from_optional(choice=["a"], backend="guidance").choice == ["a"]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_keeps_to_its_constraint(llm, kind):
    for seed in (1, 2, 3):
        out = llm.generate(PROMPTS[kind], constrained(kind, seed=seed), use_tqdm=False)[0].outputs[0]
        check_keeps_to(kind, out.text, out.finish_reason)


def test_greedy_choice_and_grammar_finish(llm):
    params = SamplingParams(temperature=0, max_tokens=20, structured_outputs=StructuredOutputsParams(choice=CHOICES))
    out = llm.generate("Pick a colour:", params, use_tqdm=False)[0].outputs[0]
    assert out.text in CHOICES and out.finish_reason == "stop"


def test_alone_equals_mixed_batch_bits(llm):
    """Each constrained request alone, then all of them with unconstrained ones (other prompts and
    seeds) in a shuffled batch, then in the reverse order: the same bits."""
    kinds = sorted(KINDS)
    alone = {k: bits(llm.generate(PROMPTS[k], constrained(k), use_tqdm=False)[0]) for k in kinds}
    for k in kinds:
        check_keeps_to(k, alone[k][0][1], alone[k][0][3])
    others = [(f"Plain request {i}: tell me about {w}", SamplingParams(temperature=1.0, seed=50 + i, max_tokens=30,
                                                                       logprobs=2))
              for i, w in enumerate(["cats", "rust", "tea", "rain", "maps", "owls"])]
    batch = [(k, PROMPTS[k], constrained(k)) for k in kinds] + [(None, p, s) for p, s in others]
    for order in (random.Random(5).sample(batch, len(batch)), batch[::-1]):
        outs = llm.generate([p for _, p, _ in order], [s for _, _, s in order], use_tqdm=False)
        got = {k: bits(o) for (k, _, _), o in zip(order, outs) if k is not None}
        assert got == alone


def test_n_choices_each_keep_to_the_constraint(llm):
    params = constrained("regex", n=3)
    out = llm.generate(PROMPTS["regex"], params, use_tqdm=False)[0]
    assert len(out.outputs) == 3
    for c in out.outputs:
        check_keeps_to("regex", c.text, c.finish_reason)
    single = llm.generate(PROMPTS["regex"], constrained("regex"), use_tqdm=False)[0]
    assert bits(single)[0][1:] == bits(out)[0][1:]  # choice 0 does not depend on n


def test_guided_decoding_is_the_same_request(llm):
    new = SamplingParams(temperature=0, max_tokens=20, structured_outputs=StructuredOutputsParams(regex=REGEX))
    old = SamplingParams(temperature=0, max_tokens=20, guided_decoding=GuidedDecodingParams(regex=REGEX))
    a, b = (bits(o) for o in llm.generate(["A code:"] * 2, [new, old], use_tqdm=False))
    assert a == b and re.fullmatch(REGEX, a[0][1])


def test_chat(llm):
    messages = [{"role": "user", "content": "Describe a person as JSON."}]
    params = SamplingParams(temperature=0.7, seed=4, max_tokens=60, logprobs=1,
                            structured_outputs=StructuredOutputsParams(choice=CHOICES))
    alone = llm.chat(messages, params, use_tqdm=False, chat_template_kwargs={"enable_thinking": False})[0]
    assert alone.outputs[0].text in CHOICES
    plain = [[{"role": "user", "content": f"Say something about {w}."}] for w in ("owls", "tea")]
    mixed = llm.chat([plain[0], messages, plain[1]],
                     [SamplingParams(temperature=1.0, seed=1, max_tokens=20), params,
                      SamplingParams(temperature=1.0, seed=2, max_tokens=20)],
                     use_tqdm=False, chat_template_kwargs={"enable_thinking": False})
    assert bits(mixed[1]) == bits(alone)


def test_async_llm_same_bits_as_generate(model_dir, llm):
    kinds = ["json", "regex", "choice", "grammar"]
    expected = {k: bits(llm.generate(PROMPTS[k], constrained(k), use_tqdm=False)[0]) for k in kinds}
    engine = AsyncLLM(model=model_dir, kv_cache_memory="256MiB")

    async def run(k, prompt, params):
        async for out in engine.generate(prompt, params, request_id=f"r-{k}"):
            pass
        return k, out

    async def main():
        jobs = [run(k, PROMPTS[k], constrained(k)) for k in kinds]
        jobs += [run(f"plain{i}", f"Plain {i}", SamplingParams(temperature=1.0, seed=i, max_tokens=24))
                 for i in range(3)]
        return await asyncio.gather(*jobs)

    try:
        got = {k: bits(o) for k, o in asyncio.run(main()) if k in expected}
    finally:
        engine.shutdown()
    assert got == expected


def test_async_llm_refuses_a_bad_schema(model_dir):
    engine = AsyncLLM(model=model_dir, kv_cache_memory="128MiB")
    params = SamplingParams(max_tokens=4, structured_outputs=StructuredOutputsParams(regex="(unclosed"))

    async def main():
        async for _ in engine.generate("Hi", params, request_id="bad"):
            pass

    try:
        with pytest.raises(ValueError, match=r"structured_outputs\.regex"):
            asyncio.run(main())
    finally:
        engine.shutdown()


@pytest.mark.parametrize("so, field, reason", [
    (StructuredOutputsParams(json={"type": "object", "properties": {"a": {"type": "no-such-type"}}}),
     "structured_outputs.json", "no-such-type"),
    (StructuredOutputsParams(json="{not json"), "structured_outputs.json", "not valid JSON"),
    (StructuredOutputsParams(json={"type": "string", "pattern": "(unclosed"}), "structured_outputs.json", ""),
    (StructuredOutputsParams(regex="(unclosed"), "structured_outputs.regex", ""),
    (StructuredOutputsParams(grammar="start: foo bar ::"), "structured_outputs.grammar", ""),
    (StructuredOutputsParams(grammar='root ::= "a"'), "structured_outputs.grammar", "GBNF"),
    (StructuredOutputsParams(structural_tag={"type": "structural_tag", "structures": [], "triggers": []}),
     "structured_outputs.structural_tag", "not supported"),
])
def test_a_constraint_the_engine_refuses_raises_before_anything_runs(llm, monkeypatch, so, field, reason):
    steps = []

    class Bar:
        def __init__(self, total, pooling=False):
            pass

        def update(self, *args):
            steps.append(args)

        def close(self):
            pass

    monkeypatch.setattr(ditto.llm, "_ProgressBar", Bar)
    good = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
    bad = SamplingParams(temperature=0, max_tokens=8, structured_outputs=so)
    with pytest.raises(ValueError) as e:
        llm.generate(["A fine request", "A bad one"], [good, bad], use_tqdm=True)
    assert field in str(e.value) and reason in str(e.value), str(e.value)
    assert steps == []  # refused at the front door: no step of the batch ran
    with pytest.raises(ValueError, match=re.escape(field)):
        llm.chat([{"role": "user", "content": "Hi"}], bad, use_tqdm=False)


def test_parameter_errors():
    with pytest.raises(ValueError, match="You can only use one kind of structured outputs constraint"):
        StructuredOutputsParams(json=SCHEMA, regex="a")
    with pytest.raises(ValueError, match="You must use one kind of structured outputs constraint"):
        StructuredOutputsParams()
    with pytest.raises(ValueError, match="You can only use one kind of guided decoding"):
        GuidedDecodingParams(choice=["a"], grammar="start: \"a\"")
    with pytest.raises(ValueError, match="not both"):
        SamplingParams(structured_outputs=StructuredOutputsParams(regex="a"),
                       guided_decoding=GuidedDecodingParams(regex="a"))
    with pytest.raises(ValueError, match="structured_outputs must be a StructuredOutputsParams"):
        SamplingParams(structured_outputs={"json": SCHEMA})
    with pytest.raises(ValueError, match="structured_outputs.choice must be a list of strings"):
        StructuredOutputsParams(choice=["a", 1])
    with pytest.raises(ValueError, match="structured_outputs.choice must hold at least one string"):
        SamplingParams(structured_outputs=StructuredOutputsParams(choice=[]))
    with pytest.raises(ValueError, match="structured_outputs.json must be a JSON Schema"):
        StructuredOutputsParams(json=3)
    with pytest.raises(ValueError, match="structured_outputs.regex must be a string"):
        StructuredOutputsParams(regex=re.compile("a"))
    with pytest.raises(ValueError, match="apply to json and json_object only"):
        SamplingParams(structured_outputs=StructuredOutputsParams(regex="a", disable_any_whitespace=True))
    with pytest.raises(ValueError, match="backend"):
        GuidedDecodingParams(regex="a", backend="xgrammar")
    assert GuidedDecodingParams(regex="a", backend="guidance").backend == "guidance"
    # disable_fallback changes nothing: ditto has one grammar engine
    SamplingParams(structured_outputs=StructuredOutputsParams(regex="a", disable_fallback=True))


def test_huge_and_deep_schemas_are_refused_by_name(llm):
    deep = {}
    cur = deep
    for _ in range(10_000):
        cur["items"] = {}
        cur = cur["items"]
    with pytest.raises(ValueError, match="structured_outputs.json is nested too deeply"):
        StructuredOutputsParams(json=deep)
    text = '{"items":' * 10_000 + "{}" + "}" * 10_000  # as text it reaches the engine, which refuses it
    with pytest.raises(ValueError, match=r"structured_outputs\.json: the schema is nested deeper than 100 levels"):
        llm.generate("x", SamplingParams(max_tokens=4, structured_outputs=StructuredOutputsParams(json=text)),
                     use_tqdm=False)
    fields = [f"field_{i}" for i in range(2700)]
    big = {"type": "object", "properties": {f: {"enum": [f"v{j}" for j in range(50)]} for f in fields},
           "required": fields}  # about 1 MB
    with pytest.raises(ValueError, match=r"structured_outputs\.json: .*too big"):
        llm.generate("x", SamplingParams(max_tokens=4, structured_outputs=StructuredOutputsParams(json=big)),
                     use_tqdm=False)


def test_pydantic_style_model_class():
    class Model:  # anything with pydantic's model_json_schema(), as vLLM takes a BaseModel class
        @staticmethod
        def model_json_schema():
            return {"type": "object", "properties": {"x": {"type": "integer"}}}

    assert StructuredOutputsParams(json=Model).json == Model.model_json_schema()
