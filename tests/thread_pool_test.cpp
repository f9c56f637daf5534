#include "kernels/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace ditto {
namespace {

TEST(ThreadPool, CoversEveryIndexOnceForAnyCountAndThreads) {
  for (const int threads : {1, 2, 3, 5})
    for (const size_t count : std::vector<size_t>{1, 2, 3, 7, 8, 13, 97, 1000}) {
      std::vector<std::atomic<int>> visits(count);
      parallel_for(threads, count, [&](size_t begin, size_t end) {
        ASSERT_LT(begin, end);
        ASSERT_LE(end, count);
        for (size_t i = begin; i < end; ++i) visits[i].fetch_add(1);
      });
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(visits[i].load(), 1) << "threads " << threads << " count " << count << " index " << i;
    }
}

// Each thread starts on a range of its own; one held up (as by the OS) must not hold up the
// rest of its range: the others take it over. The first chunk to start waits until every
// other chunk is done, which only happens if its range's remaining chunks are taken by others.
TEST(ThreadPool, OthersTakeOverTheRangeOfAThreadHeldUp) {
  constexpr size_t kCount = 64;
  std::mutex mutex;
  std::condition_variable changed;
  size_t done = 0;
  bool first_taken = false, waited_out = false;
  parallel_for(2, kCount, [&](size_t begin, size_t end) {
    std::unique_lock<std::mutex> lock(mutex);
    if (!first_taken) {
      first_taken = true;
      waited_out = !changed.wait_for(lock, std::chrono::seconds(30), [&] { return done + (end - begin) == kCount; });
    }
    done += end - begin;
    changed.notify_all();
  });
  EXPECT_FALSE(waited_out);
  EXPECT_EQ(done, kCount);
}

// A run on 2 threads after one on 5 (which started 4 workers) keeps to 2 threads: the workers
// beyond the run's count stay out of it.
TEST(ThreadPool, KeepsToTheThreadsOfTheRun) {
  parallel_for(5, 5, [](size_t, size_t) {});
  std::mutex mutex;
  std::set<std::thread::id> ids;
  parallel_for(2, 40, [&](size_t, size_t) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // time for every worker to turn up
    std::lock_guard<std::mutex> lock(mutex);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_LE(ids.size(), 2u);
}

// Workers fall asleep between runs far apart (as between a server's requests) and wake for the
// next: the caller's chunk waits for the other, which only a worker can take.
TEST(ThreadPool, WorkersAsleepWakeForTheNextRun) {
  for (int round = 0; round < 3; ++round) {
    parallel_for(2, 2, [](size_t, size_t) {});
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // far past the workers' spinning
    std::mutex mutex;
    std::condition_variable changed;
    bool second_done = false, waited_out = false;
    parallel_for(2, 2, [&](size_t begin, size_t) {
      std::unique_lock<std::mutex> lock(mutex);
      if (begin == 0) {
        waited_out = !changed.wait_for(lock, std::chrono::seconds(30), [&] { return second_done; });
      } else {
        second_done = true;
        changed.notify_all();
      }
    });
    EXPECT_FALSE(waited_out) << "round " << round;
  }
}

}  // namespace
}  // namespace ditto
