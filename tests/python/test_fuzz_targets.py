"""The libFuzzer targets of fuzz/, through scripts/fuzz.sh (built with clang, ASan and UBSan in
build-fuzz/): every input of the corpus kept in fuzz/corpus/ replayed (what fuzzing found stays
fixed), and a short run of each parser's target from that corpus. The tokenizer's target on text
and ids has its own test (test_tokenizer_fuzz.py); long campaigns: docs/fuzzing.md."""
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SECONDS = 10  # a smoke run in CI; long campaigns run by hand (docs/fuzzing.md)


def fuzz(*args):
    return subprocess.run([os.path.join(ROOT, "scripts", "fuzz.sh"), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=1800)


def test_every_input_of_the_corpus_replays_without_failure():
    result = fuzz("--replay")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert len(re.findall(r"replayed, no failure", result.stdout)) == 7, result.stdout


@pytest.mark.parametrize("target", ["gguf", "safetensors", "config", "tokenizer_json", "chat_template",
                                    "serve_request"])
def test_fuzz_a_parser_for_a_bounded_time(target):
    result = fuzz("-t", str(SECONDS), target)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    runs = re.search(rf"^{target}: (\d+) runs .* cov: (\d+) .*; no failure$", result.stdout, re.MULTILINE)
    assert runs, result.stdout
    assert int(runs.group(1)) > 0 and int(runs.group(2)) > 0
