"""What a 16-bit KV cache costs in accuracy: ditto with f16 and bf16 caches against its own f32
cache, on the same tokens, by depth.

For each model, a long text (this repository's documentation: README.md, docs/*.md and the
design notes, tokenized with the model's own tokenizer; random ids for a model without one) is
prefilled in chunks into three sessions in step, with f32, f16 and bf16 caches, and every
position's logits are compared with the f32 session's: the largest |difference| and the largest
|logit| (for scale), and how many positions' most likely token differs, by stretch of depth.

Models: SmolLM2-135M-Instruct (the default model, trained weights, Q4_1 dequantised exactly),
the Qwen3-0.6B-shaped checkpoint of bench/make_qwen3_0_6b.py (random weights, bf16) and two
oracle models of tests/python/test_oracle.py (random, made by transformers; f32 and f16).

usage: .venv/bin/python bench/kv_precision.py [--depth 8192] [--threads 2] [--work /tmp/ditto-bench]
                                             [--models smollm2,qwen3-0.6b,oracle]
"""
import argparse
import glob
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [os.path.join(ROOT, "build", "python"), os.path.join(ROOT, "python"), os.path.join(ROOT, "tests", "python")]
from ditto_testing import references  # noqa: E402

references.ensure()
import numpy as np  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

import ditto  # noqa: E402

CACHES = ("f16", "bf16")
CHUNK = 256
QWEN3_TOKENIZER = os.path.join(ROOT, "..", "shared", "data", "qwen3-tokenizer", "tokenizer.json")
ORACLE_MODELS = ("qwen3-gqa2-hd128-h128-bf16-tied", "llama-gqa4-hd64-h136-f16-tied")


def documentation():
    paths = [os.path.join(ROOT, "README.md"), *sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))),
             os.path.join(ROOT, "..", "shared", "DESIGN.md")]
    return "\n\n".join(open(p, encoding="utf-8").read() for p in paths if os.path.exists(p))


def tokens_for(tokenizer, vocab_size, count):
    """`count` token ids: the documentation, repeated if too short, or random ids."""
    if tokenizer is None:
        return [int(t) for t in np.random.default_rng(7).integers(0, vocab_size, count)]
    ids = tokenizer.encode(documentation()).ids
    return (ids * (count // len(ids) + 1))[:count]


def stretches(depth):
    edges = [0, 512]
    while edges[-1] < depth:
        edges.append(min(depth, edges[-1] * 2))
    return list(zip(edges[:-1], edges[1:]))


def compare(name, path, tokenizer, depth, threads):
    model = ditto.Model.load(path)
    tokens = tokens_for(tokenizer, model.vocab_size, depth)
    sessions = {cache: ditto.Session(model, capacity=depth, cache_dtype=cache, threads=threads)
                for cache in ("f32", *CACHES)}
    worst = {cache: np.zeros((len(stretches(depth)), 2)) for cache in CACHES}  # max |diff|, max |logit|
    flips = {cache: np.zeros(len(stretches(depth)), dtype=int) for cache in CACHES}
    for at in range(0, depth, CHUNK):
        chunk = tokens[at:at + CHUNK]
        logits = {cache: session.prefill(chunk) for cache, session in sessions.items()}
        reference = logits["f32"]
        for i in range(len(chunk)):
            bucket = next(b for b, (lo, hi) in enumerate(stretches(depth)) if lo <= at + i < hi)
            for cache in CACHES:
                row = logits[cache][i]
                worst[cache][bucket, 0] = max(worst[cache][bucket, 0], float(np.abs(row - reference[i]).max()))
                worst[cache][bucket, 1] = max(worst[cache][bucket, 1], float(np.abs(reference[i]).max()))
                flips[cache][bucket] += int(row.argmax() != reference[i].argmax())
    for b, (lo, hi) in enumerate(stretches(depth)):
        cells = " | ".join(f"{worst[c][b, 0]:.3g} | {flips[c][b]} of {hi - lo}" for c in CACHES)
        print(f"| {name} | {lo}-{hi - 1} | {worst['f16'][b, 1]:.1f} | {cells} |", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--depth", type=int, default=8192, help="positions compared (at most each model's context)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--work", default="/tmp/ditto-bench", help="where the checkpoints are made")
    parser.add_argument("--models", default="smollm2,qwen3-0.6b,oracle")
    args = parser.parse_args()

    print("| model | positions | max abs logit (f32 cache) | f16: max abs logit difference | f16: top token differs "
          "| bf16: max abs logit difference | bf16: top token differs |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |", flush=True)
    for name in args.models.split(","):
        if name == "smollm2":
            from ditto_testing.models import smollm2_gguf
            path = str(smollm2_gguf())
            tokenizer = Tokenizer.from_str(ditto.gguf_tokenizer(path)[0])
            compare("SmolLM2-135M Q4_1", path, tokenizer, min(args.depth, 8192), args.threads)
        elif name == "qwen3-0.6b":
            path = os.path.join(args.work, "qwen3-0.6b-bf16")
            if not os.path.exists(os.path.join(path, "config.json")):
                subprocess.run([sys.executable, os.path.join(HERE, "make_qwen3_0_6b.py"), path, "--dtype", "bfloat16"],
                               check=True)
            compare("Qwen3-0.6B shapes, bf16", path, Tokenizer.from_file(QWEN3_TOKENIZER), args.depth, args.threads)
        elif name == "oracle":
            from ditto_testing.checkpoints import make_checkpoint
            from test_oracle import CONFIGS
            for config_name in ORACLE_MODELS:
                path = os.path.join(args.work, f"oracle-{config_name}-{args.depth}")
                if not os.path.exists(os.path.join(path, "config.json")):
                    make_checkpoint(path, **CONFIGS[config_name], max_positions=args.depth)
                compare("oracle " + config_name, path, None, args.depth, args.threads)
        else:
            sys.exit(f"unknown model {name}")


if __name__ == "__main__":
    main()
