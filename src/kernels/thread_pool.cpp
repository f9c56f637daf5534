#include "kernels/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ditto {

namespace {

// About 50-100 microseconds: longer than the gap between two kernels of one forward pass,
// much shorter than the gap between user requests.
constexpr int kSpinIterations = 20000;

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

// Waits until `value` differs from `old`: spins first, then sleeps in the kernel.
template <typename T>
void wait_for_change(const std::atomic<T>& value, T old) {
  for (int i = 0; i < kSpinIterations; ++i) {
    if (value.load(std::memory_order_acquire) != old) return;
    cpu_relax();
  }
  while (value.load(std::memory_order_acquire) == old) value.wait(old, std::memory_order_acquire);
}

}  // namespace

ThreadPool& ThreadPool::shared() {
  static ThreadPool pool;
  return pool;
}

ThreadPool::~ThreadPool() {
  stopping_.store(true);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ThreadPool::start_workers(int count) {
  while (int(workers_.size()) < count) {
    const int index = int(workers_.size()) + 1;  // the caller is range 0
    workers_.emplace_back([this, index] { work(index); });
  }
}

void ThreadPool::run_range(int index) {
  const size_t begin = count_ * size_t(index) / size_t(active_);
  const size_t end = count_ * size_t(index + 1) / size_t(active_);
  if (begin < end) (*body_)(begin, end);
}

void ThreadPool::work(int index) {
  uint64_t seen = 0;
  while (true) {
    wait_for_change(generation_, seen);
    seen = generation_.load(std::memory_order_acquire);
    if (stopping_.load()) return;
    if (index < active_) run_range(index);
    // Every worker checks in, active or not, so that no worker can still be reading this
    // run's fields when the next run writes them.
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

void ThreadPool::run(int threads, size_t count, const std::function<void(size_t, size_t)>& body) {
  const int active = int(std::clamp<size_t>(size_t(std::max(threads, 1)), 1, std::max<size_t>(count, 1)));
  if (active == 1) {
    if (count > 0) body(0, count);
    return;
  }
  std::lock_guard<std::mutex> lock(run_mutex_);
  start_workers(active - 1);
  body_ = &body;
  count_ = count;
  active_ = active;
  pending_.store(int(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  run_range(0);
  for (int left = pending_.load(std::memory_order_acquire); left != 0; left = pending_.load(std::memory_order_acquire))
    wait_for_change(pending_, left);
}

}  // namespace ditto
