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
// Chunks per thread: enough to balance uneven progress, few enough to keep claiming cheap.
constexpr size_t kChunksPerThread = 4;

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

}  // namespace

// One run: the chunks are dealt out in one contiguous range per thread (a slot), which each
// thread claims from the front, chunk after chunk, so that what it reads next follows what it
// read last (prefetched ahead, or found by the hardware's prefetcher); a thread whose range is
// done claims from the others' in turn, so a thread the OS set aside delays nobody. `done`
// counts finished chunks. A worker that arrives late holds the job alive through its
// shared_ptr, finds no chunk left and leaves.
struct ThreadPool::Job {
  struct alignas(64) Slot {
    std::atomic<size_t> next;
    size_t end;
  };
  const std::function<void(size_t, size_t)>* body;
  size_t count, chunk, chunks;
  std::vector<Slot> slots;
  std::atomic<size_t> arrivals{0};
  std::atomic<size_t> done{0};

  Job(const std::function<void(size_t, size_t)>& run, size_t count_, size_t active)
      : body(&run), count(count_), chunk(std::max<size_t>(1, count_ / (active * kChunksPerThread))),
        chunks((count_ + chunk - 1) / chunk), slots(active) {
    for (size_t s = 0; s < active; ++s) {
      slots[s].next.store(s * chunks / active, std::memory_order_relaxed);
      slots[s].end = (s + 1) * chunks / active;
    }
  }

  // Returns true if this call finished the last chunk.
  bool claim_and_run() {
    bool finished_last = false;
    const size_t first = arrivals.fetch_add(1);
    for (size_t k = 0; k < slots.size(); ++k) {
      Slot& slot = slots[(first + k) % slots.size()];
      for (size_t i = slot.next.fetch_add(1); i < slot.end; i = slot.next.fetch_add(1)) {
        (*body)(i * chunk, std::min(count, (i + 1) * chunk));
        finished_last = done.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks;
      }
    }
    return finished_last;
  }
};

ThreadPool& ThreadPool::shared() {
  static ThreadPool pool;
  return pool;
}

ThreadPool::~ThreadPool() {
  stopping_.store(true);
  generation_.fetch_add(1, std::memory_order_release);
  wake(workers_wake_);
  for (auto& worker : workers_) worker.join();
}

// Sleeping goes through a mutex and condition variables: a waker takes the mutex after
// changing the value, so a sleeper either sees the change or gets the signal.
void ThreadPool::wake(std::condition_variable& sleepers) {
  { std::lock_guard<std::mutex> lock(sleep_mutex_); }
  sleepers.notify_all();
}

template <typename Ready>
void ThreadPool::wait_until(std::condition_variable& sleepers, Ready ready) {
  for (int i = 0; i < kSpinIterations; ++i) {
    if (ready()) return;
    cpu_relax();
  }
  std::unique_lock<std::mutex> lock(sleep_mutex_);
  sleepers.wait(lock, ready);
}

void ThreadPool::work() {
  uint64_t seen = 0;
  while (true) {
    // A worker that arrives late for a run may read the generation of a later run, or of
    // the stop, as `seen`: so the stop is part of the condition, not only a new generation.
    wait_until(workers_wake_,
               [&] { return stopping_.load() || generation_.load(std::memory_order_acquire) != seen; });
    if (stopping_.load()) return;
    std::shared_ptr<Job> job;
    {
      std::lock_guard<std::mutex> lock(job_mutex_);
      job = job_;
      seen = generation_.load(std::memory_order_acquire);
    }
    if (job && job->claim_and_run()) wake(caller_wake_);
  }
}

void ThreadPool::run(int threads, size_t count, const std::function<void(size_t, size_t)>& body) {
  if (count == 0) return;
  const size_t active = std::min<size_t>(size_t(std::max(threads, 1)), count);
  if (active == 1) return body(0, count);
  std::lock_guard<std::mutex> run_lock(run_mutex_);
  auto job = std::make_shared<Job>(body, count, active);
  {
    std::lock_guard<std::mutex> lock(job_mutex_);
    while (workers_.size() + 1 < active) workers_.emplace_back([this] { work(); });
    job_ = job;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake(workers_wake_);
  job->claim_and_run();
  wait_until(caller_wake_, [&] { return job->done.load(std::memory_order_acquire) == job->chunks; });
  std::lock_guard<std::mutex> lock(job_mutex_);
  job_.reset();
}

}  // namespace ditto
