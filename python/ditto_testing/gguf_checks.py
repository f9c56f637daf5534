"""What the tests of GGUF files check, each file against the reference: ditto's logits within the
fp32 tolerance of transformers' own GGUF loader (`gguf_file=`, dequantised to fp32 by the `gguf`
package) and the same greedy continuation, each engine with its KV cache; and ditto's bits the
same for any chunking of the prompt and any thread count.
"""
import numpy as np
import torch

import ditto

# As in the oracle tests of random checkpoints: fp32 summation-order noise, relative to the
# largest logit (the tests that use it say what they measured).
FP32_RELATIVE_TOLERANCE = 1e-4


def transformers_greedy(reference, prompt, count, logits_to_keep=0):
    """The prompt's logits (of its last `logits_to_keep` positions, or all) and the greedy
    continuation, with transformers' KV cache."""
    with torch.no_grad():
        out = reference(torch.tensor([prompt]), use_cache=True, logits_to_keep=logits_to_keep)
        logits = out.logits[0].numpy()
        tokens = []
        for _ in range(count):
            tokens.append(int(out.logits[0, -1].argmax()))
            out = reference(torch.tensor([[tokens[-1]]]), cache=out.cache, use_cache=True)
    return logits, tokens


def ditto_greedy(model, prompt, count, logits_from=0):
    """ditto's logits of the prompt's positions logits_from.. and its greedy continuation: one
    prefill, then decode."""
    session = ditto.Session(model, capacity=len(prompt) + count, threads=2)
    if logits_from:
        session.prefill(prompt[:logits_from], all_logits=False)
    logits = session.prefill(prompt[logits_from:], all_logits=True)
    tokens, last = [], logits[-1]
    for _ in range(count):
        tokens.append(int(np.argmax(last)))
        last = session.decode(tokens[-1])
    return logits, tokens


def assert_matches_transformers(model, reference, prompt, count, logits_from=0):
    """ditto's logits (of positions logits_from..) within the tolerance of transformers', and the
    same `count` greedy tokens; returns the largest difference relative to the largest logit."""
    expected_logits, expected_tokens = transformers_greedy(reference, prompt, count, len(prompt) - logits_from)
    logits, tokens = ditto_greedy(model, prompt, count, logits_from)
    largest = max(1.0, float(np.abs(expected_logits).max()))
    diff = float(np.abs(logits - expected_logits).max())
    assert diff <= FP32_RELATIVE_TOLERANCE * largest, (
        f"prompt of {len(prompt)} tokens: max |logit diff| {diff:.3e} > {FP32_RELATIVE_TOLERANCE * largest:.3e}")
    assert tokens == expected_tokens, f"prompt of {len(prompt)} tokens: {prompt}"
    return diff / largest


def assert_invariant(model, prompt, runs):
    """For each (chunk, threads) of `runs`, the logits of every position, the prompt fed in
    chunks of that size (1: token by token through decode), are the bits of the whole prompt in
    one prefill on one thread."""
    expected = ditto.Session(model, capacity=len(prompt), threads=1).prefill(prompt, all_logits=True)
    for chunk, threads in runs:
        session = ditto.Session(model, capacity=len(prompt), threads=threads)
        if chunk == 1:
            rows = [session.decode(token) for token in prompt]
        else:
            rows = [session.prefill(prompt[at:at + chunk], all_logits=True) for at in range(0, len(prompt), chunk)]
        assert np.vstack(rows).tobytes() == expected.tobytes(), f"chunk {chunk}, threads {threads}"
