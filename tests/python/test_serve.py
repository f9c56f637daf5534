"""`ditto serve` through the official `openai` client: a request's text, token ids and logprobs are
bitwise the same whether it runs alone on a fresh server or among 31 others arriving at random
moments (other chunking, other batch widths, prefix-cache hits); a chat's second turn that finds
its history in the prefix cache equals a cold server's answer; n choices are the requests with
seeds seed + k; and the server's lifecycle: 503 while loading, SIGTERM finishes what runs."""
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ditto_testing.checkpoints import make_checkpoint
from ditto_testing.models import smollm2_gguf
from ditto_testing.serve import DITTO, Server, call, call_json, event_stream, write_tiny_chat_model

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QWEN3_TOKENIZER = os.path.join(ROOT, "..", "shared", "data", "qwen3-tokenizer", "tokenizer.json")
MODEL = "tiny.gguf"
WORDS = ("the sea river mountain light quiet number seven blue paper window garden clock train winter "
         "answer question small large fast slow open closed bright dark city forest").split()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return write_tiny_chat_model(tmp_path_factory.mktemp("serve") / MODEL)


def random_specs(count, seed):
    """Requests of every shape: chat and completions (token ids), streamed or not, greedy or
    sampled with their own seed, short and long prompts (some sharing a long system prompt or a
    prefix of ids), 1 to 40 tokens, stop strings, penalties, n up to 3."""
    rng = random.Random(seed)
    systems = [" ".join(rng.choice(WORDS) for _ in range(n)) for n in (40, 90)]
    id_prefix = [rng.randrange(49152) for _ in range(70)]
    specs = []
    for i in range(count):
        spec = {"stream": rng.random() < 0.5, "max_tokens": rng.randint(1, 40), "n": 1}
        if rng.random() < 0.25:
            spec["temperature"] = 0
        else:
            spec.update(temperature=rng.choice([0.7, 1.0, 1.3]), seed=rng.randrange(2 ** 63))
            if rng.random() < 0.4:
                spec["top_p"] = 0.9
            if rng.random() < 0.3:
                spec["n"] = rng.randint(2, 3)
        if rng.random() < 0.2:
            spec["stop"] = rng.choice([["in"], ["er", "\n"], ["a"]])
        if rng.random() < 0.2:
            spec["presence_penalty"], spec["frequency_penalty"] = 0.5, 0.3
        spec["top_logprobs"] = rng.randint(0, 3)
        if rng.random() < 0.6:
            messages = [{"role": "user", "content": " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 60)))}]
            if rng.random() < 0.6:
                messages.insert(0, {"role": "system", "content": rng.choice(systems)})
            spec["messages"] = messages
        else:
            prompt = id_prefix[:rng.randint(0, 70)] if rng.random() < 0.5 else []
            prompt += [rng.randrange(49152) for _ in range(rng.randint(1, 120))]
            spec["prompt"] = prompt
        specs.append(spec)
    return specs


def token_entry(entry):
    """(id, logprob, [(id, logprob) of the top]) of a chat logprob entry ("token_id:N" tokens)."""
    top = tuple((alternative.token, alternative.logprob) for alternative in entry.top_logprobs)
    return entry.token, entry.logprob, top


def run(client, spec):
    """Sends one request and returns what it answered, streamed or not, in one shape:
    {"seed", "usage": (prompt, completion tokens), "choices": [(text, tokens, finish_reason)]}."""
    common = dict(model=MODEL, max_tokens=spec["max_tokens"], n=spec["n"], stream=spec["stream"],
                  extra_body={"return_tokens_as_token_ids": True})
    for name in ("temperature", "seed", "top_p", "stop", "presence_penalty", "frequency_penalty"):
        if name in spec:
            common[name] = spec[name]
    if spec["stream"]:
        common["stream_options"] = {"include_usage": True}
    choices = [["", [], None] for _ in range(spec["n"])]
    chat = "messages" in spec
    if chat:
        response = client.chat.completions.create(messages=spec["messages"], logprobs=True,
                                                  top_logprobs=spec["top_logprobs"], **common)
    else:
        response = client.completions.create(prompt=spec["prompt"], logprobs=spec["top_logprobs"], **common)

    def add(choice, text, logprobs):
        entry = choices[choice.index]
        entry[0] += text or ""
        if logprobs is not None:
            if chat:
                entry[1] += [token_entry(t) for t in logprobs.content]
            else:
                entry[1] += [(token, value, tuple(sorted(top.items())))
                             for token, value, top in zip(logprobs.tokens, logprobs.token_logprobs, logprobs.top_logprobs)]
        if choice.finish_reason is not None:
            entry[2] = choice.finish_reason

    if spec["stream"]:
        usage = seed = None
        for chunk in response:
            seed = chunk.model_extra["seed"]
            usage = chunk.usage or usage
            for choice in chunk.choices:
                add(choice, choice.delta.content if chat else choice.text, choice.logprobs)
    else:
        seed, usage = response.model_extra["seed"], response.usage
        for choice in response.choices:
            add(choice, choice.message.content if chat else choice.text, choice.logprobs)
    for text, tokens, finish in choices:
        assert finish in ("stop", "length")
        assert all(t[0].startswith("token_id:") for t in tokens)
    return {"seed": seed if "seed" in spec else None, "usage": (usage.prompt_tokens, usage.completion_tokens),
            "cached": usage.prompt_tokens_details.cached_tokens,
            "choices": [(text, tuple(tokens), finish) for text, tokens, finish in choices]}


def without_cache(result):
    return {key: value for key, value in result.items() if key != "cached"}


def test_answers_do_not_depend_on_the_load(tiny):
    specs = random_specs(32, seed=1)
    # Alone: one at a time on a fresh server, whole prompts in one pass, one sequence at a time.
    with Server(tiny, "-t", "2", "--parallel", "1", "--batch-tokens", "0") as server:
        client = server.openai()
        alone = [run(client, spec) for spec in specs]
    # Together: all at once with random delays, 8 sequences per pass at most, 48 positions per
    # pass (prompts cut into chunks, mixed with other requests' decoding).
    with Server(tiny, "-t", "2", "--parallel", "8", "--batch-tokens", "48") as server:
        client = server.openai()
        rng = random.Random(2)
        delays = [rng.uniform(0, 0.5) for _ in specs]

        def delayed(i):
            time.sleep(delays[i])
            return run(client, specs[i])

        with ThreadPoolExecutor(len(specs)) as pool:
            together = list(pool.map(delayed, range(len(specs))))
        cached = sum(result["cached"] for result in together)
    for i, spec in enumerate(specs):
        assert without_cache(together[i]) == without_cache(alone[i]), f"request {i}: {spec}"
    assert any(len(tokens) > 1 for result in alone for _, tokens, _ in result["choices"])
    assert any(finish == "stop" for result in alone for _, _, finish in result["choices"])
    assert cached > 0  # shared system prompts and id prefixes were found in the prefix cache


def test_a_second_turn_from_the_prefix_cache_equals_a_cold_servers(tiny):
    first = [{"role": "system", "content": " ".join(WORDS)}, {"role": "user", "content": "Tell me about the sea."}]
    spec = {"stream": True, "max_tokens": 12, "n": 1, "temperature": 0.8, "seed": 5, "top_logprobs": 2}
    with Server(tiny, "-t", "2") as server:
        client = server.openai()
        turn = run(client, {**spec, "messages": first})
        reply = turn["choices"][0][0]
        second = first + [{"role": "assistant", "content": reply}, {"role": "user", "content": "And the river?"}]
        warm = run(client, {**spec, "messages": second, "stream": False})
    with Server(tiny, "-t", "2") as server:
        cold = run(server.openai(), {**spec, "messages": second, "stream": False})
    assert warm["cached"] >= (turn["usage"][0] // 16) * 16 > 0
    assert cold["cached"] == 0
    assert without_cache(warm) == without_cache(cold)


def test_choices_are_the_requests_with_seeds_seed_plus_k(tiny):
    prompt = [random.Random(3).randrange(49152) for _ in range(64)]
    with Server(tiny, "-t", "2") as server:
        client = server.openai()
        spec = {"stream": False, "max_tokens": 6, "temperature": 1.0, "prompt": prompt, "top_logprobs": 1}
        together = run(client, {**spec, "n": 3, "seed": 2 ** 64 - 2})
        metrics = scrape(server)
        hits = metrics["ditto_prefix_cache_hit_tokens_total"]
        apart = [run(client, {**spec, "n": 1, "seed": (2 ** 64 - 2 + k) % 2 ** 64})["choices"][0] for k in range(3)]
    assert list(together["choices"]) == apart
    assert len(set(apart)) == 3
    assert together["usage"] == (64, 18)
    assert hits >= 2 * 63  # choices 1 and 2 found all but the last prompt position cached


def test_a_request_without_a_seed_gets_one_and_reports_it(tiny):
    with Server(tiny, "-t", "2") as server:
        client = server.openai()
        messages = [{"role": "user", "content": "Pick a word."}]
        first = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=8, logprobs=True)
        seed = first.model_extra["seed"]
        assert isinstance(seed, int) and 0 <= seed < 2 ** 64
        again = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=8, seed=seed, logprobs=True)
        other = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=8, logprobs=True)
    assert again.choices[0].message.content == first.choices[0].message.content
    assert again.choices[0].logprobs == first.choices[0].logprobs
    assert other.model_extra["seed"] != seed


def test_the_default_model_answers_as_ditto_generate():
    # In the exact numerics, transformers' function, whose greedy answer names Paris; the int8
    # numerics (the default) answer as llama.cpp does, with French landmarks.
    path = smollm2_gguf()
    question = "What is the capital of France?"
    # The server's default KV cache is f16; generate's is f32.
    generated = subprocess.run([DITTO, "generate", "-m", str(path), "-p", question, "-n", "16", "--json", "-t", "2",
                                "--numerics", "exact", "--cache-type", "f16"],
                               capture_output=True, text=True, check=True, timeout=300)
    expected = json.loads(generated.stdout)["ids"]
    with Server(path, "-t", "2", "--numerics", "exact") as server:
        client = server.openai()
        assert [model.id for model in client.models.list()] == ["SmolLM2-135M-Instruct.Q4_1.gguf"]
        response = client.chat.completions.create(
            model="SmolLM2-135M-Instruct.Q4_1.gguf", messages=[{"role": "user", "content": question}], max_tokens=16,
            temperature=0, logprobs=True, extra_body={"return_tokens_as_token_ids": True})
        ids = [int(entry.token.removeprefix("token_id:")) for entry in response.choices[0].logprobs.content]
        text = call_json(server.url, "POST", "/detokenize", {"tokens": ids})[1]["prompt"]
    assert ids == expected
    assert "Paris" in response.choices[0].message.content
    assert text.startswith(response.choices[0].message.content)


def scrape(server):
    """/metrics as {name or name{labels}: value}, read with Prometheus' own parser."""
    samples = {}
    status, text = call(server.url, "GET", "/metrics")
    assert status == 200
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            samples[sample.name + (f"{{{labels}}}" if labels else "")] = sample.value
    return samples


def test_metrics_count_what_happened(tiny):
    with Server(tiny, "-t", "2") as server:
        client = server.openai()
        client.completions.create(model=MODEL, prompt=[1, 2, 3], max_tokens=5, temperature=0)
        client.completions.create(model=MODEL, prompt="Hello", max_tokens=3, temperature=0, n=2)
        with pytest.raises(openai.BadRequestError):
            client.completions.create(model=MODEL, prompt=[1], max_tokens=-1)
        metrics = scrape(server)
    assert metrics['ditto_http_requests_total{endpoint="/v1/completions",status="200"}'] == 2
    assert metrics['ditto_http_requests_total{endpoint="/v1/completions",status="400"}'] == 1
    assert metrics["ditto_sequences_total"] == 3
    assert metrics['ditto_sequences_finished_total{finish_reason="length"}'] == 3
    assert metrics["ditto_generated_tokens_total"] == 11
    assert metrics["ditto_time_to_first_token_seconds_count"] == 3
    assert metrics["ditto_inter_token_latency_seconds_count"] == 8
    assert metrics['ditto_inter_token_latency_seconds_bucket{le="+Inf"}'] == 8
    assert metrics["ditto_sequences_running"] == metrics["ditto_sequences_waiting"] == 0
    assert metrics['ditto_kv_blocks{state="used"}'] == 0
    assert metrics['ditto_kv_blocks{state="free"}'] + metrics['ditto_kv_blocks{state="cached"}'] == \
        metrics['ditto_kv_blocks{state="total"}']
    assert metrics["ditto_kv_window_dropped_blocks"] == 0  # no sliding window in this model
    assert metrics['ditto_kv_bytes{state="used"}'] == 0 < metrics['ditto_kv_bytes{state="budget"}']


def test_text_prompts_get_the_tokenizers_bos_as_vllm_adds_it(tmp_path):
    """A tokenizer that puts BOS before a text (Llama 2's, Gemma's): /v1/completions and /tokenize
    add it to a text prompt unless add_special_tokens is false (vLLM's defaults); a chat prompt
    is the template's text alone."""
    model = write_tiny_chat_model(tmp_path / MODEL, add_bos=True)
    text = "The river runs to the sea"
    with Server(model, "-t", "2") as server:
        plain = call_json(server.url, "POST", "/tokenize", {"prompt": text, "add_special_tokens": False})[1]["tokens"]
        tokens = call_json(server.url, "POST", "/tokenize", {"prompt": text})[1]["tokens"]
        messages = [{"role": "user", "content": text}]
        chat_tokens = call_json(server.url, "POST", "/tokenize", {"messages": messages})[1]["tokens"]
        client = server.openai()
        options = dict(model=MODEL, max_tokens=5, temperature=0, logprobs=1,
                       extra_body={"return_tokens_as_token_ids": True})
        from_text = client.completions.create(prompt=text, **options)
        from_ids = client.completions.create(prompt=tokens, **options)
        without = client.completions.create(prompt=text, **{**options, "extra_body": {
            **options["extra_body"], "add_special_tokens": False}})
        chat = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=1)
    assert tokens == [1] + plain and 1 not in plain
    # SmolLM2's BOS is <|im_start|>, which its template writes: no second one goes before it.
    assert chat_tokens[:2] != [1, 1] and chat.usage.prompt_tokens == len(chat_tokens)
    assert from_text.usage.prompt_tokens == len(tokens) and without.usage.prompt_tokens == len(plain)
    assert from_text.choices[0].logprobs == from_ids.choices[0].logprobs
    assert from_text.choices[0].logprobs != without.choices[0].logprobs


def test_a_client_that_stops_reading_loses_its_stream(tmp_path):
    """--timeout 1: a streaming client that reads nothing holds a connection thread until the socket
    buffers are full and one more second has passed; then its sequences are cancelled and their
    blocks return to the pool, before they reach max_tokens. The model is the tiny one with hidden
    1024, so that the 16 x 900 tokens take several times longer than filling the buffers (about
    2,000 tokens here) and the timeout: with hidden 64 they were only about 2.5 times longer, and a
    CI run saw every sequence end at max_tokens before the write timed out."""
    choices, max_tokens = 16, 900
    model = write_tiny_chat_model(tmp_path / MODEL, hidden=1024)
    with Server(model, "-t", "2", "--timeout", "1", "--parallel", str(choices)) as server:
        body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "Talk."}], "n": choices,
                           "max_tokens": max_tokens, "temperature": 1.0, "ignore_eos": True, "logprobs": True,
                           "top_logprobs": 20, "stream": True}).encode()
        port = int(server.url.rsplit(":", 1)[1])
        with socket.socket() as client:
            client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: no window scaling
            client.connect(("127.0.0.1", port))
            client.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                           b"Content-Length: %d\r\n\r\n" % len(body) + body)
            assert client.recv(12, socket.MSG_WAITALL) == b"HTTP/1.1 200"  # and not a byte more
            deadline = time.monotonic() + 60  # without a write timeout: never
            cancelled = 'ditto_sequences_finished_total{finish_reason="cancelled"}'
            while (metrics := scrape(server)).get(cancelled, 0) < choices:
                assert time.monotonic() < deadline, metrics
                time.sleep(0.2)
    assert metrics["ditto_sequences_total"] == choices
    assert metrics["ditto_generated_tokens_total"] < choices * max_tokens
    assert metrics["ditto_sequences_running"] == 0 and metrics['ditto_kv_blocks{state="used"}'] == 0


def test_health_is_503_while_the_model_loads(tmp_path):
    """config.json is a pipe: the model loads only once the test writes it."""
    model = tmp_path / "model"
    make_checkpoint(str(model), "qwen3", vocab_size=512, hidden_size=32, intermediate_size=64, layers=1, heads=2,
                    kv_heads=1, head_dim=16)
    shutil.copy(QWEN3_TOKENIZER, model / "tokenizer.json")
    config = (model / "config.json").read_text()
    os.remove(model / "config.json")
    os.mkfifo(model / "config.json")
    server = Server(model, "-t", "1").start(wait_ready=False)
    try:
        assert call_json(server.url, "GET", "/health") == (503, {"status": "loading"})
        status, refused = call_json(server.url, "GET", "/v1/models")
        assert status == 503 and refused["error"]["message"] == "the model is loading"
        with open(model / "config.json", "w") as pipe:
            pipe.write(config)
        server.wait_ready()
        assert call_json(server.url, "GET", "/v1/models")[1]["data"][0]["id"] == "model"
    finally:
        assert server.stop() == 0


def test_sigterm_finishes_what_runs_and_refuses_the_rest(tiny):
    server = Server(tiny, "-t", "2").start()
    try:
        client = server.openai()
        # As long as the context allows: the checks below run while it is still generating.
        stream = client.completions.create(model=MODEL, prompt=[5, 6, 7], max_tokens=1000, temperature=0, stream=True,
                                           extra_body={"ignore_eos": True})
        text = next(iter(stream)).choices[0].text
        server.signal(signal.SIGTERM)
        server.wait_health(503)
        assert call_json(server.url, "GET", "/health") == (503, {"status": "shutting down"})
        with pytest.raises(openai.APIStatusError) as refused:
            client.completions.create(model=MODEL, prompt=[1], max_tokens=2)
        assert refused.value.status_code == 503 and "shutting down" in refused.value.message
        assert call(server.url, "POST", "/tokenize", {"prompt": "hi"})[0] == 200  # still answering
        finish = None
        for chunk in stream:
            text += chunk.choices[0].text
            finish = chunk.choices[0].finish_reason or finish
        assert finish == "length"
    finally:
        assert server.stop() == 0


def test_a_second_signal_cancels_what_runs(tmp_path):
    """The model is the tiny one with hidden 1024: with hidden 64 the 1,000 tokens could all come
    before /health said 503 and the second signal went out."""
    server = Server(write_tiny_chat_model(tmp_path / MODEL, hidden=1024), "-t", "2").start()
    try:
        body = {"prompt": [5, 6, 7], "max_tokens": 1000, "temperature": 0, "stream": True}
        with event_stream(server.url, "/v1/completions", body) as (status, stream):
            assert status == 200
            events = [next(stream)]
            server.signal(signal.SIGTERM)
            server.wait_health(503)
            server.signal(signal.SIGINT)
            events += list(stream)
        assert server.process.wait(timeout=60) == 0
    finally:
        server.stop()
    assert "the request was cancelled by the server" in events[-1]
    assert len(events) < 1000
