// What this CPU can do, for the roofline lines of the benchmarks:
//  - the FP32 fma throughput: independent fma chains in registers on every thread, no memory
//    traffic. Under ditto's numerics contract every multiply-add of a prefill is one f32 fma, so
//    this is the ceiling of prefill GFLOP/s;
//  - the read bandwidth: every thread streams its share of a buffer far larger than the caches,
//    the ceiling of decode (weights, keys and values read once per step).
// Each is timed in the CPU time of the threads doing it, so that a machine busy with other work
// does not lower the ceiling: on an idle machine that is the elapsed time.
#include <algorithm>
#include <atomic>
#include <ctime>
#include <sys/mman.h>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/thread_pool.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd/peak.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "kernels/simd/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace ditto::HWY_NAMESPACE {

inline double thread_cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// Runs `jobs` jobs of `work` (which does `units` of something) on `threads` threads, `reps`
// times; returns the best over reps of the sum over jobs of units per CPU second.
template <typename Work>
double BestRate(int threads, size_t jobs, double units, int reps, const Work& work) {
  double best = 0.0;
  std::vector<double> seconds(jobs);
  for (int repetition = 0; repetition < reps; ++repetition) {
    parallel_for(threads, jobs, [&](size_t begin, size_t end) {
      for (size_t job = begin; job < end; ++job) {
        const double start = thread_cpu_seconds();
        work(job);
        seconds[job] = thread_cpu_seconds() - start;
      }
    });
    double rate = 0.0;
    for (double s : seconds) rate += units / s;
    best = std::max(best, rate);
  }
  return best;
}

#if DITTO_SIMD_HAS_FMA

// Enough independent chains to cover the fma latency on every fma port.
constexpr size_t kChains = 12;
constexpr size_t kSteps = size_t(1) << 22;  // 50 million vector fmas per thread and run

// Runs kSteps fmas on each of kChains registers; returns a sum that the caller keeps, so that
// the compiler cannot drop the work.
HWY_NOINLINE float FmaChains(float seed) {
  const DF d;
  const VF factor = hn::Set(d, 0.999999f), addend = hn::Set(d, 1e-7f);
  VF chains[kChains];
  for (size_t c = 0; c < kChains; ++c) chains[c] = hn::Set(d, seed + float(c));
  for (size_t step = 0; step < kSteps; ++step)
    for (size_t c = 0; c < kChains; ++c) chains[c] = hn::MulAdd(chains[c], factor, addend);
  VF sum = chains[0];
  for (size_t c = 1; c < kChains; ++c) sum = hn::Add(sum, chains[c]);
  return hn::GetLane(sum);
}

double FmaPeakGflops(int threads) {
  std::atomic<float> sink{0.0f};
  const double flops = 2.0 * double(kSteps) * double(kChains) * double(hn::Lanes(DF()));
  return BestRate(threads, size_t(threads), flops / 1e9, 5,
                  [&](size_t job) { sink.store(FmaChains(float(job)), std::memory_order_relaxed); });
}

#else
double FmaPeakGflops(int) { return 0.0; }
#endif  // DITTO_SIMD_HAS_FMA

constexpr size_t kStreamBytes = size_t(1) << 30;  // far beyond any cache

// The sum of a stretch of memory, four vectors at a time: every byte read once.
HWY_NOINLINE float ReadStretch(const float* data, size_t count) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  auto s0 = hn::Zero(d), s1 = s0, s2 = s0, s3 = s0;
  for (size_t i = 0; i + 4 * lanes <= count; i += 4 * lanes) {
    s0 = hn::Add(s0, hn::LoadU(d, data + i));
    s1 = hn::Add(s1, hn::LoadU(d, data + i + lanes));
    s2 = hn::Add(s2, hn::LoadU(d, data + i + 2 * lanes));
    s3 = hn::Add(s3, hn::LoadU(d, data + i + 3 * lanes));
  }
  return hn::GetLane(hn::Add(hn::Add(s0, s1), hn::Add(s2, s3)));
}

double ReadBandwidthGbps(int threads) {
  void* memory = mmap(nullptr, kStreamBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return 0.0;
  const auto* data = static_cast<const float*>(memory);
  const size_t share = kStreamBytes / sizeof(float) / size_t(threads);
  std::fill_n(static_cast<float*>(memory), kStreamBytes / sizeof(float), 1.0f);  // touch every page
  std::atomic<float> sink{0.0f};
  const double gigabytes = double(share * sizeof(float)) / 1e9;
  const double best = BestRate(threads, size_t(threads), gigabytes, 3, [&](size_t job) {
    sink.store(ReadStretch(data + job * share, share), std::memory_order_relaxed);
  });
  munmap(memory, kStreamBytes);
  return best;
}
}  // namespace ditto::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ditto::kernels {

HWY_EXPORT(FmaPeakGflops);
HWY_EXPORT(ReadBandwidthGbps);

double fma_peak_gflops(int threads) { return HWY_DYNAMIC_DISPATCH(FmaPeakGflops)(threads); }
double read_bandwidth_gbps(int threads) { return HWY_DYNAMIC_DISPATCH(ReadBandwidthGbps)(threads); }

}  // namespace ditto::kernels
#endif
