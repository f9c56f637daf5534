"""ditto and llama.cpp side by side on the same Qwen3-0.6B-shaped weights, in one run.

Makes the checkpoint (random weights, BF16 and F16; bench/make_qwen3_0_6b.py), writes the same
weights as GGUF for llama.cpp (llama-cpp-python, built natively from PyPI), then measures on
the same machine and threads, for each weight type and context depth, ditto and then llama.cpp:
  pp512 whole-prompt prefill, pp512 in 16-token chunks (at depth 0), tg128 decode,
each after a context of `depth` positions computed first (as llama-bench's -d), with the same
KV cache precision in both (--cache-type, f16 by default: llama.cpp's own). llama.cpp runs with
flash attention off and on; the better of the two is the one compared. Prints each engine's
median tokens/s, ditto's GFLOP/s (prefill) and GB/s of weights and KV read (decode), and the
ratio ditto / llama.cpp. Repetitions are timed separately and the medians reported: the machine
is shared and noisy.

Deep contexts take long (llama.cpp computes each context once per flash-attention setting, and
its decode at depth 16,384 runs at a few tokens/s), so depths past 4,096 run --deep-reps
repetitions (1 by default) instead of --reps, and llama.cpp's decode warms up on 8 tokens rather
than a whole tg128. With --llama-cpp-figures FILE, llama.cpp's figures are kept in FILE (JSON,
one entry per GGUF file, depth, cache type, threads, repetitions and flash setting) and read from
it when there, so that a long run can be split over several sittings (e.g. `--engines llama.cpp`
at one depth, later ditto against the stored figures); the table marks figures read from FILE.

With --gguf FILE, both engines run that one file instead (ditto reads GGUF too), e.g. the
default SmolLM2-135M-Instruct Q4_1 (`--gguf smollm2`), Gemma 3 270M Q4_K_M (`--gguf gemma3`) or the
Qwen3-0.6B shapes quantised to Q4_K_M by llama.cpp's own quantiser (`--gguf qwen3-q4_k_m`), ditto in
each of --numerics (exact,int8: docs/numerics-quant.md). --target AVX2 runs ditto's kernels on that
SIMD target (DITTO_SIMD_TARGET), e.g. to measure the AVX2 kernels on an AVX-512 machine; llama.cpp
runs as built (the header says with which vector extensions), or, with --llama-cpp-avx2, as
built for AVX2 alone (no AVX-512, no VNNI; compiled once into WORK/llama-cpp-avx2, a few
minutes): `--target AVX2 --llama-cpp-avx2` is both engines as an AVX2-only machine runs them.

usage: python bench/vs_llama_cpp.py [--work DIR] [--threads 2] [--reps 3] [--deep-reps 1] [--dtypes bf16,f16]
                                    [--depth 0,4096,16384] [--cache-type f16] [--target AVX2] [--ditto BINARY]
                                    [--llama-cpp-figures FILE] [--engines ditto,llama.cpp] [--llama-cpp-avx2]
       python bench/vs_llama_cpp.py --gguf FILE|smollm2|gemma3|qwen3-q4_k_m [--numerics exact,int8] [--target AVX2]
                                    [--llama-cpp-avx2] [--threads 2] [--reps 3] [--depth 0]
"""
import argparse
import importlib.metadata
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [HERE, os.path.join(ROOT, "python")]
from ditto_testing import references  # noqa: E402

references.ensure()
import numpy as np  # noqa: E402
import make_qwen3_0_6b as shapes  # noqa: E402  (bench/make_qwen3_0_6b.py)

TOKENIZER = os.path.join(ROOT, "..", "shared", "data", "qwen3-tokenizer", "tokenizer.json")


def write_gguf(checkpoint_dir, gguf_path, dtype):
    """The checkpoint's tensors under llama.cpp's names, with the real Qwen3 vocabulary."""
    import gguf
    import torch
    from safetensors.torch import load_file

    config = json.load(open(os.path.join(checkpoint_dir, "config.json")))
    tensors = load_file(os.path.join(checkpoint_dir, "model.safetensors"))
    writer = gguf.GGUFWriter(gguf_path, "qwen3")
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(config["num_attention_heads"])
    writer.add_head_count_kv(config["num_key_value_heads"])
    writer.add_key_length(config["head_dim"])
    writer.add_value_length(config["head_dim"])
    writer.add_rope_freq_base(config["rope_theta"])
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_BF16 if dtype == "bf16" else gguf.LlamaFileType.MOSTLY_F16)

    tok = json.load(open(TOKENIZER, encoding="utf-8"))
    vocab = {**tok["model"]["vocab"], **{t["content"]: t["id"] for t in tok["added_tokens"]}}
    special = {t["id"] for t in tok["added_tokens"] if t["special"]}
    tokens = [f"[PAD{i}]" for i in range(config["vocab_size"])]
    types = [gguf.TokenType.UNUSED] * config["vocab_size"]
    for text, i in vocab.items():
        tokens[i] = text
        types[i] = gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_eos_token_id(config["eos_token_id"])

    def add(name, tensor):
        if tensor.dim() == 1:
            writer.add_tensor(name, tensor.float().numpy())
        elif tensor.dtype == torch.bfloat16:
            writer.add_tensor(name, tensor.view(torch.int16).numpy().view(np.uint16),
                              raw_dtype=gguf.GGMLQuantizationType.BF16)
        else:
            writer.add_tensor(name, tensor.numpy())

    add("token_embd.weight", tensors["model.embed_tokens.weight"])
    add("output_norm.weight", tensors["model.norm.weight"])
    names = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
             "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
             "self_attn.k_norm": "attn_k_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down"}
    for i in range(config["num_hidden_layers"]):
        for hf, ours in names.items():
            add(f"blk.{i}.{ours}.weight", tensors[f"model.layers.{i}.{hf}.weight"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


# llama.cpp's CMake options for a build that uses AVX2 and nothing wider (GGML_NATIVE would take
# whatever this CPU has).
LLAMA_CPP_AVX2 = ("-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF "
                  "-DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AVX_VNNI=OFF")


def qwen3_gguf(work, dtype):
    """The Qwen3-0.6B-shaped checkpoint of `dtype` in WORK and its GGUF file, made if missing."""
    checkpoint = os.path.join(work, f"qwen3-0.6b-{dtype}")
    if not os.path.exists(os.path.join(checkpoint, "config.json")):
        subprocess.run([sys.executable, os.path.join(HERE, "make_qwen3_0_6b.py"), checkpoint, "--dtype",
                        {"bf16": "bfloat16", "f16": "float16"}[dtype]], check=True)
    gguf_path = checkpoint + ".gguf"
    if not os.path.exists(gguf_path):
        write_gguf(checkpoint, gguf_path, dtype)
    return checkpoint, gguf_path


def qwen3_q4_k_m(work):
    """The F16 Qwen3-0.6B-shaped GGUF quantised to Q4_K_M by llama.cpp's own quantiser (Q4_K and
    Q6_K, as Llama-family Q4_K_M files are), made if missing."""
    import ctypes

    import llama_cpp

    path = os.path.join(work, "qwen3-0.6b-q4_k_m.gguf")
    if not os.path.exists(path):
        source = qwen3_gguf(work, "f16")[1]
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M
        if llama_cpp.llama_model_quantize(source.encode(), (path + ".part").encode(), ctypes.byref(params)) != 0:
            sys.exit(f"llama.cpp could not quantise {source}")
        os.replace(path + ".part", path)
    return path


def use_llama_cpp_avx2(work):
    """Puts llama.cpp built for AVX2 alone first on the import path, compiling the version .venv
    holds into WORK/llama-cpp-avx2 the first time."""
    target = os.path.join(work, "llama-cpp-avx2")
    if not os.path.exists(os.path.join(target, "llama_cpp")):
        version = importlib.metadata.version("llama-cpp-python")
        print(f"building llama-cpp-python {version} for AVX2 alone into {target} (a few minutes)", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                        "--no-cache-dir", "--target", target, f"llama-cpp-python=={version}"],
                       env=dict(os.environ, CMAKE_ARGS=LLAMA_CPP_AVX2), check=True)
    sys.path.insert(0, target)


def llama_cpp_extensions():
    """The widest vector extensions the llama.cpp in use was built with."""
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode()
    return next((name for flag, name in (("AVX512_VNNI = 1", "AVX-512 VNNI"), ("AVX512 = 1", "AVX-512"),
                                          ("AVX2 = 1", "AVX2")) if flag in info), "neither AVX2 nor AVX-512")


TESTS = ("pp512 chunk 512", "pp512 chunk 16", "tg128")
GGML_CACHE_TYPE = {"f32": 0, "f16": 1, "bf16": 30}  # ggml_type of llama.cpp's type_k / type_v


def ditto_figures(binary, model, threads, reps, depth, cache, numerics=None, target=None):
    """Median t/s of ditto for pp512 (whole; at depth 0 also in chunks of 16) and tg128 after a
    context of `depth` positions, one process; with ditto's GFLOP/s and GB/s."""
    chunks = "512,16" if depth == 0 else "512"
    command = [binary, "bench", "-m", model, "-p", "512", "-n", "128", "-r", str(reps), "-t", str(threads),
               "--chunk", chunks, "-d", str(depth), "--cache-type", cache, "-o", "json"]
    if numerics:
        command += ["--numerics", numerics]
    env = dict(os.environ, DITTO_SIMD_TARGET=target) if target else None
    out = subprocess.run(command, check=True, capture_output=True, text=True, env=env).stdout
    figure = {}
    for row in json.loads(out):
        key = "tg128" if row["test"] == "tg128" else f"pp512 chunk {row['chunk']}"
        figure[key] = statistics.median(row["samples_ts"])
        gflops = row["gflops"] * figure[key] / row["avg_ts"]
        figure[key + " rate"] = (f"{gflops:.0f} GFLOP/s" if key != "tg128" else
                                 f"{(row['weight_gbps'] + row['kv_gbps']) * figure[key] / row['avg_ts']:.1f} GB/s")
    return figure


def llama_cpp_figures(gguf_path, threads, reps, depth, cache, flash):
    """The same tests through llama.cpp, flash attention on or off: the context evaluated once,
    then each repetition evaluates its tokens after it (eval() first drops what lies beyond
    n_tokens), in batches of 512 or 16."""
    from llama_cpp import Llama

    figures = {}
    rng = np.random.default_rng(1)
    for batch in ((512, 16) if depth == 0 else (512,)):
        llm = Llama(gguf_path, n_ctx=depth + 512 + 16, n_batch=batch, n_ubatch=batch, n_threads=threads,
                    n_threads_batch=threads, flash_attn=flash, type_k=GGML_CACHE_TYPE[cache],
                    type_v=GGML_CACHE_TYPE[cache], verbose=False)
        random_tokens = lambda n: [int(t) for t in rng.integers(0, llm.n_vocab(), n)]  # noqa: E731
        llm.eval(random_tokens(depth))
        samples = []
        for r in range(reps + 1):  # r = 0 warms up
            prompt = random_tokens(512)
            llm.n_tokens = depth
            start = time.perf_counter()
            llm.eval(prompt)
            if r:
                samples.append(512 / (time.perf_counter() - start))
        figures[f"pp512 chunk {batch}"] = statistics.median(samples)
        if batch == 512:
            samples = []
            for r in range(reps + 1):  # r = 0 warms up, on a few tokens: each token is the same work
                llm.n_tokens = depth
                tokens = prompt[:128 if r else 8]
                start = time.perf_counter()
                for token in tokens:
                    llm.eval([token])
                if r:
                    samples.append(len(tokens) / (time.perf_counter() - start))
            figures["tg128"] = statistics.median(samples)
        del llm
    return figures


DEEP = 4096  # depths beyond this run --deep-reps repetitions


class StoredFigures:
    """llama.cpp's figures, measured once a run (the same for every ditto numerics) and kept in a
    JSON file if one is given: read from it when there."""

    def __init__(self, path):
        self.path = path
        self.figures = {}
        if path and os.path.exists(path):
            with open(path) as f:
                self.figures = json.load(f)
        self.from_file = set(self.figures)

    def get(self, key, measure):
        """(figures, whether they were read from the file)."""
        if key not in self.figures:
            self.figures[key] = measure()
            if self.path:
                with open(self.path, "w") as f:
                    json.dump(self.figures, f, indent=1)
        return self.figures[key], key in self.from_file


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", default="/tmp/ditto-bench", help="where the checkpoints and GGUF files go")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--deep-reps", type=int, default=1, help=f"repetitions at depths beyond {DEEP}")
    parser.add_argument("--dtypes", default="bf16,f16")
    parser.add_argument("--depth", default="0", help="context depths, comma-separated, e.g. 0,4096,16384")
    parser.add_argument("--cache-type", default="f16", choices=sorted(GGML_CACHE_TYPE),
                        help="KV cache precision of both engines")
    parser.add_argument("--gguf", help="one GGUF file for both engines ('smollm2': the default model; 'gemma3'; "
                                       "'qwen3-q4_k_m': the Qwen3-0.6B shapes quantised by llama.cpp)")
    parser.add_argument("--numerics", default="exact,int8", help="with --gguf: ditto's numerics, comma-separated")
    parser.add_argument("--target", help="ditto's SIMD target (DITTO_SIMD_TARGET), e.g. AVX2")
    parser.add_argument("--ditto", default=os.path.join(ROOT, "build", "ditto"), help="the ditto binary to run")
    parser.add_argument("--llama-cpp-figures", help="JSON file keeping llama.cpp's figures between runs")
    parser.add_argument("--engines", default="ditto,llama.cpp", choices=("ditto,llama.cpp", "llama.cpp"),
                        help="llama.cpp alone: measure and store its figures (with --llama-cpp-figures)")
    parser.add_argument("--llama-cpp-avx2", action="store_true",
                        help="run llama.cpp built for AVX2 alone (compiled into WORK/llama-cpp-avx2 the first time)")
    args = parser.parse_args()
    if args.engines == "llama.cpp" and not args.llama_cpp_figures:
        sys.exit("--engines llama.cpp stores its figures: give --llama-cpp-figures FILE")
    depths = [int(d) for d in args.depth.split(",")]

    if args.llama_cpp_avx2:
        use_llama_cpp_avx2(args.work)
    extensions = llama_cpp_extensions()
    print(f"{args.cache_type} KV cache, {args.threads} threads; llama.cpp (built for {extensions}) with flash "
          "attention off / on, the better one compared", flush=True)
    print("| weights | depth | test | ditto t/s | ditto rate | llama.cpp t/s, FA off | FA on | ditto / llama.cpp |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |", flush=True)
    runs = []
    if args.gguf:
        path = args.gguf
        if path == "qwen3-q4_k_m":
            path = qwen3_q4_k_m(args.work)
        elif path in ("smollm2", "gemma3"):
            from ditto_testing.models import gemma3_gguf, smollm2_gguf
            path = {"smollm2": smollm2_gguf, "gemma3": gemma3_gguf}[path]()
            if path is None:
                sys.exit(f"{args.gguf} is not installed (scripts/setup.sh installs it)")
            path = str(path)
        for numerics in args.numerics.split(","):
            runs.append((f"{os.path.basename(path)}, ditto {numerics}", path, path, numerics))
    else:
        for dtype in args.dtypes.split(","):
            runs.append((dtype, *qwen3_gguf(args.work, dtype), None))
    stored = StoredFigures(args.llama_cpp_figures)
    for weights, ours_path, theirs_path, numerics in runs:
        for depth in depths:
            reps = args.reps if depth <= DEEP else args.deep_reps
            theirs = []
            for flash in (False, True):
                key = f"{os.path.basename(theirs_path)} depth {depth} {args.cache_type} t{args.threads} r{reps} " + \
                      f"flash {'on' if flash else 'off'}" + (" avx2" if args.llama_cpp_avx2 else "")
                theirs.append(stored.get(key, lambda: llama_cpp_figures(theirs_path, args.threads, reps, depth,
                                                                        args.cache_type, flash)))
            if args.engines == "llama.cpp":
                print(f"llama.cpp {weights} depth {depth}: flash off {theirs[0][0]}, on {theirs[1][0]}", flush=True)
                continue
            ours = ditto_figures(args.ditto, ours_path, args.threads, reps, depth, args.cache_type, numerics,
                                 args.target)
            report(weights + (f" on {args.target}" if args.target else ""), depth, ours, *theirs)


def report(weights, depth, ours, off_stored, on_stored):
    (off, off_read), (on, on_read) = off_stored, on_stored
    mark = lambda read: " (stored)" if read else ""  # noqa: E731
    for test in TESTS:
        if test not in ours:
            continue
        best = max(off[test], on[test])
        print(f"| {weights} | {depth} | {test} | {ours[test]:.1f} | {ours[test + ' rate']} | {off[test]:.1f}"
              f"{mark(off_read)} | {on[test]:.1f}{mark(on_read)} | {ours[test] / best:.2f} |", flush=True)
    if depth == 0:
        print(f"| {weights} | 0 | chunk 16 / chunk 512 | {ours['pp512 chunk 16'] / ours['pp512 chunk 512']:.2f} | | "
              f"{off['pp512 chunk 16'] / off['pp512 chunk 512']:.2f} | "
              f"{on['pp512 chunk 16'] / on['pp512 chunk 512']:.2f} | |", flush=True)


if __name__ == "__main__":
    main()
