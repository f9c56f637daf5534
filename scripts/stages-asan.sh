#!/usr/bin/env bash
# Pipeline stages under AddressSanitizer and UndefinedBehaviorSanitizer, by hand (not in CI: the
# suite has no time for another sanitizer build): builds `ditto` in build-asan-stages/ (Debug,
# ASan + UBSan as scripts/test.sh's, Highway's static target only, to build in minutes; its own
# tree, so that build-asan-clang/'s tests keep every target) and runs sampled generation
# with penalties, logprobs and hashes through 2 and 3 stages, comparing the output with one
# process of build/ditto. Any sanitizer report fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-asan-stages -G Ninja -DCMAKE_BUILD_TYPE=Debug -DDITTO_SANITIZE=ON -DDITTO_PYTHON=OFF \
  -DCMAKE_CXX_FLAGS=-DHWY_COMPILE_ONLY_STATIC >/dev/null
cmake --build build-asan-stages -j"$(nproc)" --target ditto
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
PYTHONPATH=python .venv/bin/python -c "import sys; from ditto_testing.checkpoints import make_checkpoint; \
make_checkpoint(sys.argv[1], 'qwen3', layers=5, seed=5)" "$work/model" >/dev/null 2>&1
printf '1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20\n7 8 9\n1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22\n' \
  >"$work/prompts.txt"
args=(generate -m "$work/model" --tokens-file "$work/prompts.txt" -n 8 --parallel 3 --chunk 7 -t 1 --temp 0.9 --seed 3
      --repeat-penalty 1.2 --logprobs 2 --json --hash)
build/ditto "${args[@]}" 2>/dev/null >"$work/one.txt"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
  OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo \
  ASAN_OPTIONS=fast_unwind_on_malloc=0 LSAN_OPTIONS=suppressions=$PWD/scripts/lsan-mpi.supp
for stages in 2 3; do
  mpirun -x ASAN_OPTIONS -x LSAN_OPTIONS -np "$stages" build-asan-stages/ditto "${args[@]}" --stages "$stages" \
    2>"$work/err.txt" >"$work/stages.txt" || { cat "$work/err.txt"; exit 1; }
  if grep -q "Sanitizer\|runtime error" "$work/err.txt"; then cat "$work/err.txt"; exit 1; fi
  cmp "$work/one.txt" "$work/stages.txt"
  echo "$stages stages under ASan + UBSan: clean, and the output of one process"
done
