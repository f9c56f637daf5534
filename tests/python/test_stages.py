"""Pipeline stages over MPI (`mpirun -np K ditto ... --stages K`), on this machine's loopback: the
logits of every position and the greedy ids equal one process's, for Qwen3 and Llama, whole and
chunked prefill (and Gemma 3's layer kinds, tied head and softcap, Mistral's windows, a mixture of
experts split by the experts a row reads), several sequences in flight, shared prefixes; sampled
tokens with penalties and logprobs are drawn on the last stage as one process draws them, and
only they travel back; `verify --stages 1,2,3` passes and catches a planted fault; a killed or
frozen stage ends the run with an error within seconds, a server answering 503 (an idle one
notices a frozen stage by its heartbeat); `ditto chat`
through stages answers as one process; and two replicas of `ditto serve` give the same answers."""
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from ditto_testing.checkpoints import make_checkpoint
from ditto_testing.planted import planted_model
from ditto_testing.serve import DITTO, Server, call_json, write_tiny_chat_model

# As root (CI), any number of processes on two cores, and only the loopback interface.
MPI_ENV = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1", "OMPI_MCA_btl_tcp_if_include": "lo",
           "OMPI_MCA_oob_tcp_if_include": "lo"}
os.environ.update(MPI_ENV)  # for the children of `ditto verify` and the servers
TOKENS = 6


def mpirun(stages):
    return ["mpirun", "-np", str(stages)]


def five_layers(directory, arch):
    make_checkpoint(str(directory), arch, vocab_size=512, hidden_size=64, intermediate_size=128, layers=5, heads=4,
                    kv_heads=2, head_dim=16, seed=5)
    return str(directory)


@pytest.fixture(scope="module", params=["qwen3", "llama"])
def model_dir(request, tmp_path_factory):
    return five_layers(tmp_path_factory.mktemp("stages") / request.param, request.param)


@pytest.fixture(scope="module")
def qwen3_dir(tmp_path_factory):
    """For the transport's failures, which one architecture shows."""
    return five_layers(tmp_path_factory.mktemp("failures") / "qwen3", "qwen3")


@pytest.fixture(scope="module")
def prompt_file(tmp_path_factory):
    """Six prompts, four in flight at once; three begin with the same 37 tokens (a shared block
    and a partly filled one, copied before a sequence writes into it)."""
    rng = np.random.default_rng(2)
    shared = list(rng.integers(0, 512, 37))
    prompts = [list(rng.integers(0, 512, n)) for n in (1, 17, 40)] + [shared + list(rng.integers(0, 512, n))
                                                                      for n in (1, 9, 30)]
    path = tmp_path_factory.mktemp("prompts") / "prompts.txt"
    path.write_text("".join(" ".join(map(str, p)) + "\n" for p in prompts))
    return str(path)


def generate(model, prompts, stages, *args):
    command = (mpirun(stages) if stages > 1 else []) + [
        DITTO, "generate", "-m", model, "--tokens-file", prompts, "-n", str(TOKENS), "--parallel", "4", "-t", "1",
        "--ignore-eos", "--json", *args] + (["--stages", str(stages)] if stages > 1 else [])
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, env=MPI_ENV)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.mark.parametrize("args", [["--hash"], ["--hash", "--chunk", "7"], ["--chunk", "16"]],
                         ids=["whole", "chunk7", "prefix-cache"])
def test_stages_give_the_logits_and_ids_of_one_process(model_dir, prompt_file, args):
    # --hash: the logits of every prompt position too (without the prefix cache); without it the
    # shared prompts start from the prefix cache, whose shared blocks are copied on every stage.
    one = generate(model_dir, prompt_file, 1, *args)
    assert len(one) == 6 and all(len(row["ids"]) == TOKENS for row in one)
    for stages in (2, 3):
        assert generate(model_dir, prompt_file, stages, *args) == one, f"{stages} stages"


SAMPLED = ["--temp", "0.9", "--seed", "7", "--top-k", "40", "--top-p", "0.95", "--min-p", "0.01", "--repeat-penalty",
           "1.3", "--repeat-last-n", "5", "--presence-penalty", "0.5", "--frequency-penalty", "0.3", "--logprobs", "3"]


@pytest.mark.parametrize("args,top", [(SAMPLED + ["--hash"], 3), (["--temp", "0", "--repeat-penalty", "1.5",
                                                                   "--repeat-last-n", "0", "--chunk", "7", "--logprobs",
                                                                   "0"], 0)],
                         ids=["sampled-penalised-logprobs", "greedy-penalties-whole-history"])
def test_the_last_stage_samples_as_one_process(qwen3_dir, prompt_file, args, top):
    # The last stage draws the tokens: from the seed, the position and the penalties' window of
    # the history the head sends; the logprobs and the hashes come back with them, not the logits.
    one = generate(qwen3_dir, prompt_file, 1, *args)
    assert all(len(row["ids"]) == TOKENS and len(row["logprobs"]) == TOKENS for row in one)
    assert all(len(token["top"]) == top for row in one for token in row["logprobs"])
    for stages in (2, 3):
        assert generate(qwen3_dir, prompt_file, stages, *args) == one, f"{stages} stages"


def test_a_sampling_error_on_the_last_stage_is_the_error_of_one_process(tmp_path):
    # A final norm of 3e38 makes the logits NaN: the sampler refuses them where it runs.
    from safetensors.numpy import load_file, save_file
    model = five_layers(tmp_path / "nan", "qwen3")
    tensors = load_file(f"{model}/model.safetensors")
    tensors["model.norm.weight"][:] = np.float32(3e38)
    save_file(tensors, f"{model}/model.safetensors", metadata={"format": "pt"})
    message = "error: sampling: logit 0 is -nan: the logits must be finite"
    for launcher, stages in (([], []), (mpirun(2), ["--stages", "2"])):
        result = subprocess.run(launcher + [DITTO, "generate", "-m", model, "--tokens", "1 2 3", "-n", "3", *stages],
                                capture_output=True, text=True, timeout=60, env=MPI_ENV)
        assert result.returncode == 1 and message in result.stderr, result.stderr


def test_only_tokens_travel_back_from_the_last_stage(qwen3_dir, prompt_file):
    result = subprocess.run(mpirun(2) + [DITTO, "generate", "-m", qwen3_dir, "--tokens-file", prompt_file, "-n",
                                         str(TOKENS), "--parallel", "4", "-t", "1", "--ignore-eos", "--stages", "2"],
                            capture_output=True, text=True, timeout=120, env=MPI_ENV)
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stderr.splitlines() if line.startswith("stages: "))
    words = line.split()
    sent, back, tokens = int(words[1]), int(words[words.index("back") - 2]), int(words[-3])
    assert tokens == 6 * TOKENS
    # A row of logits would be 512 x 4 bytes; a token comes back in 5 words, with at most a word
    # of its message's header. Every row crosses as its hidden state (64 x 4 bytes) and more.
    assert back <= tokens * 6 * 8, line
    assert sent >= tokens * 64 * 4, line


def test_a_split_given_by_layer_counts_gives_the_same_bits(model_dir, prompt_file):
    assert generate(model_dir, prompt_file, 2, "--hash", "--split", "4,1") == generate(model_dir, prompt_file, 1, "--hash")


def test_the_default_split_balances_the_weight_bytes(model_dir):
    # Five equal layers and an output projection (512 x 64) of about 0.9 of one: 3 + (2 + head)
    # in two stages, 2 + 2 + (1 + head) in three.
    for stages, parts in [(2, ["layers 3..4 + logits"]), (3, ["layers 2..3", "layers 4..4 + logits"])]:
        result = subprocess.run(mpirun(stages) + [DITTO, "generate", "-m", model_dir, "--tokens", "1 2", "-n", "1",
                                                  "--stages", str(stages)], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        for stage, part in enumerate(parts, 1):
            assert f"ditto: stage {stage} of {stages}: {part}\n" in result.stderr


def test_gemma3_stages_give_the_logits_of_one_process(tmp_path, prompt_file):
    # Windows of 13 (shorter than the prompts) with their own RoPE base in every second layer: a
    # stage's layers keep their global kind and base; the first stage scales the embedding, the last
    # applies the tied output and the softcap. Heads of 128: a block of 16 positions holds whole
    # pages of a layer, which the windowed layers of every stage give back once passed.
    model = str(tmp_path / "gemma3")
    make_checkpoint(model, "gemma3_text", vocab_size=512, hidden_size=64, intermediate_size=128, layers=5, heads=4,
                    kv_heads=2, head_dim=128, tied=True, seed=5, rope_theta=1e6,
                    family=dict(sliding_window=13, sliding_window_pattern=2, rope_local_base_freq=1e4,
                                query_pre_attn_scalar=24, final_logit_softcapping=8.0))
    one = generate(model, prompt_file, 1, "--hash")
    for stages, split in ((2, "3,2"), (3, "1,3,1")):  # later stages begin at odd layers
        assert generate(model, prompt_file, stages, "--hash", "--split", split) == one, f"{stages} stages"


def test_mistral_windows_through_stages_give_the_logits_of_one_process(tmp_path, prompt_file):
    # A window of 13, shorter than the prompts: each stage releases the blocks behind it as the head does.
    model = str(tmp_path / "mistral")
    make_checkpoint(model, "mistral", vocab_size=512, hidden_size=64, intermediate_size=128, layers=5, heads=4,
                    kv_heads=2, head_dim=16, seed=5, family=dict(sliding_window=13))
    one = generate(model, prompt_file, 1, "--hash", "--chunk", "7")
    assert generate(model, prompt_file, 2, "--hash", "--chunk", "7") == one


def test_a_mixture_of_experts_splits_by_the_experts_a_row_reads_and_gives_the_logits_of_one_process(tmp_path,
                                                                                                  prompt_file):
    # 8 experts, 2 per row: a layer holds 1.6 times the bytes of the output projection (2048 x 64)
    # and a row reads 0.47 times them. Balanced by the bytes held, 2 stages would be 3 + (2 +
    # head); by the bytes a row reads, 4 + (1 + head).
    model = str(tmp_path / "mixtral")
    make_checkpoint(model, "mixtral", vocab_size=2048, hidden_size=64, intermediate_size=128, layers=5, heads=4,
                    kv_heads=2, head_dim=16, seed=5, family=dict(num_local_experts=8, num_experts_per_tok=2))
    one = generate(model, prompt_file, 1, "--hash")
    command = mpirun(2) + [DITTO, "generate", "-m", model, "--tokens-file", prompt_file, "-n", str(TOKENS),
                           "--parallel", "4", "-t", "1", "--ignore-eos", "--json", "--hash", "--stages", "2"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, env=MPI_ENV)
    assert result.returncode == 0, result.stderr
    assert "ditto: stage 1 of 2: layers 4..4 + logits\n" in result.stderr, result.stderr
    assert [json.loads(line) for line in result.stdout.splitlines()] == one


@pytest.mark.parametrize("command,message", [
    (mpirun(2) + [DITTO, "generate", "--stages", "2", "--split", "2,2"],
     "--split: the layer counts must be at least 1 each and add up to the model's 5 layers"),
    (mpirun(2) + [DITTO, "generate", "--stages", "2", "--split", "1,1,3"], "--split gives 3 layer counts for 2 stages"),
    ([DITTO, "generate", "--stages", "2"], "--stages 2 needs as many processes, but mpirun started 1"),
    ([DITTO, "generate", "--split", "2,3"], "--split cuts the model into --stages: give --stages too"),
    (mpirun(2) + [DITTO, "generate"], "this is one of 2 processes that mpirun started: give --stages 2"),
])
def test_bad_stage_options_get_a_clear_error(model_dir, command, message):
    result = subprocess.run(command + ["-m", model_dir, "--tokens", "1 2 3", "-n", "2"], capture_output=True,
                            text=True, timeout=60, env=MPI_ENV)
    assert result.returncode != 0
    assert message in result.stderr


def verify(model, prompts, *args):
    return subprocess.run([DITTO, "verify", "-m", model, "-p", prompts, "--ids", "-n", str(TOKENS), "--threads", "1",
                           *args], capture_output=True, text=True, timeout=300, env=MPI_ENV)


def test_verify_compares_stage_counts_and_finds_a_planted_fault(model_dir, prompt_file, tmp_path):
    result = verify(model_dir, prompt_file, "--modes", "whole,7", "--stages", "1,2,3", "--runs", "1", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["passed"] and report["identical"] == report["sequences"] == 6 * 2 * 3
    assert [c["name"] for c in report["configs"]] == ["whole s1", "whole s2", "whole s3", "7 s1", "7 s2", "7 s3"]

    # Layer 4 (the last stage's) of the second run of 2 stages computes another function.
    def change(tensors):
        tensors["model.layers.4.mlp.up_proj.weight"].flat[3] += np.float32(0.25)

    served, config_text, good, bad = planted_model(model_dir, tmp_path, change)
    (tmp_path / "served" / "config.json").write_text(config_text)
    os.symlink(good, os.path.join(served, "model.safetensors"))
    # An mpirun that points the model at the good weights for its first child, the changed ones
    # for its second: children run s1, s2 (run 1), s1, s2 (run 2), so run 2 of s2 has the fault.
    launcher = tmp_path / "mpirun"
    launcher.write_text(f"""#!/bin/sh
count=$(cat {tmp_path}/launches 2>/dev/null || echo 0); echo $((count + 1)) > {tmp_path}/launches
[ "$count" = 1 ] && ln -sf {bad} {served}/model.safetensors
exec mpirun "$@"
""")
    launcher.chmod(0o755)
    result = verify(served, prompt_file, "--modes", "whole", "--stages", "1,2", "--runs", "2", "--json",
                    "--mpirun", str(launcher))
    assert (tmp_path / "launches").read_text().strip() == "2", result.stderr
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert not report["passed"]
    cells = [{cell["config"]: cell for cell in prompt["cells"]} for prompt in report["prompts"]]
    assert all(row["whole s1"]["same"] for row in cells)
    diverging = [row["whole s2"] for row in cells if not row["whole s2"]["same"]]
    assert diverging and all(cell["runs"] == [2] for cell in diverging)


def rank_pid(launcher, rank):
    """The pid of MPI rank `rank` among the descendants of the mpirun process `launcher`."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for entry in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    environment = f.read().split(b"\0")
            except OSError:
                continue
            if f"OMPI_COMM_WORLD_RANK={rank}".encode() in environment and is_descendant(int(entry), launcher.pid):
                return int(entry)
        time.sleep(0.05)
    raise RuntimeError(f"rank {rank} of mpirun {launcher.pid} did not start")


def is_descendant(pid, ancestor):
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            return False
    return False


def long_generation(model, stages, *args):
    """Prompts enough for a minute of decoding under mpirun (each of them 1000 tokens: a tiny
    model decodes them in a fraction of a second): its process, started."""
    prompts = Path(model).parent / "long-generation.txt"
    prompts.write_text("".join(f"1 2 {p}\n" for p in range(3, 300)))
    command = mpirun(stages) + [DITTO, "generate", "-m", model, "--tokens-file", str(prompts), "-n", "1000",
                                "--ignore-eos", "-t", "1", "--stages", str(stages), *args]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=MPI_ENV)


def stop_a_stage(model, stages, victim, sig):
    """Sends stage `victim` of a long generation on `stages` stages the signal `sig` once it runs;
    checks that the whole run then ends within seconds, with an error, and returns its stderr."""
    run = long_generation(model, stages)
    pid = rank_pid(run, victim)
    time.sleep(0.5)
    sent = time.monotonic()
    os.kill(pid, sig)
    _, err = run.communicate(timeout=30)
    assert time.monotonic() - sent < 10
    assert run.returncode != 0
    return err


@pytest.mark.parametrize("stages,victim", [(2, 1), (3, 1)])
def test_a_killed_stage_ends_the_run_with_an_error_within_seconds(qwen3_dir, stages, victim):
    err = stop_a_stage(qwen3_dir, stages, victim, signal.SIGKILL)
    # mpirun names the stage that died and sends the survivors SIGTERM. What they say of it is
    # tested below: here mpirun may stop forwarding their output before they write (seen once
    # in a full test run on a loaded 2-core machine, where neither survivor's line came through).
    assert f"process rank {victim} with PID" in err and "exited on signal 9" in err, err


@pytest.mark.parametrize("stages,victim", [(2, 1), (3, 2)])
def test_a_stage_stopped_by_sigterm_says_so_and_the_run_ends(qwen3_dir, stages, victim):
    err = stop_a_stage(qwen3_dir, stages, victim, signal.SIGTERM)
    assert f"stage {victim} of {stages}: stopped by SIGTERM (mpirun stops every stage when one of them fails" in err, err


def test_a_frozen_stage_times_out(qwen3_dir):
    run = long_generation(qwen3_dir, 2, "--stage-timeout", "2")
    pid = rank_pid(run, 1)
    time.sleep(0.5)
    frozen = time.monotonic()
    os.kill(pid, signal.SIGSTOP)  # alive to mpirun, silent to the head
    try:
        _, err = run.communicate(timeout=30)
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert time.monotonic() - frozen < 12
    assert run.returncode != 0
    assert "error: stage 0 of 2: waited 2 s for the sampled tokens from the last stage (--stage-timeout)" in err, err


@pytest.fixture(scope="module")
def chat_model(tmp_path_factory):
    return write_tiny_chat_model(tmp_path_factory.mktemp("stage-serve") / "tiny.gguf")


REQUESTS = [{"prompt": "The sea is", "max_tokens": 12, "temperature": 0},
            {"prompt": [5, 17, 300, 2000, 9], "max_tokens": 10, "temperature": 0.9, "seed": 11, "logprobs": 3},
            {"prompt": "Once upon a time", "max_tokens": 16, "temperature": 1.1, "seed": 3, "n": 2},
            {"prompt": "The sea is", "max_tokens": 10, "temperature": 0.8, "seed": 5, "frequency_penalty": 0.8,
             "presence_penalty": 0.4, "repetition_penalty": 1.2, "logit_bias": {"5": 4.0}, "logprobs": 2}]


def answers(server, requests):
    out = []
    for body in requests:
        status, reply = call_json(server.url, "POST", "/v1/completions", {**body, "ignore_eos": True})
        assert status == 200, reply
        out.append([(c["text"], c["logprobs"]) for c in reply["choices"]])
    return out


def test_serve_with_stages_answers_as_one_process_then_a_killed_stage_gives_503_and_stops(chat_model):
    with Server(chat_model, "-t", "1") as one:
        expected = answers(one, REQUESTS)
    server = Server(chat_model, "-t", "1", "--stages", "2", launcher=mpirun(2)).start()
    try:
        assert answers(server, REQUESTS) == expected
        long = subprocess.Popen(["curl", "-s", "-w", "\\n%{http_code}", f"{server.url}/v1/completions", "-d",
                                 json.dumps({"prompt": "x", "max_tokens": 1000, "ignore_eos": True})],
                                stdout=subprocess.PIPE, text=True)
        time.sleep(0.2)
        killed = time.monotonic()
        os.kill(rank_pid(server.process, 1), signal.SIGKILL)
        body = long.communicate(timeout=30)[0]
        assert body.rsplit("\n", 1)[1] == "503", body
        server.process.wait(timeout=30)
        assert time.monotonic() - killed < 10
        assert server.process.returncode != 0
        assert "ditto serve: Terminated: stopped at once" in server.log or "ditto serve: stopped: " in server.log, \
            server.log
    finally:
        if server.process.poll() is None:
            server.process.kill()


def test_an_idle_server_notices_a_frozen_stage(chat_model):
    # No request runs: the head's heartbeat, every second, goes unanswered for --stage-timeout.
    server = Server(chat_model, "-t", "1", "--stages", "2", "--stage-timeout", "2", launcher=mpirun(2)).start()
    pid = rank_pid(server.process, 1)
    try:
        frozen = time.monotonic()
        os.kill(pid, signal.SIGSTOP)
        server.process.wait(timeout=30)
        assert time.monotonic() - frozen < 8
        assert server.process.returncode != 0
        assert ("ditto serve: stopped: stage 0 of 2: waited 2 s for the answer to a heartbeat from the last stage"
                in server.log), server.log
    finally:
        os.kill(pid, signal.SIGKILL)
        if server.process.poll() is None:
            server.process.kill()


def test_chat_with_stages_answers_as_one_process(chat_model):
    # Two turns (the second from the first's cached blocks) and a sampled one; mpirun hands its
    # input to the first stage.
    turns = "The sea is\nWhy?\n/reset\nOnce upon a time\n"
    def chat(launcher, *args):
        result = subprocess.run(launcher + [DITTO, "chat", "-m", chat_model, "-n", "12", "-t", "1", "--temp", "0.8",
                                            "--seed", "4", *args], input=turns, capture_output=True, text=True,
                                timeout=120, env=MPI_ENV)
        assert result.returncode == 0, result.stderr
        return result.stdout
    one = chat([])
    assert len(one.splitlines()) == 3
    assert chat(mpirun(2), "--stages", "2") == one


def test_two_replicas_give_the_same_answers(chat_model):
    """Several `ditto serve` behind a load balancer: whichever replica a request reaches, with
    whatever threads and batch width, it gets the same bits."""
    with Server(chat_model, "-t", "1", "--parallel", "1") as a, Server(chat_model, "-t", "2", "--parallel", "8") as b:
        assert answers(a, REQUESTS) == answers(b, REQUESTS)
