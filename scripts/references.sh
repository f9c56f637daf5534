#!/usr/bin/env bash
# Installs what the tests and benchmarks compare ditto against, on top of scripts/setup.sh: the
# Debian packages of the C++ tests and fuzzers, and in .venv the CPU build of torch,
# transformers, tokenizers, gguf, llama.cpp (llama-cpp-python, compiled here: give it time) and
# the module builder pybind11 (python/requirements-test.txt). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(libgtest-dev clang libclang-rt-14-dev)
if ! dpkg -s "${packages[@]}" >/dev/null 2>&1; then
  echo "== installing Debian packages for the tests"
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${packages[@]}"
fi
[ -x .venv/bin/python ] || { echo "run scripts/setup.sh first" >&2; exit 1; }
# torch 2.13.0 is the CPU build; the rest are the test oracles and the binding's build tool.
.venv/bin/pip install -q --disable-pip-version-check -r python/requirements-test.txt
