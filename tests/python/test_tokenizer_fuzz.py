"""Runs the tokenizer's libFuzzer target (fuzz/) for a bounded time: arbitrary bytes as text
and as token ids must not crash, hang or break a promise (see fuzz/tokenizer_fuzz.cpp).
It is built with clang, ASan and UBSan as a project of its own in build-fuzz/."""
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QWEN3 = os.path.join(ROOT, "..", "shared", "data", "qwen3-tokenizer", "tokenizer.json")
BUILD = os.path.join(ROOT, "build-fuzz")
SECONDS = 20

SEEDS = [
    b"\x00Hello <|im_end|> world's 12345",
    b"\x02<|im_start|>user\n\xe6\x97\xa5\xe6\x9c\xac e\xcc\x81   \t\n\n  x",
    b"\x00\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa9 \xff\xc3",
    b"\x01" + bytes([122, 1, 0, 0, 235, 0, 0, 0, 0x2d, 0x50, 2, 0]),
]


def test_fuzz_the_tokenizer_for_a_bounded_time(tmp_path):
    subprocess.run(["cmake", "-S", os.path.join(ROOT, "fuzz"), "-B", BUILD, "-G", "Ninja",
                    "-DCMAKE_CXX_COMPILER=clang++"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", BUILD], check=True, stdout=subprocess.DEVNULL)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i, seed in enumerate(SEEDS):
        (corpus / f"seed{i}").write_bytes(seed)
    result = subprocess.run(
        [os.path.join(BUILD, "tokenizer_fuzz"), f"-max_total_time={SECONDS}", "-timeout=10", "-rss_limit_mb=4096",
         f"-artifact_prefix={tmp_path}/", str(corpus)],
        env={**os.environ, "DITTO_FUZZ_TOKENIZER": QWEN3}, capture_output=True, text=True, timeout=SECONDS + 120)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "Done" in result.stderr
