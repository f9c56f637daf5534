"""Small random Qwen3 / Llama checkpoints, made and run by transformers itself.

Also a command: `python -m ditto_testing.checkpoints OUT_DIR [--arch qwen3] ...` writes one.
"""
import argparse

import torch
import transformers

ARCHITECTURES = {
    "qwen3": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM),
    "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
}


def make_checkpoint(out_dir, arch="qwen3", *, vocab_size=512, hidden_size=64, intermediate_size=128,
                    layers=2, heads=4, kv_heads=2, head_dim=16, tied=False, dtype="float32",
                    rope_theta=10000.0, seed=0, max_positions=1024):
    """Saves a randomly initialised model (config.json + model.safetensors) and returns it in fp32.

    For bf16/f16 checkpoints the returned model holds the same rounded weights in fp32, so it is
    the fp32 reference on exactly the values ditto loads.
    """
    config_class, model_class = ARCHITECTURES[arch]
    config = config_class(
        vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=intermediate_size,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
        head_dim=head_dim, tie_word_embeddings=tied, max_position_embeddings=max_positions,
        rope_theta=rope_theta, rms_norm_eps=1e-6, bos_token_id=None, eos_token_id=None,
        attn_implementation="eager",
    )
    torch.manual_seed(seed)
    model = model_class(config).eval()
    with torch.no_grad():
        # Default init gives near-uniform logits; larger weights make greedy choices decisive
        # and norms non-trivial.
        for name, parameter in model.named_parameters():
            if parameter.dim() == 1:
                parameter.uniform_(0.5, 1.5)
            else:
                parameter.normal_(0.0, 1.0 / hidden_size ** 0.5 * 2.0)
    model.to(getattr(torch, dtype)).save_pretrained(out_dir, safe_serialization=True)
    # Reload rather than cast back: a cast would also round buffers such as RoPE's inv_freq.
    return model_class.from_pretrained(out_dir, dtype=torch.float32, attn_implementation="eager").eval()


def reference_logits(model, token_ids):
    """All-position fp32 logits of transformers for one prompt, as a numpy array."""
    with torch.no_grad():
        return model(torch.tensor([token_ids])).logits[0].float().numpy()


def reference_greedy(model, token_ids, count):
    """Greedy continuation by transformers (full recompute each step, no cache tricks)."""
    ids = list(token_ids)
    with torch.no_grad():
        for _ in range(count):
            ids.append(int(model(torch.tensor([ids])).logits[0, -1].argmax()))
    return ids[len(token_ids):]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out_dir")
    parser.add_argument("--arch", default="qwen3", choices=sorted(ARCHITECTURES))
    parser.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--vocab", type=int, default=2048)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--intermediate", type=int, default=768)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--kv-heads", type=int, default=4)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    make_checkpoint(args.out_dir, args.arch, vocab_size=args.vocab, hidden_size=args.hidden,
                    intermediate_size=args.intermediate, layers=args.layers, heads=args.heads,
                    kv_heads=args.kv_heads, head_dim=args.head_dim, dtype=args.dtype, seed=args.seed)
    print(f"wrote a random {args.arch} checkpoint ({args.dtype}) to {args.out_dir}")


if __name__ == "__main__":
    main()
