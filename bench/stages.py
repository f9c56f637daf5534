"""Pipeline stages on one machine: `ditto bench` as 2 stages of 1 thread each (`mpirun -np 2 ...
--stages 2 -t 1`) against 1 process of 2 threads, in alternation, on the Qwen3-0.6B-shaped
checkpoint (bench/make_qwen3_0_6b.py): prefill (pp512, whole and in 128-token chunks) and many
sequences decoding together (16 sequences, 32 tokens each). Prints the medians of each and the
ratio with its range over the runs.

    .venv/bin/python bench/stages.py [--runs 3] [--dtype bfloat16] [--work DIR]
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
# As root, and only the loopback interface.
MPI_ENV = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_btl_tcp_if_include": "lo", "OMPI_MCA_oob_tcp_if_include": "lo"}
TESTS = [("pp512", ["-p", "512", "-n", "0", "--chunk", "0,128"]), ("tg32 x16", ["-p", "0", "-n", "32", "--parallel", "16"])]


def bench(model, stages, args):
    launcher = ["mpirun", "-np", str(stages)] if stages > 1 else []
    threads = "1" if stages > 1 else "2"
    command = launcher + [DITTO, "bench", "-m", model, "-t", threads, "-r", "2", "-o", "json", *args]
    if stages > 1:
        command += ["--stages", str(stages)]
    out = subprocess.run(command, capture_output=True, text=True, check=True, env=MPI_ENV).stdout
    return {(row["test"], row["chunk"], row["parallel"]): row["avg_ts"] for row in json.loads(out)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
    parser.add_argument("--work", default=os.path.join(ROOT, "bench-work"))
    args = parser.parse_args()
    model = os.path.join(args.work, f"qwen3-0.6b-{args.dtype}")
    if not os.path.exists(os.path.join(model, "config.json")):
        subprocess.run([sys.executable, os.path.join(HERE, "make_qwen3_0_6b.py"), model, "--dtype", args.dtype], check=True)

    one, two = [], []
    for run in range(args.runs):
        for _, test in TESTS:
            one.append(bench(model, 1, test))
            two.append(bench(model, 2, test))
        print(f"run {run + 1} of {args.runs} done", file=sys.stderr)
    print("| test | 1 process x 2 threads, t/s | 2 stages x 1 thread, t/s | stages / process (range) |")
    print("| --- | ---: | ---: | ---: |")
    for key in sorted({k for r in one for k in r}):
        a = [r[key] for r in one if key in r]
        b = [r[key] for r in two if key in r]
        ratios = [y / x for x, y in zip(a, b)]
        name = f"{key[0]}" + (f", chunk {key[1]}" if key[0].startswith("pp") else f", {key[2]} sequences")
        print(f"| {name} | {statistics.median(a):.1f} | {statistics.median(b):.1f} | "
              f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) |")


if __name__ == "__main__":
    main()
