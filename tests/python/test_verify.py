"""`ditto verify` end to end: the build's `ditto` binary on small random Qwen3 checkpoints.

The harness must pass on ditto's own engine and must be able to fail: a wrong oracle row, and a
different model in exactly one child process, must show up in the right cell of the table.
"""
import json
import os
import random
import shutil
import subprocess

import numpy as np
import pytest

from ditto_testing.checkpoints import make_checkpoint, reference_greedy
from ditto_testing.planted import WeightsPerChild, planted_model
from ditto_testing.text_corpus import SEED_PROMPTS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DITTO = os.path.join(ROOT, "build", "ditto")
TOKENS = 8


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    directory = tmp_path_factory.mktemp("verify") / "qwen3"
    model = make_checkpoint(str(directory), "qwen3", vocab_size=512, hidden_size=64, intermediate_size=128,
                            layers=4, heads=4, kv_heads=2, head_dim=16, seed=3)
    return str(directory), model


def write_rows(path, rows):
    path.write_text("".join(" ".join(map(str, row)) + "\n" for row in rows))
    return str(path)


def random_prompts(lengths, seed=1):
    rng = random.Random(seed)
    return [[rng.randrange(512) for _ in range(n)] for n in lengths]


def verify(model_dir, prompt_file, *args):
    return subprocess.run([DITTO, "verify", "-m", model_dir, "-p", prompt_file, "--ids", "-n", str(TOKENS), *args],
                          capture_output=True, text=True, timeout=600)


def generate_json(model_dir, prompt_file):
    out = subprocess.run([DITTO, "generate", "-m", model_dir, "--tokens-file", prompt_file, "-n", str(TOKENS),
                          "--ignore-eos", "--json", "-t", "1"], capture_output=True, text=True, check=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def table_rows(stdout):
    """The table as {prompt number: {column: cell}}, split on the runs of two spaces it pads with."""
    lines = stdout.splitlines()
    header = [cell.strip() for cell in lines[0].split("  ") if cell.strip()]
    rows = {}
    for line in lines[1:]:
        if line.startswith(("PASS", "FAIL", "trace")):
            break
        cells = [cell.strip() for cell in line.split("  ") if cell.strip()]
        rows[int(cells[0].split()[0])] = dict(zip(header[1:], cells[1:]))
    return rows


def test_every_mode_thread_count_and_run_agrees_with_each_other_and_with_transformers(checkpoint, tmp_path):
    model_dir, model = checkpoint
    prompts = random_prompts([1, 2, 16, 17, 64, 65, 300])
    oracle = [reference_greedy(model, prompt, TOKENS) for prompt in prompts]
    result = verify(model_dir, write_rows(tmp_path / "prompts.txt", prompts), "--modes", "whole,1,16,17,64",
                    "--threads", "1,2", "--runs", "2", "--oracle", write_rows(tmp_path / "oracle.txt", oracle),
                    "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["passed"]
    assert report["identical"] == report["sequences"] == len(prompts) * 5 * 2 * 2
    assert report["oracle_matches"] == report["sequences"]
    assert [p["unique_completions"] for p in report["prompts"]] == [1] * len(prompts)


def test_a_wrong_oracle_row_is_named_by_prompt_and_token(checkpoint, tmp_path):
    model_dir, _ = checkpoint
    prompt_file = write_rows(tmp_path / "prompts.txt", random_prompts([5, 20, 33]))
    oracle = [row["ids"] for row in generate_json(model_dir, prompt_file)]
    right = oracle[1][5]
    oracle[1][5] = (right + 1) % 512
    result = verify(model_dir, prompt_file, "--modes", "whole,17", "--threads", "1", "--runs", "2",
                    "--oracle", write_rows(tmp_path / "oracle.txt", oracle))
    assert result.returncode == 1
    rows = table_rows(result.stdout)
    expected_cell = f"tok 5: {oracle[1][5]} -> {right} (all runs)"
    assert rows == {1: {"whole": "same", "17": "same"},
                    2: {"whole": expected_cell, "17": "〃"},  # the same divergence as its left
                    3: {"whole": "same", "17": "same"}}
    assert "FAIL: 12 of 12 sequences identical to the baseline" in result.stdout
    assert "8 of 12 match the oracle" in result.stdout


def test_a_different_model_in_one_run_is_named_by_prompt_mode_run_and_token(checkpoint, tmp_path):
    model_dir, _ = checkpoint
    prompts = random_prompts([9, 12, 30, 4], seed=7)
    prompt_file = write_rows(tmp_path / "prompts.txt", prompts)
    outputs = [row["ids"] for row in generate_json(model_dir, prompt_file)]
    # Change the embedding of a token that prompt 3 generates at step j and that no other input of
    # any prompt holds: then only prompt 3 departs, first at step j + 1, whose input it is.
    fed = [set(prompt) | set(ids[:-1]) for prompt, ids in zip(prompts, outputs)]
    # The latest such step, so that the divergence is well inside the sequence.
    j, token = [(j, t) for j, t in enumerate(outputs[2][:-1])
                if t not in prompts[2] and t not in outputs[2][:j] and not any(t in f for i, f in enumerate(fed) if i != 2)][-1]

    def change(tensors):
        tensors["model.embed_tokens.weight"][token] *= np.float32(1.5)

    served, config_text, good, bad = planted_model(model_dir, tmp_path, change)
    # Children run as run 1 (whole, 17), run 2 (whole, 17), run 3 (whole, 17): the fourth is run 2 of 17.
    swapper = WeightsPerChild(served, config_text, [good, good, good, bad, good, good])
    result = verify(served, prompt_file, "--modes", "whole,17", "--threads", "1", "--runs", "3")
    assert swapper.served == 6, result.stderr
    assert result.returncode == 1
    rows = table_rows(result.stdout)
    assert rows[3]["whole"] == "same"
    assert rows[3]["17"].startswith(f"tok {j + 1}: ") and rows[3]["17"].endswith("(run 2)")
    assert all(rows[p] == {"whole": "same", "17": "same"} for p in (1, 2, 4))
    assert "FAIL: 23 of 24 sequences identical" in result.stdout


@pytest.mark.parametrize("layer,tensor,operation", [(2, "mlp.up_proj", "up"), (1, "self_attn.v_proj", "v"),
                                                    (3, "post_attention_layernorm", "mlp_norm")])
def test_trace_names_the_layer_and_operation_of_a_planted_change(checkpoint, tmp_path, layer, tensor, operation):
    model_dir, _ = checkpoint
    prompt_file = write_rows(tmp_path / "prompts.txt", random_prompts([6, 25]))

    def change(tensors):
        tensors[f"model.layers.{layer}.{tensor}.weight"].flat[7] += np.float32(0.25)

    served, config_text, good, bad = planted_model(model_dir, tmp_path, change)
    swapper = WeightsPerChild(served, config_text, [good, good, bad, good])
    result = verify(served, prompt_file, "--modes", "whole,17", "--threads", "1", "--runs", "2", "--trace")
    assert swapper.served == 4, result.stderr
    assert result.returncode == 1
    assert (f"trace: prompt 1, whole run 2 against the baseline (whole run 1): first difference at layer {layer}, "
            f"operation {operation}, position 0") in result.stdout


@pytest.mark.parametrize("model,options,message", [
    (None, {"--modes": "whole,0"}, "'0' is not a prefill mode"),
    (None, {"--threads": "two"}, "'two' is not a thread count"),
    (None, {"--oracle": "ORACLE_2_ROWS"}, "the oracle has 2 rows but there are 1 prompts"),
    ("/nonexistent", {}, "'/nonexistent' is not a checkpoint directory"),
])
def test_bad_input_gets_a_clear_error(checkpoint, tmp_path, model, options, message):
    prompt_file = write_rows(tmp_path / "prompts.txt", [[1, 2, 3]])
    options = {"--runs": "1", "--threads": "1", "--modes": "whole", **options}
    if options.get("--oracle") == "ORACLE_2_ROWS":
        options["--oracle"] = write_rows(tmp_path / "oracle.txt", [[1] * TOKENS] * 2)
    result = verify(model or checkpoint[0], prompt_file, *[word for item in options.items() for word in item])
    assert result.returncode == 1
    assert message in result.stderr
    assert result.stdout == ""


SEED_ORACLE = os.path.join(ROOT, "tests", "data", "seed-qwen3-0.6b-oracle.txt")
QWEN3_TOKENIZER = os.path.join(ROOT, "..", "shared", "data", "qwen3-tokenizer", "tokenizer.json")


def test_the_seed_experiment_with_its_prompts_tokenizer_and_oracle(tmp_path):
    """The README's command for Qwen/Qwen3-0.6B, on a random model with Qwen3's vocabulary and the
    real Qwen3 tokenizer.json: the built-in prompts are the seed's, encoded as `tokenizers` does;
    the seed's oracle (a different model's answers) fails in every mode, shown as text; an oracle
    made by transformers for this model passes."""
    from tokenizers import Tokenizer
    model_dir = tmp_path / "qwen3-vocab"
    model = make_checkpoint(str(model_dir), "qwen3", vocab_size=151936, hidden_size=64, intermediate_size=128,
                            layers=2, heads=4, kv_heads=2, head_dim=16, tied=True)
    shutil.copy(QWEN3_TOKENIZER, model_dir / "tokenizer.json")
    reference = Tokenizer.from_file(QWEN3_TOKENIZER)
    prompts = [reference.encode(text).ids for text in SEED_PROMPTS]

    def seed_verify(oracle):
        return subprocess.run([DITTO, "verify", "-m", str(model_dir), "--oracle", oracle, "--modes", "whole,1,17",
                               "--threads", "1", "--runs", "1"], capture_output=True, text=True, timeout=600)

    result = seed_verify(SEED_ORACLE)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    with open(SEED_ORACLE) as f:
        first_expected = [int(row.split()[0]) for row in f]
    for p, (text, ids) in enumerate(zip(SEED_PROMPTS, prompts)):
        label = f'{p + 1} ({len(ids)} tok) "{text[:28]}'
        row = next(line for line in lines if line.startswith(label))
        expected_text = json.dumps(reference.decode([first_expected[p]]))
        assert f"tok 0: {first_expected[p]} {expected_text} -> " in row
        assert row.endswith("〃  〃")  # the same answer in every mode
    assert "FAIL: 24 of 24 sequences identical to the baseline (whole run 1)" in result.stdout

    oracle = write_rows(tmp_path / "oracle.txt", [reference_greedy(model, ids, TOKENS) for ids in prompts])
    result = seed_verify(oracle)
    assert result.returncode == 0, result.stdout
    assert "PASS: 24 of 24 sequences identical to the baseline (whole run 1) in ids and logits; 24 of 24 match the oracle" \
        in result.stdout
