#!/usr/bin/env bash
# The main job until a real model ships: make a small random Qwen3 checkpoint with
# transformers, then continue one prompt with `ditto generate` at several prefill chunk
# sizes. Every run prints the same token ids and the same hash of all logits.
set -euo pipefail
cd "$(dirname "$0")/.."
model=demo-model
if [ ! -f "$model/config.json" ]; then
  PYTHONPATH=python .venv/bin/python -m ditto_testing.checkpoints "$model" --arch qwen3 --dtype bfloat16 2>/dev/null
fi
prompt="1 785 1974 374 1112 30 671 752 1744 11 279 426 315 279 418 1265 387 304 264 375 1165 13 576 729"
for chunk in 0 1 16 17; do
  echo "== ditto generate --chunk $chunk   (0 = the whole prompt in one call)"
  build/ditto generate -m "$model" --tokens "$prompt" -n 16 --chunk "$chunk" --hash --ignore-eos
done
