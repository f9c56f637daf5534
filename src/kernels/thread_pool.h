#pragma once
#include <atomic>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ditto {

// A persistent pool of worker threads, started once and shared by every session. Kernels
// split independent outputs (matmul panels, attention heads and rows) over it, so the
// thread count never changes a result. Idle workers spin briefly, then sleep on a futex, so
// that a busy machine is not slowed by threads that wait.
class ThreadPool {
 public:
  static ThreadPool& shared();
  ~ThreadPool();

  // Calls body(begin, end) on `threads` contiguous ranges that cover [0, count); the caller
  // runs the first range itself. Returns when all ranges are done.
  void run(int threads, size_t count, const std::function<void(size_t, size_t)>& body);

 private:
  ThreadPool() = default;
  void start_workers(int count);
  void work(int index);
  void run_range(int index);

  std::mutex run_mutex_;  // one run at a time
  std::vector<std::thread> workers_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stopping_{false};
  const std::function<void(size_t, size_t)>* body_ = nullptr;
  size_t count_ = 0;
  int active_ = 1;
};

// Shorthand for ThreadPool::shared().run(...).
inline void parallel_for(int threads, size_t count, const std::function<void(size_t, size_t)>& body) {
  ThreadPool::shared().run(threads, count, body);
}

}  // namespace ditto
