#pragma once
// Test helpers: write safetensors files and whole checkpoints whose weights come from the
// project's own deterministic generator, so golden hashes never depend on a library's RNG.
// No GoogleTest here: bench/matmul_bench, built without it, uses them too.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ditto/dtype.h"

namespace ditto::testing {

// splitmix64: a fixed, portable sequence of 64-bit values.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next();
  // Uniform in [-scale, scale), exactly computable: a 24-bit integer times a power of two.
  float uniform(float scale);

 private:
  uint64_t state_;
};

// Blocks of a quantised type for `values` values: random bytes, with the f16 factors set to
// finite values such that every weight lies within about [-bound, bound] (the scale d uniform
// in [-bound, bound) over the largest integer factor it meets, minimums likewise), or, if
// `any_finite_factors`, to random finite f16 bit patterns (signed zeros, subnormals, up to 65504).
std::vector<unsigned char> random_quant_blocks(DType dtype, size_t values, uint64_t seed, float bound,
                                               bool any_finite_factors = false);
// The byte at which a block of a quantised type keeps its f16 scale factor (d).
size_t f16_scale_at(DType dtype);
// The byte at which a block of a quantised type keeps its f16 minimum factor, or -1 if it has none.
int f16_minimum_at(DType dtype);
// The bytes of a K-quant block that hold its groups' integer scales (and minimums): where they
// start, and how many (none for the 32-input types).
std::pair<size_t, size_t> integer_factors_at(DType dtype);
// Sets the f16 minimum of every fourth block of `blocks` to NaN, of both signs, quiet and
// signalling in turn (so that a matrix of three blocks a row has at most one in each output).
// False if the type has no minimum.
bool set_nan_minimums(DType dtype, std::vector<unsigned char>& blocks);

struct TestTensor {
  std::string name;
  std::string dtype;  // safetensors spelling: "F32", "F16", "BF16", ...
  std::vector<size_t> shape;
  std::vector<unsigned char> bytes;
};

// Serialises tensors in the safetensors format (8-byte length, JSON header, data).
std::vector<unsigned char> safetensors_bytes(const std::vector<TestTensor>& tensors);
void write_file(const std::string& path, const std::vector<unsigned char>& bytes);
void write_text(const std::string& path, const std::string& text);

// A tiny decoder of `arch`, a family's model_type. Gemma's (gemma3_text) has sliding-window
// layers of 8 (every second layer global), its own RoPE base there, a query scale and a logit
// softcap.
struct TinyConfig {
  std::string arch = "qwen3";
  size_t vocab = 96, hidden = 40, intermediate = 72, layers = 2, heads = 4, kv_heads = 2, head_dim = 16;
  bool tied = false;
  DType dtype = DType::BF16;
  uint64_t seed = 20261129;
  // Family options: a sliding window (every layer; qwen2: the layers from 1 on), Llama 3.1's
  // RoPE scaling, and for mixtral / qwen3_moe the experts (qwen3_moe: of expert_intermediate
  // each, renormalised with norm_topk_prob).
  size_t window = 0;
  bool llama3_rope = false;
  size_t experts = 4, experts_per_token = 2, expert_intermediate = 24;
  bool norm_topk_prob = true;
};

// A tiny model of each family beyond qwen3 and llama, its own options set: qwen2 with a window
// on its upper layer, mistral with a window of 7, phi3, llama with llama3 RoPE, mixtral
// (top-2 of 4), qwen3_moe (top-1 of 5, not renormalised) and gemma3_text of three layers (two
// with windows).
TinyConfig tiny_family(const std::string& arch);
// Gemma 3's tiny model (windows of 8 in layers 0 and 2) with heads of 256 and one kv head: 1 KiB
// of f32 keys per position and layer, a 4 KiB page in a block of 4.
TinyConfig wide_gemma3();

std::string config_json(const TinyConfig& config);
// The tensors of a decoder checkpoint with weights from SplitMix64(seed).
std::vector<TestTensor> random_weights(const TinyConfig& config);
// Writes config.json and model.safetensors into a fresh directory and returns its path.
std::string write_checkpoint(const TinyConfig& config, const std::string& name);
// A fresh directory named for this process and `name`, removed when the process exits.
std::string temp_dir(const std::string& name);

}  // namespace ditto::testing
