"""Runs the chat-template engine's libFuzzer target (fuzz/chat_template_fuzz.cpp) for a bounded
time: arbitrary templates and variables must render or fail with ditto::Error, never crash, hang
or leak. Built with clang, ASan and UBSan in build-fuzz/ (see fuzz/CMakeLists.txt); seeded with
real templates and the test corpus's conversations."""
import json
import os
import subprocess

from ditto_testing.chat_corpus import CONVERSATIONS, TOOLS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QWEN3_CONFIG = os.path.join(ROOT, "..", "shared", "data", "qwen3-tokenizer", "tokenizer_config.json")
BUILD = os.path.join(ROOT, "build-fuzz")
SECONDS = 20

FEATURES = (
    "{% macro f(x, y=1) %}{{ x ~ y }}{% endmacro %}{% set ns = namespace(a=[]) %}"
    "{% for k, v in tools[0].function.parameters.properties|dictsort %}{% set ns.a = ns.a + [f(k)] %}{% endfor %}"
    "{{ ns.a|join(', ') }}{{ '%s %d' % ('a', 1) }}{{ '{} {x}'.format(1, x=2) }}"
    "{{ messages[::-1]|map(attribute='content')|select|list }}{% raw %}{{ x }}{% endraw %}{# c #}\n"
    "{%- for m in messages if m.role != 'tool' -%}{{ loop.index }}{{ m.role|upper }}"
    "{% if m.tool_calls is defined %}{{ m.tool_calls|tojson(indent=2) }}{% elif loop.last %}{% break %}{% endif %}"
    "{%- else %}{{ raise_exception('none') }}{% endfor %}")


def test_fuzz_the_chat_template_engine_for_a_bounded_time(tmp_path):
    subprocess.run(["cmake", "-S", os.path.join(ROOT, "fuzz"), "-B", BUILD, "-G", "Ninja",
                    "-DCMAKE_CXX_COMPILER=clang++"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", BUILD, "--target", "chat_template_fuzz"], check=True, stdout=subprocess.DEVNULL)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    with open(QWEN3_CONFIG, encoding="utf-8") as f:
        qwen3 = json.load(f)["chat_template"]
    # Mode 0: the template alone; mode 1: template, NUL, JSON variables.
    (corpus / "qwen3").write_bytes(b"\x00" + qwen3.encode())
    (corpus / "features").write_bytes(b"\x00" + FEATURES.encode())
    variables = json.dumps({"messages": CONVERSATIONS["tool_calls_string_arguments"], "tools": TOOLS})
    (corpus / "qwen3_variables").write_bytes(b"\x01" + qwen3.encode() + b"\x00" + variables.encode())
    result = subprocess.run(
        [os.path.join(BUILD, "chat_template_fuzz"), f"-max_total_time={SECONDS}", "-timeout=10",
         "-rss_limit_mb=4096", "-max_len=8192", f"-artifact_prefix={tmp_path}/", str(corpus)],
        capture_output=True, text=True, timeout=SECONDS + 120)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "Done" in result.stderr
