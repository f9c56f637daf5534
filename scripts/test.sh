#!/usr/bin/env bash
# Runs every test: the C++ unit tests, the same tests again under AddressSanitizer and
# UndefinedBehaviorSanitizer, and the Python tests (oracles: transformers, tokenizers).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/references.sh
echo "== building the tests and the Python module (build/)"
cmake -S . -B build -DDITTO_TESTS=ON -DDITTO_PYTHON=ON >/dev/null
cmake --build build -j"$(nproc)"

echo "== C++ tests"
ctest --test-dir build --output-on-failure -j"$(nproc)"

# Built with clang, the other compiler: its sanitizer build takes about half of GCC's CPU time
# (the release build above is GCC's), and its -fsanitize=undefined includes float-to-integer
# conversions out of range (GCC needs float-cast-overflow by name, CMakeLists.txt).
echo "== C++ tests under clang's ASan + UBSan (build-asan-clang/)"
cmake -S . -B build-asan-clang -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug -DDITTO_SANITIZE=ON \
  -DDITTO_TESTS=ON -DDITTO_PYTHON=OFF >/dev/null
cmake --build build-asan-clang -j"$(nproc)" --target core_tests tokenizer_tests chat_tests hostile_tests
ctest --test-dir build-asan-clang --output-on-failure -j"$(nproc)"

echo "== Python tests"
.venv/bin/python -m pytest -q -n "$(nproc)" --dist loadfile tests/python
