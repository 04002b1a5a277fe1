"""Chat-template parity: `ditto render-chat` against Python's jinja2 configured as transformers
configures it (render_jinja2.py), on the cases of gen_cases.py -- the real Qwen3 and Llama-3.1
templates and templates that exercise the interpreter. Required: every prompt identical.
Bad input (messages, templates, raise_exception) must fail with exit status 1 and one clear error.
"""
import json
import os

import pytest

import gen_cases
from conftest import ditto_render, oracle_render


def materialize(name, suite, root):
    """The model directory for a suite: a real one, or one written under root."""
    if suite.model:
        return suite.model
    model = root / name
    model.mkdir(parents=True)
    (model / "tokenizer_config.json").write_text(json.dumps(suite.config, ensure_ascii=False), encoding="utf-8")
    for filename, text in suite.files.items():
        (model / filename).write_text(text, encoding="utf-8")
    return model


def write_cases(path, cases):
    with open(path, "w", encoding="utf-8") as f:
        for case in cases:
            f.write(json.dumps(case, ensure_ascii=False) + "\n")


def first_difference(a, b):
    n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return n, a[max(0, n - 40):n + 40], b[max(0, n - 40):n + 40]


def test_rendered_prompts_identical_to_jinja2(ditto_bin, jinja2_available, tmp_path):
    total = identical = 0
    mismatches, per_suite = [], []
    for name, suite in gen_cases.generate().items():
        model = materialize(name, suite, tmp_path)
        if not os.path.isdir(model):
            pytest.fail(f"{name}: model directory {model} missing (run scripts/install-deps.sh)")
        cases = tmp_path / f"{name}.jsonl"
        write_cases(cases, suite.cases)
        rc, expected, err, _ = oracle_render(model, cases)
        assert rc == 0, f"{name}: jinja2 oracle failed: {err}"
        rc, actual, err, _ = ditto_render(ditto_bin, model, cases)
        assert rc == 0, f"{name}: ditto render-chat failed ({rc}): {err}"
        assert len(actual) == len(expected) == len(suite.cases), name
        same = sum(a == e for a, e in zip(actual, expected))
        per_suite.append(f"{name} {same}/{len(expected)}")
        total += len(expected)
        identical += same
        for i, (a, e) in enumerate(zip(actual, expected)):
            if a != e:
                mismatches.append((name, i, a, e))
    print(f"\nchat template parity: {identical}/{total} identical ({', '.join(per_suite)})")
    assert total >= 200
    if mismatches:
        report = []
        for name, i, a, e in mismatches[:5]:
            pos, got, want = first_difference(a, e)
            report.append(f"{name} case {i}: first difference at character {pos}\n"
                          f"  ditto : {got!r}\n  jinja2: {want!r}")
        pytest.fail(f"{len(mismatches)} of {total} prompts differ:\n" + "\n".join(report))


# ---- bad input: exit status 1, nothing on stdout, one error line naming the culprit ----

def error_of(ditto_bin, model, lines, tmp_path):
    cases = tmp_path / "bad.jsonl"
    cases.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    rc, _, err, out = ditto_render(ditto_bin, model, cases)
    assert rc == 1, f"expected exit status 1, got {rc}: {err}"
    assert out == ""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.fixture
def qwen3():
    return gen_cases.NPM / "tokenizer-qwen3" / "models"


@pytest.fixture
def llama31(tmp_path):
    suite = gen_cases.generate()["llama3_1_instruct"]
    return materialize("llama31", suite, tmp_path)


def test_missing_role(ditto_bin, qwen3, tmp_path):
    ok = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
    msg = error_of(ditto_bin, qwen3, [ok, json.dumps({"messages": [{"content": "no role"}]})], tmp_path)
    assert "line 2" in msg and "messages[0]" in msg and "'role'" in msg, msg


def test_non_string_content(ditto_bin, qwen3, tmp_path):
    bad = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": 42}]}
    msg = error_of(ditto_bin, qwen3, [json.dumps(bad)], tmp_path)
    assert "line 1" in msg and "messages[1].content" in msg and "string" in msg, msg


def test_non_string_role_and_bad_fields(ditto_bin, qwen3, tmp_path):
    msg = error_of(ditto_bin, qwen3, [json.dumps({"messages": [{"role": ["user"], "content": "x"}]})], tmp_path)
    assert "messages[0].role" in msg, msg
    msg = error_of(ditto_bin, qwen3, ['{"messages": [], "add_generation_prompt": "yes"}'], tmp_path)
    assert "add_generation_prompt" in msg, msg
    msg = error_of(ditto_bin, qwen3, ['{"messages": [{"role": "user", "content": "x"}]}', "{not json"], tmp_path)
    assert "line 2" in msg and "invalid JSON" in msg, msg
    msg = error_of(ditto_bin, qwen3, ['{"tools": []}'], tmp_path)
    assert "line 1" in msg and "'messages'" in msg, msg
    msg = error_of(ditto_bin, qwen3, ['{"messages": [{"role": "user", "content": "x"}], "tools": [3]}'], tmp_path)
    assert "tools[0]" in msg, msg


def test_template_syntax_error(ditto_bin, tmp_path):
    model = tmp_path / "broken"
    model.mkdir()
    template = "{% for message in messages %}\n{{ message.content }}\n{% if message.role == 'user' %}\nU\n{% endfor %}"
    (model / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
    msg = error_of(ditto_bin, model, ['{"messages": [{"role": "user", "content": "x"}]}'], tmp_path)
    assert "tokenizer_config.json" in msg and "line 5" in msg and "endif" in msg, msg


def test_unsupported_tag_names_tag_and_line(ditto_bin, tmp_path):
    model = tmp_path / "include"
    model.mkdir()
    (model / "tokenizer_config.json").write_text(json.dumps({"chat_template": "ok\n{% include 'x.jinja' %}"}))
    msg = error_of(ditto_bin, model, ['{"messages": []}'], tmp_path)
    assert "line 2" in msg and "'include'" in msg, msg


def test_raise_exception_from_template(ditto_bin, llama31, tmp_path):
    two_calls = {"messages": [{"role": "user", "content": "q"},
                              {"role": "assistant", "tool_calls": [
                                  {"type": "function", "function": {"name": "a", "arguments": {}}},
                                  {"type": "function", "function": {"name": "b", "arguments": {}}}]}]}
    msg = error_of(ditto_bin, llama31, [json.dumps(two_calls)], tmp_path)
    assert "This model only supports single tool-calls at once!" in msg and "line 1" in msg, msg
    # jinja2 raises the same.
    cases = tmp_path / "raise.jsonl"
    cases.write_text(json.dumps(two_calls) + "\n")
    rc, _, err, _ = oracle_render(llama31, cases)
    assert rc == 1 and "This model only supports single tool-calls at once!" in err

    no_user = {"messages": [{"role": "system", "content": "s"}], "tools": [gen_cases.TOOLS[0]]}
    msg = error_of(ditto_bin, llama31, [json.dumps(no_user)], tmp_path)
    assert "Cannot put tools in the first user message" in msg, msg


def test_runtime_error_names_line(ditto_bin, qwen3, tmp_path):
    # Qwen3's template tests `'</think>' in message.content`: null content with tool calls fails in
    # jinja2 too (TypeError), and ditto reports it with the template line.
    case = {"messages": [{"role": "user", "content": "q"},
                         {"role": "assistant", "content": None, "tool_calls": [
                             {"type": "function", "function": {"name": "a", "arguments": {}}}]}]}
    msg = error_of(ditto_bin, qwen3, [json.dumps(case)], tmp_path)
    assert "tokenizer_config.json" in msg and "line " in msg and "NoneType" in msg, msg


def test_no_chat_template(ditto_bin, tmp_path):
    model = tmp_path / "base"
    model.mkdir()
    (model / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>"}))
    cases = tmp_path / "c.jsonl"
    cases.write_text('{"messages": []}\n')
    rc, _, err, _ = ditto_render(ditto_bin, model, cases)
    assert rc == 1 and "chat_template" in err, err
