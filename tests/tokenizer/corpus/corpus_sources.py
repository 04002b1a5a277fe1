"""Categories of the tokenizer parity corpus drawn from the hand-written material in sources/
(prose, CJK, Arabic-script text, code), and the readers that split it into sections,
paragraphs and sentences. Used by make_corpus.py; each category has its own seeded RNG, so the
output is reproducible byte for byte.
"""

from __future__ import annotations

import base64
import pathlib
import random
import re
import unicodedata

SOURCES = pathlib.Path(__file__).resolve().parent / "sources"


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

