#!/usr/bin/env python3
"""Encoding speed of ditto's tokenizer and of Hugging Face `tokenizers`, side by side.

Both encode the same generated corpus (ditto_testing.text_corpus: prose, code, white space,
numbers, many scripts, emoji, special tokens) cut into documents of about 4 KB, one document
per call, on one thread, with the same tokenizer.json. Prints MB/s of each (best of --repeat
passes; caches are warm after the first) and checks that the ids are the same.

  .venv/bin/python bench/tokenizer_bench.py [--tokenizer PATH] [--megabytes 8]
  .venv/bin/python bench/tokenizer_bench.py --gguf gemma3      # a SentencePiece vocabulary

--gguf takes a GGUF file (or `gemma3`, the Gemma 3 270M file of ditto_testing.models): both then
load the tokenizer.json that ditto builds from its metadata.
"""
import argparse
import os
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"  # before tokenizers starts its thread pool
os.environ["TOKENIZERS_PARALLELISM"] = "false"

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.environ.get("DITTO_PYTHON_DIR", os.path.join(ROOT, "build", "python")))
sys.path.append(os.path.join(ROOT, "python"))

import ditto  # noqa: E402
from ditto_testing import models, text_corpus  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402


def documents(megabytes, size=4096):
    docs, current, current_size, total = [], [], 0, 0
    seed = 0
    while total < megabytes * 1e6:
        for line in text_corpus.lines(20000, seed=seed):
            current.append(line)
            current_size += len(line.encode()) + 1
            if current_size >= size:
                docs.append("\n".join(current))
                total += current_size
                current, current_size = [], 0
        seed += 1
    return docs


def best_seconds(encode, docs, repeat):
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for doc in docs:
            encode(doc)
        best = min(best, time.perf_counter() - start)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizer", default=os.path.join(ROOT, "..", "shared", "data", "qwen3-tokenizer",
                                                            "tokenizer.json"))
    parser.add_argument("--gguf", help="a GGUF file whose tokenizer to measure, or gemma3")
    parser.add_argument("--megabytes", type=float, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    docs = documents(args.megabytes)
    megabytes = sum(len(doc.encode()) for doc in docs) / 1e6
    if args.gguf:
        source = str(models.gemma3_gguf() if args.gguf == "gemma3" else args.gguf)
        json_text = ditto.gguf_tokenizer(source)[0]
    else:
        source = os.path.abspath(args.tokenizer)
        with open(source, encoding="utf-8") as f:
            json_text = f.read()
    ours = ditto.Tokenizer.from_json(json_text)
    theirs = Tokenizer.from_str(json_text)

    mismatched = sum(ours.encode(doc) != theirs.encode(doc, add_special_tokens=False).ids for doc in docs)
    ours_seconds = best_seconds(ours.encode, docs, args.repeat)
    theirs_seconds = best_seconds(lambda doc: theirs.encode(doc, add_special_tokens=False), docs, args.repeat)

    print(f"corpus: {megabytes:.2f} MB in {len(docs)} documents; tokenizer: {source}")
    print(f"ids identical in {len(docs) - mismatched} of {len(docs)} documents")
    print(f"ditto       {megabytes / ours_seconds:8.2f} MB/s")
    print(f"tokenizers  {megabytes / theirs_seconds:8.2f} MB/s")
    print(f"ratio       {theirs_seconds / ours_seconds:8.2f}x (ditto / tokenizers throughput)")
    return 1 if mismatched else 0


if __name__ == "__main__":
    sys.exit(main())
