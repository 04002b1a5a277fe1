#!/usr/bin/python3
"""The parity oracle: renders chat templates with Python's jinja2, configured the way Hugging Face
transformers configures it for tokenizer.apply_chat_template(..., tokenize=False).

Written from transformers' documented behaviour (utils/chat_template_utils.py and
tokenization_utils_base.py), not copied:
  - jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the
    jinja2.ext.loopcontrols extension and a `{% generation %}...{% endgeneration %}` tag whose body
    renders unchanged;
  - filters["tojson"] = json.dumps(x, ensure_ascii=False, indent=indent, separators=separators,
    sort_keys=sort_keys) (no HTML escaping, keys in insertion order);
  - globals raise_exception(message) (raises jinja2.TemplateError) and strftime_now(format);
  - variables: the tokenizer's special_tokens_map (bos/eos/unk/sep/pad/cls/mask token strings and
    additional_special_tokens, only those that are set), then the caller's kwargs on top, then
    messages, tools (None when absent), documents (None) and add_generation_prompt;
  - a list-valued chat_template is a set of named templates: "tool_use" when tools is not None and
    it exists, else "default".

Usage: render_jinja2.py --model DIR --input cases.jsonl   (the same interface as `ditto render-chat`)
Prints one {"prompt": ...} line per input line; on the first failure prints the error to stderr and
exits 1.
"""
import argparse
import json
import os
import sys
from datetime import datetime

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment


class GenerationTag(jinja2.ext.Extension):
    """transformers' {% generation %} block (it tracks assistant spans); the text is unchanged."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.Scope(body, lineno=lineno)


def make_environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.now().strftime(format)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


SPECIAL_TOKEN_KEYS = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]


def token_text(value):
    """A special token in tokenizer_config.json: a string or an AddedToken dict with "content"."""
    if isinstance(value, dict):
        return value["content"]
    return value


def load_model(model_dir):
    """Returns ({name: template source}, special_tokens_map) the way transformers loads them."""
    config_path = os.path.join(model_dir, "tokenizer_config.json")
    config = {}
    if os.path.exists(config_path):
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
    templates = None
    jinja_path = os.path.join(model_dir, "chat_template.jinja")
    if os.path.exists(jinja_path):
        with open(jinja_path, encoding="utf-8") as f:
            templates = {None: f.read()}
    else:
        chat_template = config.get("chat_template")
        if isinstance(chat_template, list):
            templates = {t["name"]: t["template"] for t in chat_template}
        elif chat_template is not None:
            templates = {None: chat_template}
    if templates is None:
        raise ValueError(f"{model_dir}: no chat template")
    special = {}
    for key in SPECIAL_TOKEN_KEYS:
        text = token_text(config.get(key))
        if text:
            special[key] = text
    extra = [token_text(t) for t in config.get("additional_special_tokens") or []]
    if extra:
        special["additional_special_tokens"] = extra
    return templates, special


def choose(templates, tools, requested):
    if None in templates:
        return templates[None]
    if requested is not None:
        return templates[requested]
    if tools is not None and "tool_use" in templates:
        return templates["tool_use"]
    return templates["default"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--input", required=True)
    args = parser.parse_args()
    templates, special = load_model(args.model)
    env = make_environment()
    compiled = {}
    source = sys.stdin if args.input == "-" else open(args.input, encoding="utf-8")
    out = []
    for number, line in enumerate(source, 1):
        if not line.strip():
            continue
        request = json.loads(line)
        messages = request.pop("messages")
        tools = request.pop("tools", None)
        add_generation_prompt = request.pop("add_generation_prompt", False)
        documents = request.pop("documents", None)
        requested = request.pop("chat_template", None)
        text = choose(templates, tools, requested)
        if text not in compiled:
            compiled[text] = env.from_string(text)
        kwargs = {**special, **request}
        try:
            prompt = compiled[text].render(messages=messages, tools=tools, documents=documents,
                                           add_generation_prompt=add_generation_prompt, **kwargs)
        except Exception as e:  # noqa: BLE001 -- report whatever the template raised
            print(f"line {number}: {type(e).__name__}: {e}", file=sys.stderr)
            sys.exit(1)
        out.append(json.dumps({"prompt": prompt}, ensure_ascii=False))
    sys.stdout.write("".join(o + "\n" for o in out))


if __name__ == "__main__":
    main()
