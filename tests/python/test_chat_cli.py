"""Chat in the CLI: `ditto template` renders conversations as transformers does, `generate -p` uses
the model's own template, `--stop` strings are found across tokens and never printed, and
`ditto chat` reuses the KV cache of earlier turns with the bits of a cold run."""
import json
import os
import subprocess

import pytest
from transformers import AutoTokenizer

import ditto
from ditto_testing.checkpoints import make_checkpoint
from ditto_testing.models import smollm2_gguf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DITTO = os.path.join(ROOT, "build", "ditto")
QWEN3_CONFIG = os.path.join(ROOT, "..", "shared", "data", "qwen3-tokenizer", "tokenizer_config.json")

CONVERSATION = [
    {"role": "system", "content": "You answer in one sentence."},
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "Paris is the capital of France."},
    {"role": "user", "content": "And of Italy? Ünïcödé too."},
]


def run(*args, stdin=None, check=True):
    result = subprocess.run([DITTO, *args], input=stdin, capture_output=True, text=True, timeout=600)
    if check:
        assert result.returncode == 0, result.stderr
    return result


@pytest.fixture(scope="module")
def smollm2():
    path = smollm2_gguf()
    return str(path), AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)


def write_json(tmp_path, name, value):
    path = tmp_path / name
    path.write_text(json.dumps(value))
    return str(path)


@pytest.mark.parametrize("generation_prompt", [True, False])
def test_template_renders_as_transformers(smollm2, tmp_path, generation_prompt):
    path, reference = smollm2
    messages = write_json(tmp_path, "messages.json", CONVERSATION)
    args = ["template", "-m", path, "--messages", messages] + ([] if generation_prompt else ["--no-generation-prompt"])
    expected = reference.apply_chat_template(CONVERSATION, add_generation_prompt=generation_prompt, tokenize=False)
    assert run(*args).stdout == expected


def test_template_given_with_tools_and_variables(smollm2, tmp_path):
    """The real Qwen3 template given with --chat-template, with tools and enable_thinking=false."""
    path, _ = smollm2
    chat_template = json.load(open(QWEN3_CONFIG))["chat_template"]
    template_file = tmp_path / "qwen3.jinja"
    template_file.write_text(chat_template)
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                               "parameters": {"type": "object",
                                                              "properties": {"city": {"type": "string"}}}}}]
    result = run("template", "-m", path, "--messages", write_json(tmp_path, "m.json", CONVERSATION), "--tools",
                 write_json(tmp_path, "t.json", tools), "--chat-template", str(template_file), "--var",
                 "enable_thinking=false")
    reference = AutoTokenizer.from_pretrained(os.path.dirname(QWEN3_CONFIG))
    expected = reference.apply_chat_template(CONVERSATION, tools=tools, add_generation_prompt=True, tokenize=False,
                                             enable_thinking=False)
    assert result.stdout == expected
    assert "get_weather" in expected and "<think>\n\n</think>" in expected


def test_generate_prompt_is_one_user_message_in_the_models_format(smollm2):
    """`generate -p TEXT` encodes exactly what the template makes of one user message."""
    path, reference = smollm2
    text = "Name a colour."
    rendered = reference.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                             tokenize=False)
    expected = ditto.Tokenizer.from_json(ditto.gguf_tokenizer(path)[0]).encode(rendered)
    chat = run("generate", "-m", path, "-p", text, "-n", "6", "--json").stdout
    raw = run("generate", "-m", path, "--tokens", " ".join(map(str, expected)), "-n", "6", "--json").stdout
    assert json.loads(chat)["ids"] == json.loads(raw)["ids"]


def test_a_model_without_a_template_is_refused_for_chat_only(tmp_path):
    model_dir = tmp_path / "bare"
    make_checkpoint(str(model_dir), "qwen3", vocab_size=300, hidden_size=32, intermediate_size=64, layers=1,
                    heads=2, kv_heads=1, head_dim=16)
    messages = write_json(tmp_path, "m.json", CONVERSATION)
    refused = run("template", "-m", str(model_dir), "--messages", messages, check=False)
    assert refused.returncode == 1 and "bare has no chat template: give one with --chat-template" in refused.stderr
    assert run("generate", "-m", str(model_dir), "--tokens", "1 2 3", "-n", "2").returncode == 0


@pytest.mark.parametrize("args, message", [
    (["--messages", "/nonexistent.json"], "cannot read '/nonexistent.json'"),
    (["--var", "=3"], "--var '=3' is not NAME=VALUE"),
])
def test_template_bad_input(smollm2, tmp_path, args, message):
    if "--messages" not in args:
        args = ["--messages", write_json(tmp_path, "m.json", CONVERSATION), *args]
    result = run("template", "-m", smollm2[0], *args, check=False)
    assert result.returncode == 1 and message in result.stderr


def test_bad_template_and_messages_are_refused(smollm2, tmp_path):
    bad = tmp_path / "bad.jinja"
    bad.write_text("{% for m in messages %}{{ m.content }}")
    messages = write_json(tmp_path, "m.json", CONVERSATION)
    result = run("template", "-m", smollm2[0], "--messages", messages, "--chat-template", str(bad), check=False)
    assert result.returncode == 1 and "chat template line 1" in result.stderr
    not_list = write_json(tmp_path, "o.json", {"role": "user"})
    result = run("template", "-m", smollm2[0], "--messages", not_list, check=False)
    assert result.returncode == 1 and "must hold a JSON array of messages" in result.stderr


def test_stop_strings_across_tokens_are_never_printed(smollm2):
    """The greedy answer, cut at a stop string that spans a token boundary: the text before it is
    printed, the stop string and everything after it never are."""
    path, reference = smollm2
    prompt = "Write the numbers from 1 to 30, separated by spaces."
    full = run("generate", "-m", path, "-p", prompt, "-n", "40").stdout
    ids = json.loads(run("generate", "-m", path, "-p", prompt, "-n", "40", "--json").stdout)["ids"]
    pieces = [reference.decode(ids[:i + 1]) for i in range(len(ids))]
    # A stop string made of the end of one token's text and the start of the next one's.
    boundary = next(i for i in range(5, len(ids) - 1)
                    if len(pieces[i]) - len(pieces[i - 1]) >= 1 and len(pieces[i + 1]) - len(pieces[i]) >= 1)
    stop = pieces[boundary][-1] + pieces[boundary + 1][len(pieces[boundary])]
    expected = full[:full.index(stop)]
    stopped = run("generate", "-m", path, "-p", prompt, "-n", "40", "--stop", stop, "--stop", "never there").stdout
    assert stopped == expected + "\n"
    assert stop not in stopped
    json_ids = json.loads(run("generate", "-m", path, "-p", prompt, "-n", "40", "--stop", stop, "--json").stdout)["ids"]
    assert json_ids == ids[:len(json_ids)] and len(json_ids) < len(ids)  # ended at the token that completed it


def test_chat_reuses_earlier_turns_with_the_bits_of_a_cold_run(smollm2, tmp_path):
    path, reference = smollm2
    turns = ["What is the capital of France?", "Why is it famous?", "/reset", "What is the capital of France?"]
    result = run("chat", "-m", path, "-n", "24", stdin="\n".join(turns) + "\n")
    replies = result.stdout.splitlines()
    stats = [line[line.index("[") + 1:] for line in result.stderr.splitlines() if "prompt tokens" in line]
    assert len(replies) == 3 and len(stats) == 3
    cached = [int(line.split(", ")[1].split()[0]) for line in stats]
    assert cached[1] > 20  # the second turn reused the first one's positions
    assert replies[2] == replies[0]  # after /reset, the same question gets the same answer
    # Turn 2 computed cold, from the conversation as the template renders it.
    conversation = [{"role": "user", "content": turns[0]}, {"role": "assistant", "content": replies[0]},
                    {"role": "user", "content": turns[1]}]
    rendered = reference.apply_chat_template(conversation, add_generation_prompt=True, tokenize=False)
    prompt = ditto.Tokenizer.from_json(ditto.gguf_tokenizer(path)[0]).encode(rendered)
    cold = json.loads(run("generate", "-m", path, "--tokens", " ".join(map(str, prompt)), "-n", "24",
                          "--no-prefix-cache", "--json").stdout)["ids"]
    assert reference.decode(cold, skip_special_tokens=True).strip() == replies[1].strip()
