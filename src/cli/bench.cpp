// `ditto bench`: prompt processing (pp) and token generation (tg) throughput, in the shape
// of llama-bench, with the prefill chunk size as a parameter and a line of roofline context.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/stages.h"
#include "ditto/load.h"
#include "ditto/batch.h"
#include "ditto/error.h"
#include "ditto/session.h"
#include "kernels/kernels.h"
#include "tensor/limits.h"

namespace ditto::cli {

namespace {

struct BenchOptions {
  std::string model;
  size_t prompt = 512;
  size_t generate = 128;
  int repetitions = 5;
  std::vector<int> threads = {default_threads()};
  std::vector<size_t> chunks = {0};
  std::vector<size_t> parallel = {1};
  CacheOptions cache;
  std::string numerics;
  std::string output = "md";
  StageOptions stages;
};

struct Result {
  std::string test;
  int threads;
  size_t chunk;
  size_t parallel;  // sequences decoding together (1 for prefill)
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

Result run_prefill(const std::shared_ptr<const Model>& model, const BenchOptions& o, int threads, size_t chunk,
                   Pipeline* pipeline) {
  const auto tokens = bench_tokens(o.prompt, model->config().vocab_size);
  const size_t step = prefill_chunk(chunk, o.prompt);
  Result result{"pp" + std::to_string(o.prompt), threads, step, 1, {}};
  Session session(model, {o.prompt, o.cache.dtype(), threads, nullptr, pipeline});
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

// `parallel` sequences decode `generate` tokens each, together: one forward pass of `parallel`
// rows per step, or through a pipeline of K stages, K groups of them whose passes follow each
// other through the stages. t/s counts the tokens of all of them.
Result run_decode(const std::shared_ptr<const Model>& model, const BenchOptions& o, int threads, size_t parallel,
                  Pipeline* pipeline) {
  const auto tokens = bench_tokens(o.generate, model->config().vocab_size);
  Result result{"tg" + std::to_string(o.generate), threads, 1, parallel, {}};
  BatchOptions options;
  options.threads = threads;
  options.cache_dtype = o.cache.dtype();
  options.prefix_cache = false;
  options.pipeline = pipeline;
  options.kv_blocks = o.cache.budget ? kv_blocks_for_budget(model->config(), options.cache_dtype, options.block_size, o.cache.budget)
                                     : kv_blocks_for_sequences(parallel, o.generate, options.block_size);
  BatchEngine engine(model, options);
  for (int r = -1; r < o.repetitions; ++r) {  // r = -1 warms up
    std::vector<SequenceId> sequences(parallel);
    for (SequenceId& id : sequences) id = engine.open();
    const size_t groups = std::min(parallel, engine.depth());
    std::vector<BatchRow> rows;
    const auto start = std::chrono::steady_clock::now();
    for (size_t position = 0; position < tokens.size(); ++position)
      for (size_t g = 0; g < groups; ++g) {
        rows.clear();
        for (size_t s = g * parallel / groups; s < (g + 1) * parallel / groups; ++s)
          rows.push_back({sequences[s], tokens[(position + s) % tokens.size()], position, true});
        if (engine.in_flight() == groups) engine.wait();
        engine.start(rows);
      }
    while (engine.in_flight() > 0) engine.wait();
    if (r >= 0)
      result.tokens_per_second.push_back(double(parallel * o.generate) / seconds(std::chrono::steady_clock::now() - start));
    for (const SequenceId id : sequences) engine.close(id);
  }
  return result;
}

// With stages, `model` holds the head's layers: the weights' size and the roofline, which need
// the whole model's, are left out.
void bench(const BenchOptions& o, const std::shared_ptr<const Model>& model, Pipeline* pipeline) {
  const ModelConfig& c = model->config();
  for (const auto& [tokens, flag] : {std::pair{o.prompt, "-p"}, std::pair{o.generate, "-n"}})
    if (tokens > c.max_positions)
      throw Error(std::string(flag) + " " + std::to_string(tokens) + " is longer than the model's context (" +
                  std::to_string(c.max_positions) + " positions)");
  const std::string name = std::filesystem::path(model_path(o.model)).filename().string() + " " + c.architecture_name +
                           " " + model->weight_type() + " " + numerics_name(model->numerics());
  const std::string backend = kernels::target_name() + (pipeline ? ", " + std::to_string(pipeline->stages()) + " stages" : "");
  const double size_gib = double(model->streamed_weight_bytes()) / double(1ull << 30);
  const double params_b = double(model->parameter_count()) / 1e9;

  std::vector<Result> results;
  for (int threads : o.threads) {
    if (o.prompt > 0)
      for (size_t chunk : o.chunks) {
        std::fprintf(stderr, "pp%zu, %d threads, chunk %zu...\n", o.prompt, threads, prefill_chunk(chunk, o.prompt));
        results.push_back(run_prefill(model, o, threads, chunk, pipeline));
      }
    if (o.generate > 0)
      for (size_t parallel : o.parallel) {
        std::fprintf(stderr, "tg%zu, %d threads, %zu sequences...\n", o.generate, threads, parallel);
        results.push_back(run_decode(model, o, threads, parallel, pipeline));
      }
  }

  const double pp_flops = model->flops_per_position(double(o.prompt) / 2.0, 1.0 / double(std::max<size_t>(o.prompt, 1)));
  const double tg_flops = model->flops_per_position(double(o.generate) / 2.0, 1.0);
  const double tg_bytes = double(model->streamed_weight_bytes());
  // The ceiling of prefill, measured now on each thread count (0 where unknown).
  std::map<int, double> fma_peak;
  if (o.prompt > 0 && !pipeline)
    for (int threads : o.threads) fma_peak[threads] = kernels::fma_peak_gflops(threads);
  if (o.output == "json") {
    nlohmann::json out = nlohmann::json::array();
    for (const Result& r : results) {
      const bool pp = r.test.rfind("pp", 0) == 0;
      nlohmann::json row = {{"model", name}, {"params", model->parameter_count()}, {"kernels", kernels::target_name()},
                            {"threads", r.threads}, {"test", r.test}, {"chunk", r.chunk}, {"parallel", r.parallel},
                            {"cache_type", o.cache.type}, {"numerics", numerics_name(model->numerics())},
                            {"stages", pipeline ? pipeline->stages() : 1},
                            {"avg_ts", r.mean()}, {"stddev_ts", r.sd()}, {"samples_ts", r.tokens_per_second}};
      if (pipeline) {  // no size nor roofline: they need the whole model's weights
        out.push_back(row);
        continue;
      }
      row["size_bytes"] = model->streamed_weight_bytes();
      if (pp) {
        row["gflops"] = r.mean() * pp_flops / 1e9;
        row["fma_peak_gflops"] = fma_peak[r.threads];
      } else {
        // Every step streams the weights once, for all its sequences.
        row["weight_gbps"] = r.mean() / double(r.parallel) * tg_bytes / 1e9;
        row["gflops"] = r.mean() * tg_flops / 1e9;
      }
      out.push_back(row);
    }
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("| model | size | params | backend | threads | chunk | sequences | test | t/s |\n");
  std::printf("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |\n");
  char size[32] = "-";
  if (!pipeline) std::snprintf(size, sizeof size, "%.2f GiB", size_gib);
  for (const Result& r : results)
    std::printf("| %s | %s | %.2f B | ditto %s | %d | %zu | %zu | %s | %.2f ± %.2f |\n", name.c_str(), size, params_b,
                backend.c_str(), r.threads, r.chunk, r.parallel, r.test.c_str(), r.mean(), r.sd());
  std::printf("\n");
  if (pipeline) return;
  for (const Result& r : results) {
    if (r.test.rfind("pp", 0) == 0) {
      const double gflops = r.mean() * pp_flops / 1e9, peak = fma_peak[r.threads];
      std::printf("roofline: %s, %d threads, chunk %zu: %.1f GFLOP/s in prefill", r.test.c_str(), r.threads, r.chunk,
                  gflops);
      if (peak > 0)
        std::printf(", %.0f%% of the f32 fma peak measured on %d threads (%.0f GFLOP/s)", 100.0 * gflops / peak,
                    r.threads, peak);
      std::printf("\n");
    } else {
      std::printf("roofline: %s, %d threads, %zu sequences: %.1f GB/s of weights streamed in decode, %.1f GFLOP/s\n",
                  r.test.c_str(), r.threads, r.parallel, r.mean() / double(r.parallel) * tg_bytes / 1e9,
                  r.mean() * tg_flops / 1e9);
    }
  }
}

void run_bench(const BenchOptions& o) {
  if (o.prompt == 0 && o.generate == 0) throw Error("nothing to measure: -p and -n are both 0");
  LoadOptions load;
  load.tokenizer = false;
  load.numerics = numerics_choice(o.numerics);
  const std::string path = model_path(o.model);
  const std::unique_ptr<Pipeline> pipeline = start_stages(o.stages, load);
  if (pipeline && !pipeline->head()) return run_stage(*pipeline, path, load);
  bench(o, load_model(path, load).model, pipeline.get());
  if (pipeline) pipeline->finish();
}

}  // namespace

void register_bench(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand("bench", "Measure prefill and decode throughput (like llama-bench)");
  add_model_option(cmd, o->model);
  const CLI::Range positions(int64_t(0), limits::kPositions.max);
  cmd->add_option("-p,--n-prompt", o->prompt, "Prompt tokens to prefill (0 skips the test)")
      ->capture_default_str()->check(positions);
  cmd->add_option("-n,--n-gen", o->generate, "Tokens to generate (0 skips the test)")->capture_default_str()->check(positions);
  cmd->add_option("-r,--repetitions", o->repetitions, "Timed repetitions of each test, after one warm-up")
      ->capture_default_str()->check(CLI::Range(limits::kRepetitions.min, limits::kRepetitions.max));
  cmd->add_option("-t,--threads", o->threads, "Thread counts, comma-separated")
      ->delimiter(',')->capture_default_str()->check(CLI::Range(limits::kThreads.min, limits::kThreads.max));
  cmd->add_option("--chunk", o->chunks, "Prefill chunk sizes, comma-separated; 0 = the whole prompt")
      ->delimiter(',')->capture_default_str()->check(positions);
  cmd->add_option("--parallel", o->parallel,
                  "Sequences decoding together in the tg test, comma-separated; t/s counts all their tokens")
      ->delimiter(',')->capture_default_str()->check(CLI::Range(limits::kParallel.min, limits::kParallel.max));
  add_cache_options(cmd, o->cache);
  add_numerics_option(cmd, o->numerics);
  cmd->add_option("-o,--output", o->output, "Output format: md or json")->capture_default_str()->check(CLI::IsMember({"md", "json"}));
  add_stage_options(cmd, o->stages);
  cmd->callback([o] { run_bench(*o); });
}

}  // namespace ditto::cli
