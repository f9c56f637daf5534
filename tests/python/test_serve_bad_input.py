"""`ditto serve` against malformed and hostile requests: each gets its 4xx with an OpenAI-style error
body, and between them the server keeps giving a correct request exactly its answer. Then abuse
below HTTP: garbage bytes, a request line too long, a client that never finishes its request, a
body shorter than announced. No input crashes the server or touches another request."""
import json
import re
import socket

import openai
import pytest

from ditto_testing.serve import Server, call, write_tiny_chat_model

MODEL = "tiny.gguf"
KEY = "sk-test-key"
AUTH = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
CONTEXT = 256
MAX_BODY = 65536
CORRECT = {"model": MODEL, "prompt": [11, 22, 33, 44], "max_tokens": 6, "temperature": 0.9, "seed": 5, "logprobs": 2}

CHAT = '"messages": [{"role": "user", "content": "Hi"}]'

# (what it is, method, path, body, headers, status, a fragment of the error message)
CORPUS = [
    ("broken JSON", "POST", "/v1/chat/completions", '{"messages": [', AUTH, 400, "not valid JSON"),
    ("JSON that is not an object", "POST", "/v1/chat/completions", "[1, 2, 3]", AUTH, 400, "must be a JSON object"),
    ("an empty body", "POST", "/v1/completions", "", AUTH, 400, "not valid JSON"),
    ("trailing garbage", "POST", "/v1/completions", '{"prompt": [1]} x', AUTH, 400, "not valid JSON"),
    ("a number too large for a double", "POST", "/v1/chat/completions", "{" + CHAT + ', "temperature": 1e999}', AUTH,
     400, "number overflow"),
    ("max_tokens too large for an integer", "POST", "/v1/chat/completions", "{" + CHAT + ', "max_tokens": 1e30}', AUTH,
     400, "'max_tokens' must be an integer"),
    ("max_tokens past the context", "POST", "/v1/chat/completions",
     "{" + CHAT + ', "max_tokens": 9223372036854775807}', AUTH, 400, "is past the model's context of 256 positions"),
    ("negative max_tokens", "POST", "/v1/completions", '{"prompt": [1], "max_tokens": -5}', AUTH, 400,
     "'max_tokens' must be between 1"),
    ("messages of the wrong type", "POST", "/v1/chat/completions", '{"messages": "Hi"}', AUTH, 400,
     "'messages' must be an array"),
    ("no messages", "POST", "/v1/chat/completions", '{"messages": []}', AUTH, 400, "non-empty array"),
    ("temperature of the wrong type", "POST", "/v1/chat/completions", "{" + CHAT + ', "temperature": "hot"}', AUTH,
     400, "'temperature' must be a number"),
    ("n of the wrong type", "POST", "/v1/completions", '{"prompt": [1], "n": true}', AUTH, 400, "'n' must be an integer"),
    ("stop of the wrong type", "POST", "/v1/completions", '{"prompt": [1], "stop": {"a": 1}}', AUTH, 400, "'stop'"),
    ("top_logprobs beyond 20", "POST", "/v1/chat/completions", "{" + CHAT + ', "logprobs": true, "top_logprobs": 50}',
     AUTH, 400, "'top_logprobs' must be between 0 and 20"),
    ("stream_options without stream", "POST", "/v1/chat/completions",
     "{" + CHAT + ', "stream_options": {"include_usage": true}}', AUTH, 400, "only allowed when 'stream' is true"),
    ("invalid UTF-8", "POST", "/v1/chat/completions", b'{"messages": [{"role": "user", "content": "\xc3\x28\xff"}]}',
     AUTH, 400, "ill-formed UTF-8"),
    ("a lone surrogate", "POST", "/v1/chat/completions", '{"messages": [{"role": "user", "content": "\\ud83d"}]}',
     AUTH, 400, "surrogate"),
    ("nesting 100 deep", "POST", "/v1/chat/completions", "[" * 100 + "]" * 100, AUTH, 400, "deeper than 64 levels"),
    ("an image", "POST", "/v1/chat/completions",
     '{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x"}}]}]}', AUTH,
     400, "only text content parts"),
    ("an unknown role", "POST", "/v1/chat/completions", '{"messages": [{"role": "root", "content": "x"}]}', AUTH, 400,
     "unknown role 'root'"),
    ("a prompt past the context", "POST", "/v1/completions", json.dumps({"prompt": list(range(300))}), AUTH, 400,
     "the prompt has 300 tokens and the model's context is 256 positions"),
    ("a token outside the vocabulary", "POST", "/v1/completions", '{"prompt": [1, 49152]}', AUTH, 400,
     "token id 49152 is outside the vocabulary"),
    ("a negative token id", "POST", "/v1/completions", '{"prompt": [1, -1]}', AUTH, 400, "token ids must be integers"),
    ("a logit bias outside the vocabulary", "POST", "/v1/completions", '{"prompt": [1], "logit_bias": {"60000": 1}}',
     AUTH, 400, "60000"),
    ("an empty text prompt", "POST", "/v1/completions", '{"prompt": ""}', AUTH, 400, "the prompt is empty"),
    ("an unknown model", "POST", "/v1/completions", '{"model": "gpt-4", "prompt": [1]}', AUTH, 404,
     "the model 'gpt-4' does not exist"),
    ("an unknown model to retrieve", "GET", "/v1/models/gpt-4", None, AUTH, 404, "does not exist"),
    ("detokenizing an id outside the vocabulary", "POST", "/detokenize", '{"tokens": [49152]}', AUTH, 400,
     "outside the vocabulary"),
    ("tokenizing nothing", "POST", "/tokenize", "{}", AUTH, 400, "give 'prompt' (text) or 'messages'"),
    ("a body over the limit", "POST", "/v1/completions", '{"prompt": "' + "a" * (MAX_BODY + 10) + '"}', AUTH, 413,
     "larger than the limit of 65536 bytes"),
    ("no key", "POST", "/v1/completions", json.dumps(CORRECT), {}, 401, "no API key given"),
    ("a wrong key", "POST", "/v1/completions", json.dumps(CORRECT), {"Authorization": "Bearer sk-wrong"}, 401,
     "the API key is not valid"),
    ("a key one character short", "POST", "/v1/completions", json.dumps(CORRECT),
     {"Authorization": f"Bearer {KEY[:-1]}"}, 401, "not valid"),
    ("an empty bearer", "POST", "/v1/completions", json.dumps(CORRECT), {"Authorization": "Bearer "}, 401, "not valid"),
    ("basic authentication", "POST", "/v1/completions", json.dumps(CORRECT), {"Authorization": f"Basic {KEY}"}, 401,
     "not valid"),
    ("no key for /metrics", "GET", "/metrics", None, {}, 401, "no API key given"),
    ("an unknown endpoint", "GET", "/v1/engines", None, AUTH, 404, "no such endpoint: GET /v1/engines"),
    ("a GET of a POST endpoint", "GET", "/v1/chat/completions", None, AUTH, 404, "no such endpoint"),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    model = write_tiny_chat_model(tmp_path_factory.mktemp("serve-bad") / MODEL)
    with Server(model, "-t", "2", "-c", str(CONTEXT), "--api-key", KEY, "--max-body", str(MAX_BODY), "--timeout", "1",
                "--parallel", "4") as running:
        yield running


def correct(server):
    status, text = call(server.url, "POST", "/v1/completions", CORRECT, AUTH)
    assert status == 200, text
    answer = json.loads(text)["choices"][0]
    return answer["text"], answer["logprobs"]


def test_every_bad_request_gets_its_4xx_and_the_server_goes_on(server):
    expected = correct(server)
    for what, method, path, body, headers, status, fragment in CORPUS:
        got, text = call(server.url, method, path, body, headers)
        error = json.loads(text)["error"]
        assert (got, fragment in error["message"]) == (status, True), f"{what}: {got} {text[:300]}"
        assert set(error) == {"message", "type", "param", "code"}
        assert correct(server) == expected, f"after {what}"
    status, text = call(server.url, "GET", "/health")  # exempt from the key
    assert (status, json.loads(text)) == (200, {"status": "ok"})


def test_the_openai_client_sees_openai_errors(server):
    client = server.openai(api_key="sk-wrong")
    with pytest.raises(openai.AuthenticationError) as refused:
        client.models.list()
    assert refused.value.code == "invalid_api_key"
    client = server.openai(api_key=KEY)
    with pytest.raises(openai.NotFoundError) as missing:
        client.completions.create(model="gpt-4", prompt=[1])
    assert missing.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as too_long:
        client.completions.create(model=MODEL, prompt=[1] * 200, max_tokens=100)
    assert too_long.value.code == "context_length_exceeded" and too_long.value.param == "max_tokens"
    assert client.completions.create(model=MODEL, prompt=[1], max_tokens=2).usage.completion_tokens == 2


def raw(server, data):
    """Sends raw bytes on a new connection; returns the answer: its head and the body its
    Content-Length gives (the server may write them apart), or what came before the close."""
    port = int(server.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(data)
        answer = b""
        while True:
            part = connection.recv(65536)
            answer += part
            head, blank, body = answer.partition(b"\r\n\r\n")
            length = re.search(rb"(?im)^content-length: *(\d+)", head)
            if not part or (blank and len(body) >= (int(length.group(1)) if length else 0)):
                return answer


def test_abuse_below_http(server):
    expected = correct(server)
    assert raw(server, b"\x00\xff\xfe garbage \r\n\r\n").startswith(b"HTTP/1.1 400")
    assert b"no such endpoint: DELETE /v1/models" in raw(server, b"DELETE /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
    assert raw(server, b"GET /" + b"a" * 10000 + b" HTTP/1.1\r\nHost: x\r\n\r\n").startswith(b"HTTP/1.1 414")
    assert raw(server, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n")[:12] \
        in (b"HTTP/1.1 400", b"HTTP/1.1 413")
    assert correct(server) == expected
    # Clients that never finish their request hold a connection until --timeout (1 s) passes:
    # they get a 408 and, after cpp-httplib's keep-alive of 5 s, the server closes the connection
    # (our sockets' own 30 s timeout would fail the test). Nobody else waits for them.
    port = int(server.url.rsplit(":", 1)[1])
    idle = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(8)]
    for number, connection in enumerate(idle):
        connection.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" if number % 2 else
                           b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"prompt\"")
    assert correct(server) == expected
    for connection in idle:
        answer = b""
        while chunk := connection.recv(65536):  # until the server closes it
            answer += chunk
        connection.close()
        assert answer.startswith(b"HTTP/1.1 408") and b"did not arrive whole within the timeout of 1 s" in answer
    assert correct(server) == expected
