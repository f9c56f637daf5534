// The scheduler: continuous batching gives every request what it gets alone, whatever the number
// in flight, the row budget, the chunking or a pool that makes requests wait; requests end at
// their stop token, at the context's end or when the caller says so; bad requests are refused.
#include <gtest/gtest.h>

#include <map>

#include "runtime/scheduler.h"
#include "expect_error.h"
#include "test_checkpoint.h"

namespace ditto {
namespace {

using testing::expect_error;
using testing::SplitMix64;
using testing::TinyConfig;

std::vector<int32_t> prompt_of(size_t length, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<int32_t> ids(length);
  for (auto& id : ids) id = int32_t(rng.next() % TinyConfig{}.vocab);
  return ids;
}

class SchedulerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = Model::load(testing::write_checkpoint(TinyConfig{}, "scheduler")); }
  static void TearDownTestSuite() { model_.reset(); }

  // Runs the requests and returns their generations by request number.
  static std::map<size_t, Generation> run(const std::vector<GenerationRequest>& requests, SchedulerOptions options,
                                          size_t kv_blocks = 64) {
    BatchOptions batch;
    batch.kv_blocks = kv_blocks;
    batch.threads = 2;
    BatchEngine engine(model_, batch);
    std::map<size_t, Generation> done;
    Scheduler scheduler(engine, options, {}, [&](size_t number, Generation g) { done.emplace(number, std::move(g)); });
    for (const GenerationRequest& request : requests) scheduler.submit(request);
    scheduler.run();
    EXPECT_EQ(engine.kv_stats().used, 0u);
    return done;
  }

  static std::vector<GenerationRequest> mixed_requests() {
    std::vector<GenerationRequest> requests;
    for (size_t r = 0; r < 9; ++r) {
      GenerationRequest request;
      request.prompt = prompt_of(1 + r * 7, r);
      request.max_tokens = 3 + r % 4;
      request.hash_logits = true;
      if (r % 3 == 1) {  // some sampled, with a seed
        request.sampling.temperature = 0.9;
        request.sampling.seed = 100 + r;
      }
      requests.push_back(request);
    }
    return requests;
  }

  static std::shared_ptr<const Model> model_;
};

std::shared_ptr<const Model> SchedulerTest::model_;

void expect_same(const std::map<size_t, Generation>& a, const std::map<size_t, Generation>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [number, generation] : a) {
    const Generation& other = b.at(number);
    EXPECT_EQ(generation.ids, other.ids) << "request " << number;
    EXPECT_EQ(generation.step_hashes, other.step_hashes) << "request " << number;
    EXPECT_EQ(generation.logits_hash, other.logits_hash) << "request " << number;
    EXPECT_EQ(generation.seed, other.seed) << "request " << number;
  }
}

TEST_F(SchedulerTest, RequestsGetWhatTheyGetAloneWhateverRunsBesideThem) {
  const auto requests = mixed_requests();
  const auto alone = run(requests, {1, 0, 0});
  ASSERT_EQ(alone.size(), requests.size());
  expect_same(run(requests, {9, 0, 0}), alone);
  expect_same(run(requests, {4, 3, 0}), alone);   // prompts in chunks of 3
  expect_same(run(requests, {5, 0, 8}), alone);   // at most 8 rows a pass
  expect_same(run(requests, {9, 0, 0}, 8), alone);  // a pool of 8 blocks: requests wait for room
}

TEST_F(SchedulerTest, RequestsEndAtTheirStopTokenTheContextOrTheCallersWord) {
  GenerationRequest request;
  request.prompt = prompt_of(10, 7);
  request.max_tokens = 8;
  const Generation free = run({request}, {1, 0, 0}).at(0);
  ASSERT_EQ(free.ids.size(), 8u);
  EXPECT_EQ(free.stop, StopReason::MaxTokens);

  request.stop_tokens = {free.ids[2], 95};
  const Generation stopped = run({request}, {1, 0, 0}).at(0);
  const size_t first = size_t(std::find(free.ids.begin(), free.ids.end(), free.ids[2]) - free.ids.begin());
  EXPECT_EQ(stopped.ids, std::vector<int32_t>(free.ids.begin(), free.ids.begin() + ptrdiff_t(first) + 1));
  EXPECT_EQ(stopped.stop, StopReason::StopToken);

  request.stop_tokens.clear();
  request.max_length = 12;  // the prompt, then room for 2 positions: 3 tokens (the last is never computed)
  const Generation full = run({request}, {1, 0, 0}).at(0);
  EXPECT_EQ(full.ids, std::vector<int32_t>(free.ids.begin(), free.ids.begin() + 3));
  EXPECT_EQ(full.stop, StopReason::ContextFull);

  request.max_length = 0;
  BatchEngine engine(model_, {});
  Generation told;
  Scheduler scheduler(
      engine, {1, 0, 0}, [](size_t, const SampledToken&) { return false; }, [&](size_t, Generation g) { told = std::move(g); });
  scheduler.submit(request);
  scheduler.run();
  EXPECT_EQ(told.ids, std::vector<int32_t>{free.ids[0]});
  EXPECT_EQ(told.stop, StopReason::Stopped);
}

TEST_F(SchedulerTest, BadRequestsAreRefusedWhenSubmitted) {
  BatchOptions small;
  small.kv_blocks = 4;
  BatchEngine engine(model_, small);
  Scheduler scheduler(engine, {2, 0, 0}, {}, {});
  GenerationRequest request;
  expect_error([&] { scheduler.submit(request); }, "the prompt is empty");
  request.prompt = prompt_of(20, 1);
  request.max_tokens = 0;
  expect_error([&] { scheduler.submit(request); }, "at least one token");
  request.max_tokens = 100;
  expect_error([&] { scheduler.submit(request); }, "needs up to 73728 bytes of KV cache and the pool holds 32768");
  request.max_tokens = 4;
  request.max_length = 20;
  expect_error([&] { scheduler.submit(request); }, "leaves no room to generate in a context of 20 positions");
  request.max_length = 0;
  request.prompt = {1, 96};
  expect_error([&] { scheduler.submit(request); }, "token id 96 is outside the vocabulary");
  request.prompt = {1, 2};
  request.sampling.temperature = -1;
  expect_error([&] { scheduler.submit(request); }, "temperature must be a finite number >= 0");
  EXPECT_TRUE(scheduler.idle());
  expect_error([&] { Scheduler(engine, {8, 0, 4}, {}, {}); }, "a pass of 4 rows cannot hold a decode row for each of 8");
}

// Gemma 3's windowed layers give their memory back behind the window, and the budget counts
// that: two requests of 108 positions, each more blocks than the budget holds whole, run in it
// one after the other (each promised what it may hold at once) with the bits of a roomy pool,
// where they run side by side.
TEST(SchedulerWindows, RequestsFitTheMemoryTheirDroppedWindowsLeave) {
  const auto model = Model::load(testing::write_checkpoint(testing::wide_gemma3(), "scheduler-windows"));
  struct Run {
    std::map<size_t, Generation> done;
    std::vector<size_t> order;  // the request of each token, as chosen
    size_t most_blocks = 0, most_bytes = 0, budget = 0;
  };
  const auto run = [&](size_t kv_blocks) {
    BatchOptions batch;
    batch.kv_blocks = kv_blocks;
    batch.block_size = 4;  // a 4 KiB page of each layer's keys (and values) a block
    BatchEngine engine(model, batch);
    Run out;
    out.budget = engine.kv_stats().budget_bytes;
    Scheduler scheduler(
        engine, {2, 0, 0},
        [&](size_t number, const SampledToken&) {
          out.order.push_back(number);
          out.most_blocks = std::max(out.most_blocks, engine.kv_stats().used);
          out.most_bytes = std::max(out.most_bytes, engine.kv_stats().used_bytes);
          return true;
        },
        [&](size_t number, Generation g) { out.done.emplace(number, std::move(g)); });
    for (uint64_t r = 0; r < 2; ++r) {
      GenerationRequest request;
      request.prompt = prompt_of(8, 40 + r);
      request.max_tokens = 100;
      request.hash_logits = true;
      scheduler.submit(request);
    }
    scheduler.run();
    EXPECT_EQ(engine.kv_stats().used_bytes, 0u);
    return out;
  };
  const Run roomy = run(64), tight = run(16);
  ASSERT_EQ(roomy.done.size(), 2u);
  expect_same(tight.done, roomy.done);
  EXPECT_NE(roomy.order[0], roomy.order[1]);  // side by side
  EXPECT_EQ(tight.order, [] {
    std::vector<size_t> order(200, 1);
    std::fill(order.begin(), order.begin() + 100, 0);
    return order;
  }());
  EXPECT_GT(tight.most_blocks, 16u);
  EXPECT_LE(tight.most_bytes, tight.budget);
}

}  // namespace
}  // namespace ditto
