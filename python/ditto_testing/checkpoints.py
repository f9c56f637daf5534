"""Small random checkpoints of every family ditto runs, made and run by transformers itself.

Also a command: `python -m ditto_testing.checkpoints OUT_DIR [--arch qwen3] ...` writes one.
"""
import argparse
import copy

import torch
import transformers

ARCHITECTURES = {
    "qwen3": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM),
    "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
    "gemma3_text": (transformers.Gemma3TextConfig, transformers.Gemma3ForCausalLM),
    "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
    "mistral": (transformers.MistralConfig, transformers.MistralForCausalLM),
    "phi3": (transformers.Phi3Config, transformers.Phi3ForCausalLM),
    "mixtral": (transformers.MixtralConfig, transformers.MixtralForCausalLM),
    "qwen3_moe": (transformers.Qwen3MoeConfig, transformers.Qwen3MoeForCausalLM),
}


def make_checkpoint(out_dir, arch="qwen3", *, vocab_size=512, hidden_size=64, intermediate_size=128,
                    layers=2, heads=4, kv_heads=2, head_dim=16, tied=False, dtype="float32",
                    rope_theta=10000.0, seed=0, max_positions=1024, max_shard_size=None, family=None):
    """Saves a randomly initialised model (config.json + model.safetensors) and returns it in fp32.

    `family` holds the family's own config fields (sliding_window, num_local_experts, ...); a
    "rope_parameters" entry there replaces the plain RoPE of rope_theta.

    With max_shard_size (e.g. "200KB") transformers writes model-0000x-of-0000y.safetensors shards
    and model.safetensors.index.json instead of one file.

    For bf16/f16 checkpoints the returned model holds the same rounded weights in fp32, so it is
    the fp32 reference on exactly the values ditto loads.
    """
    config_class, model_class = ARCHITECTURES[arch]
    options = dict(rope_theta=rope_theta)
    options.update(family or {})
    config = config_class(
        vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=intermediate_size,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
        head_dim=head_dim, tie_word_embeddings=tied, max_position_embeddings=max_positions,
        rms_norm_eps=1e-6, bos_token_id=None, eos_token_id=None, pad_token_id=None,
        attn_implementation="eager", **options,
    )
    torch.manual_seed(seed)
    model = model_class(config).eval()
    with torch.no_grad():
        # Default init gives near-uniform logits; larger weights make greedy choices decisive
        # and norms non-trivial. Norm weights act in [0.5, 1.5), Gemma's as 1 + w; biases (Qwen2's
        # q, k, v) are centred on zero.
        norm_low = -0.5 if arch == "gemma3_text" else 0.5
        for name, parameter in model.named_parameters():
            if name.endswith(".bias"):
                parameter.uniform_(-0.5, 0.5)
            elif parameter.dim() == 1:
                parameter.uniform_(norm_low, norm_low + 1.0)
            else:
                parameter.normal_(0.0, 1.0 / hidden_size ** 0.5 * 2.0)
    save_options = {} if max_shard_size is None else {"max_shard_size": max_shard_size}
    model.to(getattr(torch, dtype)).save_pretrained(out_dir, safe_serialization=True, **save_options)
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


def reference_greedy_with_margins(model, token_ids, count):
    """Like reference_greedy, and also the margin (top logit minus runner-up) of every choice.

    A small margin marks a near-tie, where a tolerance-sized difference may pick the other token.
    """
    ids = list(token_ids)
    margins = []
    with torch.no_grad():
        for _ in range(count):
            top2 = model(torch.tensor([ids])).logits[0, -1].topk(2)
            ids.append(int(top2.indices[0]))
            margins.append(float(top2.values[0] - top2.values[1]))
    return ids[len(token_ids):], margins


_CACHE_DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


def _register_rounded_cache_attention(cache_dtype):
    """An attention implementation for transformers that rounds K and V to cache_dtype first."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask
    from transformers.models.llama.modeling_llama import eager_attention_forward

    name = f"ditto_rounded_kv_{cache_dtype}"
    torch_dtype = _CACHE_DTYPES[cache_dtype]

    def attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
        # key arrives after the q/k norm and RoPE, value after its projection: exactly the
        # values a KV cache stores. Round them (to nearest even, as torch casts) and go on in fp32.
        return eager_attention_forward(module, query, key.to(torch_dtype).float(), value.to(torch_dtype).float(),
                                       attention_mask, scaling, dropout, **kwargs)

    AttentionInterface.register(name, attention)
    AttentionMaskInterface.register(name, eager_mask)  # the same causal mask as "eager"
    return name


def with_rounded_kv_cache(model, cache_dtype):
    """A copy of an fp32 reference model whose attention sees K and V rounded to cache_dtype
    ("f16" or "bf16"), as an engine with a 16-bit KV cache stores them; all else stays fp32."""
    rounded = copy.deepcopy(model)
    rounded.set_attn_implementation(_register_rounded_cache_attention(cache_dtype))
    return rounded.eval()


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
