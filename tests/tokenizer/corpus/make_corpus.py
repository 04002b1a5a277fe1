#!/usr/bin/env python3
"""Builds the tokenizer parity corpus: tests/tokenizer/corpus/*.jsonl, one {"text": ...} per line.

    /usr/bin/python3 tests/tokenizer/corpus/make_corpus.py [--out DIR] [--check]

Hand-written material lives in sources/ (prose in ~30 languages, CJK, Arabic-script text, code
in ~30 languages); everything else is generated here from fixed lists and one seeded RNG per
category, so the output is byte-for-byte reproducible (`--check` verifies the committed files).
The .jsonl files are committed; rerun this script after editing it or sources/.

Each category file is named after what it stresses; test_tokenizer_parity.py reads every
*.jsonl here. unicode_new.jsonl is special (see its generator): it holds code points assigned
after Unicode 14, where the oracle's Unicode tables (Node) and PCRE2 10.42's may disagree.
"""

from __future__ import annotations

import argparse
import base64
import json
import pathlib
import random
import re
import sys
import unicodedata

HERE = pathlib.Path(__file__).resolve().parent
SOURCES = HERE / "sources"

# Special and added tokens of the two tokenizers under test (from their tokenizer.json), plus
# look-alikes that are *not* tokens of either file.
QWEN_TOKENS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
    "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
    "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>",
]
LLAMA_TOKENS = [
    "<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
    "<|eot_id|>", "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
    "<|reserved_special_token_5|>", "<|reserved_special_token_42|>",
    "<|reserved_special_token_100|>", "<|reserved_special_token_247|>",
    "<|reserved_special_token_250|>",
]
NOT_TOKENS = [
    "<|im_start", "im_start|>", "<|IM_START|>", "<|Im_Start|>", "< |im_start|>", "<|im_start |>",
    "<| im_start|>", "<|im-start|>", "<|im_start||>", "<||im_start|>", "<|im_start|im_end|>",
    "<im_start>", "|im_start|", "<|endoftext", "endoftext|>", "<|endoftext|", "<|end of text|>",
    "<think", "think>", "</think", "<THINK>", "</ think>", "<think >", "<thinking>", "<tool_call",
    "<tool_calls>", "</tool_call >", "<|eot_id", "<|EOT_ID|>", "<|eot_id|", "<|begin_of_text",
    "<|begin_of_text|", "<|start_header_id", "<|reserved_special_token_251|>",
    "<|reserved_special_token_999|>", "<|reserved_special_token_-1|>", "<|reserved_special_token|>",
    "<|eom_id|>", "<|python_tag|>", "<|finetune_right_pad_id|>", "<s>", "</s>", "<unk>", "[INST]",
    "<|>", "<||>", "<|", "|>", "<|<|>|>", "<<|im_end|>>", "<|im_end|>>", "<<|im_end|>",
]

CONTRACTIONS = ["s", "t", "re", "ve", "m", "ll", "d"]


def jsonl(texts):
    return "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts)


def dedup(texts):
    seen, out = set(), []
    for t in texts:
        if t not in seen:
            seen.add(t)
            out.append(t)
    return out


def read_sections(name):
    """sources/NAME: '### tag' lines start sections; returns [(tag, body)] in file order."""
    sections, tag, lines = [], None, []
    for line in (SOURCES / name).read_text(encoding="utf-8").split("\n"):
        if line.startswith("### "):
            if tag is not None:
                sections.append((tag, "\n".join(lines).strip("\n")))
            tag, lines = line[4:].strip(), []
        else:
            lines.append(line)
    if tag is not None:
        sections.append((tag, "\n".join(lines).strip("\n")))
    return sections


def paragraphs(text):
    return [p for p in re.split(r"\n\s*\n", text) if p.strip()]


# Sentence ends: Latin/Cyrillic/Greek . ! ? ; CJK 。！？; Devanagari danda; Arabic ؟ and ۔;
# Armenian ։; Ethiopic ።; Greek question mark is ';' (handled as ';' followed by space).
_SENTENCE_END = re.compile(r"(?<=[.!?。！？।؟۔։።…])[\"'”»」』)]*\s+|(?<=[。！？])")


def sentences(par):
    out = []
    for line in par.split("\n"):
        out.extend(s for s in _SENTENCE_END.split(line) if s.strip())
    return out


def prose_items(sections, rng, combos):
    """Paragraphs, sentences, lines, whole sections and seeded recombinations (same language)."""
    items = []
    by_lang = {}
    for tag, body in sections:
        pars = paragraphs(body)
        by_lang.setdefault(tag, []).extend(pars)
        items.append(body)
        for p in pars:
            items.append(p)
            sents = sentences(p)
            items.extend(sents)
            if len(sents) > 1:
                # A leading space and a trailing newline change the first and last pre-tokens.
                items.append(" " + sents[-1])
                items.append(sents[0] + "\n")
    langs = sorted(by_lang)
    for _ in range(combos):
        lang = rng.choice(langs)
        pars = by_lang[lang]
        k = rng.randint(2, 4)
        picked = [rng.choice(pars) for _ in range(k)]
        sep = rng.choice(["\n\n", "\n", " ", "\r\n\r\n", "\n\n\n"])
        items.append(sep.join(picked))
    return items


# --------------------------------------------------------------------------------------------
# Categories
# --------------------------------------------------------------------------------------------

def cat_prose_en():
    rng = random.Random(101)
    secs = [("en", (SOURCES / "prose_en.txt").read_text(encoding="utf-8"))]
    items = prose_items(secs, rng, combos=60)
    # Case variants of sentences: upper-case text stresses contractions and merges.
    sents = [s for p in paragraphs(secs[0][1]) for s in sentences(p)]
    for s in rng.sample(sents, 40):
        items.append(s.upper())
    for s in rng.sample(sents, 20):
        items.append(s.lower())
    for s in rng.sample(sents, 20):
        items.append(s.title())
    return items


def cat_prose_world():
    return prose_items(read_sections("prose_world.txt"), random.Random(102), combos=80)


def cat_cjk():
    rng = random.Random(103)
    secs = read_sections("cjk.txt")
    items = prose_items(secs, rng, combos=30)
    # CJK sentences split at every clause mark too, and runs without any punctuation.
    for tag, body in secs:
        for piece in re.split(r"[，、。！？「」]", body):
            if piece.strip():
                items.append(piece.strip())
    items += [
        "中文English混合mixed文本", "日本語とEnglishのmix、そして한국어도", "漢字かなカナ交じり文",
        "ｈｅｌｌｏ　ｗｏｒｌｄ（全角）", "ﾊﾝｶｸｶﾀｶﾅ ﾃｽﾄ", "〇一二三四五六七八九十百千万亿",
        "「引用」『二重』【括弧】〔亀甲〕《書名》〈単〉", "ㄅㄆㄇㄈ 注音符號", "ㄱㄴㄷㄹ ㅏㅑㅓㅕ 자모",
        "𠮷野家", "𡈽 𠀋 𪚲 𩸽 — astral CJK (Ext B)", "々〆〇ゝゞヽヾ", "ー－―‐", "令和６年１２月３１日",
    ]
    return items


def cat_arabic():
    rng = random.Random(104)
    items = prose_items(read_sections("arabic.txt"), rng, combos=20)
    items += [
        "مرحبا بالعالم", "السلام عليكم ورحمة الله", "٠١٢٣٤٥٦٧٨٩", "۰۱۲۳۴۵۶۷۸۹",
        "العدد 2024 والعدد ٢٠٢٤", "ﷺ ﷲ ﷽", "ﻻ ﻷ ﻹ ﻵ", "كتاب‌ها و می‌خواهم",
        "Arabic عربي inside English text", "(قوسين) [معقوفين] «علامات»", "ـــــــطويل",
        "\u200fمرحبا\u200f", "\u202bنص\u202c", "قرأتُ الكِتابَ", "ئ ؤ إ أ آ ء ة ى",
    ]
    return items


def cat_emoji():
    singles = [
        "😀", "😂", "🤣", "❤", "❤️", "♥", "👍", "👍🏻", "👍🏼", "👍🏽", "👍🏾", "👍🏿", "🙏🏽", "👋🏿",
        "🧑", "🧑🏻", "👨‍👩‍👧‍👦", "👨‍👩‍👧", "👩‍👩‍👦‍👦", "👨‍👨‍👧", "👩‍❤️‍👨", "👩‍❤️‍💋‍👨",
        "🧑🏽‍💻", "👩🏿‍🔬", "👨🏻‍🚀", "🧑‍🤝‍🧑", "🧑🏻‍🤝‍🧑🏿", "🏳️‍🌈", "🏳️‍⚧️", "🏴‍☠️", "🐻‍❄️",
        "❤️‍🔥", "❤️‍🩹", "😮‍💨", "😵‍💫", "🫱🏼‍🫲🏾", "🇺🇸", "🇯🇵", "🇩🇪", "🇫🇷", "🇧🇷", "🇮🇳",
        "🇺🇦", "🇪🇺", "🇺🇳", "🇦", "🇿🇿", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "🏴󠁧󠁢󠁥󠁮󠁧󠁿", "🏴󠁧󠁢󠁷󠁬󠁳󠁿", "1️⃣", "2️⃣",
        "0️⃣", "9️⃣", "#️⃣", "*️⃣", "🔟", "1⃣", "#⃣", "☺", "☺️", "☺︎", "✌", "✌️", "✌🏽",
        "⚠️", "™", "©", "®", "‼️", "⁉️", "↔️", "🅰️", "🆗", "🈁", "🉐", "🀄", "🃏", "🎴",
        "🫠", "🫶🏻", "🪿", "🩷", "🛜", "🦀", "🐍", "🚀", "🌍", "🌏", "🎉", "🔥", "✨", "💯",
        "🍕", "☕", "⌛", "⏰", "⭐", "🌟", "🧬", "🧪", "🇦🇶", "🏁", "🚩", "🎌", "👁️‍🗨️",
        "🙇‍♀️", "🙇🏽‍♂️", "🤷", "🤷‍♀️", "🤷🏾‍♂️", "💁🏻‍♀️", "🧙‍♂️", "🧛🏼", "🧜‍♀️",
    ]
    contexts = [
        "I love this {}!", "{} {} {}", "{}{}{}", "Great job{}", "{}Hello", "wow {} wow",
        "status: {} done", "({})", "\"{}\"", "{}\n{}", "123{}456", "a{}b", "emoji after space {}",
        "{}.", "{}, {}; {}!", "\t{}\t",
    ]
    rng = random.Random(105)
    items = list(singles)
    for _ in range(160):
        ctx = rng.choice(contexts)
        items.append(ctx.format(*[rng.choice(singles) for _ in range(ctx.count("{}"))]))
    items += [
        "".join(rng.choice(singles) for _ in range(rng.randint(5, 40))) for _ in range(25)
    ]
    items += [
        "Family: 👨‍👩‍👧‍👦 (ZWJ) vs 👨 👩 👧 👦 (separate)",
        "Broken ZWJ: 👨\u200d\u200d👩 and trailing ZWJ 👨\u200d and leading \u200d👩",
        "Lone modifier 🏽 and lone VS16 \ufe0f and lone keycap \u20e3",
        "Regional indicators odd count: 🇺🇸🇬", "Tag sequence without base: \U000e0067\U000e0062\U000e007f",
        "Skin tones on non-emoji: a🏻 1🏼 !🏽", "Text 👍🏻good👎🏿bad",
        "🇺🇸🇬🇧🇨🇦🇦🇺🇳🇿🇮🇪", "😀😃😄😁😆😅🤣😂🙂🙃😉😊😇",
    ]
    return items


def _nfd_pieces(text):
    return unicodedata.normalize("NFD", text)


def cat_nfc():
    """Text that NFC changes (decomposed, reordered, singletons, Hangul jamo) and NFC text."""
    items = [
        "e\u0301", "E\u0301", "e\u0301cole", "caf\u0065\u0301", "cafe\u0301 au lait", "re\u0301sume\u0301",
        "a\u0308", "o\u0308", "u\u0308ber", "U\u0308BER", "n\u0303", "man\u0303ana", "c\u0327a", "c\u0327",
        "A\u030a", "\u212b", "\u212bngstr\u00f6m", "\u2126", "\u2126 = ohm", "\u212a", "\u212aelvin",
        "\u00c5 \u212b A\u030a", "\u0041\u030a\u0301", "a\u0323\u0302", "a\u0302\u0323",
        "e\u0323\u0302", "e\u0302\u0323", "\u1ec7", "\u00ea\u0323", "\u1eb9\u0302",
        "Vi\u1ec7t Nam", "Vie\u0323\u0302t Nam", "Vie\u0302\u0323t Nam", "ngu\u031bo\u031b\u0300i",
        "Tie\u0302\u0301ng Vie\u0323\u0302t", "o\u031b\u0301", "u\u031b\u0303", "A\u0306\u0301",
        "q\u0303", "x\u0304y\u0304", "s\u0323\u0307", "s\u0307\u0323", "d\u0323\u0307",
        "\u1100\u1161", "\u1100\u1161\u11a8", "\u1112\u1161\u11ab\u1100\u1173\u11af",
        "\u1109\u1165\u110b\u116e\u11af", "\uac00\u11a8", "\uac00\u11a8\u11a8", "\u1100\u1100\u1161",
        "\u1100", "\u1161", "\u11a8", "\u1100 \u1161", "\u1113\u1161", "\u115f\u1160",
        "\u110b\u1161\u11ab\u1102\u1167\u11bc\u1112\u1161\u1109\u1166\u110b\u116d",
        "\u0915\u093c", "\u0958", "\u0915\u093c\u093e", "\u0928\u093c", "\u09a1\u09bc",
        "\u0b47\u0b3e", "\u0bc6\u0bbe", "\u0dd9\u0dca", "\u1025\u102e",
        "\u05e9\u05c1", "\ufb2a", "\ufb2c", "\u05d1\u05bc", "\ufb31",
        "\u0374", "\u037e", "What\u037e", "\u0387", "\u0344", "\u0340", "\u0341", "\u0343",
        "\u03b1\u0301", "\u1f71", "\u03ac", "\u1f00\u0345", "\u03b1\u0313\u0345", "\u03b1\u0345\u0313",
        "\u0438\u0306", "\u0439", "\u0435\u0308", "\u0415\u0308\u0416", "\u0456\u0308",
        "\uf900", "\uf901\uf902", "\ufa10", "\U0002f800", "\u2000", "\u2001", "\u2329\u232a",
        "\u00e5", "\u0061\u030a", "\u2126\u212b\u212a",
        "\u1e9b\u0323", "\u0073\u0323\u0307", "\u1e69", "\u0071\u0307\u0323",
        "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034da\u0357\u0369\u0301\u030b\u0304",
        "\u0301", "\u0301\u0301", " \u0301", "1\u0301", "!\u0301", "\u0301a", "\n\u0301",
        "\t\u0308x", "\U0001f600\u0301", "\u00e9\u0301", "a\u0301\u0301\u0301\u0301",
        "\u0061\u0300\u0301\u0302\u0303\u0304\u0305\u0306\u0307\u0308\u0309\u030a\u030b",
        "\u0061\u0316\u0300\u0317\u0301", "\u0041\u0328\u0301", "\u0104\u0301",
        "\u0e01\u0e49\u0e33", "\u0e01\u0e4d\u0e32", "\u0e33", "\u0e4d\u0e32",
        "\u3099", "\u304b\u3099", "\u30cf\u309a", "\u304c", "\u30d1", "\u3046\u3099", "\uff76\uff9e",
        "\u00c7\u0301", "C\u0327\u0301", "\u1e08", "o\u0328\u0304", "\u01ed",
        "=\u0338", "<\u0338", ">\u0338", "a=\u0338b", "x <\u0338 y", "fi\ufb01", "\ufb01", "\u2460", "\u00bd", "\u2075", "\u33a1", "\uff21",
    ]
    # Whole NFD'ed sentences from the prose sources (and their NFC, already-normalised forms).
    rng = random.Random(106)
    world = dict(read_sections("prose_world.txt"))
    cjk = dict(read_sections("cjk.txt"))
    for lang in ["fr", "de", "es", "pt", "it", "pl", "cs", "sv", "hu", "ro", "ru", "uk", "el",
                 "vi", "tr", "he", "hi", "bn", "ta", "is", "fi"]:
        sents = [s for p in paragraphs(world[lang]) for s in sentences(p)]
        for s in rng.sample(sents, min(len(sents), 6)):
            d = _nfd_pieces(s)
            if d != s:
                items.append(d)
            items.append(s)
    for lang in ["ja", "ko"]:
        sents = [s for p in paragraphs(cjk[lang]) for s in sentences(p)]
        for s in rng.sample(sents, min(len(sents), 10)):
            items.append(_nfd_pieces(s))
            items.append(s)
    # Partially decomposed: each character independently NFD'ed with probability 1/2.
    vi = [s for p in paragraphs(world["vi"]) for s in sentences(p)]
    for s in vi + [s for p in paragraphs(cjk["ko"]) for s in sentences(p)][:6]:
        items.append("".join(_nfd_pieces(c) if rng.random() < 0.5 else c for c in s))
    # Random combining-mark stacks on random bases (canonical reordering by combining class).
    marks = ["\u0300", "\u0301", "\u0302", "\u0303", "\u0308", "\u0323", "\u0327", "\u0328",
             "\u031b", "\u0345", "\u0316", "\u0331", "\u0338", "\u05b4", "\u093c", "\u0e31", "\u3099"]
    bases = ["a", "e", "o", "u", "A", "O", "s", "n", "c", "\u03b1", "\u0438", "\u304b", "1", " ", "-"]
    for _ in range(60):
        items.append("".join(rng.choice(bases) + "".join(rng.choice(marks)
                                                          for _ in range(rng.randint(1, 4)))
                             for _ in range(rng.randint(1, 6))))
    return items


def cat_code():
    rng = random.Random(107)
    snippets = read_sections("code.txt")
    items = []
    for tag, body in snippets:
        if tag in ("go", "makefile"):
            body = re.sub(r"(?m)^((?:    )+)", lambda m: "\t" * (len(m.group(1)) // 4), body)
        items.append(body)
        items.append(body + "\n")
        items.append(body.replace("\n", "\r\n"))
        tabbed = re.sub(r"(?m)^((?:    )+)", lambda m: "\t" * (len(m.group(1)) // 4), body)
        if tabbed != body:
            items.append(tabbed)
        two = re.sub(r"(?m)^((?:    )+)", lambda m: "  " * (len(m.group(1)) // 4), body)
        if two != body:
            items.append(two)
        lines = [l for l in body.split("\n") if l.strip()]
        items.extend(rng.sample(lines, min(len(lines), 8)))
        # A fragment of a few consecutive lines, as a model would see in a chunked prompt.
        if len(lines) > 4:
            i = rng.randrange(len(lines) - 3)
            items.append("\n".join(lines[i:i + 3]))
    items += [
        "x=1", "x = 1", "x  =  1", "if(x){return y;}", "a->b", "a=>b", "a::b", "a...b", "a?.b ?? c",
        "i++; --j;", "x <<= 2 >>> 3", "!==", "===", "!=", "<=>", "**kwargs", "*args", "&&", "||",
        "/* comment */", "// comment", "# comment", "-- comment", "<!-- comment -->", "\"\"\"doc\"\"\"",
        "'''doc'''", "r'\\d+\\s*'", "b'\\x00\\xff'", "0b1010_1010", "0o755", "0xDEAD_BEEF", "1_000_000",
        "std::vector<std::pair<int, std::string>>", "Vec<Option<Box<dyn Fn(&str) -> bool>>>",
        "SELECT * FROM t WHERE a='x' AND b=\"y\";", "$HOME/.bashrc", "${VAR:-default}", "%d %s %%",
        "@decorator", "#[derive(Debug)]", "#include <stdio.h>", "#!/bin/sh", "__init__", "__name__",
        "snake_case_name", "camelCaseName", "PascalCaseName", "SCREAMING_SNAKE_CASE", "kebab-case-name",
        "getHTTPResponseCode", "XMLHttpRequest", "parseJSON2XML", "utf8_to_utf16le", "i18n", "l10n",
        "\tif (x) {\n\t\treturn;\n\t}\n", "    \n    \n", "{\n}\n", "[]", "{}", "()", "[[]]", "{{}}",
        "def f():\n\tpass\n", "def f():\r\n    pass\r\n", "<div>\n  <span>hi</span>\n</div>",
        "key: value\n  - item\n  - item2\n", "a\\nb\\tc\\\\d", "\"escaped \\\"quotes\\\"\"",
        "C:\\Users\\name\\Documents\\file.txt", "/usr/local/lib/python3.11/site-packages/",
        "https://github.com/org/repo/blob/main/src/file.cc#L10-L20", "git commit -m \"fix: off-by-one\"",
    ]
    return items


def cat_whitespace():
    rng = random.Random(108)
    items = []
    for n in [1, 2, 3, 4, 5, 7, 8, 15, 16, 31, 32, 63, 64, 100]:
        items += [" " * n, "\t" * n, "\n" * n, "\r\n" * n, "\r" * n, "a" + " " * n + "b",
                  " " * n + "a", "a" + " " * n, "x\n" + " " * n + "y", "x" + "\t" * n + "y"]
    items += [
        " \t", "\t ", " \t \t", "\t\t  \t", " \n", "\n ", " \n ", "\t\n", "\n\t", "\r\n", "\r",
        "\r\r\n", "\n\r", "\r\n\r\n", "\n\n\n", " \r\n ", "a\r\nb", "a\rb", "a\r\rb", "a\n\rb",
        "line1\r\nline2\r\nline3\r\n", "line1\rline2\rline3", "line1\nline2\r\nline3\rline4",
        "trailing spaces   ", "   leading spaces", "   both   ", "trailing tab\t", "\tleading tab",
        "trailing newline\n", "\nleading newline", "mixed \t \n \r\n end", "a \n b", "a  \n  b",
        "a\t\n\tb", "a \r\n b", "  \n\n  x", "x  \n\n  ", "word\u00a0word", "word\u00a0\u00a0word",
        "\u00a0", "\u00a0\u00a0\u00a0", " \u00a0 ", "\u2003", "\u3000", "a\u3000b", "\u202f", "a\u202fb",
        "\u2009thin\u2009space\u2009", "\u200a", "\u205f", "\u1680", "\u2028", "\u2029", "a\u2028b",
        "a\u2029b", "\u0085", "a\u0085b", "\u000b", "\u000c", "a\u000bb\u000cc", "\u001c\u001d\u001e\u001f",
        "\u200b", "a\u200bb", "\ufeff", "\ufeffHello", "Hello\ufeff", "a\ufeff\ufeffb", "a \ufeff!",
        "x\ufeff\n", "\ufeff \ufeff", "\u180e", "\u2060", "a\u2060b", "  \u00a0\t\u3000\n",
        # Characters on which regex engines disagree about \s: U+FEFF (ECMAScript: space;
        # PCRE2, Oniguruma: not), U+0085 (PCRE2, Oniguruma: space; ECMAScript: not), U+180E
        # (PCRE2 10.42: space; ECMAScript, Oniguruma: not, it is Cf since Unicode 6.3).
        "\ufeff's", "\ufeff/t", " \ufeff(", "\u0085'll", " \u0085>", "\u0085>X", "a \u180e!",
        "\u180e's", " \u180e\n", "x\u180e\u180ey", "\u180e/t", "a\u0085\u0085b", "x \u0085 y",
    ]
    pool = [" ", " ", " ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\n\n", "    "]
    words = ["the", "quick", "brown", "fox", "ß", "Ünïcödé", "123", "!", "中文", "'s", "x"]
    for _ in range(150):
        parts = []
        for _ in range(rng.randint(1, 8)):
            if rng.random() < 0.6:
                parts.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 4))))
            parts.append(rng.choice(words))
        if rng.random() < 0.5:
            parts.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 3))))
        items.append("".join(parts))
    return items


def cat_numbers():
    rng = random.Random(109)
    items = []
    for n in list(range(1, 25)) + [31, 32, 33, 64, 99, 100, 101, 255, 256, 257, 1000]:
        items.append("".join(str(rng.randrange(10)) for _ in range(n)))
    items += ["0", "00", "000", "0000", "1" * 50, "9" * 40, "1234567890" * 10, "3.141592653589793",
              "2.718281828459045", "-0.0", "+1", "-1", "1e10", "1E-10", "6.022e23", "1.5e-10",
              "0x1F", "0xdeadbeef", "0b1011", "1_000_000", "1,000", "1,000,000", "12,345,678.90",
              "1.234.567,89", "1 234 567", "1\u00a0234\u00a0567", "1\u202f234\u202f567,8",
              "1'234'567", "12:30", "12:30:45.123", "2024-01-31", "31/12/2023", "12/31/2023",
              "2024-01-31T23:59:59Z", "+1 (555) 123-4567", "+44 20 7946 0958", "192.168.0.1",
              "::1", "2001:db8::ff00:42:8329", "v1.2.3", "v10.0.0-rc.1+build.5", "3.11.4", "100%",
              "50 %", "$1,299.99", "€5,00", "£12", "¥1000", "₹2,50,000", "1st", "2nd", "3rd", "4th",
              "21st century", "1990s", "'90s", "x2", "2x", "H2O", "CO2", "3D", "4K", "COVID-19",
              "A4", "MP3", "IPv6", "abc123def", "123abc", "abc123", "a1b2c3d4e5", "1a2b3c",
              "٠١٢٣٤٥٦٧٨٩", "१२३४५", "০১২৩", "๑๒๓", "１２３４５", "１２３abc", "²³", "x²+y²=z²",
              "½ ¼ ¾", "⅓⅔", "Ⅻ", "Ⅷ ⅷ", "①②③", "⑴⑵", "𝟙𝟚𝟛", "𝟘𝟡", "〇", "零一二", "፩፪፫",
              "𒐕", "𐄇", "3 × 4 = 12", "10 ÷ 2", "5 − 3", "2^10 = 1024", "1/3", "-273.15 °C",
              "98.6°F", "9:41 AM", "12.5kg", "1.5GB", "100km/h", "60fps", "24/7", "365.25",
              "1234567890123456789012345678901234567890", "0.000000000000001",
              "98765432109876543210" * 5]
    for _ in range(80):
        kind = rng.randrange(6)
        if kind == 0:
            items.append(f"{rng.randrange(10 ** rng.randint(1, 15)):,}")
        elif kind == 1:
            items.append(f"{rng.uniform(-1e6, 1e6):.{rng.randint(0, 8)}f}")
        elif kind == 2:
            items.append(" ".join(str(rng.randrange(1000)) for _ in range(rng.randint(2, 10))))
        elif kind == 3:
            items.append(f"The total was {rng.randrange(100000)} items at ${rng.randrange(100)}.{rng.randrange(100):02d} each.")
        elif kind == 4:
            items.append(",".join(str(rng.randrange(-500, 500)) for _ in range(rng.randint(3, 20))))
        else:
            items.append(f"{rng.randrange(10 ** 12)}{rng.choice(['', ' ', '.', '-', 'abc', 'ß'])}{rng.randrange(10 ** 6)}")
    return items


def cat_contractions():
    items = []
    for c in CONTRACTIONS:
        variants = {c, c.upper(), c.capitalize(), c[:-1] + c[-1].upper()} if len(c) > 1 else {c, c.upper()}
        for v in sorted(variants):
            items += [f"'{v}", f"it'{v}", f"IT'{v}", f"It'{v} fine", f"x'{v}y", f"'{v}'{v}",
                      f" '{v}", f"1'{v}", f"\n'{v}\n", f"a'{v}'", f"'{v}s", f"word '{v} word"]
    items += [
        "DON'T", "don't", "Don't", "DoN'T", "It'S", "IT'S", "it's", "we'VE", "We'Ve", "WE'VE",
        "I'M", "I'm", "i'M", "YOU'LL", "You'Ll", "you'lL", "SHE'D", "She'D", "they'Re", "THEY'RE",
        "They'rE", "WOULDN'T'VE", "y'all'd've", "Y'ALL'D'VE", "I'd've", "ma'am", "o'clock",
        "rock 'n' roll", "'tis", "'TWAS", "'sup", "'cause", "'em", "ol'", "fo'c'sle",
        "don’t", "DON’T", "it’s", "we’ve", "don`t", "don''t", "don'''t", "'''", "''", "'",
        "O'Brien", "O'NEILL", "D'Angelo", "l'homme", "L'HOMME", "aujourd'hui", "qu'il", "c'est",
        "n'est-ce pas", "dell'anno", "Shi'a", "Hawai'i", "ʻOkina", "can't'nt", "'s's's's", "'S'S'S",
        "it'ſ", "IT'ſ", "it'ſok", "that'ſ fine", "we'ʀe", "I'ᴍ", "he'K", "'K", "it'\u212a",
        "'\u017ft", "He said 'STOP' and 'GO'.", "'Quoted' text", "the dogs' bowls", "James' car",
        "'LL", "'Ll", "'lL", "'RE", "'rE", "'VE", "'vE", "'Ve", "'D", "'M", "'T", "'S",
        "x'S", "x'T", "x'RE", "x'VE", "x'M", "x'LL", "x'D", "X'S2", "'s1", "'re!", "'ve?",
        "ISN'T IT? AREN'T WE? WE'LL SEE. THEY'D KNOW. I'VE DONE IT. YOU'RE RIGHT. SHE'S HERE.",
        "İt'S", "iT'S", "ıt'S",
    ]
    rng = random.Random(110)
    words = ["don", "can", "won", "it", "he", "she", "we", "they", "you", "I", "who", "that"]
    for _ in range(60):
        w = rng.choice(words)
        c = rng.choice(CONTRACTIONS + ["t"])
        cased = "".join(ch.upper() if rng.random() < 0.5 else ch for ch in w + "'" + c)
        items.append(cased + rng.choice(["", " ", "!", " ok", "\n", "s", "1"]))
    return items


def cat_special_tokens():
    rng = random.Random(111)
    toks = QWEN_TOKENS + LLAMA_TOKENS
    items = list(toks) + list(NOT_TOKENS)
    ctxs = ["hello{}world", "hello {} world", " {} ", "{} ", " {}", "\n{}\n", "{}\n", "\n{}",
            "{}{}", "a{}", "{}a", "x {}\n\ny", "  {}  ", "\t{}\t", "123{}456", "{}'s", "'s{}",
            "é{}\u0301", "e{}\u0301", "{}\r\n", "中文{}中文", "😀{}😀", "{} {} {}", "<{}>", "|{}|"]
    for t in toks:
        for ctx in rng.sample(ctxs, 8):
            items.append(ctx.format(*([t] * ctx.count("{}"))))
    for t in NOT_TOKENS:
        items.append(f"text {t} text")
        items.append(f"{t}\n")
    # Mixtures of real tokens and look-alikes, back to back.
    for _ in range(60):
        parts = []
        for _ in range(rng.randint(2, 6)):
            parts.append(rng.choice(toks + NOT_TOKENS + ["hi", " ", "\n", "user", "assistant", "<", "|", ">"]))
        items.append("".join(parts))
    # Chat-formatted prompts as the two templates would produce them.
    items += [
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n",
        "<|im_start|>user\nWhat's 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\nSimple arithmetic.\n</think>\n\n4<|im_end|>\n",
        "<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response><|im_end|>\n",
        "<|fim_prefix|>def add(a, b):\n    <|fim_suffix|>\n    return c<|fim_middle|>c = a + b",
        "<|repo_name|>ditto\n<|file_sep|>src/main.cc\nint main() {}\n<|file_sep|>README.md\n# ditto",
        "<|vision_start|><|image_pad|><|image_pad|><|image_pad|><|vision_end|>Describe the image.",
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
        "<|start_header_id|>user<|end_header_id|>\n\nWhat's the capital of France?<|eot_id|>",
        "<|begin_of_text|><|begin_of_text|>double bos",
        "<|endoftext|><|endoftext|><|endoftext|>",
        "<|im_start|><|im_start|>im_start|>",
        "<|im_start|im_start|>", "<|im_end|im_end|>", "<|<|im_start|>|>", "<think><think></think></think>",
        "<tool_call></tool_call><tool_call>", "</tool_call><tool_call>", "<|eot_id|><|eot_id|>\n\n",
        "<|IM_START|>user<|IM_END|>", "<|Im_start|>", "＜|im_start|＞", "<\u200b|im_start|>",
        "<|im_start|\u200b>", "<|im_\u200bstart|>", "<|im_start|>\u0301", "\u0301<|im_start|>",
        # NFC runs between added tokens only: '>' + U+0338 would compose to U+226F across one.
        "<|im_end|>\u0338", "<think>\u0338", "</tool_call>\u0338 x", "<|eot_id|>\u0338",
        "<|im_end|>\u0323\u0301", "<|begin_of_text|>\u0338", "<|im_end|>\u0338\u0301",
    ]
    return items


def cat_long():
    rng = random.Random(112)
    letters = "abcdefghijklmnopqrstuvwxyz"
    raw = bytes(rng.randrange(256) for _ in range(6000))
    b64 = base64.b64encode(raw).decode()
    items = [
        "a" * 5000, "A" * 5000, "ab" * 2500, "abc" * 1700,
        "".join(rng.choice(letters) for _ in range(5000)),
        "".join(rng.choice(letters + letters.upper()) for _ in range(5000)),
        "supercalifragilisticexpialidocious" * 150,
        "Donaudampfschifffahrtsgesellschaftskapitän" * 120,
        "é" * 3000, "e\u0301" * 2000, "ж" * 4000, "中" * 5000,
        "".join(chr(rng.randrange(0x4E00, 0x9FA5)) for _ in range(5000)),
        "".join(chr(rng.randrange(0xAC00, 0xD7A4)) for _ in range(3000)),
        "ภาษาไทย" * 700, "😀" * 1500, "👨‍👩‍👧‍👦" * 300, "🇺🇸" * 1000,
        "1" * 5000, "".join(str(rng.randrange(10)) for _ in range(5000)), " " * 5000, "\n" * 3000,
        "\t" * 3000, " \n" * 2000, "\r\n" * 2000, "!" * 3000, "=" * 3000, "-" * 2000, "." * 2000,
        "'s" * 2000, "<|im_end|>" * 500, "<|eot_id|>" * 500, "<|im_start" * 400, "x" * 4999 + "!",
        b64, "\n".join(b64[i:i + 76] for i in range(0, len(b64), 76)),
        "data:image/png;base64," + b64[:6000],
        raw.hex(), "0x" + raw.hex()[:5000],
        "https://example.com/" + "/".join("".join(rng.choice(letters) for _ in range(rng.randint(3, 12))) for _ in range(200)) +
        "?" + "&".join(f"k{i}=" + "".join(rng.choice(letters + "0123456789%") for _ in range(8)) for i in range(100)),
        "https://www.google.com/search?q=" + "+".join(rng.choice(["batch", "invariant", "llm", "inference", "tokenizer"]) for _ in range(400)),
        "a" + "\u0301" * 1000, "x" + "\u0323\u0302" * 500,
        "".join(rng.choice(letters + " ") for _ in range(20000)),
    ]
    # Every prose source, each as one long document.
    for name in ["prose_en.txt", "prose_world.txt", "cjk.txt", "arabic.txt", "code.txt"]:
        items.append((SOURCES / name).read_text(encoding="utf-8"))
    return items


def cat_edge():
    rng = random.Random(113)
    items = [""]
    items += [chr(c) for c in range(0x00, 0x100)]  # every ASCII and Latin-1 character alone
    ranges = [(0x100, 0x24F), (0x250, 0x2FF), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x52F),
              (0x530, 0x58F), (0x590, 0x5FF), (0x600, 0x6FF), (0x900, 0x97F), (0xE00, 0xE7F),
              (0x10A0, 0x10FF), (0x1100, 0x11FF), (0x1E00, 0x1EFF), (0x2000, 0x206F), (0x2070, 0x209F),
              (0x20A0, 0x20CF), (0x2100, 0x214F), (0x2190, 0x21FF), (0x2200, 0x22FF), (0x2500, 0x257F),
              (0x2600, 0x26FF), (0x2700, 0x27BF), (0x3000, 0x303F), (0x3040, 0x30FF), (0x4E00, 0x9FFF),
              (0xAC00, 0xD7A3), (0xE000, 0xF8FF), (0xFB00, 0xFB4F), (0xFE00, 0xFE0F), (0xFE30, 0xFE4F),
              (0xFF00, 0xFFEF), (0xFFF0, 0xFFFF), (0x10000, 0x1007F), (0x10300, 0x1034F),
              (0x10400, 0x1044F), (0x1D400, 0x1D7FF), (0x1F300, 0x1F5FF), (0x1F600, 0x1F64F),
              (0x1F900, 0x1F9FF), (0x20000, 0x2A6DF), (0xE0000, 0xE007F), (0xF0000, 0xFFFFD),
              (0x100000, 0x10FFFD)]
    for lo, hi in ranges:
        for _ in range(8):
            items.append(chr(rng.randint(lo, hi)))
    items += [chr(c) for c in [0x10FFFF, 0x10FFFE, 0xFFFE, 0xFFFF, 0x1FFFF, 0xFDD0, 0xFDEF, 0xFFFD,
                               0xFFFC, 0xFFF9, 0xFFFA, 0xFFFB, 0xE0001, 0xE0020, 0xE007F, 0xE0100,
                               0xE01EF, 0x1D11E, 0x13000, 0x12000, 0x10330, 0x10400, 0x1F0A1]]
    # Punctuation runs.
    items += ["...", "…", "!!!", "???", "?!?!", "!?", "—", "——", "--", "---", "----------", "***",
              "###", "@@@", "$$$", "%%%", "^^^", "&&&", "~~~", "```", "'''", "\"\"\"", ";;;", ":::",
              "<<<", ">>>", "<>", "</>", "[](){}<>", "!@#$%^&*()_+-=[]{}|;':\",./<>?`~", ",.", ".,",
              "。。。", "！？", "、、", "«»", "„“", "‹›", "¡¿", "¿Qué?", "¡Hola!", "•••", "·", "‽",
              "※", "§§", "¶", "†‡", "′″‴", "‐‑‒–—―", "（）［］｛｝", "、。〃〄", ".!?\n", "?\r\n",
              ".\n\n", "!\r", "  ...  ", " !", " !!", "a!b?c.d", "end.", "end...", "(a)", "[b]",
              "{c}", "/*/", "\\\\", "\\n", "/", "//", "\\", "|", "||", "|||"]
    # Control characters inside text.
    for c in list(range(0x00, 0x20)) + [0x7F, 0x80, 0x85, 0x9F]:
        items.append(f"a{chr(c)}b")
        items.append(f"{chr(c)}{chr(c)}x")
    items += ["\x00", "\x00\x00\x00", "text\x00with\x00nul", "\x1b[31mred\x1b[0m", "bell\x07",
              "back\bspace", "form\x0cfeed", "\x7f\x7f"]
    # Unusual Unicode: invisible, bidi, private use, astral symbols, variation selectors.
    items += [
        "zero\u200bwidth\u200bspace", "zero\u200cwidth\u200cnon\u200cjoiner", "zwj\u200djoiner",
        "word\u2060joiner", "soft\u00adhyphen", "\u200e", "\u200f", "\u200eLTR\u200f",
        "\u202aLRE\u202c \u202bRLE\u202c \u202dLRO\u202c \u202eRLO\u202c",
        "\u2066LRI\u2069 \u2067RLI\u2069 \u2068FSI\u2069", "abc\u202edcba\u202c", "\u061c",
        "private \ue000\ue001\uf8ff use", "\U000f0000\U000f0001", "\U00100000", "\U0010fffd",
        "noncharacters \ufdd0\ufffe\uffff", "replacement \ufffd char", "\ufffc object",
        "\ufff9anchor\ufffaseparator\ufffbterminator", "tags\U000e0041\U000e0042\U000e007f",
        "vs \u2764\ufe0e \u2764\ufe0f", "\u8fbb\U000e0100", "\u845b\U000e0101",
        "𝐇𝐞𝐥𝐥𝐨 𝒲𝑜𝓇𝓁𝒹 𝔉𝔯𝔞𝔨𝔱𝔲𝔯 𝕯𝖔𝖚𝖇𝖑𝖊 𝚖𝚘𝚗𝚘", "𝄞 𝄢 𝅘𝅥𝅮", "𓀀𓀁𓂀", "𐀀𐀁𐀂", "𒀀𒀁", "𐌰𐌱𐌲",
        "𐐀𐐨𐐁𐐩", "⠁⠃⠉⠙ braille", "╔═══╗\n║ x ║\n╚═══╝", "✓ ✗ ☐ ☑ ☒", "→ ← ↑ ↓ ⇒ ⇔",
        "∀x∈ℝ: x²≥0", "∑∏∫∮√∞≈≠≤≥", "ℕℤℚℝℂ", "ﬁﬂﬀﬃﬄ", "Ⓐⓑⓒ", "🄰🄱🄲", "ªº", "ĲĳŒœ",
        "ǅǈǋ", "ß ẞ", "ﬅ", "ŉ", "İıİı", "ǰ", "ΐ", "ᾳ", "ﾞﾟ", "\u0e3f", "\u20bf", "Ω ℧",
        "\u00b5 \u03bc", "K \u212a", "\u1e9e", "\u2126\u2127",
    ]
    return items


def cat_mixed():
    rng = random.Random(114)
    items = [
        "Hello世界", "東京Tokyo2024年", "abcабвαβγאבג", "Привет, world!", "Γειά σου, κόσμε!",
        "Hello שלום world", "Hello مرحبا 123 world", "ASCII and 日本語 and 한국어 and ภาษาไทย",
        "pаypаl.com (Cyrillic а)", "ΑΒΓ vs ABC", "Ｆｕｌｌ ｗｉｄｔｈ", "naïve café résumé Zoë",
        "straße STRASSE", "İstanbul ISTANBUL istanbul", "ǅemal", "x = λ.x; y = μ·ν",
        "Price: ₹1,200 / €15 / $17", "C++ 与 Python 的区别", "Rust의 소유권 개념", "Pythonでプログラミング",
        "# 注释：计算平均值\ndef mean(xs):  # 平均\n    return sum(xs) / len(xs)",
        "// コメント\nconst 変数 = 'テスト';", "print('Привет, мир!')", "SELECT '日本' AS 国;",
        "emoji😀in😀words", "中文😀English", "数字123和字母abc", "Ελληνικά123English",
        "עברית123English", "עברית עם מספרים 2024 ו-English", "हिन्दी और English मिश्रित",
        "ไทยEnglish123ไทย", "Việt Nam và English", "Türkçe ve English", "Ünïcödé™ ©2024",
    ]
    world = read_sections("prose_world.txt") + read_sections("cjk.txt") + read_sections("arabic.txt")
    en = [("en", (SOURCES / "prose_en.txt").read_text(encoding="utf-8"))]
    sents = [s for _, body in world + en for p in paragraphs(body) for s in sentences(p)]
    for _ in range(180):
        k = rng.randint(2, 4)
        sep = rng.choice([" ", "", "\n", " — ", ", ", "\t"])
        items.append(sep.join(rng.choice(sents) for _ in range(k)))
    # Words of different scripts glued without spaces.
    words = [w for s in sents for w in s.split() if len(w) > 1]
    for _ in range(80):
        items.append("".join(rng.choice(words) for _ in range(rng.randint(2, 5))))
    return items


def cat_fuzz():
    """Random strings over an alphabet of characters that sit on pre-tokenizer boundaries."""
    rng = random.Random(115)
    alphabet = (
        list("abcXYZ019 '\"!?.,;:-_()[]<>|/\\\t\n\r") + [" ", " ", "  ", "\r\n", "\n\n"] +
        ["s", "t", "re", "ve", "m", "ll", "d", "S", "T", "RE", "VE", "LL", "'s", "'S", "'ll"] +
        ["é", "e\u0301", "\u0301", "ß", "ж", "Ω", "α", "中", "日", "カ", "한", "\u1100", "\u1161",
         "ع", "ש", "\u05b4", "ก", "\u0e31", "ह", "\u093f", "ệ", "\u00a0", "\u3000", "\u2028",
         "\u200b", "\u200d", "\ufeff", "\u0085", "\x00", "\x0b", "\x0c", "\x7f", "😀", "👍", "🏽",
         "\ufe0f", "🇺", "🇸", "\u20e3", "١", "٢", "１", "²", "½", "Ⅻ", "𝟙", "𐐀", "\ue000", "\U000f0000",
         "<|im_start|>", "<|im_end|>", "<think>", "<|eot_id|>", "<|begin_of_text|>", "<|", "|>",
         "<|endoftext|>", "</tool_call>", "<|im_start"]
    )
    items = []
    for _ in range(700):
        n = rng.choice([1, 2, 3, 4, 5, 8, 12, 20, 40, 80])
        items.append("".join(rng.choice(alphabet) for _ in range(n)))
    return items


def cat_unicode_new():
    """Letters/digits assigned in Unicode 15-17: Node 20's tables know them, Python 3.11's and
    PCRE2 10.42's (Unicode 14) do not. Kept apart: the two regex engines see different \\p{L}."""
    return [
        "𱍐𱍑𱍒", "a𱍐b", "x𱍐", "𱍐x", " 𱍐", "中𱍐中", "𫜹 𫜺", "a𫜹", "\U0002ebf0\U0002ebf1",
        "Kawi \U00011f04\U00011f05\U00011f06", "\U0001e4d0\U0001e4d1 x", "digits \U0001d2c0\U0001d2c1",
        "a\U0001d2c0b", "\U00011f50\U00011f51", "ಜ\u0cdd", "\u0c5d", "\U0001e030\U0001e031",
        "\U000105c0\U000105c1a", "1\U00016d70", "\U00011380\U00011381 text",
    ]


CATEGORIES = {
    "prose_en": cat_prose_en,
    "prose_world": cat_prose_world,
    "cjk": cat_cjk,
    "arabic": cat_arabic,
    "emoji": cat_emoji,
    "nfc": cat_nfc,
    "code": cat_code,
    "whitespace": cat_whitespace,
    "numbers": cat_numbers,
    "contractions": cat_contractions,
    "special_tokens": cat_special_tokens,
    "long": cat_long,
    "edge": cat_edge,
    "mixed": cat_mixed,
    "fuzz": cat_fuzz,
    "unicode_new": cat_unicode_new,
}


def build():
    out = {}
    for name, fn in CATEGORIES.items():
        texts = dedup(fn())
        for t in texts:
            # Surrogates cannot be written as UTF-8; every string must be valid Unicode text.
            assert not any(0xD800 <= ord(c) <= 0xDFFF for c in t), (name, t)
        out[name + ".jsonl"] = jsonl(texts)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=pathlib.Path, default=HERE)
    ap.add_argument("--check", action="store_true", help="verify the files in --out are up to date")
    args = ap.parse_args()
    files = build()
    total = 0
    for name, content in files.items():
        path = args.out / name
        n = content.count("\n")
        total += n
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != content:
                print(f"{path} is out of date; rerun make_corpus.py", file=sys.stderr)
                return 1
        else:
            path.write_text(content, encoding="utf-8", newline="\n")
        print(f"{name:24s} {n:5d} strings {len(content.encode()):9d} bytes")
    print(f"{'total':24s} {total:5d} strings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
