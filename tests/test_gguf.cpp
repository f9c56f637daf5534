#include "test_gguf.h"

#include <cstring>

#include "test_checkpoint.h"

namespace ditto::testing {

uint32_t ggml_type(DType dtype) {
  switch (dtype) {
    case DType::Q8_0: return kQ8_0;
    case DType::Q4_0: return kQ4_0;
    case DType::Q4_1: return kQ4_1;
    default: return kF32;
  }
}

std::vector<unsigned char> random_blocks(DType dtype, size_t values, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<unsigned char> bytes(dtype_bytes(dtype, values));
  for (auto& b : bytes) b = uint8_t(rng.next());
  for (size_t at = 0; at < bytes.size(); at += dtype_block_bytes(dtype)) {
    const uint16_t d = f32_to_f16(rng.uniform(1.0f / 64));
    std::memcpy(&bytes[at], &d, 2);
    if (dtype == DType::Q4_1) {
      const uint16_t m = f32_to_f16(rng.uniform(1.0f / 64));
      std::memcpy(&bytes[at + 2], &m, 2);
    }
  }
  return bytes;
}

void GgufWriter::strings(const std::string& key, const std::vector<std::string>& v) {
  entry(key, 9), put(uint32_t(8)), put(uint64_t(v.size()));
  for (const auto& s : v) put_string(s);
}

void GgufWriter::put_string(const std::string& s) {
  put(uint64_t(s.size()));
  raw_.insert(raw_.end(), s.begin(), s.end());
}

void GgufWriter::entry(const std::string& key, uint32_t type) {
  put_string(key), put(type);
  ++kv_count_;
}

std::vector<unsigned char> GgufWriter::bytes() const {
  GgufWriter out;
  out.put(uint32_t(0x46554747)), out.put(uint32_t(3)), out.put(uint64_t(tensors_.size())), out.put(kv_count_);
  out.raw_.insert(out.raw_.end(), raw_.begin(), raw_.end());
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    out.put_string(t.name), out.put(uint32_t(t.ne.size()));
    for (uint64_t d : t.ne) out.put(d);
    out.put(t.type), out.put(offset);
    offset += (t.data.size() + 31) / 32 * 32;
  }
  out.raw_.resize((out.raw_.size() + 31) / 32 * 32);
  for (const auto& t : tensors_) {
    out.raw_.insert(out.raw_.end(), t.data.begin(), t.data.end());
    out.raw_.resize((out.raw_.size() + 31) / 32 * 32);
  }
  return out.raw_;
}

GgufWriter tiny_llama(DType dtype, float rms_norm_eps) {
  GgufWriter g;
  g.str("general.architecture", "llama");
  g.u32("llama.block_count", 2);
  g.u32("llama.context_length", 256);
  g.u32("llama.embedding_length", 64);
  g.u32("llama.feed_forward_length", 96);
  g.u32("llama.attention.head_count", 4);
  g.u32("llama.attention.head_count_kv", 2);
  g.f32("llama.attention.layer_norm_rms_epsilon", rms_norm_eps);
  g.f32("llama.rope.freq_base", 10000.0f);
  g.u32("tokenizer.ggml.eos_token_id", 2);
  uint64_t seed = 1;
  const auto matrix = [&](const std::string& name, DType type, uint64_t cols, uint64_t rows) {
    g.tensor(name, ggml_type(type), {cols, rows}, random_blocks(type, cols * rows, seed++));
  };
  const auto ones = [&](const std::string& name, uint64_t n) {
    std::vector<float> values(n, 1.0f);
    std::vector<unsigned char> bytes(n * 4);
    std::memcpy(bytes.data(), values.data(), bytes.size());
    g.tensor(name, kF32, {n}, bytes);
  };
  matrix("token_embd.weight", DType::Q8_0, 64, 80);
  for (int l = 0; l < 2; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    ones(b + "attn_norm.weight", 64);
    matrix(b + "attn_q.weight", dtype, 64, 64);
    matrix(b + "attn_k.weight", dtype, 64, 32);
    matrix(b + "attn_v.weight", dtype, 64, 32);
    matrix(b + "attn_output.weight", dtype, 64, 64);
    ones(b + "ffn_norm.weight", 64);
    matrix(b + "ffn_gate.weight", dtype, 64, 96);
    matrix(b + "ffn_up.weight", dtype, 64, 96);
    matrix(b + "ffn_down.weight", dtype, 96, 64);
  }
  ones("output_norm.weight", 64);
  matrix("output.weight", dtype, 64, 80);
  return g;
}

std::string write_gguf(const std::string& name, const std::vector<unsigned char>& bytes) {
  const std::string path = temp_dir("gguf-" + name) + "/model.gguf";
  write_file(path, bytes);
  return path;
}

}  // namespace ditto::testing
