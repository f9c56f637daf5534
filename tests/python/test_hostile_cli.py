"""Hostile and careless command lines (issue 17): each is refused with a message that names the
option or field, the value and the accepted range (docs/limits.md), never a crash, a 309-digit
range or a silent exit 0. The C++ side of the same classes: tests/hostile_test.cpp."""
import json
import os
import re
import shutil
import subprocess

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from ditto_testing import checkpoints, text_corpus

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DITTO = os.environ.get("DITTO_BINARY", os.path.join(ROOT, "build", "ditto"))
CONTEXT = 256


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("model")
    checkpoints.make_checkpoint(str(path), "qwen3", vocab_size=512, max_positions=CONTEXT)
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(text_corpus.lines(500, seed=4), trainer)
    tokenizer.save(str(path / "tokenizer.json"))
    return path


def ditto(*args, stdin=None):
    return subprocess.run([DITTO, *map(str, args)], input=stdin, capture_output=True, text=True, timeout=120)


def refused(result, *fragments):
    """A refusal: a non-zero exit that is not a signal, each fragment in the message, no long numbers."""
    assert 0 < result.returncode < 128, (result.returncode, result.stderr)
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr
    assert max(map(len, re.findall(r"\d+", result.stderr)), default=0) <= 20, result.stderr


@pytest.mark.parametrize("args, option, accepted", [
    (["generate", "-n", "0"], "--predict: Value 0", "range 1 to 268435456"),
    (["generate", "-n", "-1"], "--predict: Value -1", "range 1 to 268435456"),
    (["generate", "-t", "0"], "--threads: Value 0", "range 1 to 1024"),
    (["generate", "-c", "300000000"], "--ctx-size: Value 300000000", "range 0 to 268435456"),
    (["chat", "-n", "0"], "--predict: Value 0", "range 1 to 268435456"),
    (["verify", "-m", "x", "-n", "0"], "--predict: Value 0", "range 1 to 268435456"),
    (["bench", "-r", "0"], "--repetitions: Value 0", "range 1 to 1000000"),
    (["bench", "-t", "2,0"], "--threads: Value 0", "range 1 to 1024"),
])
def test_numbers_out_of_range_are_refused_with_their_range(args, option, accepted):
    refused(ditto(*args), option, accepted)


def test_detokenize_refuses_ids_it_cannot_show_as_arguments_and_on_standard_input(model_dir):
    vocab = Tokenizer.from_file(str(model_dir / "tokenizer.json")).get_vocab_size()
    for ids, message in [([vocab], f"token id {vocab} is not in the vocabulary (ids 0..{vocab - 1})"),
                         ([5, -1], "a token id is -1, outside the accepted range 0..16777215"),
                         ([2 ** 32 + 1], "a token id is 4294967297, outside the accepted range 0..16777215"),
                         (["7x"], "'7x' is not a token id")]:
        refused(ditto("detokenize", "-m", model_dir, "--", *ids), message)
        refused(ditto("detokenize", "-m", model_dir, stdin=" ".join(map(str, ids))), message)
    assert ditto("detokenize", "-m", model_dir, 5, 6).returncode == 0


def test_a_context_or_a_budget_past_what_there_is_is_refused(model_dir):
    refused(ditto("generate", "-m", model_dir, "--tokens", "1 2", "-c", CONTEXT + 1),
            f"-c {CONTEXT + 1} is past the model's context of {CONTEXT} positions")
    refused(ditto("bench", "-m", model_dir, "-p", CONTEXT + 1, "-n", 1), "is longer than the model's context")
    refused(ditto("generate", "-m", model_dir, "--tokens", "1 2", "--kv-budget", "1000000G"),
            "a KV budget of 1073741824000000 bytes needs", "more than this machine's memory")


def test_json_nested_a_million_deep_is_refused_not_a_stack_overflow(model_dir, tmp_path):
    deep = "[" * 10 ** 6 + "]" * 10 ** 6
    bad = tmp_path / "bad"
    shutil.copytree(model_dir, bad)
    config = (model_dir / "config.json").read_text()
    (bad / "config.json").write_text(config.replace("{", '{"deep": ' + deep + ", ", 1))
    refused(ditto("inspect", bad), "config.json nests arrays and objects more than 256 deep")
    (tmp_path / "tokenizer.json").write_text('{"padding": ' + deep + "}")
    refused(ditto("tokenize", "--tokenizer", tmp_path / "tokenizer.json", "-p", "hi"),
            "the file nests arrays and objects more than 256 deep")
    (tmp_path / "messages.json").write_text('[{"role": "user", "content": ' + deep + "}]")
    refused(ditto("template", "-m", model_dir, "--messages", tmp_path / "messages.json"),
            "(the messages) nests arrays and objects more than 256 deep")
    (tmp_path / "messages.json").write_text('[{"role": "user", "content": "hi"}]')
    (tmp_path / "template.jinja").write_text("{{ messages[0].content }}")
    template = ["template", "-m", model_dir, "--messages", tmp_path / "messages.json", "--chat-template",
                tmp_path / "template.jinja"]
    assert ditto(*template, "--var", "x=[[1]]").stdout == "hi"
    refused(ditto(*template, "--var", "x=" + "[" * 300 + "]" * 300), "--var x nests arrays and objects more than 256 deep")


def test_hostile_configs_and_tokenizers_are_refused_by_name(model_dir, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(model_dir, bad)
    config = json.loads((model_dir / "config.json").read_text())
    for key, value, message in [
            ("max_position_embeddings", 10 ** 12,
             "config.json: max_position_embeddings is 1000000000000, outside the accepted range 1..268435456"),
            ("hidden_size", 2 ** 40, "config.json: hidden_size is 1099511627776, outside the accepted range 1..1048576"),
            ("rms_norm_eps", -1e-6, "config.json: rms_norm_eps is -1e-06, outside the accepted range 0..1"),
            ("hidden_size", 128, "'model.embed_tokens.weight' has shape [512, 64] but the config implies [512, 128]")]:
        (bad / "config.json").write_text(json.dumps({**config, key: value}))
        refused(ditto("generate", "-m", bad, "--tokens", "1 2", "-n", 1), message)
        refused(ditto("inspect", bad), message)  # inspect reports only sizes the model has
    tokenizer = json.loads((model_dir / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    for mutate, message in [(lambda: vocab.update({"zz": 2 ** 31 + 5}), '"zz" is 2147483653, outside the accepted range'),
                            (lambda: vocab.clear(), "the vocabulary is empty")]:
        mutate()
        (tmp_path / "tokenizer.json").write_text(json.dumps(tokenizer))
        refused(ditto("tokenize", "--tokenizer", tmp_path / "tokenizer.json", "-p", "hello"), message)
