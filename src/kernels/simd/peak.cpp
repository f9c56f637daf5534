// The FP32 fma throughput this CPU reaches, for the roofline line of `ditto bench`: independent
// fma chains in registers on every thread, no memory traffic. Under ditto's numerics contract
// every multiply-add of a prefill is one f32 fma, so this is the ceiling of prefill GFLOP/s.
#include <algorithm>
#include <atomic>
#include <chrono>

#include "kernels/kernels.h"
#include "kernels/thread_pool.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/simd/peak.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "kernels/simd/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace ditto::HWY_NAMESPACE {
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
  double best = 0.0;
  for (int repetition = 0; repetition < 5; ++repetition) {
    const auto start = std::chrono::steady_clock::now();
    parallel_for(threads, size_t(threads), [&](size_t begin, size_t end) {
      for (size_t job = begin; job < end; ++job) sink.store(FmaChains(float(job)), std::memory_order_relaxed);
    });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double flops = 2.0 * double(threads) * double(kSteps) * double(kChains) * double(hn::Lanes(DF()));
    best = std::max(best, flops / seconds / 1e9);
  }
  return best;
}

#else
double FmaPeakGflops(int) { return 0.0; }
#endif  // DITTO_SIMD_HAS_FMA
}  // namespace ditto::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ditto::kernels {

HWY_EXPORT(FmaPeakGflops);

double fma_peak_gflops(int threads) { return HWY_DYNAMIC_DISPATCH(FmaPeakGflops)(threads); }

}  // namespace ditto::kernels
#endif
