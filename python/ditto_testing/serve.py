"""`ditto serve` for tests and benchmarks: a server started on a free loopback port, waited for until
/health says it is ready, and stopped with SIGTERM; and a small random model that has SmolLM2's
tokenizer and chat template, fast enough for hundreds of requests."""
import contextlib
import http.client
import json
import os
import re
import signal
import subprocess
import tempfile
import time
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DITTO = os.path.join(ROOT, "build", "ditto")


def call(url, method, path, body=None, headers=None, timeout=300):
    """One HTTP request on a connection of its own: (status, the body as text). `body` is sent
    as JSON (with its Content-Type) unless it is bytes or str (sent as it is, with `headers` only)."""
    address = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=timeout)
    try:
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
            headers = {"Content-Type": "application/json", **(headers or {})}
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read().decode("utf-8", errors="replace")
    finally:
        connection.close()


def wait_until_answers(process, url, path, timeout, interval, name, log, status=200):
    """Returns once GET `path` answers `status`; raises RuntimeError (with `log()`) if the process
    exits first or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with {process.returncode}: {log()}")
        try:
            if call(url, "GET", path, timeout=10)[0] == status:
                return
        except OSError:
            pass
        time.sleep(interval)
    raise RuntimeError(f"{name} did not answer {path} with {status} in {timeout} s: {log()}")


def call_json(url, method, path, body=None, headers=None):
    status, text = call(url, method, path, body, headers)
    return status, json.loads(text)


@contextlib.contextmanager
def event_stream(url, path, body, headers=None, timeout=300):
    """POSTs a streaming request and yields (status, an iterator of its `data: ...` payloads).
    Leaving the block closes the connection, finished or not: a client that goes away."""
    address = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=timeout)
    try:
        connection.request("POST", path, body=json.dumps(body),
                           headers={"Content-Type": "application/json", **(headers or {})})
        response = connection.getresponse()

        def events():
            while line := response.readline():
                line = line.decode("utf-8").rstrip("\r\n")
                if line.startswith("data: "):
                    yield line[len("data: "):]

        yield response.status, events()
    finally:
        connection.close()


def write_tiny_chat_model(path, seed=0, add_bos=False, hidden=64):
    """A 2-layer llama GGUF file (hidden 64 unless asked, Q8_0, random weights) with SmolLM2's
    tokenizer and chat template copied in: real text in and out, a few milliseconds per token. With
    add_bos, its tokenizer puts BOS (id 1) before a text, as Llama 2's and Gemma's do. A larger
    `hidden` makes each token cost more (the output matrix is 49,152 x hidden)."""
    from ditto_testing.gguf_models import copy_tokenizer, write_llama_gguf
    from ditto_testing.models import smollm2_gguf

    tokenizer = copy_tokenizer(smollm2_gguf(), replace={"tokenizer.ggml.add_bos_token": add_bos})
    write_llama_gguf(path, {"default": "Q8_0"}, vocab=49152, hidden=hidden, mlp=2 * hidden, layers=2, heads=4,
                     kv_heads=2, tied=True, bound=0.5, seed=seed, tokenizer=tokenizer)
    return str(path)


class Server:
    """`ditto serve -m MODEL ARGS... --port 0` (after `launcher`, e.g. mpirun's words), as a context manager. `url` is its root
    (http://127.0.0.1:PORT), `log` what it wrote to stderr."""

    def __init__(self, model, *args, ready_timeout=300, launcher=()):
        self.args = [*launcher, DITTO, "serve", "-m", str(model), "--host", "127.0.0.1", "--port", "0", *map(str, args)]
        self.ready_timeout = ready_timeout
        self.process = None
        self.url = None
        self._stderr = None
        self._clients = []

    def openai(self, **options):
        """An `openai` client of this server, closed (its idle connections too) by stop()."""
        import openai

        client = openai.OpenAI(base_url=self.url + "/v1", api_key=options.pop("api_key", "unused"), max_retries=0,
                               timeout=300, **options)
        self._clients.append(client)
        return client

    def start(self, wait_ready=True):
        self._stderr = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=self._stderr, text=True)
        line = self.process.stdout.readline()
        match = re.search(r"listening on (http://\S+)", line)
        if not match:
            self.process.wait(timeout=60)
            raise RuntimeError(f"ditto serve did not start: {line!r} {self.log}")
        self.url = match.group(1)
        if wait_ready:
            self.wait_ready()
        return self

    def wait_ready(self):
        self.wait_health(200)

    def wait_health(self, status):
        """Waits until /health answers `status` (200 ready, 503 loading or shutting down)."""
        wait_until_answers(self.process, self.url, "/health", self.ready_timeout, 0.01, "ditto serve", lambda: self.log,
                           status)

    @property
    def log(self):
        self._stderr.seek(0)
        return self._stderr.read()

    def signal(self, number=signal.SIGTERM):
        self.process.send_signal(number)

    def stop(self, timeout=120):
        """SIGTERM, then the exit code (killed if it does not exit in time). The clients' idle
        connections are closed first: the server would wait for them (cpp-httplib's keep-alive)."""
        for client in self._clients:
            client.close()
        if self.process.poll() is None:
            self.signal()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                raise RuntimeError(f"ditto serve did not stop on SIGTERM in {timeout} s: {self.log}")
        return self.process.returncode

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        try:
            self.stop()
        finally:
            self.process.stdout.close()
            self._stderr.close()
