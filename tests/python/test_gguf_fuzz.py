"""Runs the GGUF header parser's libFuzzer target (fuzz/gguf_fuzz.cpp) for a bounded time:
arbitrary bytes as a GGUF file must give a ditto::Error or a header whose tensors lie inside
the file, never a crash. Built with clang, ASan and UBSan in build-fuzz/ (see fuzz/CMakeLists.txt);
seeded with small valid files written by the `gguf` package."""
import os
import subprocess

import gguf
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, "build-fuzz")
SECONDS = 20


def write_seed(path, quant):
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(1)
    writer.add_context_length(64)
    writer.add_embedding_length(32)
    writer.add_feed_forward_length(64)
    writer.add_head_count(2)
    writer.add_head_count_kv(1)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(10000.0)
    writer.add_token_list(["a", "b", "ab"])
    writer.add_token_types([1, 1, 1])
    rng = np.random.default_rng(0)
    embedding = rng.standard_normal((4, 32), dtype=np.float32)
    writer.add_tensor("token_embd.weight", gguf.quants.quantize(embedding, quant), raw_dtype=quant)
    writer.add_tensor("output_norm.weight", np.ones(32, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_fuzz_the_gguf_parser_for_a_bounded_time(tmp_path):
    subprocess.run(["cmake", "-S", os.path.join(ROOT, "fuzz"), "-B", BUILD, "-G", "Ninja",
                    "-DCMAKE_CXX_COMPILER=clang++"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", BUILD, "--target", "gguf_fuzz"], check=True, stdout=subprocess.DEVNULL)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for quant in (gguf.GGMLQuantizationType.Q4_1, gguf.GGMLQuantizationType.Q8_0, gguf.GGMLQuantizationType.Q4_0,
                  gguf.GGMLQuantizationType.Q5_0, gguf.GGMLQuantizationType.Q5_1):
        write_seed(corpus / f"seed-{quant.name}.gguf", quant)
    result = subprocess.run(
        [os.path.join(BUILD, "gguf_fuzz"), f"-max_total_time={SECONDS}", "-timeout=10", "-rss_limit_mb=4096",
         f"-artifact_prefix={tmp_path}/", str(corpus)],
        capture_output=True, text=True, timeout=SECONDS + 120)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "Done" in result.stderr
