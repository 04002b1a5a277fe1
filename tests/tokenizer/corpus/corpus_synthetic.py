"""Categories of the tokenizer parity corpus generated from fixed lists (no sources/ files):
emoji, whitespace, numbers, contractions, special tokens and look-alikes, edge-case code points,
random strings over pre-tokenizer boundaries, and code points new since Unicode 14. Used by
make_corpus.py; each category has its own seeded RNG, so the output is reproducible byte for byte.
"""

from __future__ import annotations

import random

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


# --------------------------------------------------------------------------------------------
# Categories
# --------------------------------------------------------------------------------------------

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

