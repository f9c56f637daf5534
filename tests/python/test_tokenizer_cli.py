"""The tokenizer on the command line: `ditto tokenize`, `ditto detokenize`, and `ditto generate
-p TEXT` (text in, streamed text out) on a small random Qwen3 checkpoint whose directory holds
a tokenizer.json made here with tokenizers."""
import os
import subprocess

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from ditto_testing import checkpoints, text_corpus

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DITTO = os.environ.get("DITTO_BINARY", os.path.join(ROOT, "build", "ditto"))
PROMPT = "Write one factual sentence about local inference, don't you think? 日本語 👍🏽"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("model")
    checkpoints.make_checkpoint(str(path), "qwen3", vocab_size=512)
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=510, special_tokens=["<|endoftext|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(text_corpus.lines(2000, seed=4), trainer)
    tokenizer.save(str(path / "tokenizer.json"))
    return path


def run(*args):
    result = subprocess.run([DITTO, *args], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_tokenize_and_detokenize_agree_with_tokenizers(model_dir):
    reference = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    ids = reference.encode(PROMPT).ids
    assert run("tokenize", "-m", str(model_dir), "-p", PROMPT).split() == [str(i) for i in ids]
    assert run("detokenize", "--tokenizer", str(model_dir / "tokenizer.json"), *map(str, ids)) == PROMPT + "\n"


def test_generate_takes_text_and_streams_text(model_dir):
    reference = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    prompt_ids = reference.encode(PROMPT).ids
    generated = run("generate", "-m", str(model_dir), "--tokens", " ".join(map(str, prompt_ids)),
                    "-n", "12", "-t", "1", "--ignore-eos").split()
    expected = reference.decode([int(i) for i in generated], skip_special_tokens=True)
    text = run("generate", "-m", str(model_dir), "-p", PROMPT, "-n", "12", "-t", "1", "--ignore-eos")
    assert text == expected + "\n"


def test_generate_without_a_tokenizer_says_so(tmp_path):
    checkpoints.make_checkpoint(str(tmp_path), "qwen3")
    result = subprocess.run([DITTO, "generate", "-m", str(tmp_path), "-p", "hi"], capture_output=True, text=True)
    assert result.returncode == 1
    assert "no tokenizer.json in" in result.stderr
