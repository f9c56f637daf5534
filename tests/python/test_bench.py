"""`ditto bench` end to end on a small random Qwen3 checkpoint: the tests it runs, its table and
JSON, and its errors. Only the shape of the report is checked, never a speed: the machine is
shared, and speed is measured in bench/, not in tests."""
import json
import os
import subprocess

import pytest

from ditto_testing.checkpoints import make_checkpoint

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DITTO = os.path.join(ROOT, "build", "ditto")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    directory = tmp_path_factory.mktemp("bench") / "qwen3"
    make_checkpoint(str(directory), "qwen3", vocab_size=256, hidden_size=64, intermediate_size=128, layers=2,
                    heads=4, kv_heads=2, head_dim=16, seed=5)
    return str(directory)


def bench(*args):
    return subprocess.run([DITTO, "bench", *args], capture_output=True, text=True, timeout=300)


def test_json_has_a_row_per_test_thread_count_and_chunk(checkpoint):
    result = bench("-m", checkpoint, "-p", "24", "-n", "5", "-r", "2", "-t", "1,2", "--chunk", "0,7", "-o", "json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [(r["test"], r["threads"], r["chunk"]) for r in rows] == [
        ("pp24", 1, 24), ("pp24", 1, 7), ("tg5", 1, 1), ("pp24", 2, 24), ("pp24", 2, 7), ("tg5", 2, 1)]
    for row in rows:
        assert len(row["samples_ts"]) == 2 and all(t > 0 for t in row["samples_ts"])
        assert row["avg_ts"] == pytest.approx(sum(row["samples_ts"]) / 2)
        assert row["params"] > 0 and row["size_bytes"] > 0 and row["cache_type"] == "f32"
        if row["test"].startswith("pp"):
            assert row["gflops"] > 0
            # The measured ceiling: real fma throughput, far above what a tiny model reaches.
            if row["kernels"] in ("AVX2", "AVX3", "AVX3_DL", "AVX3_ZEN4", "AVX3_SPR"):
                assert row["fma_peak_gflops"] > row["gflops"]
        else:
            assert row["weight_gbps"] > 0 and row["kv_gbps"] > 0
            if row["kernels"] in ("AVX2", "AVX3", "AVX3_DL", "AVX3_ZEN4", "AVX3_SPR"):
                assert row["read_bandwidth_gbps"] > 0


def test_markdown_table_and_roofline_lines(checkpoint):
    result = bench("-m", checkpoint, "-p", "16", "-n", "3", "-r", "1", "-t", "1")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "| model | size | params | backend | threads | cache | chunk | sequences | test | t/s |"
    assert [line.split("|")[9].strip() for line in lines[2:4]] == ["pp16", "tg3"]
    roofline = [line for line in lines if line.startswith("roofline:")]
    assert len(roofline) == 2
    assert "GFLOP/s in prefill" in roofline[0] and "GB/s of weights and KV cache streamed in decode" in roofline[1]


def test_depths_and_cache_types_have_their_rows_and_the_logit_difference_from_f32(checkpoint):
    # Depth 37 is not a whole number of 16-position blocks: the context's last block is shared in part.
    result = bench("-m", checkpoint, "-p", "20", "-n", "4", "-r", "2", "-t", "1", "-d", "0,37",
                   "--cache-type", "bf16,f32", "-o", "json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    # f32 first, whatever the order given: the others are compared with it.
    assert [(r["test"], r["depth"], r["cache_type"]) for r in rows] == [
        ("pp20", 0, "f32"), ("tg4", 0, "f32"), ("pp20", 0, "bf16"), ("tg4", 0, "bf16"),
        ("pp20", 37, "f32"), ("tg4", 37, "f32"), ("pp20", 37, "bf16"), ("tg4", 37, "bf16")]
    for row in rows:
        assert all(t > 0 for t in row["samples_ts"])
        if row["cache_type"] == "f32":
            assert "max_logit_difference_vs_f32" not in row
        else:  # a bf16 cache rounds keys and values to 8 bits of mantissa: the logits move, a little
            assert 0 < row["max_logit_difference_vs_f32"] < 1
    # More context, more multiply-adds per prefilled position at the same speed.
    by_depth = {r["depth"]: r for r in rows if r["test"] == "pp20" and r["cache_type"] == "f32"}
    assert by_depth[37]["gflops"] / by_depth[37]["avg_ts"] > by_depth[0]["gflops"] / by_depth[0]["avg_ts"]
    table = bench("-m", checkpoint, "-p", "8", "-n", "2", "-r", "1", "-t", "1", "-d", "16", "--cache-type", "f16,f32")
    assert table.returncode == 0, table.stderr
    assert "| pp8 @ d16 |" in table.stdout and "| tg2 @ d16 |" in table.stdout
    assert "accuracy: f16 cache at depth 16: the largest |logit - f32 cache's| is" in table.stdout


def test_parallel_decode_has_a_row_per_sequence_count(checkpoint):
    result = bench("-m", checkpoint, "-p", "0", "-n", "6", "-r", "2", "-t", "2", "--parallel", "1,4,16",
                   "--cache-type", "bf16", "-o", "json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [(r["test"], r["parallel"]) for r in rows] == [("tg6", 1), ("tg6", 4), ("tg6", 16)]
    for row in rows:
        assert row["cache_type"] == "bf16" and row["gflops"] > 0 and row["weight_gbps"] > 0
    # KV budgets too small: for one block (of 16 positions: 4 KiB here), and for 16 sequences.
    none = bench("-m", checkpoint, "-p", "0", "-n", "6", "-r", "1", "--kv-budget", "2K")
    assert none.returncode != 0 and "a KV budget of 2048 bytes holds no block" in none.stderr
    small = bench("-m", checkpoint, "-p", "0", "-n", "6", "-r", "1", "--parallel", "16", "--kv-budget", "8K")
    assert small.returncode != 0 and "the KV pool is full" in small.stderr


def test_a_chunk_longer_than_the_prompt_is_the_whole_prompt(checkpoint):
    result = bench("-m", checkpoint, "-p", "8", "-n", "0", "-r", "1", "-t", "1", "--chunk", "100", "-o", "json")
    assert result.returncode == 0, result.stderr
    assert [(r["test"], r["chunk"]) for r in json.loads(result.stdout)] == [("pp8", 8)]


@pytest.mark.parametrize("args, message", [
    (["-m", "/nonexistent/model"], "is not a checkpoint directory"),
    (["-p", "16", "-n", "0", "--cache-type", "q4"], "--cache-type"),
    (["-r", "0"], "--repetitions: Value 0 not in range 1"),
    (["-t", "0"], "--threads: Value 0 not in range 1"),
    (["-p", "0", "-n", "0"], "nothing to measure"),
    (["-p", "2000", "-n", "0"], "-p 2000 is longer than the model's context (1024 positions)"),
    (["-p", "100", "-n", "0", "-d", "1000"], "-d 1000 with -p 100 is longer than the model's context (1024 positions)"),
    (["-p", "16", "-n", "0", "-d", "512", "--kv-budget", "64K"], "the KV pool"),
])
def test_bad_input_is_refused_with_a_message(checkpoint, args, message):
    if "-m" not in args:
        args = ["-m", checkpoint, *args]
    result = bench(*args)
    assert result.returncode != 0
    assert message in result.stderr + result.stdout
    assert "Traceback" not in result.stderr and "terminate" not in result.stderr


def test_numerics_and_a_pinned_simd_target_are_reported(checkpoint, tmp_path):
    from ditto_testing.gguf_models import write_llama_gguf
    quantised = tmp_path / "tiny-q4_k.gguf"
    write_llama_gguf(quantised, {"default": "Q4_K"}, tied=False, bound=0.5, seed=1)
    environment = dict(os.environ, DITTO_SIMD_TARGET="avx2")
    for model, numerics, expected in ((checkpoint, None, "exact"), (str(quantised), None, "int8"),
                                      (str(quantised), "exact", "exact")):
        args = ["-m", model, "-p", "8", "-n", "2", "-r", "1", "-t", "1", "-o", "json"]
        args += ["--numerics", numerics] if numerics else []
        result = subprocess.run([DITTO, "bench", *args], capture_output=True, text=True, timeout=300,
                                env=environment)
        assert result.returncode == 0, result.stderr
        for row in json.loads(result.stdout):
            assert row["numerics"] == expected and row["kernels"] == "AVX2"
            assert row["model"].endswith(" " + expected)
    inspected = subprocess.run([DITTO, "inspect", str(quantised)], capture_output=True, text=True, timeout=60)
    assert "numerics:        int8 by default for quantised weights" in inspected.stdout
    refused = subprocess.run([DITTO, "bench", "-m", checkpoint, "-p", "8", "-n", "0"], capture_output=True,
                             text=True, timeout=60, env=dict(os.environ, DITTO_SIMD_TARGET="NEON"))
    assert refused.returncode == 1
    assert "DITTO_SIMD_TARGET=NEON is not a SIMD target of this CPU and build (" in refused.stderr
    assert "AVX2" in refused.stderr


def test_decode_reads_the_window_of_a_windowed_layer(tmp_path):
    """The roofline's KV bytes of a decode step: in a layer with a sliding window, its window alone
    (Mistral, a window of 8 in both layers: 8 positions of f32 keys and values of 2 heads of 16)."""
    directory = str(tmp_path / "mistral")
    make_checkpoint(directory, "mistral", vocab_size=256, hidden_size=64, intermediate_size=128, layers=2, heads=4,
                    kv_heads=2, head_dim=16, seed=5, family={"sliding_window": 8})
    result = bench("-m", directory, "-p", "0", "-n", "3", "-r", "1", "-t", "1", "-d", "64", "-o", "json")
    assert result.returncode == 0, result.stderr
    [row] = json.loads(result.stdout)
    assert row["kv_gbps"] * 1e9 / row["avg_ts"] == pytest.approx(2 * 8 * 2 * 2 * 16 * 4)
