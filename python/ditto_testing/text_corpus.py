"""Varied text for the tokenizer tests and benchmark: deterministic for a given seed.

Every line comes from one of the generators below, which cover what a byte-level BPE
tokenizer can get wrong: prose, code with mixed indentation, runs of white space, numbers,
contractions in any case, many scripts, emoji sequences, combining marks that NFC composes,
special tokens written in text, and the eight prompts of the seed report.
"""
import random
import unicodedata

from tokenizers import normalizers

_TOKENIZERS_NFC = normalizers.NFC()

SEED_PROMPTS = [
    "Name one primary color.",
    "Write one factual sentence about local inference on Apple silicon.",
    'Return a JSON object with keys "language" and "runtime" for Swift and Core AI.',
    "Explain in two sentences why logits should stay on the final stage.",
    "Write a Swift function signature for adding two Int values.",
    "List three constraints for a safe distributed model test.",
    "Answer with one word: what device family runs macOS?",
    "Summarize pipeline parallelism in one short paragraph.",
]

PROSE = [
    "The quick brown fox jumps over the lazy dog.",
    "It was the best of times, it was the worst of times.",
    "Tokenizers split text into pieces that a model can count on.",
    "She said, \"Don't worry about it\" -- and then left (quietly).",
    "Prices rose 3.5% in March; analysts weren't surprised.",
    "A well-tested program is one whose failures are boring.",
    "Mr. O'Neil's dog didn't bark at the mail-carrier; it never had.",
    "What's the difference between a cache and a buffer?",
    "The committee will reconvene at 10:30 a.m. on Tuesday.",
    "Hyphen-ated, slash/separated and under_scored words are common.",
    "e-mail me at someone@example.com or visit https://example.org/path?q=1&r=2#frag",
    "Never trust a benchmark you did not run yourself!!!",
    "... and so on, et cetera, etc.",
    "Well -- that's that.  Two spaces after a period, like typewriters.",
]

CODE = [
    "def encode(self, text: str) -> list[int]:",
    "return [self.vocab[t] for t in tokens if t in self.vocab]",
    "for (size_t i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
    "if (x != nullptr && x->next) {",
    "}",
    "const auto it = std::find_if(v.begin(), v.end(), [](int x) { return x > 0; });",
    "SELECT name, COUNT(*) FROM users WHERE age >= 18 GROUP BY name;",
    "let mut map: HashMap<String, u32> = HashMap::new();",
    "console.log(`value=${value}`);  // TODO: remove",
    "#include <vector>",
    "x = {'a': 1, \"b\": [2, 3], 'c': None}",
    "    # indented comment with trailing spaces   ",
    "print(f\"{name!r:>10}\")",
    "<div class=\"row\"><span>&nbsp;&lt;tag&gt;</span></div>",
    "$ cmake -S . -B build -G Ninja && cmake --build build -j2",
]

WORDS = ("the of and to in is you that it he was for on are as with his they at be this have "
         "from or one had by word but not what all were we when your can said there use an each "
         "which she do how their if will up other about out many then them these so some her "
         "would make like him into time has look two more write go see number no way could people").split()

CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"]

SCRIPTS = [
    "我们今天去公园散步，天气很好。",
    "机器学习模型需要大量的数据来训练。",
    "東京は日本の首都です。ひらがなとカタカナも使います。",
    "トークナイザーのテストを書いています",
    "안녕하세요, 만나서 반갑습니다. 한국어 텍스트입니다.",
    "مرحبا بالعالم، هذا نص عربي للاختبار.",
    "اللغة العربية تكتب من اليمين إلى اليسار ١٢٣٤٥",
    "नमस्ते दुनिया, यह हिंदी का वाक्य है।",
    "क्षत्रिय ज्ञान श्रृंखला द्वितीय",
    "Привет, мир! Это тест токенизатора.",
    "Γειά σου Κόσμε· αυτό είναι ελληνικό κείμενο.",
    "שלום עולם, זה טקסט בעברית.",
    "สวัสดีชาวโลก นี่คือข้อความภาษาไทย",
    "Tiếng Việt có rất nhiều dấu thanh điệu.",
    "Ḿëtäl ümläüts änd çédillas: naïve café façade",
    "ǅemal ǈubljana ǋjegoš ﬁne ﬂow Ⅻ ① ² ½ ℌ",
    "𝒜𝓁𝓅𝒽𝒶 𝔅𝔢𝔱𝔞 𝕲𝖆𝖒𝖒𝖆 𝟙𝟚𝟛",
    "ᚠᚢᚦᚨᚱᚲ ᐊᐃᐅᐁ ꦧꦱꦗꦮ ሰላም ᏣᎳᎩ",
]

EMOJI = [
    "👍", "👍🏽", "👋🏿", "❤️", "🇺🇸", "🇯🇵", "🏳️‍🌈", "👩‍👩‍👧‍👦", "👨🏻‍💻", "🧑🏾‍🚀", "1️⃣", "#️⃣",
    "😀", "🤖", "🫠", "🦀", "☕", "✅", "⚠️", "🔥🔥🔥", "👁️‍🗨️", "🤷‍♀️", "🙇🏼‍♂️",
]

# Decomposed text that NFC composes, and characters NFC replaces or reorders.
COMBINING = [
    "e\u0301", "A\u030a", "n\u0303", "u\u0308", "o\u0302\u0301", "a\u0323\u0302", "a\u0302\u0323",
    "\u1100\u1161\u11a8", "\u1112\u1161\u11ab\u1100\u1173\u11af", "\u212b", "\u2126", "\u212a",
    "q\u0307\u0323", "\u0041\u0301\u0301", "\u0915\u093c", "\u00e9", "c\u0327a\u0300",
    "\u0301", " \u0308", "\u03b9\u0308\u0301", "\u1e9b\u0323", "\u2000", "\u0958",
]

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>",
                  "<think>", "</think>", "<|fim_prefix|>", "<|vision_pad|>"]
NEAR_SPECIAL = ["<|im_sta", "<|", "|>", "<think", "<|endoftext|", "<<|im_end|>>", "<tool_call"]

WHITE_SPACE = [" ", "  ", "    ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000", "\u2028",
               "\u0085", "\u180e", "\u200b", "\u2009", "\x0b", "\x0c"]


def _nfc_data_agrees(char):
    """Whether tokenizers' NFC knows this character as Unicode 14 does. Its tables are older:
    about a hundred combining marks assigned since Unicode 11 have no combining class there,
    so it does not reorder them (docs/tokenizer.md)."""
    for text in (char, "a" + char + "\u0334", "a\u0334" + char, "a" + char + "\u0345", "a\u0345" + char):
        if _TOKENIZERS_NFC.normalize_str(text) != unicodedata.normalize("NFC", text):
            return False
    return True


def _assigned_code_point(rng):
    """A random code point that Unicode 14 (Python's unicodedata here) assigns, any plane."""
    while True:
        cp = rng.choice([rng.randrange(0x20, 0x2000), rng.randrange(0x2000, 0x10000),
                         rng.randrange(0x10000, 0x30000), rng.randrange(0xE0000, 0xE0080)])
        if 0xD800 <= cp < 0xE000:
            continue
        if unicodedata.category(chr(cp)) != "Cn" and _nfc_data_agrees(chr(cp)):
            return chr(cp)


def _case(rng, text):
    return rng.choice([str.lower, str.upper, str.title, lambda s: s, lambda s: s])(text)


def prose(rng):
    return _case(rng, " ".join(rng.choice(PROSE) for _ in range(rng.randint(1, 4))))


def code(rng):
    lines = []
    for _ in range(rng.randint(1, 6)):
        indent = "".join(rng.choice([" ", "    ", "\t", "  "]) for _ in range(rng.randint(0, 4)))
        lines.append(indent + rng.choice(CODE) + rng.choice(["", "", " ", "  \t"]))
    return rng.choice(["\n", "\r\n", "\n\n"]).join(lines)


def white_space(rng):
    parts = []
    for _ in range(rng.randint(1, 8)):
        parts.append(rng.choice(WHITE_SPACE) * rng.randint(1, 40 if rng.random() < 0.2 else 3))
        parts.append(rng.choice(WORDS + ["", "", "x", ".", "1"]))
    return "".join(parts)


def numbers(rng):
    def number():
        kind = rng.randrange(6)
        if kind == 0:
            return str(rng.randrange(10 ** rng.randint(1, 40)))
        if kind == 1:
            return f"{rng.uniform(-1e6, 1e6):.{rng.randint(0, 8)}f}"
        if kind == 2:
            return f"{rng.randrange(10**9):,}"
        if kind == 3:
            return f"{rng.randint(1900, 2100)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        if kind == 4:
            return hex(rng.randrange(2**64))
        return f"+1 ({rng.randint(200, 999)}) {rng.randint(100, 999)}-{rng.randint(1000, 9999)}"
    return rng.choice([" ", ", ", "; ", "\n", "x", ""]).join(number() for _ in range(rng.randint(1, 6)))


def contractions(rng):
    parts = []
    for _ in range(rng.randint(1, 8)):
        word = rng.choice(WORDS + ["I", "you", "we", "they", "it", "don", "can", "won", "O"])
        suffix = rng.choice(CONTRACTIONS)
        suffix = rng.choice([suffix, suffix.upper(), suffix.title(), suffix.replace("'", "\u2019"),
                             suffix.replace("s", "\u017f")])
        parts.append(_case(rng, word) + suffix + rng.choice(["", "", "s", "'", "''"]))
    return " ".join(parts)


def scripts(rng):
    picks = [rng.choice(SCRIPTS) for _ in range(rng.randint(1, 3))]
    if rng.random() < 0.5:
        picks.insert(rng.randrange(len(picks) + 1), rng.choice(PROSE + [numbers(rng)]))
    return rng.choice(["", " ", "\n"]).join(picks)


def emoji(rng):
    parts = []
    for _ in range(rng.randint(1, 8)):
        parts.append(rng.choice(EMOJI) * rng.randint(1, 3))
        parts.append(rng.choice(["", " ", "  ", "a", "ok", "!", "\n", "日本"]))
    return "".join(parts)


def combining(rng):
    parts = []
    for _ in range(rng.randint(1, 10)):
        parts.append(rng.choice(COMBINING))
        parts.append(rng.choice(["", "", " ", "x", "'s", "1", "中"]))
    return "".join(parts)


def special_tokens(rng):
    parts = []
    for _ in range(rng.randint(1, 6)):
        parts.append(rng.choice(SPECIAL_TOKENS + NEAR_SPECIAL))
        parts.append(rng.choice(["", " ", "  ", "\n", "user\n", "Hello, world", "assistant", " x "]))
    return "".join(parts)


def seed_prompt(rng):
    return rng.choice(SEED_PROMPTS)


def random_mix(rng):
    generators = [prose, code, white_space, numbers, contractions, scripts, emoji, combining, special_tokens]
    parts = [rng.choice(generators)(rng) for _ in range(rng.randint(1, 3))]
    parts.append("".join(_assigned_code_point(rng) for _ in range(rng.randint(1, 12))))
    rng.shuffle(parts)
    return rng.choice(["", " ", "\n"]).join(parts)


GENERATORS = [prose, code, white_space, numbers, contractions, scripts, emoji, combining, special_tokens,
              random_mix, random_mix]


def lines(count, seed=0):
    """`count` varied lines (a line may itself hold newlines), the seed prompts first."""
    rng = random.Random(seed)
    result = list(SEED_PROMPTS)
    while len(result) < count:
        result.append(GENERATORS[len(result) % len(GENERATORS)](rng))
    return result[:count]
