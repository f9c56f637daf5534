// `ditto bench`: prompt processing (pp) and token generation (tg) throughput, in the shape
// of llama-bench, with the prefill chunk size as a parameter and a line of roofline context.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "ditto/error.h"
#include "ditto/session.h"
#include "kernels/kernels.h"
#include "model/weights.h"

namespace ditto::cli {

namespace {

struct BenchOptions {
  std::string model;
  size_t prompt = 512;
  size_t generate = 128;
  int repetitions = 5;
  std::vector<int> threads = {int(std::max(1u, std::thread::hardware_concurrency()))};
  std::vector<size_t> chunks = {0};
  std::string cache_type = "f32";
  std::string output = "md";
};

struct Result {
  std::string test;
  int threads;
  size_t chunk;
  std::vector<double> tokens_per_second;
  double mean() const {
    double sum = 0;
    for (double v : tokens_per_second) sum += v;
    return sum / double(tokens_per_second.size());
  }
  double sd() const {
    if (tokens_per_second.size() < 2) return 0.0;
    double sum = 0;
    for (double v : tokens_per_second) sum += (v - mean()) * (v - mean());
    return std::sqrt(sum / double(tokens_per_second.size() - 1));
  }
};

double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

// As packed: quantised matrices with their f32 scales and one byte per entry (QuantTile).
size_t matrix_bytes(const MatrixView& m) { return m.panels() * m.panel_bytes(); }

// Bytes of weights one decode step streams: every matrix once (the embedding only as the
// output projection when tied; the one looked-up row is negligible).
size_t streamed_weight_bytes(const Model& model) {
  const ModelWeights& w = model.weights();
  size_t bytes = matrix_bytes(w.output_matrix());
  for (const LayerWeights& l : w.layers)
    for (const PackedMatrix* m : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down}) bytes += matrix_bytes(m->view());
  return bytes;
}

// Multiply-adds count 2 flops. Matmuls of every layer, plus attention over `context` keys
// (scores and output), plus the output projection for `logit_rows` of `tokens`.
double flops_per_token(const ModelConfig& c, double mean_context, double logit_fraction) {
  const double q = double(c.heads * c.head_dim), kv = double(c.kv_heads * c.head_dim), h = double(c.hidden_size);
  const double layer = 2.0 * (h * q * 2 + h * kv * 2 + 3 * h * double(c.intermediate_size)) +
                       4.0 * mean_context * double(c.heads * c.head_dim);
  return double(c.layers) * layer + logit_fraction * 2.0 * h * double(c.vocab_size);
}

std::vector<int32_t> bench_tokens(size_t count, size_t vocab) {
  std::vector<int32_t> ids(count);
  uint64_t state = 12345;
  for (auto& id : ids) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    id = int32_t((state >> 33) % vocab);
  }
  return ids;
}

// The chunk a prefill test runs with: 0, or more than the prompt, means the whole prompt.
size_t prefill_chunk(size_t chunk, size_t prompt) { return chunk ? std::min(chunk, prompt) : prompt; }

Result run_prefill(const std::shared_ptr<const Model>& model, const BenchOptions& o, int threads, size_t chunk) {
  const auto tokens = bench_tokens(o.prompt, model->config().vocab_size);
  const size_t step = prefill_chunk(chunk, o.prompt);
  Result result{"pp" + std::to_string(o.prompt), threads, step, {}};
  Session session(model, {o.prompt, parse_dtype(o.cache_type), threads});
  for (int r = -1; r < o.repetitions; ++r) {  // r = -1 warms up
    session.reset();
    const auto start = std::chrono::steady_clock::now();
    for (size_t at = 0; at < tokens.size(); at += step) {
      const size_t count = std::min(step, tokens.size() - at);
      const bool last = at + count == tokens.size();
      session.prefill(std::span<const int32_t>(tokens).subspan(at, count), last ? Logits::Last : Logits::None);
    }
    if (r >= 0) result.tokens_per_second.push_back(double(o.prompt) / seconds(std::chrono::steady_clock::now() - start));
  }
  return result;
}

Result run_decode(const std::shared_ptr<const Model>& model, const BenchOptions& o, int threads) {
  const auto tokens = bench_tokens(o.generate, model->config().vocab_size);
  Result result{"tg" + std::to_string(o.generate), threads, 1, {}};
  Session session(model, {o.generate, parse_dtype(o.cache_type), threads});
  for (int r = -1; r < o.repetitions; ++r) {
    session.reset();
    const auto start = std::chrono::steady_clock::now();
    for (const int32_t token : tokens) session.decode(token);
    if (r >= 0) result.tokens_per_second.push_back(double(o.generate) / seconds(std::chrono::steady_clock::now() - start));
  }
  return result;
}

std::string weight_types(const Model& model) {
  return dtype_name(model.weights().layers.front().q.view().dtype);
}

void run_bench(const BenchOptions& o) {
  if (o.prompt == 0 && o.generate == 0) throw Error("nothing to measure: -p and -n are both 0");
  const auto model = Model::load(o.model);
  const ModelConfig& c = model->config();
  for (const auto& [tokens, flag] : {std::pair{o.prompt, "-p"}, std::pair{o.generate, "-n"}})
    if (tokens > c.max_positions)
      throw Error(std::string(flag) + " " + std::to_string(tokens) + " is longer than the model's context (" +
                  std::to_string(c.max_positions) + " positions)");
  const std::string name = std::filesystem::path(o.model).filename().string() + " " + c.architecture_name + " " +
                           weight_types(*model);
  const double size_gib = double(streamed_weight_bytes(*model)) / double(1ull << 30);
  const double params_b = double(model->parameter_count()) / 1e9;

  std::vector<Result> results;
  for (int threads : o.threads) {
    if (o.prompt > 0)
      for (size_t chunk : o.chunks) {
        std::fprintf(stderr, "pp%zu, %d threads, chunk %zu...\n", o.prompt, threads, prefill_chunk(chunk, o.prompt));
        results.push_back(run_prefill(model, o, threads, chunk));
      }
    if (o.generate > 0) {
      std::fprintf(stderr, "tg%zu, %d threads...\n", o.generate, threads);
      results.push_back(run_decode(model, o, threads));
    }
  }

  const double pp_flops = flops_per_token(c, double(o.prompt) / 2.0, 1.0 / double(std::max<size_t>(o.prompt, 1)));
  const double tg_bytes = double(streamed_weight_bytes(*model));
  // The ceiling of prefill, measured now on each thread count (0 where unknown).
  std::map<int, double> fma_peak;
  if (o.prompt > 0)
    for (int threads : o.threads) fma_peak[threads] = kernels::fma_peak_gflops(threads);
  if (o.output == "json") {
    nlohmann::json out = nlohmann::json::array();
    for (const Result& r : results) {
      const bool pp = r.test.rfind("pp", 0) == 0;
      nlohmann::json row = {{"model", name}, {"size_bytes", streamed_weight_bytes(*model)},
                            {"params", model->parameter_count()}, {"kernels", kernels::target_name()},
                            {"threads", r.threads}, {"test", r.test}, {"chunk", r.chunk}, {"cache_type", o.cache_type},
                            {"avg_ts", r.mean()}, {"stddev_ts", r.sd()}, {"samples_ts", r.tokens_per_second}};
      if (pp) {
        row["gflops"] = r.mean() * pp_flops / 1e9;
        row["fma_peak_gflops"] = fma_peak[r.threads];
      } else {
        row["weight_gbps"] = r.mean() * tg_bytes / 1e9;
      }
      out.push_back(row);
    }
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("| model | size | params | backend | threads | chunk | test | t/s |\n");
  std::printf("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |\n");
  for (const Result& r : results)
    std::printf("| %s | %.2f GiB | %.2f B | ditto %s | %d | %zu | %s | %.2f ± %.2f |\n", name.c_str(), size_gib, params_b,
                kernels::target_name().c_str(), r.threads, r.chunk, r.test.c_str(), r.mean(), r.sd());
  std::printf("\n");
  for (const Result& r : results) {
    if (r.test.rfind("pp", 0) == 0) {
      const double gflops = r.mean() * pp_flops / 1e9, peak = fma_peak[r.threads];
      std::printf("roofline: %s, %d threads, chunk %zu: %.1f GFLOP/s in prefill", r.test.c_str(), r.threads, r.chunk,
                  gflops);
      if (peak > 0)
        std::printf(", %.0f%% of the f32 fma peak measured on %d threads (%.0f GFLOP/s)", 100.0 * gflops / peak,
                    r.threads, peak);
      std::printf("\n");
    } else
      std::printf("roofline: %s, %d threads: %.1f GB/s of weights streamed in decode\n", r.test.c_str(), r.threads,
                  r.mean() * tg_bytes / 1e9);
  }
}

}  // namespace

void register_bench(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand("bench", "Measure prefill and decode throughput (like llama-bench)");
  cmd->add_option("-m,--model", o->model, "GGUF file or checkpoint directory")->required();
  cmd->add_option("-p,--n-prompt", o->prompt, "Prompt tokens to prefill (0 skips the test)")->capture_default_str();
  cmd->add_option("-n,--n-gen", o->generate, "Tokens to generate (0 skips the test)")->capture_default_str();
  cmd->add_option("-r,--repetitions", o->repetitions, "Timed repetitions of each test, after one warm-up")
      ->capture_default_str()->check(CLI::Range(1, 1000000));
  cmd->add_option("-t,--threads", o->threads, "Thread counts, comma-separated")
      ->delimiter(',')->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--chunk", o->chunks, "Prefill chunk sizes, comma-separated; 0 = the whole prompt")
      ->delimiter(',')->capture_default_str();
  cmd->add_option("--cache-type", o->cache_type, "KV cache precision: f32, f16 or bf16")
      ->capture_default_str()->check(CLI::IsMember({"f32", "f16", "bf16"}));
  cmd->add_option("-o,--output", o->output, "Output format: md or json")->capture_default_str()->check(CLI::IsMember({"md", "json"}));
  cmd->callback([o] { run_bench(*o); });
}

}  // namespace ditto::cli
