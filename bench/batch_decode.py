"""Many sequences decoding together: aggregate decode t/s of the batch engine at N sequences,
against what one sequence's decode and the whole-prompt prefill allow.

One sequence's decode streams every weight per token: memory bound. N sequences decoding together
share that stream until the arithmetic is the limit, whose practical roof is the whole-prompt
prefill rate. So the target is aggregate(N) >= 0.8 * min(N * decode(1), prefill). For each model
this runs `ditto bench -p 512 -n 128 --parallel 1,4,16` R times and prints medians; with
--baseline BINARY it also runs that build's pp512 and tg128 in alternation with this one, for
"single-sequence speed no slower than before".

    .venv/bin/python bench/batch_decode.py [--models smollm2,qwen3-bf16,qwen3-f16] [--runs 3]
        [--threads 2] [--baseline OTHER/build/ditto] [--work DIR]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DITTO = os.path.join(ROOT, "build", "ditto")
sys.path.insert(0, os.path.join(ROOT, "python"))


def model_path(name, work):
    if name == "smollm2":
        from ditto_testing.models import smollm2_gguf
        return str(smollm2_gguf())
    dtype = {"qwen3-bf16": "bfloat16", "qwen3-f16": "float16"}[name]
    path = os.path.join(work, f"qwen3-0.6b-{dtype}")
    if not os.path.exists(os.path.join(path, "config.json")):
        subprocess.run([sys.executable, os.path.join(HERE, "make_qwen3_0_6b.py"), path, "--dtype", dtype], check=True)
    return path


def bench(binary, model, threads, *args):
    out = subprocess.run([binary, "bench", "-m", model, "-t", str(threads), "-r", "3", "-o", "json", *args],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="smollm2,qwen3-bf16,qwen3-f16")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--baseline", help="another build's ditto, for pp512 and tg128 side by side")
    parser.add_argument("--work", default=os.path.join(ROOT, "bench-work"))
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)

    print("| model | pp512 t/s | tg128 t/s, 1 seq | 4 seq | 16 seq | 16 seq: GB/s, GFLOP/s | agg / 0.8 target (4, 16) |"
          + (" pp512 / baseline | tg128 / baseline |" if args.baseline else ""))
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |" + (" ---: | ---: |" if args.baseline else ""))
    for name in args.models.split(","):
        model = model_path(name, args.work)
        runs, baseline_runs = [], []
        for _ in range(args.runs):
            runs.append(bench(DITTO, model, args.threads, "-p", "512", "-n", "128", "--parallel", "1,4,16"))
            if args.baseline:
                baseline_runs.append(bench(args.baseline, model, args.threads, "-p", "512", "-n", "128"))

        def median(rows_per_run, test, parallel=1):
            return statistics.median(next(r for r in rows if r["test"] == test and r.get("parallel", 1) == parallel)
                                     ["avg_ts"] for rows in rows_per_run)

        pp, tg = median(runs, "pp512"), median(runs, "tg128")
        agg = {n: median(runs, "tg128", n) for n in (4, 16)}
        row16 = [next(r for r in rows if r["test"] == "tg128" and r["parallel"] == 16) for rows in runs]
        gbps = statistics.median(r["weight_gbps"] for r in row16)
        gflops = statistics.median(r["gflops"] for r in row16)
        target = {n: agg[n] / (0.8 * min(n * tg, pp)) for n in (4, 16)}
        line = (f"| {name} | {pp:.1f} | {tg:.1f} | {agg[4]:.1f} | {agg[16]:.1f} | {gbps:.1f}, {gflops:.1f} | "
                f"{target[4]:.2f}, {target[16]:.2f} |")
        if args.baseline:
            line += f" {pp / median(baseline_runs, 'pp512'):.2f} | {tg / median(baseline_runs, 'tg128'):.2f} |"
        print(line, flush=True)


if __name__ == "__main__":
    main()
