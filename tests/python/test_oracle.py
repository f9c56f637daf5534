"""Same function as Hugging Face: ditto against `transformers` on small random checkpoints.

Every checkpoint here is made by `transformers` itself (Qwen3ForCausalLM, LlamaForCausalLM and
each other family's class, from a config, saved as safetensors) and the reference is that same model run by `transformers` in
fp32 (for BF16/F16 files: in fp32 on the same rounded values). ditto must give all-position
logits within FP32 tolerance (below) and the identical 32-token greedy continuation.
"""
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

import ditto
from ditto_testing.checkpoints import (make_checkpoint, reference_greedy_with_margins, reference_logits,
                                       with_rounded_kv_cache)

# ---------------------------------------------------------------------------------------------
# Tolerance.
#
# ditto and torch both compute in fp32 but sum in different orders (ditto: the fixed fma chains
# and 16-lane folds of the reference kernels; torch: its BLAS's blocked sums), so the logits
# differ by rounding noise. Measured on these models (max|logit| ~ 10): at most ~2.5e-6 x
# max|logit| for Qwen3 and ~6e-6 x max|logit| for Llama, growing with the prompt (no q/k norm
# there, so attention scores are large and amplify noise; transformers' own fp32 logits differ
# from an fp64 run of the same weights by as much as ditto's do). The tolerance
# 1e-4 x max(1, max|logit|) leaves >10x headroom over that noise and is far below what a real
# mistake does: rope_theta off by 0.1% already gives 20-80x the tolerance, a wrong RoPE pairing,
# GQA head mapping or weight rounding gives 1e-2 to 1.
# ---------------------------------------------------------------------------------------------
FP32_RELATIVE_TOLERANCE = 1e-4

GREEDY_TOKENS = 32
PROMPT_LENGTHS = (1, 2, 3, 17, 64, 200)
GREEDY_PROMPT_LENGTHS = (1, 17, 200)
CAPACITY = 256  # holds the longest prompt plus its greedy continuation


def fp32_tolerance(reference):
    return FP32_RELATIVE_TOLERANCE * max(1.0, float(np.abs(reference).max()))


# Each config covers several of: Qwen3/Llama, GQA ratio (heads / kv_heads) 1, 2, 4, head_dim 64
# and 128, a hidden size that is not a multiple of 16 (72, 136, 200), tied and untied
# embeddings, F32/BF16/F16 weights, RoPE theta from the config, odd vocab and MLP sizes.
CONFIGS = {
    "qwen3-gqa1-hd64-h72-f32": dict(
        arch="qwen3", hidden_size=72, intermediate_size=136, heads=4, kv_heads=4, head_dim=64,
        dtype="float32", rope_theta=1e6),
    "qwen3-gqa2-hd128-h128-bf16-tied": dict(
        arch="qwen3", hidden_size=128, intermediate_size=256, heads=4, kv_heads=2, head_dim=128,
        dtype="bfloat16", tied=True, rope_theta=1e6),
    "qwen3-gqa4-hd64-h200-f16": dict(
        arch="qwen3", vocab_size=500, hidden_size=200, intermediate_size=200, heads=8, kv_heads=2,
        head_dim=64, dtype="float16"),
    "llama-gqa1-hd128-h96-bf16": dict(
        arch="llama", hidden_size=96, intermediate_size=160, heads=2, kv_heads=2, head_dim=128,
        dtype="bfloat16", rope_theta=5e5),
    "llama-gqa2-hd64-h72-f32-tied": dict(
        arch="llama", hidden_size=72, intermediate_size=136, heads=4, kv_heads=2, head_dim=64,
        dtype="float32", tied=True),
    "llama-gqa4-hd128-h128-f32": dict(
        arch="llama", hidden_size=128, intermediate_size=256, heads=4, kv_heads=1, head_dim=128,
        dtype="float32", rope_theta=5e5),
    "llama-gqa4-hd64-h136-f16-tied": dict(
        arch="llama", vocab_size=500, hidden_size=136, intermediate_size=136, heads=8, kv_heads=2,
        head_dim=64, dtype="float16", tied=True, rope_theta=1e5),
    # Gemma 3: local layers with a sliding window shorter than the longer prompts (13, 50) and
    # their own RoPE base, between global ones (every 2nd, every 3rd layer); query_pre_attn_scalar
    # other than head_dim; GELU-tanh; the final softcap in one (270M has none).
    "gemma3-gqa2-hd64-h72-f32-tied-w13": dict(
        arch="gemma3_text", hidden_size=72, intermediate_size=136, layers=4, heads=4, kv_heads=2, head_dim=64,
        dtype="float32", tied=True, rope_theta=1e6,
        family=dict(sliding_window=13, sliding_window_pattern=2, rope_local_base_freq=1e4, query_pre_attn_scalar=48)),
    "gemma3-mqa-hd128-h136-bf16-w50-softcap": dict(
        arch="gemma3_text", vocab_size=500, hidden_size=136, intermediate_size=200, layers=3, heads=4, kv_heads=1,
        head_dim=128, dtype="bfloat16", rope_theta=5e5,
        family=dict(sliding_window=50, sliding_window_pattern=3, rope_local_base_freq=2e4, query_pre_attn_scalar=256,
                    final_logit_softcapping=8.0)),
}

# The other families, each with what sets it apart: Qwen2's q/k/v biases and its window on the
# upper layers, Mistral's and Phi-3's windows in every layer (shorter than the longest prompts),
# Phi-3's fused projections, Llama 3.1's RoPE scaling (an original context of 64, so that
# all three frequency bands occur), and mixtures of experts with top-1 and top-2 routing, with
# and without renormalisation, Qwen3-MoE with a dense layer among its sparse ones.
LLAMA3_ROPE = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
FAMILY_CONFIGS = {
    "qwen2-gqa2-hd64-h72-f32-window24": dict(
        arch="qwen2", hidden_size=72, intermediate_size=136, heads=4, kv_heads=2, head_dim=64,
        dtype="float32", rope_theta=1e6, family=dict(use_sliding_window=True, sliding_window=24, max_window_layers=1)),
    "qwen2-mqa-hd64-h128-bf16-tied": dict(
        arch="qwen2", hidden_size=128, intermediate_size=200, heads=4, kv_heads=1, head_dim=64,
        dtype="bfloat16", tied=True),
    "mistral-gqa4-hd128-h96-bf16-window32": dict(
        arch="mistral", hidden_size=96, intermediate_size=160, heads=4, kv_heads=1, head_dim=128,
        dtype="bfloat16", family=dict(sliding_window=32)),
    "phi3-gqa1-hd64-h136-f32-window48": dict(
        arch="phi3", vocab_size=500, hidden_size=136, intermediate_size=136, heads=4, kv_heads=4, head_dim=64,
        dtype="float32", family=dict(sliding_window=48)),
    "llama-llama3-rope-gqa2-hd64-h72-f32": dict(
        arch="llama", hidden_size=72, intermediate_size=136, heads=4, kv_heads=2, head_dim=64,
        dtype="float32", family=dict(rope_parameters=LLAMA3_ROPE)),
    "mixtral-top2of4-gqa2-hd64-h72-bf16": dict(
        arch="mixtral", hidden_size=72, intermediate_size=56, heads=4, kv_heads=2, head_dim=64,
        dtype="bfloat16", family=dict(num_local_experts=4, num_experts_per_tok=2)),
    "mixtral-top1of3-mqa-hd64-h64-f32-tied-window40": dict(
        arch="mixtral", hidden_size=64, intermediate_size=40, heads=2, kv_heads=1, head_dim=64,
        dtype="float32", tied=True, family=dict(num_local_experts=3, num_experts_per_tok=1, sliding_window=40)),
    "qwen3_moe-top2of5-gqa2-hd64-h72-f32": dict(
        arch="qwen3_moe", hidden_size=72, intermediate_size=136, heads=4, kv_heads=2, head_dim=64,
        dtype="float32", family=dict(num_experts=5, num_experts_per_tok=2, moe_intermediate_size=40,
                                     norm_topk_prob=False)),
    "qwen3_moe-top1of4-gqa4-hd64-h128-bf16-tied-dense0": dict(
        arch="qwen3_moe", hidden_size=128, intermediate_size=96, heads=4, kv_heads=1, head_dim=64,
        dtype="bfloat16", tied=True, layers=3,
        family=dict(num_experts=4, num_experts_per_tok=1, moe_intermediate_size=48, norm_topk_prob=True,
                    mlp_only_layers=[0])),
}
CONFIGS.update(FAMILY_CONFIGS)


@pytest.fixture(scope="module", autouse=True)
def single_threaded_torch():
    """The reference's small matmuls gain nothing from threads, and on a busy 2-core machine
    torch's thread pool makes them tens of times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@dataclass
class Checkpoint:
    path: str
    reference: transformers.PreTrainedModel  # fp32, on the values stored in the file
    model: "ditto.Model"
    vocab_size: int


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory):
    """checkpoint(name, **overrides) -> Checkpoint, each made and loaded once per session."""
    made = {}

    def get(name, **overrides):
        key = (name, tuple(sorted(overrides.items())))
        if key not in made:
            options = {**CONFIGS[name], **overrides}
            path = str(tmp_path_factory.mktemp(name))
            reference = make_checkpoint(path, **options)
            made[key] = Checkpoint(path, reference, ditto.Model.load(path), options.get("vocab_size", 512))
        return made[key]

    return get


def prompt(length, vocab_size):
    """A fixed pseudo-random prompt of `length` token ids."""
    return np.random.default_rng(1000 + length).integers(0, vocab_size, length).tolist()


def assert_logits_close(actual, expected, tolerance, what):
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape}, expected {expected.shape}"
    assert np.isfinite(actual).all(), f"{what}: non-finite logits"
    diff = np.abs(actual.astype(np.float64) - expected)
    worst = np.unravel_index(int(diff.argmax()), diff.shape)
    assert diff.max() <= tolerance, (
        f"{what}: max |ditto - transformers| = {diff.max():.3e} > tolerance {tolerance:.3e} "
        f"at position {worst[0]}, token {worst[1]} (ditto {actual[worst]:.6f}, "
        f"transformers {expected[worst]:.6f}); max |logit| = {np.abs(expected).max():.3f}")
    return float(diff.max())


def ditto_greedy(model, prompt_ids, count, cache_dtype="f32"):
    """ditto's greedy continuation: one prefill, then decode; returns tokens and the logit rows
    they were chosen from (row i predicts token i)."""
    session = ditto.Session(model, capacity=CAPACITY, cache_dtype=cache_dtype)
    rows = [session.prefill(prompt_ids, all_logits=False)[0]]
    tokens = [int(rows[-1].argmax())]
    while len(tokens) < count:
        rows.append(session.decode(tokens[-1]))
        tokens.append(int(rows[-1].argmax()))
    assert session.position == len(prompt_ids) + count - 1
    return tokens, np.stack(rows)


def assert_same_greedy(actual, expected, margins, near_tie, what):
    """Tokens must be identical; where they first differ, say whether the reference had a
    near-tie there (a margin below `near_tie`, so the comparison was ill-posed) or not (a bug)."""
    for step, (got, want) in enumerate(zip(actual, expected)):
        if got != want:
            verdict = (f"ILL-POSED: the reference's margin {margins[step]:.2e} there is a near-tie "
                       f"(< {near_tie:.2e}); choose another prompt or seed"
                       if margins[step] < near_tie else
                       f"the reference's choice was decisive (margin {margins[step]:.3f} >= {near_tie:.2e})")
            pytest.fail(f"{what}: greedy tokens differ first at step {step}: ditto {got}, transformers "
                        f"{want}; {verdict}.\n  ditto:        {actual}\n  transformers: {expected}")
    assert len(actual) == len(expected)


# ---------------------------------------------------------------------------------------------
# All-position logits and greedy continuations, per config.
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("length", PROMPT_LENGTHS, ids=lambda n: f"prompt{n}")
@pytest.mark.parametrize("name", CONFIGS)
def test_all_position_logits_match_transformers(checkpoint, name, length):
    ck = checkpoint(name)
    ids = prompt(length, ck.vocab_size)
    expected = reference_logits(ck.reference, ids)
    actual = ditto.Session(ck.model, capacity=CAPACITY).prefill(ids, all_logits=True)
    assert_logits_close(actual, expected, fp32_tolerance(expected), f"{name}, prompt of {length}")


@pytest.mark.parametrize("length", GREEDY_PROMPT_LENGTHS, ids=lambda n: f"prompt{n}")
@pytest.mark.parametrize("name", CONFIGS)
def test_greedy_continuation_matches_transformers(checkpoint, name, length):
    ck = checkpoint(name)
    ids = prompt(length, ck.vocab_size)
    expected, margins = reference_greedy_with_margins(ck.reference, ids, GREEDY_TOKENS)
    actual, rows = ditto_greedy(ck.model, ids, GREEDY_TOKENS)
    # The logits of the whole sequence from transformers, for the positions that chose the tokens:
    # this checks the decode path's logits too, not only their argmax.
    reference_rows = reference_logits(ck.reference, ids + expected[:-1])[length - 1:]
    tolerance = fp32_tolerance(reference_rows)
    assert_same_greedy(actual, expected, margins, 2 * tolerance, f"{name}, prompt of {length}")
    assert_logits_close(rows, reference_rows, tolerance, f"{name}, prompt of {length}, prefill+decode rows")


# ---------------------------------------------------------------------------------------------
# A 16-bit KV cache.
#
# With cache_dtype f16/bf16 ditto stores K (after q/k norm and RoPE) and V rounded to nearest
# even, and attends over those. The reference does the same: `with_rounded_kv_cache` rounds K and
# V at that point inside transformers' attention. The fp32 tolerance does not apply, for a
# principled reason: ditto's and torch's fp32 K/V differ by rounding noise (~1e-7 relative),
# and the few elements that lie within that noise of a rounding boundary of the 16-bit type round
# the other way -- each such flip is a whole cache ulp (2^-11 relative for f16, 2^-8 for bf16) on
# one element, an error of the same kind as the cache rounding itself. (Measured: a handful of
# K/V elements per layer lie within 1e-3 ulp of a boundary.) So the checks are, with
# D = max|rounded reference - fp32 reference| (what the cache rounding does to the logits):
#   - ditto is nearer the rounded reference than the unrounded one (it rounds, to nearest, and
#     in the same place: a cache that does not round, that truncates, or that rounds K before
#     RoPE fails this -- the last on the 200-token prompt -- as emulating them in torch shows);
#   - ditto's distance from the fp32 reference is at most 2 D plus the fp32 tolerance (every
#     element is off by at most one cache ulp instead of half of one);
#   - the greedy continuation equals the rounded reference's, unless a near-tie (margin below
#     2 D plus the tolerance) makes it ill-posed -- which the assertion would say.
# ---------------------------------------------------------------------------------------------
CACHE_CONFIGS = ("qwen3-gqa2-hd128-h128-bf16-tied", "llama-gqa4-hd128-h128-f32")


@pytest.mark.parametrize("length", (1, 17, 200), ids=lambda n: f"prompt{n}")
@pytest.mark.parametrize("cache_dtype", ("f16", "bf16"))
@pytest.mark.parametrize("name", CACHE_CONFIGS)
def test_16bit_kv_cache_matches_rounded_reference(checkpoint, name, cache_dtype, length):
    ck = checkpoint(name)
    ids = prompt(length, ck.vocab_size)
    exact = reference_logits(ck.reference, ids)
    rounded_model = with_rounded_kv_cache(ck.reference, cache_dtype)
    rounded = reference_logits(rounded_model, ids)
    actual = ditto.Session(ck.model, capacity=CAPACITY, cache_dtype=cache_dtype).prefill(ids).astype(np.float64)
    tolerance = fp32_tolerance(exact)
    rounding_effect = float(np.abs(rounded - exact).max())
    to_rounded = float(np.abs(actual - rounded).max())
    to_exact = float(np.abs(actual - exact).max())
    what = f"{name}, {cache_dtype} cache, prompt of {length}"
    assert rounding_effect > tolerance, f"{what}: the cache rounding should be visible ({rounding_effect:.2e})"
    assert to_rounded < to_exact, (
        f"{what}: ditto is {to_rounded:.3e} from the reference with a rounded K/V cache but "
        f"{to_exact:.3e} from the unrounded one: its cache does not round as the reference's does")
    assert to_exact <= 2 * rounding_effect + tolerance, (
        f"{what}: ditto is {to_exact:.3e} from the fp32 reference, more than twice the cache "
        f"rounding's own effect {rounding_effect:.3e} (+ tolerance {tolerance:.1e})")

    if length == 17:
        expected, margins = reference_greedy_with_margins(rounded_model, ids, GREEDY_TOKENS)
        tokens, _ = ditto_greedy(ck.model, ids, GREEDY_TOKENS, cache_dtype)
        assert_same_greedy(tokens, expected, margins, 2 * rounding_effect + tolerance, what)


# ---------------------------------------------------------------------------------------------
# Checkpoint formats.
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ("qwen3-gqa2-hd128-h128-bf16-tied", "llama-gqa4-hd128-h128-f32"))
def test_sharded_checkpoint_gives_the_same_logits(checkpoint, name):
    single = checkpoint(name)
    sharded = checkpoint(name, max_shard_size="150KB")
    with open(f"{sharded.path}/model.safetensors.index.json") as f:
        shards = sorted(set(json.load(f)["weight_map"].values()))
    assert len(shards) >= 3 and all("-of-" in shard for shard in shards), shards
    assert not os.path.exists(f"{sharded.path}/model.safetensors")
    ids = prompt(200, single.vocab_size)
    from_single = ditto.Session(single.model, capacity=CAPACITY).prefill(ids)
    from_shards = ditto.Session(sharded.model, capacity=CAPACITY).prefill(ids)
    # Same weights, same engine: the same bits.
    assert np.array_equal(from_single, from_shards), (
        f"{name}: {len(shards)} shards give logits up to {np.abs(from_single - from_shards).max():.3e} "
        "away from the single-file checkpoint")
    expected = reference_logits(sharded.reference, ids)
    assert_logits_close(from_shards, expected, fp32_tolerance(expected), f"{name}, {len(shards)} shards")


def with_config(ck, directory, config):
    """A copy of checkpoint `ck` in `directory` with another config.json; its path."""
    shutil.copytree(ck.path, directory)
    (directory / "config.json").write_text(json.dumps(config))
    return str(directory)


def assert_same_bits_as(ck, path):
    """The model at `path` gives checkpoint ck's logits bit for bit on a 200-token prompt; returns them."""
    ids = prompt(200, ck.vocab_size)
    expected = ditto.Session(ck.model, capacity=CAPACITY).prefill(ids)
    actual = ditto.Session(ditto.Model.load(path), capacity=CAPACITY).prefill(ids)
    assert np.array_equal(actual, expected), np.abs(actual - expected).max()
    return ids, actual


def test_legacy_config_layout_gives_the_same_logits(checkpoint, tmp_path):
    """A config.json as transformers 4 wrote it (and as SmolLM2 ships it): top-level rope_theta,
    "rope_scaling": null, no head_dim (it is hidden_size / heads)."""
    # GQA 2 with head_dim 64 = hidden_size 128 / 2 heads, and a non-default theta.
    ck = checkpoint("llama-gqa2-hd64-h72-f32-tied", hidden_size=128, heads=2, kv_heads=1, rope_theta=1e5)
    config = json.loads(Path(ck.path, "config.json").read_text())
    rope = config.pop("rope_parameters")
    assert rope == {"rope_type": "default", "rope_theta": 1e5}, rope
    assert config.pop("head_dim") == 64 == config["hidden_size"] // config["num_attention_heads"]
    config.update(rope_theta=1e5, rope_scaling=None)
    ids, actual = assert_same_bits_as(ck, with_config(ck, tmp_path / "legacy", config))
    reference = reference_logits(ck.reference, ids)
    assert_logits_close(actual, reference, fp32_tolerance(reference), "legacy config layout")


def test_gemma3_legacy_config_layout_gives_the_same_logits(checkpoint, tmp_path):
    """Gemma 3 as transformers 4 wrote it (and as google/gemma-3-270m ships it): rope_theta and
    rope_local_base_freq at the top level, "rope_scaling": null; and the sliding layers given by
    sliding_window_pattern alone, without layer_types."""
    ck = checkpoint("gemma3-mqa-hd128-h136-bf16-w50-softcap")
    config = json.loads(Path(ck.path, "config.json").read_text())
    rope = config.pop("rope_parameters")
    assert rope == {"full_attention": {"rope_type": "default", "rope_theta": 5e5},
                    "sliding_attention": {"rope_type": "default", "rope_theta": 2e4}}, rope
    assert config.pop("layer_types") == ["sliding_attention", "sliding_attention", "full_attention"]
    config.update(rope_theta=5e5, rope_local_base_freq=2e4, rope_scaling=None)
    assert_same_bits_as(ck, with_config(ck, tmp_path / "legacy-gemma3", config))


@pytest.mark.parametrize("fields, error", [
    # Gemma 3 4B and larger scale their global layers' RoPE linearly.
    ({"rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
                          "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}, r"rope.*\blinear\b"),
    ({"rope_theta": 1e6, "rope_scaling": {"rope_type": "linear", "factor": 8.0}}, r"rope.*\blinear\b"),
    ({"attn_logit_softcapping": 50.0}, "attn_logit_softcapping"),
    ({"hidden_activation": "gelu"}, "hidden_activation 'gelu'"),
    ({"use_bidirectional_attention": True}, "bidirectional"),
    ({"layer_types": ["sliding_attention", "full_attention"]}, "one type for each of the 4 layers"),
    ({"sliding_window": 0}, r"sliding_window is 0, outside the accepted range 1\.\."),
    ({"query_pre_attn_scalar": -1}, "query_pre_attn_scalar is -1"),
])
def test_gemma3_configs_ditto_does_not_run_are_refused(checkpoint, tmp_path, fields, error):
    ck = checkpoint("gemma3-gqa2-hd64-h72-f32-tied-w13")
    config = json.loads(Path(ck.path, "config.json").read_text())
    if "rope_scaling" in fields:
        del config["rope_parameters"]
    config.update(fields)
    with pytest.raises(ditto.Error, match=error):
        ditto.Model.load(with_config(ck, tmp_path / "changed", config))


# ---------------------------------------------------------------------------------------------
# RoPE scaling other than Llama 3.1's is not implemented: a config that asks for it is refused,
# naming it, never run with plain RoPE (which would silently compute another function).
# ---------------------------------------------------------------------------------------------
ROPE_SCALINGS = {
    # As transformers 5 writes them: "rope_parameters".
    "llama-linear": ("llama-gqa2-hd64-h72-f32-tied", "linear", {"rope_parameters": {
        "rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0}}),
    "qwen3-yarn": ("qwen3-gqa1-hd64-h72-f32", "yarn", {"rope_parameters": {
        "rope_type": "yarn", "rope_theta": 1000000.0, "factor": 4.0, "original_max_position_embeddings": 256}}),
    # As transformers 4 wrote them (older Qwen): top-level "rope_scaling".
    "legacy-llama-linear-type": ("llama-gqa2-hd64-h72-f32-tied", "linear", {"rope_theta": 10000.0, "rope_scaling": {
        "type": "linear", "factor": 2.0}}),
    "legacy-qwen3-dynamic": ("qwen3-gqa1-hd64-h72-f32", "dynamic", {"rope_theta": 1000000.0, "rope_scaling": {
        "rope_type": "dynamic", "factor": 2.0}}),
}


@pytest.mark.parametrize("case", ROPE_SCALINGS)
def test_rope_scaling_is_refused_by_name(checkpoint, tmp_path, case):
    name, rope_type, fields = ROPE_SCALINGS[case]
    ck = checkpoint(name)
    config = json.loads(Path(ck.path, "config.json").read_text())
    if "rope_scaling" in fields:
        del config["rope_parameters"]
    config.update(fields)
    scaled = with_config(ck, tmp_path / case, config)
    # transformers reads this scaling from the file (so it is well-formed) ...
    hf_config = transformers.AutoConfig.from_pretrained(scaled)
    assert hf_config.rope_parameters["rope_type"] == rope_type
    # ... and ditto refuses it, naming the scaling it was asked for.
    with pytest.raises(ditto.Error, match=rf"(?i)rope.*\b{rope_type}\b"):
        ditto.Model.load(scaled)


def test_llama3_rope_in_the_legacy_layout_gives_the_same_logits(checkpoint, tmp_path):
    """Llama 3.1's config.json as transformers 4 wrote it: top-level rope_theta and "rope_scaling"."""
    ck = checkpoint("llama-llama3-rope-gqa2-hd64-h72-f32")
    config = json.loads(Path(ck.path, "config.json").read_text())
    rope = config.pop("rope_parameters")
    config.update(rope_theta=rope.pop("rope_theta"), rope_scaling=rope)
    assert_same_bits_as(ck, with_config(ck, tmp_path / "legacy-llama3", config))


@pytest.mark.parametrize("field, value, message", [
    ("factor", 0.5, "factor is 0.5, outside the accepted range 1.."),
    ("high_freq_factor", 1.0, "high_freq_factor must be greater than low_freq_factor"),
    ("original_max_position_embeddings", 0, "original_max_position_embeddings is 0, outside"),
    ("low_freq_factor", None, "low_freq_factor is missing"),
])
def test_bad_llama3_rope_fields_are_refused_by_name(checkpoint, tmp_path, field, value, message):
    ck = checkpoint("llama-llama3-rope-gqa2-hd64-h72-f32")
    config = json.loads(Path(ck.path, "config.json").read_text())
    if value is None:
        del config["rope_parameters"][field]
    else:
        config["rope_parameters"][field] = value
    bad = with_config(ck, tmp_path / "bad-llama3", config)
    with pytest.raises(ditto.Error, match=f"rope_parameters: {field}"):
        ditto.Model.load(bad)
    with pytest.raises(ditto.Error, match=message):
        ditto.Model.load(bad)
