#include "test_gguf.h"

#include <cstring>

#include "test_checkpoint.h"

namespace ditto::testing {

uint32_t ggml_type(DType dtype) {
  switch (dtype) {
    case DType::Q4_0: return kQ4_0;
    case DType::Q4_1: return 3;
    case DType::Q5_0: return 6;
    case DType::Q5_1: return 7;
    case DType::Q8_0: return 8;
    case DType::Q2_K: return 10;
    case DType::Q3_K: return 11;
    case DType::Q4_K: return 12;
    case DType::Q5_K: return 13;
    case DType::Q6_K: return 14;
    default: return kF32;
  }
}

std::vector<unsigned char> random_blocks(DType dtype, size_t values, uint64_t seed) {
  return random_quant_blocks(dtype, values, seed, 0.25f);
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
  const bool k_quant = dtype_block_elements(dtype) == 256;
  const uint64_t hidden = k_quant ? 256 : 64, mlp = k_quant ? 512 : 96, kv = hidden / 2;
  GgufWriter g;
  g.str("general.architecture", "llama");
  g.u32("llama.block_count", 2);
  g.u32("llama.context_length", 256);
  g.u32("llama.embedding_length", uint32_t(hidden));
  g.u32("llama.feed_forward_length", uint32_t(mlp));
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
  matrix("token_embd.weight", DType::Q8_0, hidden, 80);
  for (int l = 0; l < 2; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    ones(b + "attn_norm.weight", hidden);
    matrix(b + "attn_q.weight", dtype, hidden, hidden);
    matrix(b + "attn_k.weight", dtype, hidden, kv);
    matrix(b + "attn_v.weight", dtype, hidden, kv);
    matrix(b + "attn_output.weight", dtype, hidden, hidden);
    ones(b + "ffn_norm.weight", hidden);
    matrix(b + "ffn_gate.weight", dtype, hidden, mlp);
    matrix(b + "ffn_up.weight", dtype, hidden, mlp);
    matrix(b + "ffn_down.weight", dtype, mlp, hidden);
  }
  ones("output_norm.weight", hidden);
  matrix("output.weight", dtype, hidden, 80);
  return g;
}

std::string write_gguf(const std::string& name, const std::vector<unsigned char>& bytes) {
  const std::string path = temp_dir("gguf-" + name) + "/model.gguf";
  write_file(path, bytes);
  return path;
}

}  // namespace ditto::testing
