// The sampler's cost per token on a Qwen-sized vocabulary (151,936 ids), for the sampling
// settings people use, on logits shaped like a language model's. Compare the figures with a
// decode step of the default model: `build/ditto bench -p 0 -n 128` (1 / its t/s).
//
//   build/bench/sampler_bench [--vocab N] [--calls N]
//
// The logits: a normal body (sd 3.5, as SmolLM2-135M's rows measure 2.5-4.4) and a head of
// tokens above it, chosen so that top-p 0.95 keeps 1, 13 and 3,099 tokens (SmolLM2's rows keep
// 1 to about 3,000). Each line: median microseconds per call over --calls calls at successive
// positions.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "runtime/sampler.h"

namespace {

struct Shape {
  const char* name;
  int head;           // tokens lifted above the body
  float head_height;  // how far above the body's mean the head starts
};

std::vector<float> make_logits(size_t vocab, const Shape& shape) {
  std::mt19937_64 rng(7);
  std::normal_distribution<float> body(0.0f, 3.5f);
  std::vector<float> logits(vocab);
  for (float& v : logits) v = body(rng);
  // The head: a geometric staircase down from head_height, at random ids.
  for (int i = 0; i < shape.head; ++i) logits[rng() % vocab] = shape.head_height - 0.25f * float(i);
  return logits;
}

// How many tokens top-p 0.95 keeps at temperature 1, and the logit gap across the top 40.
void describe(const std::vector<float>& logits) {
  std::vector<double> sorted(logits.begin(), logits.end());
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  double total = 0, mass = 0;
  for (double v : sorted) total += std::exp(v - sorted[0]);
  size_t kept = 0;
  while (mass < 0.95 * total) mass += std::exp(sorted[kept++] - sorted[0]);
  std::printf("  top-p 0.95 keeps %zu tokens; p(best) %.3f; top-40 logit gap %.1f\n", kept, 1.0 / total,
              sorted[0] - sorted[39]);
}

}  // namespace

int main(int argc, char** argv) {
  size_t vocab = 151936;
  int calls = 300;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--vocab") == 0) vocab = std::strtoul(argv[i + 1], nullptr, 10);
    else if (std::strcmp(argv[i], "--calls") == 0) calls = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--vocab N] [--calls N]\n", argv[0]);
      return 2;
    }
  }

  struct Setting {
    const char* name;
    ditto::SamplingParams params;
  };
  std::vector<Setting> settings;
  const auto add = [&](const char* name, auto change) {
    ditto::SamplingParams p;
    p.seed = 12345;
    change(p);
    settings.push_back({name, p});
  };
  add("greedy", [](auto& p) { p.temperature = 0.0; });
  add("greedy + logprobs (top 5)", [](auto& p) { p.temperature = 0.0; p.logprobs = true; p.top_logprobs = 5; });
  add("temperature 0.8", [](auto& p) { p.temperature = 0.8; });
  add("top-k 40", [](auto& p) { p.top_k = 40; });
  add("top-p 0.95", [](auto& p) { p.top_p = 0.95; });
  add("min-p 0.05", [](auto& p) { p.min_p = 0.05; });
  add("full chain", [](auto& p) {
    p.repetition_penalty = 1.1; p.presence_penalty = 0.2; p.frequency_penalty = 0.1;
    p.logit_bias = {{11, 1.0}, {500, -2.0}}; p.temperature = 0.8; p.top_k = 40; p.top_p = 0.95; p.min_p = 0.05; });
  add("full chain + logprobs (top 5)", [](auto& p) {
    p.repetition_penalty = 1.1; p.presence_penalty = 0.2; p.frequency_penalty = 0.1;
    p.logit_bias = {{11, 1.0}, {500, -2.0}}; p.temperature = 0.8; p.top_k = 40; p.top_p = 0.95; p.min_p = 0.05;
    p.logprobs = true; p.top_logprobs = 5; });
  add("top-p 0.95 without top-k", [](auto& p) {
    p.repetition_penalty = 1.1; p.temperature = 0.8; p.top_p = 0.95; p.min_p = 0.05; });

  std::printf("sampler: vocabulary %zu, SIMD target %s, median of %d calls\n", vocab,
              ditto::kernels::target_name().c_str(), calls);
  const Shape shapes[] = {{"peaked", 1, 35.0f}, {"typical", 60, 22.0f}, {"flat", 0, 0.0f}};
  std::vector<int32_t> history(300);
  for (size_t i = 0; i < history.size(); ++i) history[i] = int32_t((i * 7919) % vocab);
  ditto::Sampler sampler;
  for (const Shape& shape : shapes) {
    const std::vector<float> logits = make_logits(vocab, shape);
    std::printf("%s logits:\n", shape.name);
    describe(logits);
    for (const Setting& s : settings) {
      std::vector<double> micros;
      for (int c = 0; c < calls; ++c) {
        const auto start = std::chrono::steady_clock::now();
        sampler.sample(logits, history, s.params, uint64_t(1000 + c));
        micros.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
      }
      std::nth_element(micros.begin(), micros.begin() + calls / 2, micros.end());
      std::printf("  %-32s %8.1f us\n", s.name, micros[calls / 2]);
    }
  }
  return 0;
}
