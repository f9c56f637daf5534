"""Properties of ditto's tokenizer on random input, with the real Qwen3 tokenizer."""
import os
import random

import unicodedata

import pytest

import ditto

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QWEN3 = os.path.join(ROOT, "..", "shared", "data", "qwen3-tokenizer", "tokenizer.json")


def nfc(text):
    # Python's tables (Unicode 14), not tokenizers', which miss the combining class of marks
    # assigned since Unicode 11 (docs/tokenizer.md).
    return unicodedata.normalize("NFC", text)


@pytest.fixture(scope="module")
def qwen3():
    return ditto.Tokenizer.from_file(QWEN3)


def random_text(rng):
    """Any code points (unassigned ones too, no surrogates), clustered so that scripts,
    combining marks and white space meet."""
    ranges = [(0x20, 0x7F), (0x0, 0x20), (0x80, 0x800), (0x300, 0x370), (0x800, 0x10000), (0x10000, 0x110000),
              (0x1F300, 0x1FAFF), (0x4E00, 0x9FFF)]
    chars = []
    for _ in range(rng.randint(0, 40)):
        low, high = rng.choice(ranges)
        cp = rng.randrange(low, high)
        if not 0xD800 <= cp < 0xE000:
            chars.append(chr(cp))
    return "".join(chars)


def test_decode_of_encode_is_the_nfc_text(qwen3):
    rng = random.Random(11)
    for _ in range(5000):
        text = random_text(rng)
        assert qwen3.decode(qwen3.encode(text, allow_special=False)) == nfc(text), repr(text)


def test_every_id_decodes_to_its_bytes(qwen3):
    for token_id in range(0, qwen3.vocab_size, 97):
        data = qwen3.token_bytes(token_id)
        assert qwen3.decode([token_id]) == data.decode("utf-8", errors="replace")


def test_invalid_utf8_is_refused_with_a_clear_error(qwen3):
    rng = random.Random(12)
    refused = 0
    for _ in range(3000):
        data = bytes(rng.randrange(256) for _ in range(rng.randint(1, 12)))
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            with pytest.raises(ditto.Error, match=rf"not valid UTF-8 \(at byte {e.start}\)"):
                qwen3.encode_bytes(data)
            refused += 1
        else:
            assert qwen3.encode_bytes(data) == qwen3.encode(text)
    assert refused > 2000


def test_streaming_never_splits_a_character(qwen3):
    rng = random.Random(13)
    for _ in range(1000):
        text = random_text(rng)
        ids = qwen3.encode(text)
        stream = ditto.StreamDecoder(qwen3)
        pieces = [stream.push(token_id) for token_id in ids] + [stream.finish()]
        assert "".join(pieces) == nfc(text)
        assert all("\ufffd" not in piece for piece in pieces), repr(text)
