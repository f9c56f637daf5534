#!/usr/bin/env bash
# Runs the libFuzzer targets of fuzz/ (docs/fuzzing.md), built with clang, ASan and UBSan in
# build-fuzz/, on the corpus kept in the repo (fuzz/corpus/TARGET, only read) and on what earlier
# runs found (build-fuzz/corpus/TARGET, kept between runs).
#
#   scripts/fuzz.sh [-t SECONDS] [-n RUNS] [TARGET ...]
#                                               fuzz each target for SECONDS (default 60), or
#                                               until it has run RUNS inputs if that comes first
#   scripts/fuzz.sh --replay [TARGET ...]       run every input of the repo's corpus once
#   scripts/fuzz.sh --merge [TARGET ...]        copy into fuzz/corpus/TARGET the inputs of
#                                               build-fuzz/corpus/TARGET (up to 4 KiB) that add coverage
#   scripts/fuzz.sh --build [TARGET ...]        only build the targets
#
# TARGET: gguf safetensors config tokenizer_json tokenizer chat_template serve_request (default: all).
# Prints a line per target: executions, seconds, executions per second, coverage (cov: edges, ft:
# features) and corpus size. A crash, leak, timeout or broken promise leaves its input in
# build-fuzz/artifacts/TARGET/ and makes the exit status 1. A long campaign takes only idle CPU:
#   nice -n 19 scripts/fuzz.sh -t 1800 -n 1000000
set -euo pipefail
cd "$(dirname "$0")/.."

ALL_TARGETS=(gguf safetensors config tokenizer_json tokenizer chat_template serve_request)
mode=fuzz
seconds=60
runs=-1
targets=()
while (($#)); do
  case "$1" in
    -t) seconds="$2"; shift 2 ;;
    -n) runs="$2"; shift 2 ;;
    --replay) mode=replay; shift ;;
    --merge) mode=merge; shift ;;
    --build) mode=build; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
((${#targets[@]})) || targets=("${ALL_TARGETS[@]}")

BUILD=build-fuzz
QWEN3_TOKENIZER=../shared/data/qwen3-tokenizer/tokenizer.json
PYTHON=.venv/bin/python

# libFuzzer's options for each target: the largest input it makes (the GGUF target must hold a real
# header: SmolLM2's is 1.7 MB; libFuzzer's default stops at 1 MB).
max_len() {
  case "$1" in
    gguf) echo 8388608 ;;
    tokenizer_json) echo 65536 ;;
    chat_template|config) echo 8192 ;;
    *) echo 4096 ;;
  esac
}

for target in "${targets[@]}"; do
  [[ " ${ALL_TARGETS[*]} " == *" $target "* ]] || { echo "unknown target '$target' (${ALL_TARGETS[*]})" >&2; exit 2; }
done
# One configure and build at a time in build-fuzz/: the tests run this from parallel workers.
mkdir -p "$BUILD"
flock "$BUILD/.build-lock" bash -c 'cmake -S fuzz -B "$1" -G Ninja -DCMAKE_CXX_COMPILER=clang++ >/dev/null &&
  cmake --build "$1" --target "${@:2}" >/dev/null' build "$BUILD" $(printf '%s_fuzz ' "${targets[@]}")
[[ "$mode" == build ]] && exit 0
export DITTO_FUZZ_TOKENIZER="${DITTO_FUZZ_TOKENIZER:-$QWEN3_TOKENIZER}"

# The real GGUF header seed, written from the installed model (fuzz/seeds.py); none without it.
if [[ " ${targets[*]} " == *" gguf "* && ! -e "$BUILD/seeds/gguf" ]]; then
  "$PYTHON" fuzz/seeds.py real-gguf "$BUILD/seeds/gguf"
fi

status=0
for target in "${targets[@]}"; do
  binary="$BUILD/${target}_fuzz"
  seeds="fuzz/corpus/$target"
  found="$BUILD/corpus/$target"
  mkdir -p "$found" "$BUILD/artifacts/$target" "$BUILD/logs"
  log="$BUILD/logs/$target.log"
  case "$mode" in
    replay)
      if "$binary" -rss_limit_mb=4096 "$seeds"/* >"$log" 2>&1; then
        echo "$target: $(ls "$seeds" | wc -l) inputs of $seeds replayed, no failure"
      else
        echo "$target: FAILED replaying $seeds (log: $log)"; tail -30 "$log"; status=1
      fi
      ;;
    merge)
      small="$BUILD/merge/$target"
      rm -rf "$small" && mkdir -p "$small"
      find "$found" -type f -size -4097c -exec cp {} "$small" \;
      before=$(ls "$seeds" | wc -l)
      "$binary" -merge=1 -rss_limit_mb=4096 -max_len="$(max_len "$target")" "$seeds" "$small" >"$log" 2>&1
      echo "$target: $(( $(ls "$seeds" | wc -l) - before )) inputs added to $seeds"
      ;;
    fuzz)
      extra=()
      [[ -d "$BUILD/seeds/$target" ]] && extra+=("$BUILD/seeds/$target")
      start=$(date +%s)
      if "$binary" -max_total_time="$seconds" -runs="$runs" -timeout=10 -rss_limit_mb=4096 -max_len="$(max_len "$target")" \
           -print_final_stats=1 -artifact_prefix="$BUILD/artifacts/$target/" "$found" "$seeds" "${extra[@]}" >"$log" 2>&1; then
        result="no failure"
      else
        result="FAILED (log: $log; input in $BUILD/artifacts/$target/)"; status=1
      fi
      elapsed=$(($(date +%s) - start))
      executed=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
      speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
      coverage=$(grep -E '^#[0-9]+' "$log" | tail -1 | grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' || true)
      echo "$target: ${executed:-?} runs in ${elapsed} s (${speed:-?}/s), ${coverage:-no coverage line}; $result"
      [[ "$result" == "no failure" ]] || tail -30 "$log"
      ;;
  esac
done
exit $status
