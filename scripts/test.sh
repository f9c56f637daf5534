#!/usr/bin/env bash
# Runs every test: the C++ unit tests, the loader tests again under AddressSanitizer and
# UndefinedBehaviorSanitizer, and the Python oracle tests against transformers/tokenizers.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

echo "== C++ tests"
ctest --test-dir build --output-on-failure -j"$(nproc)"

echo "== C++ tests under ASan + UBSan (build-asan/)"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DDITTO_SANITIZE=ON -DDITTO_PYTHON=OFF >/dev/null
cmake --build build-asan -j"$(nproc)" --target core_tests
build-asan/tests/core_tests --gtest_brief=1

echo "== Python tests"
.venv/bin/python -m pytest -q tests/python
