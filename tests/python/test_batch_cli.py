"""`ditto generate --tokens-file --parallel N`: many prompts in flight in one batch give exactly the
`--json` lines of `--parallel 1` (ids and the hash of every step's logits), in prompt order,
whatever N, the chunking, the threads, the KV budget or the prefix cache; and greedy ids equal
transformers'."""
import json
import os
import random
import re
import subprocess

import pytest

from ditto_testing.checkpoints import make_checkpoint, reference_greedy
from ditto_testing.models import smollm2_gguf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DITTO = os.path.join(ROOT, "build", "ditto")
TOKENS = 6


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    directory = tmp_path_factory.mktemp("batch") / "qwen3"
    model = make_checkpoint(str(directory), "qwen3", vocab_size=384, hidden_size=64, intermediate_size=96,
                            layers=2, heads=4, kv_heads=2, head_dim=16, dtype="bfloat16", seed=11)
    return str(directory), model


def mixed_prompts(vocab, count=20, seed=7):
    """Prompts of 1 to 70 tokens; half start with one of two shared prefixes, a few repeat."""
    rng = random.Random(seed)
    prefixes = [[rng.randrange(vocab) for _ in range(n)] for n in (37, 16)]
    prompts = []
    for i in range(count):
        if i >= 3 and rng.random() < 0.15:
            prompts.append(list(rng.choice(prompts)))
            continue
        prompt = list(rng.choice(prefixes)) if rng.random() < 0.5 else []
        prompt += [rng.randrange(vocab) for _ in range(rng.randint(1, 33))]
        prompts.append(prompt)
    return prompts


def generate(model, prompts, tmp_path, *args):
    prompt_file = tmp_path / "prompts.txt"
    prompt_file.write_text("".join(" ".join(map(str, p)) + "\n" for p in prompts))
    result = subprocess.run([DITTO, "generate", "-m", model, "--tokens-file", str(prompt_file), "-n", str(TOKENS),
                             "--ignore-eos", "--json", *args], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    return result.stdout, result.stderr


@pytest.fixture(scope="module")
def baseline(checkpoint, tmp_path_factory):
    model_dir, _ = checkpoint
    out, _ = generate(model_dir, mixed_prompts(384), tmp_path_factory.mktemp("baseline"), "--parallel", "1",
                      "--no-prefix-cache", "-t", "1")
    return out


@pytest.mark.parametrize("args", [
    ["--parallel", "2"],
    ["--parallel", "3", "--chunk", "5", "-t", "2"],
    ["--parallel", "8", "--chunk", "16"],
    ["--parallel", "16", "-t", "3"],
    ["--parallel", "20", "--chunk", "1"],
    # A budget of 12 blocks of 16 positions: requests wait for room, and cached prefixes are evicted.
    ["--parallel", "16", "--kv-budget", str(12 * 2 * 2 * 2 * 16 * 16 * 4)],
    ["--parallel", "4", "--no-prefix-cache"],
])
def test_parallel_gives_the_json_of_one_at_a_time(checkpoint, baseline, tmp_path, args):
    out, err = generate(checkpoint[0], mixed_prompts(384), tmp_path, *args)
    assert out == baseline
    cached = int(re.search(r"\(\d+ tokens, (\d+) from the prefix cache\)", err).group(1))
    if "--no-prefix-cache" in args:
        assert cached == 0
    elif args == ["--parallel", "2"]:
        assert cached > 0  # prompts start after earlier ones with the same beginning computed it


def test_greedy_ids_match_transformers(checkpoint, baseline):
    _, model = checkpoint
    for line, prompt in zip(baseline.splitlines(), mixed_prompts(384)):
        assert json.loads(line)["ids"] == reference_greedy(model, prompt, TOKENS)


def test_hash_of_every_prompt_position_is_the_same_in_a_batch(checkpoint, tmp_path):
    prompts = mixed_prompts(384, count=8, seed=2)
    one, _ = generate(checkpoint[0], prompts, tmp_path, "--hash")
    many, _ = generate(checkpoint[0], prompts, tmp_path, "--hash", "--parallel", "8", "--chunk", "7")
    assert one == many
    assert all("logits_hash" in json.loads(line) for line in one.splitlines())


def test_the_default_model_in_a_batch(tmp_path):
    """The default model (SmolLM2, Q4_1 GGUF) with end-of-sequence stops: prompts that stop early
    make room for the next ones."""
    prompts = mixed_prompts(49152, count=10, seed=3)
    path = smollm2_gguf()
    prompt_file = tmp_path / "prompts.txt"
    prompt_file.write_text("".join(" ".join(map(str, p)) + "\n" for p in prompts))
    outputs = []
    for args in (["--parallel", "1"], ["--parallel", "4", "--chunk", "9"], ["--parallel", "10", "-t", "1"]):
        result = subprocess.run([DITTO, "generate", "-m", path, "--tokens-file", str(prompt_file), "-n", "12",
                                 "--json", *args], capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1] == outputs[2]
    assert [json.loads(line)["prompt"] for line in outputs[0].splitlines()] == list(range(10))


@pytest.mark.parametrize("args, message", [
    (["--parallel", "0"], "--parallel: Value 0 not in range"),
    (["--kv-budget", "1K"], "holds no block"),
    (["--trace", "--parallel", "2"], "--trace follows one prompt at a time"),
    (["-c", "100000"], "-c 100000 is past the model's context of 1024 positions"),
    (["-c", "40"], "leaves no room to generate in a context of 40 positions"),
])
def test_bad_options_are_refused(checkpoint, tmp_path, args, message):
    prompt_file = tmp_path / "prompts.txt"
    prompt_file.write_text(" ".join(["5"] * 40) + "\n1 2 3\n")
    result = subprocess.run([DITTO, "generate", "-m", checkpoint[0], "--tokens-file", str(prompt_file), "--json",
                             *args], capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert message in result.stderr


def test_sampled_tokens_with_a_seed_do_not_depend_on_the_batch(checkpoint, tmp_path):
    """The same seed gives each prompt the same draws alone (--parallel 1) and among others, in any
    chunking; another seed gives other draws."""
    prompts = mixed_prompts(384, count=12, seed=4)
    sampling = ["--temp", "1.3", "--top-k", "50", "--top-p", "0.95", "--repeat-penalty", "1.1", "--logprobs", "3",
                "--seed", "1234"]
    alone, _ = generate(checkpoint[0], prompts, tmp_path, *sampling, "-t", "1")
    batched, _ = generate(checkpoint[0], prompts, tmp_path, *sampling, "--parallel", "12", "--chunk", "4")
    assert alone == batched
    lines = [json.loads(line) for line in alone.splitlines()]
    assert all(line["seed"] == 1234 for line in lines)
    for line in lines:  # the chosen token's logprob, and the three most likely tokens'
        assert len(line["logprobs"]) == len(line["ids"])
        for token, logprob in zip(line["ids"], line["logprobs"]):
            top = dict(logprob["top"])
            values = [value for _, value in logprob["top"]]
            assert len(top) == 3 and values == sorted(values, reverse=True)
            assert top[token] == logprob["logprob"] if token in top else logprob["logprob"] <= values[-1]
    other, _ = generate(checkpoint[0], prompts, tmp_path, *sampling[:-1], "99")
    assert [json.loads(line)["ids"] for line in other.splitlines()] != [line["ids"] for line in lines]
    greedy = [json.loads(line)["ids"] for line in generate(checkpoint[0], prompts, tmp_path)[0].splitlines()]
    assert greedy != [line["ids"] for line in lines]  # it did sample
