"""Writes a Qwen3-0.6B-shaped checkpoint with random weights (config.json + model.safetensors).

Shapes of Qwen/Qwen3-0.6B: hidden 1024, 28 layers, 16 query / 8 kv heads of 128, intermediate
3072, vocabulary 151,936, tied embeddings. The weights are random normal, scaled so that
activations stay of order one; nothing is downloaded.
usage: python bench/make_qwen3_0_6b.py OUT_DIR [--dtype bfloat16|float16]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
from ditto_testing import references  # noqa: E402

references.ensure()
import numpy as np  # noqa: E402
import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

SHAPE = dict(hidden=1024, layers=28, heads=16, kv_heads=8, head_dim=128, intermediate=3072, vocab=151936)


def qwen3_tensors(dtype, seed=0):
    s = SHAPE
    rng = np.random.default_rng(seed)

    def matrix(rows, cols):
        return torch.from_numpy(rng.standard_normal((rows, cols), dtype=np.float32) * (1.0 / cols ** 0.5)).to(dtype)

    def norm(n):
        return torch.from_numpy(rng.uniform(0.8, 1.2, n).astype(np.float32)).to(dtype)

    q, kv, h = s["heads"] * s["head_dim"], s["kv_heads"] * s["head_dim"], s["hidden"]
    tensors = {"model.embed_tokens.weight": matrix(s["vocab"], h), "model.norm.weight": norm(h)}
    for i in range(s["layers"]):
        p = f"model.layers.{i}."
        tensors.update({
            p + "input_layernorm.weight": norm(h),
            p + "post_attention_layernorm.weight": norm(h),
            p + "self_attn.q_proj.weight": matrix(q, h),
            p + "self_attn.k_proj.weight": matrix(kv, h),
            p + "self_attn.v_proj.weight": matrix(kv, h),
            p + "self_attn.o_proj.weight": matrix(h, q),
            p + "self_attn.q_norm.weight": norm(s["head_dim"]),
            p + "self_attn.k_norm.weight": norm(s["head_dim"]),
            p + "mlp.gate_proj.weight": matrix(s["intermediate"], h),
            p + "mlp.up_proj.weight": matrix(s["intermediate"], h),
            p + "mlp.down_proj.weight": matrix(h, s["intermediate"]),
        })
    return tensors


def qwen3_config(dtype_name):
    s = SHAPE
    return {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": s["vocab"],
        "hidden_size": s["hidden"], "intermediate_size": s["intermediate"], "num_hidden_layers": s["layers"],
        "num_attention_heads": s["heads"], "num_key_value_heads": s["kv_heads"], "head_dim": s["head_dim"],
        "max_position_embeddings": 40960, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "rope_scaling": None,
        "tie_word_embeddings": True, "hidden_act": "silu", "attention_bias": False, "torch_dtype": dtype_name,
        "bos_token_id": 151643, "eos_token_id": 151645,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    save_file(qwen3_tensors(getattr(torch, args.dtype)), os.path.join(args.out_dir, "model.safetensors"))
    with open(os.path.join(args.out_dir, "config.json"), "w") as f:
        json.dump(qwen3_config(args.dtype), f, indent=2)
    print(f"wrote a Qwen3-0.6B-shaped checkpoint ({args.dtype}) to {args.out_dir}")


if __name__ == "__main__":
    main()
