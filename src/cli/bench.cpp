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
#include "ditto/batch.h"
#include "ditto/error.h"
#include "ditto/load.h"
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
  std::vector<size_t> depths = {0};
  std::vector<std::string> cache_types = {"f32"};
  size_t kv_budget = 0;
  std::string numerics;
  std::string output = "md";
  StageOptions stages;
};

struct Result {
  std::string test;
  int threads;
  size_t chunk;
  size_t parallel;  // sequences decoding together (1 for prefill)
  size_t depth;     // positions of context before the test's first token
  std::string cache_type;
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
  std::string name() const { return depth ? test + " @ d" + std::to_string(depth) : test; }
};

double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Pseudo-random token ids, a stream of its own for every seed.
std::vector<int32_t> bench_tokens(size_t count, size_t vocab, uint64_t seed) {
  std::vector<int32_t> ids(count);
  uint64_t state = 12345 + seed * 0x9e3779b97f4a7c15ull;
  for (auto& id : ids) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    id = int32_t((state >> 33) % vocab);
  }
  return ids;
}

constexpr size_t kContextChunk = 512;  // the context is prefilled in chunks of this many positions

// The chunk a prefill test runs with: 0, or more than the prompt, means the whole prompt.
size_t prefill_chunk(size_t chunk, size_t prompt) { return chunk ? std::min(chunk, prompt) : prompt; }

// A batch engine whose prefix cache holds a context of `depth` positions, computed once: each
// repetition of a test opens its sequences with the context before their own tokens, so they
// start at position `depth` (several sequences share it, as a common system prompt).
class DepthContext {
 public:
  DepthContext(const std::shared_ptr<const Model>& model, const BenchOptions& o, int threads, DType cache, size_t depth,
               Pipeline* pipeline)
      : engine_(model, engine_options(*model, o, threads, cache, depth, pipeline)),
        context_(fresh_tokens(depth)) {
    if (depth == 0) return;
    const SequenceId id = engine_.open();
    std::vector<BatchRow> rows;
    for (size_t at = 0; at < depth; at += kContextChunk) {
      rows.clear();
      for (size_t p = at; p < std::min(depth, at + kContextChunk); ++p) rows.push_back({id, context_[p], p, false});
      engine_.forward(rows);
    }
    engine_.close(id);
  }

  // A sequence that holds the context and will be fed `tokens` after it.
  SequenceId open(std::span<const int32_t> tokens) {
    std::vector<int32_t> prompt(context_);
    prompt.insert(prompt.end(), tokens.begin(), tokens.end());
    const SequenceId id = engine_.open(prompt);
    if (engine_.length(id) != context_.size())
      throw Error("the KV pool did not keep the context of " + std::to_string(context_.size()) +
                  " positions: give --kv-budget room for it and the test");
    return id;
  }
  BatchEngine& engine() { return engine_; }
  // Tokens no earlier call gave, so that the prefix cache holds none of them: every prefill
  // repetition computes its prompt. The same calls give the same tokens in every engine.
  std::vector<int32_t> fresh_tokens(size_t count) {
    return bench_tokens(count, engine_.model().config().vocab_size, next_seed_++);
  }

 private:
  static BatchOptions engine_options(const Model& model, const BenchOptions& o, int threads, DType cache, size_t depth,
                                     Pipeline* pipeline) {
    BatchOptions options;
    options.threads = threads;
    options.cache_dtype = cache;
    options.pipeline = pipeline;
    const size_t sequences = *std::max_element(o.parallel.begin(), o.parallel.end());
    // The context, and each sequence's own positions with a copy of the context's last block.
    options.kv_blocks = o.kv_budget ? kv_blocks_for_budget(model.config(), cache, options.block_size, o.kv_budget)
                                    : kv_blocks_for_sequences(1, depth, options.block_size) +
                                          kv_blocks_for_sequences(sequences, std::max(o.prompt, o.generate) + 1,
                                                                  options.block_size);
    return options;
  }

  BatchEngine engine_;
  uint64_t next_seed_ = 1;  // 0: the decode tests' tokens
  std::vector<int32_t> context_;
};

// Logits a test computed in its first repetition, kept to compare cache precisions.
using KeptLogits = std::vector<float>;

Result run_prefill(DepthContext& context, const BenchOptions& o, int threads, size_t chunk, size_t depth,
                   const std::string& cache, KeptLogits* logits) {
  BatchEngine& engine = context.engine();
  const size_t step = prefill_chunk(chunk, o.prompt);
  Result result{"pp" + std::to_string(o.prompt), threads, step, 1, depth, cache, {}};
  std::vector<BatchRow> rows;
  for (int r = -1; r < o.repetitions; ++r) {  // r = -1 warms up
    const auto tokens = context.fresh_tokens(o.prompt);
    const SequenceId id = context.open(tokens);
    const auto start = std::chrono::steady_clock::now();
    std::vector<float> last;
    for (size_t at = 0; at < tokens.size(); at += step) {
      rows.clear();
      for (size_t t = at; t < std::min(tokens.size(), at + step); ++t)
        rows.push_back({id, tokens[t], depth + t, t + 1 == tokens.size()});
      last = engine.forward(rows);
    }
    if (r >= 0) result.tokens_per_second.push_back(double(o.prompt) / seconds(std::chrono::steady_clock::now() - start));
    if (r == 0 && logits) *logits = std::move(last);
    engine.close(id);
  }
  return result;
}

// `parallel` sequences decode `generate` tokens each, together: one forward pass of `parallel`
// rows per step, or through a pipeline of K stages, K groups of them whose passes follow each
// other through the stages. t/s counts the tokens of all of them.
Result run_decode(DepthContext& context, const BenchOptions& o, int threads, size_t parallel, size_t depth,
                  const std::string& cache, KeptLogits* logits) {
  BatchEngine& engine = context.engine();
  const auto tokens = bench_tokens(o.generate, engine.model().config().vocab_size, 0);
  Result result{"tg" + std::to_string(o.generate), threads, 1, parallel, depth, cache, {}};
  const size_t vocab = engine.model().config().vocab_size;
  for (int r = -1; r < o.repetitions; ++r) {  // r = -1 warms up
    std::vector<SequenceId> sequences(parallel);
    for (size_t s = 0; s < parallel; ++s) sequences[s] = context.open(std::span(&tokens[s % tokens.size()], 1));
    const size_t groups = std::min(parallel, engine.depth());
    // Passes end in the order they start: the first group's (whose first row is sequence 0's)
    // is every `groups`-th.
    size_t passes_waited = 0;
    const auto wait = [&] {
      const PassOutput step = engine.wait();
      if (r == 0 && logits && passes_waited++ % groups == 0)
        logits->insert(logits->end(), step.logits.begin(), step.logits.begin() + ptrdiff_t(vocab));
    };
    if (r == 0 && logits) logits->clear();
    // Each row's greedy token, drawn where the logits are, as generation draws it (only the token
    // comes back through stages); sequence 0's logits too when they are kept.
    const SamplingParams greedy{.temperature = 0.0};
    const RowOutput token{.sampling = &greedy}, token_and_logits{.logits = r == 0 && logits, .sampling = &greedy};
    std::vector<BatchRow> rows;
    const auto start = std::chrono::steady_clock::now();
    for (size_t position = 0; position < tokens.size(); ++position)
      for (size_t g = 0; g < groups; ++g) {
        rows.clear();
        for (size_t s = g * parallel / groups; s < (g + 1) * parallel / groups; ++s)
          rows.push_back({sequences[s], tokens[(position + s) % tokens.size()], depth + position, true,
                          s == 0 ? &token_and_logits : &token});
        if (engine.in_flight() == groups) wait();
        engine.start(rows);
      }
    while (engine.in_flight() > 0) wait();
    if (r >= 0)
      result.tokens_per_second.push_back(double(parallel * o.generate) / seconds(std::chrono::steady_clock::now() - start));
    for (const SequenceId id : sequences) engine.close(id);
  }
  return result;
}

double max_difference(const KeptLogits& a, const KeptLogits& b) {
  double most = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) most = std::max(most, std::fabs(double(a[i]) - double(b[i])));
  return most;
}

// With stages, `model` holds the head's layers: the weights' size and the rooflines, which need
// the whole model's, are left out.
void bench(const BenchOptions& o, const std::shared_ptr<const Model>& model, Pipeline* pipeline) {
  const ModelConfig& c = model->config();
  for (const size_t depth : o.depths)
    for (const auto& [tokens, flag] : {std::pair{o.prompt, "-p"}, std::pair{o.generate, "-n"}})
      if (depth + tokens > c.max_positions)
        throw Error((depth ? "-d " + std::to_string(depth) + " with " : std::string()) + flag + " " +
                    std::to_string(tokens) + " is longer than the model's context (" + std::to_string(c.max_positions) +
                    " positions)");
  const std::string name = std::filesystem::path(model_path(o.model)).filename().string() + " " + c.architecture_name +
                           " " + model->weight_type() + " " + numerics_name(model->numerics());
  const std::string backend = kernels::target_name() + (pipeline ? ", " + std::to_string(pipeline->stages()) + " stages" : "");
  const double size_gib = double(model->streamed_weight_bytes()) / double(1ull << 30);
  const double params_b = double(model->parameter_count()) / 1e9;

  // f32 first: the other precisions' logits are compared with its (the same bits on any thread
  // count, so on the first only).
  std::vector<std::string> caches = o.cache_types;
  std::stable_partition(caches.begin(), caches.end(), [](const std::string& t) { return t == "f32"; });
  const bool compare = caches.front() == "f32" && caches.size() > 1;
  std::vector<Result> results;
  std::map<std::pair<std::string, size_t>, double> difference;  // (cache, depth) -> max |logit - f32's|
  for (int threads : o.threads)
    for (size_t depth : o.depths) {
      KeptLogits reference_pp, reference_tg;
      for (const std::string& cache : caches) {
        if (depth) std::fprintf(stderr, "context of %zu positions, %s cache, %d threads...\n", depth, cache.c_str(), threads);
        DepthContext context(model, o, threads, parse_dtype(cache), depth, pipeline);
        const bool keep = compare && threads == o.threads.front();
        KeptLogits pp, tg;
        if (o.prompt > 0)
          for (size_t chunk : o.chunks) {
            std::fprintf(stderr, "pp%zu @ d%zu, %d threads, chunk %zu, %s cache...\n", o.prompt, depth, threads,
                         prefill_chunk(chunk, o.prompt), cache.c_str());
            results.push_back(run_prefill(context, o, threads, chunk, depth, cache, keep && pp.empty() ? &pp : nullptr));
          }
        if (o.generate > 0)
          for (size_t parallel : o.parallel) {
            std::fprintf(stderr, "tg%zu @ d%zu, %d threads, %zu sequences, %s cache...\n", o.generate, depth, threads,
                         parallel, cache.c_str());
            results.push_back(run_decode(context, o, threads, parallel, depth, cache, keep && tg.empty() ? &tg : nullptr));
          }
        if (!keep) continue;
        if (cache == "f32") {
          reference_pp = std::move(pp);
          reference_tg = std::move(tg);
        } else {
          difference[{cache, depth}] = std::max(max_difference(pp, reference_pp), max_difference(tg, reference_tg));
        }
      }
    }

  const auto pp_flops = [&](size_t depth) {
    return model->flops_per_position(double(depth) + double(o.prompt) / 2.0, 1.0 / double(std::max<size_t>(o.prompt, 1)));
  };
  const auto tg_flops = [&](size_t depth) { return model->flops_per_position(double(depth) + double(o.generate) / 2.0, 1.0); };
  const double weight_bytes = double(model->streamed_weight_bytes());
  // Keys and values a decode step reads, per sequence: every position up to its own, in a layer
  // with a sliding window those of the window.
  const auto kv_bytes = [&](const Result& r) {
    const double context = double(r.depth) + double(o.generate + 1) / 2.0;
    double positions = 0.0;  // summed over the layers
    for (size_t l = 0; l < c.layers; ++l) positions += c.window(l) ? std::min(context, double(c.window(l))) : context;
    return positions * 2.0 * double(c.kv_heads * c.head_dim) * double(dtype_size(parse_dtype(r.cache_type)));
  };
  // The ceilings of prefill and decode, measured now on each thread count (0 where unknown).
  std::map<int, double> fma_peak, read_bandwidth;
  for (int threads : pipeline ? std::vector<int>{} : o.threads) {
    if (o.prompt > 0) fma_peak[threads] = kernels::fma_peak_gflops(threads);
    if (o.generate > 0) read_bandwidth[threads] = kernels::read_bandwidth_gbps(threads);
  }
  const auto accuracy = [&](const Result& r) {
    const auto found = difference.find({r.cache_type, r.depth});
    return found == difference.end() ? -1.0 : found->second;
  };
  if (o.output == "json") {
    nlohmann::json out = nlohmann::json::array();
    for (const Result& r : results) {
      const bool pp = r.test.rfind("pp", 0) == 0;
      nlohmann::json row = {{"model", name}, {"params", model->parameter_count()}, {"kernels", kernels::target_name()},
                            {"threads", r.threads}, {"test", r.test}, {"depth", r.depth}, {"chunk", r.chunk},
                            {"parallel", r.parallel}, {"cache_type", r.cache_type},
                            {"numerics", numerics_name(model->numerics())},
                            {"stages", pipeline ? pipeline->stages() : 1},
                            {"avg_ts", r.mean()}, {"stddev_ts", r.sd()}, {"samples_ts", r.tokens_per_second}};
      if (accuracy(r) >= 0) row["max_logit_difference_vs_f32"] = accuracy(r);
      if (pipeline) {  // no size nor roofline: they need the whole model's weights
        out.push_back(row);
        continue;
      }
      row["size_bytes"] = model->streamed_weight_bytes();
      if (pp) {
        row["gflops"] = r.mean() * pp_flops(r.depth) / 1e9;
        row["fma_peak_gflops"] = fma_peak[r.threads];
      } else {
        // Every step streams the weights once, for all its sequences, and each sequence's keys and values.
        const double steps = r.mean() / double(r.parallel);
        row["weight_gbps"] = steps * weight_bytes / 1e9;
        row["kv_gbps"] = steps * double(r.parallel) * kv_bytes(r) / 1e9;
        row["read_bandwidth_gbps"] = read_bandwidth[r.threads];
        row["gflops"] = r.mean() * tg_flops(r.depth) / 1e9;
      }
      out.push_back(row);
    }
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("| model | size | params | backend | threads | cache | chunk | sequences | test | t/s |\n");
  std::printf("| --- | ---: | ---: | --- | ---: | --- | ---: | ---: | ---: | ---: |\n");
  char size[32] = "-";
  if (!pipeline) std::snprintf(size, sizeof size, "%.2f GiB", size_gib);
  for (const Result& r : results)
    std::printf("| %s | %s | %.2f B | ditto %s | %d | %s | %zu | %zu | %s | %.2f ± %.2f |\n", name.c_str(), size,
                params_b, backend.c_str(), r.threads, r.cache_type.c_str(), r.chunk, r.parallel, r.name().c_str(),
                r.mean(), r.sd());
  std::printf("\n");
  for (const Result& r : pipeline ? std::vector<Result>{} : results) {
    if (r.test.rfind("pp", 0) == 0) {
      const double gflops = r.mean() * pp_flops(r.depth) / 1e9, peak = fma_peak[r.threads];
      std::printf("roofline: %s, %d threads, chunk %zu, %s cache: %.1f GFLOP/s in prefill", r.name().c_str(), r.threads,
                  r.chunk, r.cache_type.c_str(), gflops);
      if (peak > 0)
        std::printf(", %.0f%% of the f32 fma peak measured on %d threads (%.0f GFLOP/s)", 100.0 * gflops / peak,
                    r.threads, peak);
      std::printf("\n");
    } else {
      const double steps = r.mean() / double(r.parallel), kv = double(r.parallel) * kv_bytes(r);
      const double gbps = steps * (weight_bytes + kv) / 1e9, roof = read_bandwidth[r.threads];
      std::printf("roofline: %s, %d threads, %zu sequences, %s cache: %.1f GB/s of weights and KV cache streamed in "
                  "decode (%.2f GB of weights and %.2f GB of KV per step)",
                  r.name().c_str(), r.threads, r.parallel, r.cache_type.c_str(), gbps, weight_bytes / 1e9, kv / 1e9);
      if (roof > 0) std::printf(", %.0f%% of the read bandwidth measured on %d threads (%.1f GB/s)", 100.0 * gbps / roof,
                                r.threads, roof);
      std::printf(", %.1f GFLOP/s\n", r.mean() * tg_flops(r.depth) / 1e9);
    }
  }
  for (const auto& [key, value] : difference)
    std::printf("accuracy: %s cache at depth %zu: the largest |logit - f32 cache's| is %.3g (pp%zu's last position, "
                "tg%zu's %zu positions)\n",
                key.first.c_str(), key.second, value, o.prompt, o.generate, o.generate);
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
  cmd->add_option("-d,--n-depth", o->depths,
                  "Context depths, comma-separated: each test runs after a context of that many positions, "
                  "computed once and kept in the prefix cache (several sequences share it)")
      ->delimiter(',')->capture_default_str()->check(positions);
  cmd->add_option("--cache-type", o->cache_types,
                  "KV cache precisions, comma-separated: f32, f16, bf16; with f32 among them, the largest logit "
                  "difference of each other precision from f32's is reported")
      ->delimiter(',')->capture_default_str()->check(CLI::IsMember({"f32", "f16", "bf16"}));
  cmd->add_option("--kv-budget", o->kv_budget,
                  "Memory for the KV cache, in bytes (e.g. 512M, 4G); default: the context and the test's sequences")
      ->transform(CLI::AsSizeValue(false));
  add_numerics_option(cmd, o->numerics);
  cmd->add_option("-o,--output", o->output, "Output format: md or json")->capture_default_str()->check(CLI::IsMember({"md", "json"}));
  add_stage_options(cmd, o->stages);
  cmd->callback([o] { run_bench(*o); });
}

}  // namespace ditto::cli
