"""The sampler against transformers, statistically (docs/sampling.md).

A tiny random Qwen3 model made by transformers gives the logits of one prompt; ditto computes the
same logits and draws the next token with each of 4,000 fixed seeds. The frequencies of those
tokens must match the probabilities that transformers' own logits processors (temperature, top-k,
top-p, min-p, repetition penalty, sequence bias) give on transformers' logits — presence and
frequency penalties, which transformers lacks, are OpenAI's formula in torch. The comparison is a
chi-square test; the seeds are fixed, so the test is deterministic, and its threshold was chosen
before looking at the data. Tokens that the transforms remove must never be drawn, and the
logprobs must be torch.log_softmax of the logits.
"""
import numpy as np
import pytest
import torch
import transformers

import ditto
from ditto_testing.checkpoints import make_checkpoint, reference_logits

PROMPT = [17, 300, 42, 7, 99, 123, 5, 5, 5]
SEEDS = range(4000)
# Reject agreement when the chi-square p-value is below this. With 4,000 draws a wrong
# transform (a temperature off by 10%, top-p keeping one token too many) gives p-values far
# below it; a correct sampler passes with probability 1 - 1e-4 per case, and the seeds are
# fixed, so a pass stays a pass.
SIGNIFICANCE = 1e-4
MIN_EXPECTED = 5  # tokens expected fewer times than this are pooled into one chi-square bin
LOGPROB_TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def logits(tmp_path_factory):
    """(ditto's logits, transformers' logits, history) for the token after PROMPT.

    The history (for the penalties) is the prompt followed by some of the likeliest tokens,
    repeated, so that the penalties change the distribution visibly.
    """
    path = str(tmp_path_factory.mktemp("sampling-model"))
    reference = make_checkpoint(path, "qwen3", vocab_size=512, hidden_size=64, intermediate_size=128,
                                layers=2, heads=4, kv_heads=2, head_dim=16)
    expected = reference_logits(reference, PROMPT)[-1]
    session = ditto.Session(ditto.Model.load(path), capacity=len(PROMPT))
    got = session.prefill(PROMPT, all_logits=False)[0]
    np.testing.assert_allclose(got, expected, atol=1e-4 * max(1.0, float(np.abs(expected).max())), rtol=0)
    ranked = np.argsort(-expected, kind="stable")
    history = PROMPT + [int(ranked[r]) for r in (0, 0, 1, 3, 3, 3, 6)]
    return got, expected, history


def reference_probabilities(logits, history, params):
    """The next-token distribution under `params`, by transformers' logits processors, in the
    order of ditto's chain: penalties, bias, temperature, top-k, top-p, min-p."""
    ids = torch.tensor([history])
    scores = torch.tensor(logits, dtype=torch.float32)[None]
    if params.get("repetition_penalty", 1.0) != 1.0:
        scores = transformers.RepetitionPenaltyLogitsProcessor(params["repetition_penalty"])(ids, scores)
    presence, frequency = params.get("presence_penalty", 0.0), params.get("frequency_penalty", 0.0)
    if presence or frequency:  # OpenAI: logit - count * frequency - (count > 0) * presence
        counts = torch.bincount(ids[0], minlength=scores.shape[-1]).float()
        scores = scores - counts * frequency - (counts > 0).float() * presence
    if params.get("logit_bias"):
        bias = [[[token], value] for token, value in params["logit_bias"].items()]
        scores = transformers.SequenceBiasLogitsProcessor(bias)(ids, scores)
    if "temperature" in params:
        scores = transformers.TemperatureLogitsWarper(params["temperature"])(ids, scores)
    if "top_k" in params:
        scores = transformers.TopKLogitsWarper(params["top_k"])(ids, scores)
    if "top_p" in params:
        scores = transformers.TopPLogitsWarper(params["top_p"])(ids, scores)
    if "min_p" in params:
        scores = transformers.MinPLogitsWarper(params["min_p"])(ids, scores)
    return torch.softmax(scores[0].double(), -1).numpy()


def chi_square_p_value(counts, probabilities):
    """P-value of Pearson's chi-square test of counts against probabilities; tokens expected
    fewer than MIN_EXPECTED times are pooled into one bin (added to the smallest other bin when
    the pool itself is expected fewer times)."""
    expected = probabilities * counts.sum()
    large = expected >= MIN_EXPECTED
    observed_bins, expected_bins = list(counts[large]), list(expected[large])
    pooled_observed, pooled_expected = counts[~large].sum(), expected[~large].sum()
    if pooled_expected >= MIN_EXPECTED:
        observed_bins.append(pooled_observed)
        expected_bins.append(pooled_expected)
    elif pooled_expected > 0:
        smallest = int(np.argmin(expected_bins))
        observed_bins[smallest] += pooled_observed
        expected_bins[smallest] += pooled_expected
    observed_bins, expected_bins = np.array(observed_bins, float), np.array(expected_bins)
    statistic = float(((observed_bins - expected_bins) ** 2 / expected_bins).sum())
    dof = len(expected_bins) - 1
    return float(torch.special.gammaincc(torch.tensor(dof / 2, dtype=torch.float64),
                                         torch.tensor(statistic / 2, dtype=torch.float64)))


# ditto's penalties see the whole history (penalty_window 0), as transformers' do.
CASES = {
    "temperature 1": {"temperature": 1.0},
    "temperature 0.6": {"temperature": 0.6},
    "temperature 1.7": {"temperature": 1.7},
    "top-k 20": {"top_k": 20},
    "top-p 0.8": {"top_p": 0.8},
    "min-p 0.1": {"min_p": 0.1},
    "repetition penalty 1.8": {"repetition_penalty": 1.8, "penalty_window": 0},
    "presence 0.7 and frequency 0.4": {"presence_penalty": 0.7, "frequency_penalty": 0.4, "penalty_window": 0},
    "logit bias": {"logit_bias": {5: 6.0, 99: 2.0, 400: -1.0}},
    "the whole chain": {"repetition_penalty": 1.3, "presence_penalty": 0.2, "frequency_penalty": 0.1,
                        "penalty_window": 0, "logit_bias": {5: 2.0}, "temperature": 0.8, "top_k": 50,
                        "top_p": 0.9, "min_p": 0.02},
}


@pytest.mark.parametrize("name", list(CASES))
def test_first_token_frequencies_match_transformers(logits, name):
    ditto_logits, reference, history = logits
    params = CASES[name]
    probabilities = reference_probabilities(reference, history, params)
    kept = probabilities > 0
    # The transforms must keep the same tokens on ditto's logits (within fp32 noise of these):
    # otherwise the case sits on a boundary and says nothing.
    assert np.array_equal(reference_probabilities(ditto_logits, history, params) > 0, kept), name
    if not kept.all():
        assert kept.sum() >= 2, f"{name}: keeps one token; the draw would be trivial"

    counts = np.zeros(len(probabilities), dtype=np.int64)
    for seed in SEEDS:
        token, _, _ = ditto.sample(ditto_logits, history, {**params, "seed": seed}, len(PROMPT))
        counts[token] += 1
    assert counts[~kept].sum() == 0, f"{name}: drew removed tokens {np.flatnonzero(counts * ~kept).tolist()}"
    p_value = chi_square_p_value(counts, probabilities)
    assert p_value > SIGNIFICANCE, f"{name}: chi-square p-value {p_value:.2e}"


def test_a_wrong_distribution_fails_the_test(logits):
    """The test has power: draws at temperature 1 against the probabilities at 1.1 fail it."""
    ditto_logits, reference, history = logits
    counts = np.zeros(len(reference), dtype=np.int64)
    for seed in SEEDS:
        counts[ditto.sample(ditto_logits, history, {"seed": seed}, len(PROMPT))[0]] += 1
    assert chi_square_p_value(counts, reference_probabilities(reference, history, {"temperature": 1.1})) < SIGNIFICANCE


def test_logprobs_are_log_softmax_of_the_raw_logits(logits):
    _, reference, history = logits
    expected = torch.log_softmax(torch.tensor(reference), -1).numpy()
    order = np.lexsort((np.arange(len(expected)), -expected))  # logprob desc, then id asc
    # Neither the penalties, the bias, the temperature nor the filters change them.
    for params in ({"temperature": 0.0}, CASES["the whole chain"]):
        for seed in range(20):
            token, logprob, top = ditto.sample(reference, history, {**params, "seed": seed, "logprobs": True,
                                                                    "top_logprobs": 20}, len(PROMPT))
            assert abs(logprob - expected[token]) <= LOGPROB_TOLERANCE
            assert [t for t, _ in top] == order[:20].tolist()
            assert np.abs(np.array([lp for _, lp in top]) - expected[order[:20]]).max() <= LOGPROB_TOLERANCE


def test_bad_parameters_are_clear_errors(logits):
    ditto_logits, _, _ = logits
    for params, words in [({"temperature": -1.0}, "temperature"), ({"top_p": 0.0, "seed": 1}, "top_p"),
                          ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"), ({"temp": 1.0}, "unknown"),
                          ({"temperature": 1.0}, "seed")]:
        with pytest.raises(ditto.Error, match=words):
            ditto.sample(ditto_logits, [], params, 0)
    with pytest.raises(ditto.Error, match="finite"):
        ditto.sample(np.array([0.0, np.nan], dtype=np.float32), [], {"temperature": 0.0}, 0)
