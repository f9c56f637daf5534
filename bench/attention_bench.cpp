// The attention kernel alone, on Qwen3-0.6B's shapes (16 query heads, 8 kv heads, head_dim 128, blocks
// of 16 positions; or --heads, --kv-heads, --head-dim, --block: Gemma 3 270M's are 4, 1, 256), on
// every SIMD target with fma this CPU supports
// (the others run the reference):
//  - prefill: a prompt of --prompt positions in chunks of --chunk rows, as `ditto bench` runs
//    it, for one layer: GFLOP/s of its multiply-adds (q.k and p*v, two flops each) against the
//    f32 fma peak measured on the same threads;
//  - decode: one query row at depth --depth in each of --layers layers (keys and values of
//    their own, as a decode step reads them): GB/s of keys and values read.
// Medians of --reps runs (and the range), timed in CPU time as the peaks are
// (kernels::fma_peak_gflops, read_bandwidth_gbps), so that a busy machine blurs the figures less;
// with several threads, spinning workers count too. A program to run by hand, not a test;
// `build/bench/attention_bench --help` lists its options (kUsage).
#include <algorithm>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "hwy/aligned_allocator.h"
#include "hwy/targets.h"
#include "kernels/kernels.h"

namespace {

using namespace ditto;

size_t kHeads = 16, kKvHeads = 8, kBlock = 16, kHeadDim = 128;  // --heads, --kv-heads, --block, --head-dim

// One layer's paged cache of `positions` random keys and values, blocks in order, aligned as the
// engine's KV pool is (to a page; here to cache lines, which is what the rows see). In a
// std::vector, 16 bytes past a page boundary, every 256-byte row straddled one more cache line
// than in the pool, and decode measured about a quarter slower than the engine's attention runs.
struct Layer {
  hwy::AlignedFreeUniquePtr<unsigned char[]> k, v;
  std::vector<uint32_t> blocks;
  ref::KVLayerView view;

  Layer(DType dtype, size_t positions, std::minstd_rand& rng) {
    // At least one block: Highway's allocator refuses zero bytes (--prompt 0, --depth 0).
    const size_t count = std::max<size_t>(1, (positions + kBlock - 1) / kBlock);
    view = {dtype, kKvHeads, kHeadDim, kBlock, nullptr, nullptr};
    k = hwy::AllocateAligned<unsigned char>(count * view.block_bytes());
    v = hwy::AllocateAligned<unsigned char>(count * view.block_bytes());
    view.k = k.get();
    view.v = v.get();
    for (uint32_t b = 0; b < count; ++b) blocks.push_back(b);
    std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
    std::vector<float> keys(kKvHeads * kHeadDim), values(kKvHeads * kHeadDim);
    for (size_t p = 0; p < positions; ++p) {
      for (size_t i = 0; i < keys.size(); ++i) keys[i] = uniform(rng), values[i] = uniform(rng);
      view.write(p / kBlock, p % kBlock, keys.data(), values.data());
    }
  }
};

// Seconds of the process's CPU time (all threads): on a shared machine, what the work took
// while it ran, however often the OS set it aside.
double cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// Median and range of runs of `measure` (a figure per run).
template <typename Measure>
void report(const char* what, const char* unit, int reps, Measure measure, double roof, const char* roof_name) {
  std::vector<double> figures;
  for (int r = 0; r < reps; ++r) figures.push_back(measure());
  std::sort(figures.begin(), figures.end());
  const double median = figures[figures.size() / 2];
  std::printf("  %-8s %8.1f %s (%.1f-%.1f)", what, median, unit, figures.front(), figures.back());
  if (roof > 0) std::printf(", %.0f%% of the %s (%.1f %s)", 100.0 * median / roof, roof_name, roof, unit);
  std::printf("\n");
  std::fflush(stdout);
}

}  // namespace

constexpr const char* kUsage =
    "usage: attention_bench [--threads 2] [--prompt 4096] [--chunk 512] [--depth 4096] [--layers 28]\n"
    "                       [--cache f16|bf16|f32] [--reps 5] [--target AVX2] [--heads 16] [--kv-heads 8]\n"
    "                       [--head-dim 128] [--block 16]\n"
    "--prompt 0 or --depth 0 skips prefill or decode; the other numbers are positive (at most 1000000;\n"
    "--threads at most 1024)\n";

int main(int argc, char** argv) {
  size_t threads_wanted = 2, reps_wanted = 5, prompt = 4096, chunk = 512, depth = 4096, layers = 28;
  std::string cache = "f16", only_target;
  const auto fail = [](const std::string& why) {
    std::fprintf(stderr, "%s\n%s", why.c_str(), kUsage);
    return 2;
  };
  // The numeric options; only --prompt and --depth may be 0 (that test is skipped).
  const std::pair<const char*, size_t*> numbers[] = {
      {"--threads", &threads_wanted}, {"--reps", &reps_wanted}, {"--prompt", &prompt},     {"--chunk", &chunk},
      {"--depth", &depth},            {"--layers", &layers},    {"--head-dim", &kHeadDim}, {"--block", &kBlock},
      {"--heads", &kHeads},           {"--kv-heads", &kKvHeads}};
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      std::printf("%s", kUsage);
      return 0;
    }
    if (i + 1 == argc) return fail(flag + " needs a value");
    const std::string text = argv[i + 1];
    if (flag == "--cache") {
      cache = text;
      continue;
    }
    if (flag == "--target") {
      only_target = text;
      continue;
    }
    const auto number =
        std::find_if(std::begin(numbers), std::end(numbers), [&](const auto& n) { return flag == n.first; });
    if (number == std::end(numbers)) return fail("unknown option " + flag);
    char* end = nullptr;
    const unsigned long value = std::strtoul(text.c_str(), &end, 10);
    if (text.empty() || text[0] == '-' || *end != '\0') return fail(flag + " takes a number, not '" + text + "'");
    if (value == 0 && flag != "--prompt" && flag != "--depth") return fail(flag + " takes a positive number");
    if (value > 1'000'000) return fail(flag + " takes at most 1000000");
    *number->second = value;
  }
  if (threads_wanted > 1024) return fail("--threads takes at most 1024");
  if (kHeads % kKvHeads != 0) return fail("--heads must be a multiple of --kv-heads");
  const int threads = int(threads_wanted), reps = int(reps_wanted);
  DType dtype;
  try {
    dtype = parse_dtype(cache);
  } catch (const std::exception& e) {
    return fail(std::string("--cache: ") + e.what());
  }
  if (!only_target.empty()) {
    std::string names;
    bool known = false;
    for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
      names += std::string(" ") + hwy::TargetName(target);
      known = known || only_target == hwy::TargetName(target);
    }
    if (!known) return fail("--target " + only_target + ": this CPU and build run" + names);
  }
  std::minstd_rand rng(7);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  const Layer prefill_layer(dtype, prompt, rng);
  std::vector<Layer> decode_layers;
  for (size_t l = 0; l < layers; ++l) decode_layers.emplace_back(dtype, depth, rng);
  std::vector<float> q(chunk * kHeads * kHeadDim), out(q.size());
  for (float& x : q) x = uniform(rng);
  const ref::AttentionParams params{ref::AttentionParams::inverse_sqrt_scale(double(kHeadDim))};

  // Multiply-adds of the prompt: every row at position p reads p + 1 keys and values.
  double prefill_flops = 0;
  for (size_t p = 0; p < prompt; ++p) prefill_flops += 4.0 * double(kHeads * kHeadDim) * double(p + 1);
  const double decode_bytes = double(layers) * 2.0 * double(kKvHeads * kHeadDim * dtype_size(dtype)) * double(depth);

  std::printf("attention, %zu heads / %zu kv heads x %zu, %s cache, %d threads: prefill of %zu positions in chunks "
              "of %zu; decode at depth %zu over %zu layers\n",
              kHeads, kKvHeads, kHeadDim, cache.c_str(), threads, prompt, chunk, depth, layers);
  for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
    if (!only_target.empty() && only_target != hwy::TargetName(target)) continue;
    hwy::SetSupportedTargetsForTest(target);
    const double peak = kernels::fma_peak_gflops(threads);
    if (peak == 0) continue;
    const double bandwidth = kernels::read_bandwidth_gbps(threads);
    std::printf("%s\n", kernels::target_name().c_str());
    if (prompt > 0)
      report("prefill", "GFLOP/s", reps, [&] {
      std::vector<ref::AttentionRow> rows;
      const double start = cpu_seconds();
      for (size_t at = 0; at < prompt; at += chunk) {
        rows.clear();
        for (size_t p = at; p < std::min(prompt, at + chunk); ++p) rows.push_back({prefill_layer.blocks.data(), p});
        kernels::attention(q.data(), rows, prefill_layer.view, kHeads, params, out.data(), threads);
      }
      return prefill_flops / (cpu_seconds() - start) * threads / 1e9;
    }, peak, "f32 fma peak");
    if (depth > 0)
      report("decode", "GB/s", reps, [&] {
      const double start = cpu_seconds();
      for (const Layer& layer : decode_layers) {
        const ref::AttentionRow row{layer.blocks.data(), depth - 1};
        kernels::attention(q.data(), std::span(&row, 1), layer.view, kHeads, params, out.data(), threads);
      }
      return decode_bytes / (cpu_seconds() - start) * threads / 1e9;
    }, bandwidth, "read bandwidth");
  }
  hwy::SetSupportedTargetsForTest(0);
  return 0;
}
