"""Runs the server's request-parsing libFuzzer target (fuzz/serve_request_fuzz.cpp) for a bounded
time: arbitrary bodies for each endpoint must parse into requests that keep the parser's promises
or be refused with a 400, never crash, hang or leak; conversations that parse are rendered with a
chat template. Built with clang, ASan and UBSan in build-fuzz/ (see fuzz/CMakeLists.txt); seeded
with valid requests of every endpoint."""
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, "build-fuzz")
SECONDS = 20

SEEDS = {  # first byte: 0 chat, 1 completions, 2 tokenize, 3 detokenize
    "chat": (0, {"model": "m", "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Weather in Zürich?"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "1", "type": "function", "function": {"name": "f", "arguments": "{\"city\": \"Zürich\"}"}}]},
        {"role": "tool", "content": "21", "tool_call_id": "1"}],
        "max_tokens": 7, "stop": ["\n", "END"], "n": 2, "stream": True, "stream_options": {"include_usage": True},
        "temperature": 0.5, "top_p": 0.9, "top_k": 40, "min_p": 0.1, "seed": -3, "logprobs": True, "top_logprobs": 3,
        "presence_penalty": 1, "frequency_penalty": -1, "repetition_penalty": 1.2, "logit_bias": {"5": -100},
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        "chat_template_kwargs": {"enable_thinking": False}}),
    "completion_text": (1, {"prompt": ["Once upon", "a time"], "max_tokens": 16, "logprobs": 2, "echo": False,
                            "add_special_tokens": False}),
    "completion_ids": (1, {"prompt": [[1, 2, 3], [4]], "n": 3, "best_of": 3, "ignore_eos": True}),
    "tokenize": (2, {"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": False}),
    "detokenize": (3, {"tokens": [0, 1, 2147483647]}),
}


def test_fuzz_the_request_parser_for_a_bounded_time(tmp_path):
    subprocess.run(["cmake", "-S", os.path.join(ROOT, "fuzz"), "-B", BUILD, "-G", "Ninja",
                    "-DCMAKE_CXX_COMPILER=clang++"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", BUILD, "--target", "serve_request_fuzz"], check=True,
                   stdout=subprocess.DEVNULL)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name, (endpoint, body) in SEEDS.items():
        (corpus / name).write_bytes(bytes([endpoint]) + json.dumps(body, ensure_ascii=False).encode())
    result = subprocess.run(
        [os.path.join(BUILD, "serve_request_fuzz"), f"-max_total_time={SECONDS}", "-timeout=10",
         "-rss_limit_mb=4096", "-max_len=4096", f"-artifact_prefix={tmp_path}/", str(corpus)],
        capture_output=True, text=True, timeout=SECONDS + 300)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "Done" in result.stderr
