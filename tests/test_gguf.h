#pragma once
// Test helpers: GGUF files written byte by byte, and a tiny quantised llama model in one.
#include <cstdint>
#include <string>
#include <vector>

#include "ditto/dtype.h"

namespace ditto::testing {

// ggml type ids.
constexpr uint32_t kF32 = 0, kQ4_0 = 2;
uint32_t ggml_type(DType dtype);

// Random blocks of a quantised type with weights of order 0.25 (finite scales).
std::vector<unsigned char> random_blocks(DType dtype, size_t values, uint64_t seed);

// Writes GGUF version 3 files.
class GgufWriter {
 public:
  void u32(const std::string& key, uint32_t v) { entry(key, 4), put(v); }
  void i32(const std::string& key, int32_t v) { entry(key, 5), put(v); }
  void u64(const std::string& key, uint64_t v) { entry(key, 10), put(v); }
  void i64(const std::string& key, int64_t v) { entry(key, 11), put(v); }
  void f32(const std::string& key, float v) { entry(key, 6), put(v); }
  void f64(const std::string& key, double v) { entry(key, 12), put(v); }
  void str(const std::string& key, const std::string& v) { entry(key, 8), put_string(v); }
  void strings(const std::string& key, const std::vector<std::string>& v);
  void i32s(const std::string& key, const std::vector<int32_t>& v) {
    entry(key, 9), put(uint32_t(5)), put(uint64_t(v.size()));
    for (const int32_t x : v) put(x);
  }
  void tensor(const std::string& name, uint32_t type, std::vector<uint64_t> ne, std::vector<unsigned char> data) {
    tensors_.push_back({name, type, std::move(ne), std::move(data)});
  }
  std::vector<unsigned char> bytes() const;

 private:
  struct Tensor {
    std::string name;
    uint32_t type;
    std::vector<uint64_t> ne;
    std::vector<unsigned char> data;
  };
  template <typename T>
  void put(T v) {
    const auto* p = reinterpret_cast<const unsigned char*>(&v);
    raw_.insert(raw_.end(), p, p + sizeof(T));
  }
  void put_string(const std::string& s);
  void entry(const std::string& key, uint32_t type);
  std::vector<unsigned char> raw_;
  std::vector<Tensor> tensors_;
  uint64_t kv_count_ = 0;
};

// A tiny llama model: hidden 64, 4 heads of 16 (2 kv heads), MLP 96, vocab 80, 2 layers,
// context 256, RMSNorm epsilon as given; matrices in `dtype`, the embedding in Q8_0, untied
// output in `dtype`. For the K-quants, whose rows are whole blocks of 256, hidden 256 (4 heads of
// 64) and MLP 512.
GgufWriter tiny_llama(DType dtype, float rms_norm_eps = 1e-5f);

// Writes the bytes as model.gguf in a fresh directory and returns its path.
std::string write_gguf(const std::string& name, const std::vector<unsigned char>& bytes);

}  // namespace ditto::testing
