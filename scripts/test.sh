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

echo "== C++ tests under ASan + UBSan (build-asan/)"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DDITTO_SANITIZE=ON -DDITTO_TESTS=ON -DDITTO_PYTHON=OFF >/dev/null
cmake --build build-asan -j"$(nproc)" --target core_tests tokenizer_tests chat_tests hostile_tests
ctest --test-dir build-asan --output-on-failure -j"$(nproc)"

# The hostile-input suite again with clang, whose sanitizers are another implementation of the
# same checks, each catching some things the other misses (float-to-integer conversions out of
# range are in clang's -fsanitize=undefined; GCC needs float-cast-overflow by name, CMakeLists.txt).
echo "== hostile-input tests under clang's ASan + UBSan (build-asan-clang/)"
cmake -S . -B build-asan-clang -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug -DDITTO_SANITIZE=ON \
  -DDITTO_TESTS=ON -DDITTO_PYTHON=OFF >/dev/null
cmake --build build-asan-clang -j"$(nproc)" --target hostile_tests
build-asan-clang/tests/hostile_tests --gtest_brief=1

echo "== Python tests"
.venv/bin/python -m pytest -q -n "$(nproc)" --dist loadfile tests/python
