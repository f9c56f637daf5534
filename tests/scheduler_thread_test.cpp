// SchedulerThread: requests submitted from many threads at random moments get exactly what
// each gets alone on a plain Scheduler (ids, the hash of every step's logits, logprobs);
// cancelled requests end before the next step and give their blocks back; the thread sleeps
// when idle and wakes for work.
#include <gtest/gtest.h>

#include <future>
#include <map>
#include <thread>

#include "ditto/error.h"
#include "runtime/scheduler.h"
#include "runtime/scheduler_thread.h"
#include "expect_error.h"
#include "test_checkpoint.h"

namespace ditto {
namespace {

using namespace std::chrono_literals;
using testing::SplitMix64;
using testing::TinyConfig;

GenerationRequest request(std::vector<int32_t> prompt, size_t max_tokens, double temperature = 0.0, uint64_t seed = 1) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.hash_logits = true;
  r.sampling.temperature = temperature;
  r.sampling.seed = seed;
  return r;
}

class SchedulerThreadTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = Model::load(testing::write_checkpoint(TinyConfig{}, "scheduler-thread")); }
  static void TearDownTestSuite() { model_.reset(); }

  static BatchOptions pool(size_t blocks) {
    BatchOptions options;
    options.kv_blocks = blocks;
    options.block_size = 4;
    options.threads = 2;
    return options;
  }

  // Requests of mixed lengths, some sharing a prefix, sampled with their own seeds and logprobs.
  static std::vector<GenerationRequest> requests(size_t count) {
    SplitMix64 rng(5);
    const size_t vocab = model_->config().vocab_size;
    std::vector<int32_t> prefix;
    for (int i = 0; i < 13; ++i) prefix.push_back(int32_t(rng.next() % vocab));
    std::vector<GenerationRequest> list;
    for (size_t r = 0; r < count; ++r) {
      std::vector<int32_t> prompt;
      if (r % 3 == 0) prompt = prefix;
      for (size_t i = 0, n = 1 + rng.next() % 30; i < n; ++i) prompt.push_back(int32_t(rng.next() % vocab));
      GenerationRequest sampled = request(prompt, 1 + rng.next() % 12, r % 4 == 0 ? 0.0 : 0.9, 1000 + r);
      sampled.sampling.top_p = 0.95;
      sampled.sampling.logprobs = true;
      sampled.sampling.top_logprobs = int(r % 3);
      list.push_back(std::move(sampled));
    }
    return list;
  }

  static Generation alone(const GenerationRequest& request) {
    BatchEngine engine(model_, pool(64));
    Generation result;
    Scheduler scheduler(engine, {1, 0, 0}, nullptr, [&](size_t, Generation g) { result = std::move(g); });
    scheduler.submit(request);
    scheduler.run();
    return result;
  }

  static void expect_same(const Generation& got, const Generation& expected) {
    EXPECT_EQ(got.ids, expected.ids);
    EXPECT_EQ(got.step_hashes, expected.step_hashes);
    EXPECT_EQ(got.seed, expected.seed);
    EXPECT_EQ(got.stop, expected.stop);
    ASSERT_EQ(got.sampled.size(), expected.sampled.size());
    for (size_t i = 0; i < got.sampled.size(); ++i) {
      EXPECT_EQ(got.sampled[i].token, expected.sampled[i].token);
      EXPECT_EQ(std::bit_cast<uint32_t>(got.sampled[i].logprob), std::bit_cast<uint32_t>(expected.sampled[i].logprob));
      ASSERT_EQ(got.sampled[i].top.size(), expected.sampled[i].top.size());
      for (size_t k = 0; k < got.sampled[i].top.size(); ++k) {
        EXPECT_EQ(got.sampled[i].top[k].token, expected.sampled[i].top[k].token);
        EXPECT_EQ(std::bit_cast<uint32_t>(got.sampled[i].top[k].logprob),
                  std::bit_cast<uint32_t>(expected.sampled[i].top[k].logprob));
      }
    }
  }

  static std::shared_ptr<const Model> model_;
};

std::shared_ptr<const Model> SchedulerThreadTest::model_;

TEST_F(SchedulerThreadTest, RequestsFromManyThreadsGetWhatTheyGetAlone) {
  const std::vector<GenerationRequest> list = requests(24);
  for (const auto& [width, batch_tokens] : std::vector<std::pair<size_t, size_t>>{{3, 7}, {16, 0}}) {
    BatchEngine engine(model_, pool(200));
    SchedulerThread scheduler(engine, {width, 5, batch_tokens});
    std::vector<std::promise<Generation>> done(list.size());
    std::vector<std::vector<int32_t>> streamed(list.size());
    std::vector<std::thread> clients;
    for (size_t c = 0; c < 4; ++c)
      clients.emplace_back([&, c] {
        SplitMix64 rng(c);
        for (size_t r = c; r < list.size(); r += 4) {
          std::this_thread::sleep_for(std::chrono::microseconds(rng.next() % 3000));
          scheduler.submit(
              list[r], [&, r](const SampledToken& token) { return streamed[r].push_back(token.token), true; },
              [&, r](Generation g) { done[r].set_value(std::move(g)); });
        }
      });
    for (std::thread& client : clients) client.join();
    for (size_t r = 0; r < list.size(); ++r) {
      SCOPED_TRACE("request " + std::to_string(r) + ", width " + std::to_string(width));
      const Generation got = done[r].get_future().get();
      expect_same(got, alone(list[r]));
      EXPECT_EQ(streamed[r], got.ids);
    }
    ASSERT_TRUE(scheduler.wait_idle(10s));
    const SchedulerThread::Status status = scheduler.status();
    EXPECT_EQ(status.waiting + status.running, 0u);
    EXPECT_EQ(status.kv.used, 0u);
    EXPECT_GT(status.kv.prefix_hit_positions, 0u);
  }
}

TEST_F(SchedulerThreadTest, CancelEndsARunningRequestBeforeTheNextStep) {
  BatchEngine engine(model_, pool(400));
  SchedulerThread scheduler(engine, {4, 0, 0});
  // The third token's callback holds the scheduler's thread until the request is cancelled.
  std::promise<void> third_token, cancelled_now;
  std::promise<Generation> cancelled, other;
  int seen = 0;
  const auto ticket = scheduler.submit(
      request({1, 2, 3, 4, 5}, 300),
      [&](const SampledToken&) {
        if (++seen == 3) third_token.set_value(), cancelled_now.get_future().wait();
        return true;
      },
      [&](Generation g) { cancelled.set_value(std::move(g)); });
  const GenerationRequest short_one = request({7, 8, 9}, 6);
  scheduler.submit(short_one, nullptr, [&](Generation g) { other.set_value(std::move(g)); });
  third_token.get_future().wait();
  scheduler.cancel(ticket);
  cancelled_now.set_value();
  const Generation result = cancelled.get_future().get();
  EXPECT_EQ(result.stop, StopReason::Cancelled);
  EXPECT_EQ(result.ids.size(), 3u);
  expect_same(other.get_future().get(), alone(short_one));
  ASSERT_TRUE(scheduler.wait_idle(10s));
  EXPECT_EQ(scheduler.status().kv.used, 0u);
  scheduler.cancel(ticket);  // finished: ignored
}

TEST_F(SchedulerThreadTest, CancelDropsAWaitingRequest) {
  BatchEngine engine(model_, pool(400));
  SchedulerThread scheduler(engine, {1, 0, 0});
  // The first request's first token holds the scheduler's thread while the second is queued;
  // once both queued requests are dropped, its next token holds it until it is cancelled too
  // (left running, it could reach its 300 tokens first on a busy machine).
  std::promise<void> running, go_on, a_cancelled;
  std::promise<Generation> first, second;
  bool started = false;
  int dropped_count = 0;  // on the scheduler's thread
  const auto a = scheduler.submit(
      request({1, 2, 3}, 300),
      [&](const SampledToken&) {
        if (!started) started = true, running.set_value(), go_on.get_future().wait();
        else if (dropped_count == 2) ++dropped_count, a_cancelled.get_future().wait();
        return true;
      },
      [&](Generation g) { first.set_value(std::move(g)); });
  running.get_future().wait();
  const auto b = scheduler.submit(request({4, 5, 6}, 2, 1.0, 77), nullptr, [&](Generation g) {
    ++dropped_count;
    second.set_value(std::move(g));
  });
  GenerationRequest greedy = request({7, 8}, 2);
  greedy.sampling.seed.reset();  // a greedy request has none (the 1 left in its storage must not show)
  std::promise<Generation> third;
  const auto c = scheduler.submit(greedy, nullptr, [&](Generation g) {
    ++dropped_count;
    third.set_value(std::move(g));
  });
  const SchedulerThread::Status status = scheduler.status();  // as of the last step: `a` may count as waiting
  EXPECT_GE(status.waiting, 2u);
  EXPECT_EQ(status.waiting + status.running, 3u);
  scheduler.cancel(b);
  scheduler.cancel(c);
  go_on.set_value();
  const Generation dropped = second.get_future().get();
  EXPECT_EQ(dropped.stop, StopReason::Cancelled);
  EXPECT_TRUE(dropped.ids.empty());
  EXPECT_EQ(dropped.seed, 77u);
  const Generation dropped_greedy = third.get_future().get();
  EXPECT_EQ(dropped_greedy.stop, StopReason::Cancelled);
  EXPECT_EQ(dropped_greedy.seed, 0u);
  scheduler.cancel(a);
  a_cancelled.set_value();
  EXPECT_EQ(first.get_future().get().stop, StopReason::Cancelled);
  ASSERT_TRUE(scheduler.wait_idle(10s));
  EXPECT_EQ(scheduler.status().kv.used, 0u);
}

TEST_F(SchedulerThreadTest, CancelAllAndDestructionEndEveryRequest) {
  BatchEngine engine(model_, pool(400));
  std::vector<std::promise<Generation>> done(6);
  {
    SchedulerThread scheduler(engine, {2, 0, 0});
    for (size_t r = 0; r < 3; ++r)
      scheduler.submit(request({1, int32_t(r)}, 300), nullptr,
                       [&, r](Generation g) { done[r].set_value(std::move(g)); });
    scheduler.cancel_all();
    for (size_t r = 0; r < 3; ++r) EXPECT_EQ(done[r].get_future().get().stop, StopReason::Cancelled);
    for (size_t r = 3; r < 6; ++r)
      scheduler.submit(request({2, int32_t(r)}, 300), nullptr,
                       [&, r](Generation g) { done[r].set_value(std::move(g)); });
  }
  for (size_t r = 3; r < 6; ++r) EXPECT_EQ(done[r].get_future().get().stop, StopReason::Cancelled);
  EXPECT_EQ(engine.kv_stats().used, 0u);
}

TEST_F(SchedulerThreadTest, ACallbackMaySubmitMoreAndStopStrings) {
  // The way a server starts the other choices of a request once the first has its prompt cached.
  BatchEngine engine(model_, pool(100));
  SchedulerThread scheduler(engine, {4, 0, 0});
  const GenerationRequest first = request({3, 1, 4, 1, 5, 9, 2, 6, 5, 3}, 8);
  const GenerationRequest second = request(first.prompt, 8, 1.0, 9);
  std::promise<Generation> a, b;
  bool submitted = false;
  scheduler.submit(
      first,
      [&](const SampledToken&) {
        if (!submitted) scheduler.submit(second, nullptr, [&](Generation g) { b.set_value(std::move(g)); });
        submitted = true;
        return true;
      },
      [&](Generation g) { a.set_value(std::move(g)); });
  expect_same(a.get_future().get(), alone(first));
  const Generation got = b.get_future().get();
  expect_same(got, alone(second));
  EXPECT_EQ(got.cached_positions, 8u);  // the first's two full blocks of 4

  std::promise<Generation> stopped;
  int count = 0;
  scheduler.submit(first, [&](const SampledToken&) { return ++count < 2; },
                   [&](Generation g) { stopped.set_value(std::move(g)); });
  const Generation result = stopped.get_future().get();
  EXPECT_EQ(result.stop, StopReason::Stopped);
  EXPECT_EQ(result.ids.size(), 2u);
}

TEST_F(SchedulerThreadTest, SubmitChecksTheRequestInTheCallersThread) {
  BatchEngine engine(model_, pool(8));
  SchedulerThread scheduler(engine, {2, 0, 0});
  testing::expect_error([&] { scheduler.submit(request({}, 4), nullptr, nullptr); }, "the prompt is empty");
  testing::expect_error([&] { scheduler.submit(request({1, 100000}, 4), nullptr, nullptr); }, "outside the vocabulary");
  testing::expect_error([&] { scheduler.submit(request({1}, 100), nullptr, nullptr); },
                        "needs up to 55296 bytes of KV cache and the pool holds 16384");
  testing::expect_error([&] { scheduler.submit(request({1}, 4, -1.0), nullptr, nullptr); }, "temperature");
  GenerationRequest unseeded = request({1}, 4, 1.0);
  unseeded.sampling.seed.reset();
  const GenerationRequest checked = scheduler.check(unseeded);
  EXPECT_TRUE(checked.sampling.seed.has_value());
  EXPECT_EQ(checked.max_length, model_->config().max_positions);
  EXPECT_TRUE(scheduler.wait_idle(1s));
}

}  // namespace
}  // namespace ditto
