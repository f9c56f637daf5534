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
# llama.cpp's AMX kernels crash on batches of many rows (ggml-org/llama.cpp#20824) and are slower
# than its AVX-512 ones on Sapphire Rapids (ollama dropped them): on a CPU with AMX, build it
# with this CPU's vector extensions but without AMX, and rebuild a copy that has AMX compiled in.
if grep -qw amx_tile /proc/cpuinfo; then
  flags="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
  for pair in avx512f:AVX512 avx512vbmi:AVX512_VBMI avx512_vnni:AVX512_VNNI avx512_bf16:AVX512_BF16 avx_vnni:AVX_VNNI; do
    grep -qw "${pair%%:*}" /proc/cpuinfo && flags="$flags -DGGML_${pair##*:}=ON"
  done
  export CMAKE_ARGS="$flags"
  if .venv/bin/python -c "import llama_cpp, sys; sys.exit(b'AMX_INT8 = 1' not in llama_cpp.llama_print_system_info())" 2>/dev/null; then
    echo "== rebuilding llama-cpp-python without AMX (a few minutes)"
    .venv/bin/pip install -q --disable-pip-version-check --force-reinstall --no-deps --no-cache-dir \
      "$(grep '^llama-cpp-python' python/requirements-test.txt)"
  fi
fi
# torch 2.13.0 is the CPU build; the rest are the test oracles and the binding's build tool.
.venv/bin/pip install -q --disable-pip-version-check -r python/requirements-test.txt
