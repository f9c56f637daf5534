#pragma once
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace ditto {

// A persistent pool of worker threads, started once and shared by every session. Kernels
// split independent outputs (matmul panels, attention heads and rows) over it, so neither
// the thread count nor which thread computes what can change a result. Work is handed out
// in small chunks that threads claim as they come, each from a contiguous range of its own
// first, so a worker the OS has descheduled on a busy machine delays nobody; idle workers spin
// briefly, then sleep. A run allocates nothing and goes through the kernel only when a thread
// sleeps: a forward pass hands out hundreds (a decode step of SmolLM2 135M about 150-200).
class ThreadPool {
 public:
  static ThreadPool& shared();
  ~ThreadPool();

  // Calls body(begin, end) on chunks that cover [0, count), on up to `threads` threads (the
  // caller is one of them). Returns when every chunk is done.
  void run(int threads, size_t count, const std::function<void(size_t, size_t)>& body);

 private:
  struct Job;
  ThreadPool();
  void work(size_t index);
  void wake(std::condition_variable& sleepers);
  template <typename Ready>
  void wait_until(std::condition_variable& sleepers, Ready ready);

  std::mutex run_mutex_;  // one run at a time; guards workers_
  std::vector<std::thread> workers_;
  std::unique_ptr<Job> job_;  // the current run's, rewritten by the next
  // Even: the run of this number is published (0: none yet); odd: the caller is rewriting job_.
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<int> sleepers_{0};  // threads asleep (or about to be) on the condition variables
  std::mutex sleep_mutex_;
  std::condition_variable workers_wake_;  // a new run (or stop)
  std::condition_variable caller_wake_;   // the last chunk of a run is done
};

// Shorthand for ThreadPool::shared().run(...).
inline void parallel_for(int threads, size_t count, const std::function<void(size_t, size_t)>& body) {
  ThreadPool::shared().run(threads, count, body);
}

}  // namespace ditto
