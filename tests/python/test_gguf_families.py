"""GGUF files of the families beyond Llama and Qwen3, written as llama.cpp's converter writes them
(ditto_testing.gguf_models.write_family_gguf: llama.cpp's tensor names and metadata, q/k rows
permuted for the llama architecture, experts stacked, Phi-3's fused matrices), from checkpoints
made by transformers: ditto must load each and compute the bits of the safetensors checkpoint
(the same f32 weights), and, where llama.cpp runs the file, continue prompts greedily as llama.cpp
does wherever the choice is not a near-tie. Bad files are refused by name.
"""
import re

import numpy as np
import pytest

import ditto
from ditto_testing.checkpoints import make_checkpoint
from ditto_testing.gguf_models import write_family_gguf

# One small f32 checkpoint per family, with what sets it apart in a file: biases, fused
# projections, llama3 RoPE, experts. No window shorter than the prompt: GGUF files have none
# (llama.cpp runs Phi-3's attention.sliding_window disabled, and writes Mistral's files as llama),
# so a file computes the checkpoint's function only where the window does not matter.
FAMILIES = {
    "qwen2": dict(arch="qwen2"),
    "mistral": dict(arch="mistral", family=dict(sliding_window=None)),
    "phi3": dict(arch="phi3", kv_heads=4, family=dict(sliding_window=2047)),
    "llama3-rope": dict(arch="llama", family=dict(rope_parameters={
        "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64})),
    "mixtral": dict(arch="mixtral", intermediate_size=48, family=dict(num_local_experts=4, num_experts_per_tok=2)),
    "qwen3_moe": dict(arch="qwen3_moe", family=dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=40,
                                                    norm_topk_prob=True)),
}
PROMPT = [int(t) for t in np.random.default_rng(7).integers(0, 512, 90)]


def make_family_checkpoint(directory, name, **overrides):
    # head_dim = hidden / heads: llama.cpp's phi3 and qwen2 take no other.
    make_checkpoint(str(directory), **{"hidden_size": 128, "intermediate_size": 96, "heads": 4, "kv_heads": 2,
                                       "head_dim": 32, **FAMILIES[name], **overrides})


def sentencepiece_vocabulary(writer):
    """A vocabulary of 512 tokens that llama.cpp loads (a `tokenizer` for write_family_gguf):
    <unk>, <s>, </s>, the 256 byte tokens, and pieces."""
    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + [f"\u2581t{i}" for i in range(253)]
    writer.add_tokenizer_model("llama")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(pieces)
    writer.add_token_scores([0.0] * 259 + [-float(i) for i in range(253)])
    writer.add_token_types([2, 3, 3] + [6] * 256 + [1] * 253)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family_files(request, tmp_path_factory):
    directory = tmp_path_factory.mktemp(request.param)
    make_family_checkpoint(directory, request.param)
    path = directory / "model.gguf"
    write_family_gguf(str(directory), path)
    return request.param, str(directory), str(path)


def test_gguf_gives_the_bits_of_the_checkpoint(family_files):
    """The same weights give the same bits, except Llama 3.1's RoPE: llama.cpp's file holds the
    scaling as divisors of the frequencies (rope_freqs), which computes the same function in
    other roundings; there the fp32 tolerance of the oracle tests applies, and plain RoPE fails it."""
    name, directory, path = family_files
    from_checkpoint = ditto.Session(ditto.Model.load(directory), capacity=len(PROMPT)).prefill(PROMPT, all_logits=True)
    from_gguf = ditto.Session(ditto.Model.load(path), capacity=len(PROMPT)).prefill(PROMPT, all_logits=True)
    difference = float(np.abs(from_gguf - from_checkpoint).max())
    if name == "llama3-rope":
        assert 0 < difference <= 1e-4 * max(1.0, float(np.abs(from_checkpoint).max())), difference
    else:
        assert from_gguf.tobytes() == from_checkpoint.tobytes(), (
            f"{name}: the GGUF file's logits differ from the checkpoint's by up to {difference}")


@pytest.fixture(scope="module")
def moe_checkpoint(tmp_path_factory):
    directory = tmp_path_factory.mktemp("bad-moe")
    make_family_checkpoint(directory, "qwen3_moe")
    return str(directory)


@pytest.mark.parametrize("change, message", [
    # A qwen3moe file without experts, a llama file whose experts qwen3moe's reader would need.
    (dict(expert_count=0), "a 'qwen3moe' file needs experts (qwen3moe.expert_count of at least 1)"),
    # More experts than the router and the stacked tensors hold.
    (dict(expert_count=5), "tensor 'model.layers.0.mlp.gate.weight' has shape [4, 128] but the config implies [5, 128]"),
    (dict(drop={"blk.1.ffn_down_exps.weight"}), "has no tensor 'model.layers.1.mlp.experts.0.down_proj.weight'"),
    (dict(drop={"blk.0.attn_k_norm.weight"}),
     "has no tensor 'blk.0.attn_k_norm.weight' (transformers' model.layers.0.self_attn.k_norm.weight)"),
])
def test_bad_moe_files_are_refused_by_name(moe_checkpoint, tmp_path, change, message):
    path = tmp_path / "bad.gguf"
    write_family_gguf(moe_checkpoint, path, **change)
    with pytest.raises(ditto.Error, match=re.escape(message)):
        ditto.Model.load(str(path))


def test_experts_per_token_beyond_the_experts_is_refused(moe_checkpoint, tmp_path):
    import json
    config = json.loads(open(f"{moe_checkpoint}/config.json").read())
    config["num_experts_per_tok"] = 5
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "model.safetensors").symlink_to(f"{moe_checkpoint}/model.safetensors")
    with pytest.raises(ditto.Error, match="num_experts_per_tok is 5, more than the 4 experts"):
        ditto.Model.load(str(tmp_path))


def test_an_unknown_family_is_refused_by_name(moe_checkpoint, tmp_path):
    import gguf
    path = tmp_path / "falcon.gguf"
    writer = gguf.GGUFWriter(str(path), "falcon")
    writer.add_block_count(1)
    writer.add_tensor("token_embd.weight", np.zeros((8, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ditto.Error, match="GGUF architecture 'falcon' is not supported; ditto runs qwen3, llama, qwen2"):
        ditto.Model.load(str(path))


PEER_PROMPT = [int(t) for t in np.random.default_rng(8).integers(0, 512, 40)]
PEER_GREEDY_TOKENS = 12


# Mistral's file is a plain llama file (llama3-rope covers that architecture, with rope_freqs).
@pytest.mark.parametrize("name", sorted(set(FAMILIES) - {"mistral"}))
def test_llama_cpp_runs_the_file_as_ditto_does(name, tmp_path):
    """All-position logits within the fp32 tolerance of llama.cpp's (it computes in f32 on these
    f32 weights, summing in its own orders), and the same greedy continuation. llama.cpp needs a
    vocabulary to load a file: one of the model's 512 tokens is added."""
    from llama_cpp import Llama
    make_family_checkpoint(tmp_path, name, tied=True)
    path = tmp_path / "model.gguf"
    write_family_gguf(str(tmp_path), path, tokenizer=sentencepiece_vocabulary)
    # An f32 KV cache (llama.cpp rounds keys and values to f16 by default).
    peer = Llama(model_path=str(path), n_ctx=128, logits_all=True, n_threads=2, type_k=0, type_v=0, verbose=False)
    tokens = list(PEER_PROMPT)
    peer.eval(tokens)
    for _ in range(PEER_GREEDY_TOKENS):
        tokens.append(int(np.argmax(peer.scores[peer.n_tokens - 1])))
        peer.eval([tokens[-1]])
    expected = np.array(peer.scores[:peer.n_tokens - 1])  # the logits that chose each token
    session = ditto.Session(ditto.Model.load(str(path)), capacity=len(tokens))
    actual = session.prefill(tokens[:-1], all_logits=True)
    tolerance = 1e-4 * max(1.0, float(np.abs(expected).max()))
    difference = float(np.abs(actual - expected).max())
    assert difference <= tolerance, f"{name}: ditto and llama.cpp differ by {difference} > {tolerance}"
    # Greedy: ditto's choices from its own logits are llama.cpp's, unless a near-tie (within
    # twice the tolerance) made the step ill-posed.
    for step in range(len(PEER_PROMPT) - 1, len(tokens) - 1):
        top2 = np.sort(actual[step])[-2:]
        if top2[1] - top2[0] > 2 * tolerance:
            assert int(np.argmax(actual[step])) == tokens[step + 1], f"{name}: step {step}"
