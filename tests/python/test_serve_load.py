"""`ditto serve` under load, with faults: 300 requests at concurrency 32 on loopback, of which some
clients go away mid-stream and some requests are planted errors. Every request that completes
gets exactly its answer alone (text, token ids, logprobs), the only error responses are the
planted ones, every client that went away had its sequence cancelled, and afterwards the KV pool
and /metrics are back to idle."""
import json
import random
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from ditto_testing.serve import Server, call, event_stream, write_tiny_chat_model

MODEL = "tiny.gguf"
REQUESTS = 300
CONCURRENCY = 32
VOCAB = 49152


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return write_tiny_chat_model(tmp_path_factory.mktemp("serve-load") / MODEL)


def specs(count, seed):
    """Distinct requests: chat and completions, greedy or sampled, streamed or not, with logprobs
    and token ids to compare."""
    rng = random.Random(seed)
    prefix = [rng.randrange(VOCAB) for _ in range(40)]
    result = []
    for i in range(count):
        body = {"model": MODEL, "max_tokens": rng.randint(1, 24), "return_tokens_as_token_ids": True,
                "stream": rng.random() < 0.5}
        if rng.random() < 0.7:
            body.update(temperature=1.0, seed=rng.randrange(2 ** 32))
        else:
            body["temperature"] = 0
        if rng.random() < 0.5:
            body["messages"] = [{"role": "user", "content": f"Question {i}: " + "why " * rng.randint(0, 30)}]
            body.update(logprobs=True, top_logprobs=rng.randint(0, 2))
        else:
            body["prompt"] = (prefix if rng.random() < 0.5 else []) + [rng.randrange(VOCAB) for _ in range(rng.randint(1, 50))]
            body["logprobs"] = rng.randint(0, 2)
        result.append(body)
    return result


def endpoint(body):
    return "/v1/chat/completions" if "messages" in body else "/v1/completions"


def answer(chunks, chat):
    """(text, [(token, logprob, top)], finish_reason) from a reply or from all chunks of a stream."""
    text, tokens, finish = "", [], None
    for chunk in chunks:
        for choice in chunk["choices"]:
            text += (choice["delta"].get("content") or "") if "delta" in choice else \
                (choice["message"]["content"] if chat else choice["text"])
            logprobs = choice["logprobs"]
            if logprobs and chat:
                tokens += [(t["token"], t["logprob"], tuple((a["token"], a["logprob"]) for a in t["top_logprobs"]))
                           for t in logprobs["content"]]
            elif logprobs:
                tokens += [(t, v, tuple(sorted(top.items())))
                           for t, v, top in zip(logprobs["tokens"], logprobs["token_logprobs"], logprobs["top_logprobs"])]
            finish = choice["finish_reason"] or finish
    return text, tokens, finish


def send(url, body):
    """(status, answer or error body)."""
    if body.get("stream"):
        with event_stream(url, endpoint(body), body) as (status, events):
            if status != 200:
                return status, None
            chunks = [json.loads(event) for event in events if event != "[DONE]"]
            return status, answer(chunks, "messages" in body)
    status, text = call(url, "POST", endpoint(body), body)
    return status, answer([json.loads(text)], "messages" in body) if status == 200 else json.loads(text)


def go_away(url, body):
    """Streams a long answer, reads two events and closes the connection."""
    with event_stream(url, endpoint(body), {**body, "stream": True, "max_tokens": 900}) as (status, events):
        assert status == 200
        next(events), next(events)


PLANTED = [  # (body, status): errors the load carries on purpose
    ({"model": MODEL, "prompt": [1, 2], "max_tokens": 5000}, 400),
    ({"model": MODEL, "prompt": [1, 2], "max_tokens": "5"}, 400),
    ({"model": "another-model", "prompt": [1, 2]}, 404),
    ({"model": MODEL, "messages": []}, 400),
]


def metrics(url):
    status, text = call(url, "GET", "/metrics")
    assert status == 200
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def test_hundreds_of_requests_with_clients_that_go_away(tiny):
    pool = specs(40, seed=3)
    rng = random.Random(4)
    plan = []  # ("ok", spec index) | ("away", spec index) | ("planted", planted index)
    for _ in range(REQUESTS):
        draw = rng.random()
        kind = "away" if draw < 0.15 else "planted" if draw < 0.2 else "ok"
        plan.append((kind, rng.randrange(len(PLANTED) if kind == "planted" else len(pool))))
    with Server(tiny, "-t", "2", "--parallel", "16", "--batch-tokens", "64") as server:
        reference = [send(server.url, body) for body in pool]
        assert all(status == 200 for status, _ in reference)
        before = metrics(server.url)

        def run(step):
            kind, index = step
            if kind == "away":
                return go_away(server.url, pool[index])
            if kind == "planted":
                return send(server.url, PLANTED[index][0])
            return send(server.url, pool[index])

        with ThreadPoolExecutor(CONCURRENCY) as executor:
            results = list(executor.map(run, plan))
        for (kind, index), result in zip(plan, results):
            if kind == "ok":
                assert result == reference[index], f"request {pool[index]}"
            elif kind == "planted":
                status, error = result
                assert status == PLANTED[index][1] and error["error"]["message"]

        # Idle again: nothing running or waiting, no block held by a sequence.
        deadline = time.monotonic() + 60
        while (after := metrics(server.url))["ditto_sequences_running"] or after["ditto_sequences_waiting"]:
            assert time.monotonic() < deadline, "the server did not become idle"
            time.sleep(0.1)
        assert after['ditto_kv_blocks{state="used"}'] == 0
        assert after['ditto_kv_blocks{state="free"}'] + after['ditto_kv_blocks{state="cached"}'] == \
            after['ditto_kv_blocks{state="total"}']

    def delta(name):
        return after.get(name, 0) - before.get(name, 0)

    away = sum(kind == "away" for kind, _ in plan)
    ok = sum(kind == "ok" for kind, _ in plan)
    planted = [PLANTED[index][1] for kind, index in plan if kind == "planted"]
    assert away > 20 and planted
    assert delta('ditto_sequences_finished_total{finish_reason="cancelled"}') == away
    assert delta("ditto_sequences_total") == ok + away
    finished = sum(delta(f'ditto_sequences_finished_total{{finish_reason="{reason}"}}')
                   for reason in ("stop", "length", "cancelled"))
    assert finished == ok + away
    errors = {name: value for name, value in after.items()
              if name.startswith("ditto_http_requests_total") and 'status="2' not in name}
    assert sum(errors.values()) == len(planted)
    for status in (400, 404):
        assert sum(v for name, v in errors.items() if f'status="{status}"' in name) == planted.count(status)
