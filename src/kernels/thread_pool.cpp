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
// done claims from the others' in turn, so a thread the OS set aside delays nobody. Each thread
// adds the chunks it finished to `done` once, as it leaves: a counter shared per chunk moved its
// cache line between the cores at every chunk. A worker joins a run as one of its `users`, which
// the caller waits out before rewriting the job for the next run.
struct ThreadPool::Job {
  struct alignas(64) Slot {
    std::atomic<size_t> next;
    size_t end;
  };
  const std::function<void(size_t, size_t)>* body = nullptr;
  size_t count = 0, chunk = 0, chunks = 0, active = 0;
  std::unique_ptr<Slot[]> slots;
  size_t capacity = 0;
  alignas(64) std::atomic<size_t> users{0};
  alignas(64) std::atomic<size_t> done{0};

  void prepare(const std::function<void(size_t, size_t)>& run, size_t count_, size_t active_) {
    body = &run;
    count = count_;
    active = active_;
    chunk = std::max<size_t>(1, count / (active * kChunksPerThread));
    chunks = (count + chunk - 1) / chunk;
    if (capacity < active) {
      slots = std::make_unique<Slot[]>(active);
      capacity = active;
    }
    for (size_t s = 0; s < active; ++s) {
      slots[s].next.store(s * chunks / active, std::memory_order_relaxed);
      slots[s].end = (s + 1) * chunks / active;
    }
    done.store(0, std::memory_order_relaxed);
  }

  // Claims and runs chunks, from slot `first` on. Returns true if this call finished the last.
  bool claim_and_run(size_t first) {
    size_t finished = 0;
    for (size_t k = 0; k < active; ++k) {
      Slot& slot = slots[(first + k) % active];
      for (size_t i = slot.next.fetch_add(1); i < slot.end; i = slot.next.fetch_add(1)) {
        (*body)(i * chunk, std::min(count, (i + 1) * chunk));
        ++finished;
      }
    }
    return finished != 0 && done.fetch_add(finished) + finished == chunks;
  }
};

ThreadPool& ThreadPool::shared() {
  static ThreadPool pool;
  return pool;
}

ThreadPool::ThreadPool() : job_(std::make_unique<Job>()) {}

ThreadPool::~ThreadPool() {
  stopping_.store(true);
  wake(workers_wake_);
  for (auto& worker : workers_) worker.join();
}

// A sleeper counts itself in sleepers_ before it checks its condition a last time, and a waker
// reads sleepers_ after changing the value the sleepers wait for (both sequentially consistent),
// so either the sleeper sees the change or the waker sees the sleeper; then the waker takes the
// sleepers' mutex, which the sleeper holds until it waits, so the signal cannot come between.
void ThreadPool::wake(std::condition_variable& sleepers) {
  if (sleepers_.load() == 0) return;
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
  sleepers_.fetch_add(1);
  sleepers.wait(lock, ready);
  sleepers_.fetch_sub(1);
}

// Worker `index` starts on slot index + 1 (the caller's is 0) and joins the runs of at least
// index + 2 threads. A worker late for a run may find a later one published, or the job being
// rewritten (an odd generation): it joins a run only after counting itself among the job's
// users, with the generation unchanged since it read it.
void ThreadPool::work(size_t index) {
  uint64_t seen = 0;
  while (true) {
    uint64_t generation = 0;
    wait_until(workers_wake_, [&] {
      generation = generation_.load();
      return stopping_.load() || (generation % 2 == 0 && generation != seen);
    });
    if (stopping_.load()) return;
    seen = generation;
    Job& job = *job_;
    job.users.fetch_add(1);
    if (generation_.load() == generation && index + 1 < job.active && job.claim_and_run(index + 1))
      wake(caller_wake_);
    job.users.fetch_sub(1);
  }
}

void ThreadPool::run(int threads, size_t count, const std::function<void(size_t, size_t)>& body) {
  if (count == 0) return;
  const size_t active = std::min<size_t>(size_t(std::max(threads, 1)), count);
  if (active == 1) return body(0, count);
  std::lock_guard<std::mutex> run_lock(run_mutex_);
  while (workers_.size() + 1 < active) workers_.emplace_back([this, index = workers_.size()] { work(index); });
  Job& job = *job_;
  generation_.fetch_add(1);  // odd: rewriting
  // Workers still leaving the last run (a moment, unless the OS set one aside meanwhile).
  for (int i = 0; job.users.load() != 0; ++i) i < kSpinIterations ? cpu_relax() : std::this_thread::yield();
  job.prepare(body, count, active);
  generation_.fetch_add(1);  // even: published
  wake(workers_wake_);
  if (!job.claim_and_run(0)) wait_until(caller_wake_, [&] { return job.done.load() == job.chunks; });
}

}  // namespace ditto
