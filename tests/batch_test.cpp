// The batch engine keeps the contract (DESIGN.md §1): whatever shares a forward pass — other
// sequences prefilling or decoding, their number and lengths, the chunking, the threads, the
// block size, cached prefixes — every sequence's logits are bitwise those it has alone. And the
// paged pool gives back every block it lends.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>

#include <unistd.h>

#include "ditto/batch.h"
#include "ditto/error.h"
#include "ditto/session.h"
#include "runtime/kv_pool.h"
#include "runtime/sampler.h"
#include "tensor/hash.h"
#include "expect_error.h"
#include "test_checkpoint.h"
#include "test_gguf.h"

namespace ditto {
namespace {

using testing::expect_error;
using testing::SplitMix64;
using testing::TinyConfig;
using testing::wide_gemma3;

using Tokens = std::vector<int32_t>;

// The logits of every position of `tokens`, computed alone: one sequence, the whole prompt in one call.
std::vector<float> alone(const std::shared_ptr<const Model>& model, const Tokens& tokens, DType cache) {
  Session session(model, {tokens.size(), cache, 1});
  return session.prefill(tokens, Logits::All);
}

bool same_row(const float* a, const float* b, size_t vocab) { return std::memcmp(a, b, vocab * sizeof(float)) == 0; }

void expect_kv_pool_idle(const BatchEngine& engine) {
  const KVStats stats = engine.kv_stats();
  EXPECT_EQ(stats.used, 0u);
  EXPECT_EQ(stats.free + stats.cached, stats.blocks);
}

struct Request {
  Tokens tokens;
  size_t arrival;  // the step from which it may start
  size_t chunk;    // positions fed per pass
};

struct Schedule {
  size_t width;  // sequences in flight at most
  int threads;
  size_t block_size;
  std::vector<Request> requests;
};

// Requests of random lengths, many starting with one of a few shared prefixes (so that the
// prefix cache hits, in full blocks and in part), some repeated whole.
Schedule random_schedule(uint64_t seed, size_t vocab, size_t max_length) {
  SplitMix64 rng(seed);
  const auto below = [&](size_t n) { return size_t(rng.next() % n); };
  Schedule s;
  s.width = 1 + below(16);
  s.threads = 1 + int(below(4));
  s.block_size = std::vector<size_t>{1, 3, 7, 16}[below(4)];
  std::vector<Tokens> prefixes(3);
  for (Tokens& prefix : prefixes)
    for (size_t i = 0, n = 1 + below(max_length / 2); i < n; ++i) prefix.push_back(int32_t(below(vocab)));
  const size_t count = 8 + below(17);
  for (size_t r = 0; r < count; ++r) {
    Request request;
    if (r > 0 && below(6) == 0) {
      request.tokens = s.requests[below(r)].tokens;
    } else {
      if (below(2) == 0) request.tokens = prefixes[below(prefixes.size())];
      for (size_t i = 0, n = 1 + below(max_length - request.tokens.size()); i < n; ++i)
        request.tokens.push_back(int32_t(below(vocab)));
    }
    request.arrival = below(12);
    request.chunk = std::vector<size_t>{1, 2, 5, 16, 64, max_length}[below(6)];
    s.requests.push_back(std::move(request));
  }
  std::stable_sort(s.requests.begin(), s.requests.end(),
                   [](const Request& a, const Request& b) { return a.arrival < b.arrival; });
  return s;
}

// Runs the schedule on one engine: requests start in order when they have arrived and fewer
// than `width` run; each pass takes the next chunk of every running one. Every computed row's
// logits are checked against the request alone. Adds the positions served from the cache to `hits`.
void run_and_check(const std::shared_ptr<const Model>& model, const Schedule& s, DType cache,
                   std::map<Tokens, std::vector<float>>& expected, const std::string& what, size_t& hits) {
  const size_t vocab = model->config().vocab_size;
  size_t longest = 0;
  for (const Request& r : s.requests) longest = std::max(longest, r.tokens.size());
  // Room for `width` of the longest request, plus a copy each: finished ones' cached blocks must
  // make way as new ones start.
  BatchOptions options;
  options.kv_blocks = s.width * ((longest + s.block_size - 1) / s.block_size + 1);
  options.block_size = s.block_size;
  options.cache_dtype = cache;
  options.threads = s.threads;
  BatchEngine engine(model, options);

  struct Running {
    const Request* request;
    SequenceId id;
    size_t fed;
  };
  std::vector<Running> running;
  size_t next = 0;
  for (size_t step = 0; next < s.requests.size() || !running.empty(); ++step) {
    while (next < s.requests.size() && s.requests[next].arrival <= step && running.size() < s.width) {
      const Request& r = s.requests[next++];
      const SequenceId id = engine.open(r.tokens);
      hits += engine.length(id);
      running.push_back({&r, id, engine.length(id)});
    }
    std::vector<BatchRow> rows;
    std::vector<std::pair<const Request*, size_t>> computed;  // (request, position) of each logits row
    for (const Running& run : running)
      for (size_t p = run.fed; p < std::min(run.fed + run.request->chunk, run.request->tokens.size()); ++p) {
        rows.push_back({run.id, run.request->tokens[p], p, true});
        computed.emplace_back(run.request, p);
      }
    if (rows.empty()) continue;
    const std::vector<float> logits = engine.forward(rows);
    for (size_t i = 0; i < computed.size(); ++i) {
      const auto [request, position] = computed[i];
      auto [found, added] = expected.try_emplace(request->tokens);
      if (added) found->second = alone(model, request->tokens, cache);
      ASSERT_TRUE(same_row(&logits[i * vocab], &found->second[position * vocab], vocab))
          << what << ": step " << step << ", position " << position << " of a request of "
          << request->tokens.size() << " tokens, " << rows.size() << " rows in the pass";
    }
    for (size_t i = running.size(); i-- > 0;) {
      running[i].fed = std::min(running[i].fed + running[i].request->chunk, running[i].request->tokens.size());
      if (running[i].fed == running[i].request->tokens.size()) {
        engine.close(running[i].id);
        running.erase(running.begin() + ptrdiff_t(i));
      }
    }
  }
  EXPECT_EQ(engine.sequences(), 0u);
  expect_kv_pool_idle(engine);
}

struct ModelCase {
  const char* name;
  std::shared_ptr<const Model> (*load)();
  DType cache;
};

TinyConfig with(DType dtype, size_t head_dim, size_t kv_heads, const char* arch) {
  TinyConfig c;
  c.dtype = dtype;
  c.head_dim = head_dim;
  c.kv_heads = kv_heads;
  c.arch = arch;
  return c;
}

const ModelCase kModels[] = {
    {"qwen3_bf16", [] { return Model::load(testing::write_checkpoint(TinyConfig{}, "batch-bf16")); }, DType::F32},
    {"qwen3_f16_head24_cache_f16",
     [] { return Model::load(testing::write_checkpoint(with(DType::F16, 24, 2, "qwen3"), "batch-f16")); }, DType::F16},
    {"llama_f32_mqa_cache_bf16",
     [] { return Model::load(testing::write_checkpoint(with(DType::F32, 16, 1, "llama"), "batch-f32")); },
     DType::BF16},
    {"gguf_q4_1", [] { return Model::load(testing::write_gguf("batch-q4_1", testing::tiny_llama(DType::Q4_1).bytes()), Numerics::Exact); },
     DType::F32},
    {"gguf_q4_k_int8",
     [] { return Model::load(testing::write_gguf("batch-q4_k", testing::tiny_llama(DType::Q4_K).bytes()), Numerics::Int8); },
     DType::F32},
    // Every layer windowed: blocks behind the window go back to the pool as sequences run.
    {"mistral_window_7",
     [] { return Model::load(testing::write_checkpoint(testing::tiny_family("mistral"), "batch-mistral")); }, DType::F32},
    // Experts gathered across the rows of a pass: each row still sums its own experts alone.
    {"mixtral_top2_of_4",
     [] { return Model::load(testing::write_checkpoint(testing::tiny_family("mixtral"), "batch-mixtral")); }, DType::F16},
    // Windows of 8 in two of three layers (a global one between): sequences of up to 90
    // positions read past them, and keep every block.
    {"gemma3_bf16",
     [] { return Model::load(testing::write_checkpoint(testing::tiny_family("gemma3_text"), "batch-gemma3")); }, DType::F32},
    // ... with heads of 256: a block of 3 positions or more holds whole pages of a layer. The
    // alone runs (no prefix cache) give back those of the windowed layers as they pass them; the
    // schedules keep their prompts' blocks whole: the same bits either way.
    {"gemma3_head256_windows_dropped", [] { return Model::load(testing::write_checkpoint(wide_gemma3(), "batch-gemma3-256")); },
     DType::F32},
};

class BatchInvariance : public ::testing::TestWithParam<ModelCase> {};

TEST_P(BatchInvariance, RandomSchedulesGiveEverySequenceItsAloneBits) {
  const ModelCase& c = GetParam();
  const auto model = c.load();
  std::map<Tokens, std::vector<float>> expected;
  size_t hits = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    const Schedule schedule = random_schedule(seed, model->config().vocab_size, 90);
    run_and_check(model, schedule, c.cache, expected,
                  std::string(c.name) + " schedule " + std::to_string(seed) + " (width " +
                      std::to_string(schedule.width) + ", " + std::to_string(schedule.threads) +
                      " threads, blocks of " + std::to_string(schedule.block_size) + ")",
                  hits);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(hits, 0u) << "the schedules never hit the prefix cache";
}

INSTANTIATE_TEST_SUITE_P(Models, BatchInvariance, ::testing::ValuesIn(kModels),
                         [](const auto& info) { return std::string(info.param.name); });

class BatchEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = Model::load(testing::write_checkpoint(TinyConfig{}, "batch-engine")); }
  static void TearDownTestSuite() { model_.reset(); }

  static Tokens tokens(size_t count, uint64_t seed) {
    SplitMix64 rng(seed);
    Tokens ids(count);
    for (auto& id : ids) id = int32_t(rng.next() % TinyConfig{}.vocab);
    return ids;
  }
  static BatchOptions options(size_t blocks, bool prefix_cache = true) {
    BatchOptions o;
    o.kv_blocks = blocks;
    o.block_size = 16;
    o.prefix_cache = prefix_cache;
    return o;
  }
  // Feeds tokens[from ..] in one pass; returns their logits.
  static std::vector<float> feed(BatchEngine& engine, SequenceId id, const Tokens& tokens, size_t from) {
    std::vector<BatchRow> rows;
    for (size_t p = from; p < tokens.size(); ++p) rows.push_back({id, tokens[p], p, true});
    return engine.forward(rows);
  }
  static void expect_alone_bits(const std::vector<float>& logits, const Tokens& tokens, size_t from) {
    const auto expected = alone(model_, tokens, DType::F32);
    const size_t vocab = TinyConfig{}.vocab;
    ASSERT_EQ(logits.size(), (tokens.size() - from) * vocab);
    EXPECT_EQ(std::memcmp(logits.data(), &expected[from * vocab], logits.size() * sizeof(float)), 0);
  }
  static std::shared_ptr<const Model> model_;
};

std::shared_ptr<const Model> BatchEngineTest::model_;

// A chat's second turn: the first turn's blocks (two full, one partial) serve the second.
TEST_F(BatchEngineTest, PrefixHitGivesTheColdBits) {
  BatchEngine engine(model_, options(16));
  const Tokens first = tokens(40, 1);
  const SequenceId a = engine.open(first);
  EXPECT_EQ(engine.length(a), 0u);
  feed(engine, a, first, 0);
  engine.close(a);
  EXPECT_EQ(engine.kv_stats().cached, 3u);

  Tokens second = first;
  for (int32_t id : tokens(9, 2)) second.push_back(id);
  const SequenceId b = engine.open(second);
  EXPECT_EQ(engine.length(b), 40u);
  expect_alone_bits(feed(engine, b, second, 40), second, 40);
  EXPECT_EQ(engine.kv_stats().prefix_hit_positions, 40u);
  engine.close(b);
  expect_kv_pool_idle(engine);
}

// Passes started before the earlier ones are waited for (as through a pipeline's stages), one
// continuing a sequence whose previous rows are still in flight: each wait() returns its own
// pass's logits, oldest first, with the bits of the sequences alone.
TEST_F(BatchEngineTest, PassesInFlightAreWaitedForInOrderWithTheAloneBits) {
  BatchEngine engine(model_, options(16));
  const Tokens a_tokens = tokens(21, 4), b_tokens = tokens(7, 5);
  const SequenceId a = engine.open(), b = engine.open();
  std::vector<BatchRow> first, second, third;
  for (size_t p = 0; p < 13; ++p) first.push_back({a, a_tokens[p], p, true});
  for (size_t p = 0; p < b_tokens.size(); ++p) second.push_back({b, b_tokens[p], p, true});
  for (size_t p = 13; p < a_tokens.size(); ++p) third.push_back({a, a_tokens[p], p, true});
  engine.start(first);
  engine.start(second);
  engine.start(third);
  EXPECT_EQ(engine.in_flight(), 3u);
  std::vector<float> a_logits = engine.wait().logits;
  const std::vector<float> b_logits = engine.wait().logits;
  const std::vector<float> rest = engine.wait().logits;
  a_logits.insert(a_logits.end(), rest.begin(), rest.end());
  expect_alone_bits(a_logits, a_tokens, 0);
  expect_alone_bits(b_logits, b_tokens, 0);
  EXPECT_EQ(engine.in_flight(), 0u);
  expect_error([&] { engine.wait(); }, "no forward pass was started");
  engine.close(a);
  engine.close(b);
  expect_kv_pool_idle(engine);
}

// A row's output computed where its logits are is what the caller would compute from them: the
// sampler's token and logprobs (the penalties reading the end of the history), the row's
// FNV-1a, and the running FNV-1a from chain_from across the sequence's rows of the pass; the
// logits come only to a row that asks for them.
TEST_F(BatchEngineTest, RowOutputsAreTheSamplersAndTheHashesOfTheLogits) {
  const Tokens prompt = tokens(9, 6);
  const std::vector<float> logits = alone(model_, prompt, DType::F32);
  const size_t vocab = model_->config().vocab_size;
  const auto row = [&](size_t p) { return std::span(logits).subspan(p * vocab, vocab); };
  SamplingParams sampling{.temperature = 0.9, .repetition_penalty = 1.3, .penalty_window = 4, .seed = 5,
                          .logprobs = true, .top_logprobs = 3};
  const Tokens history = {3, 1, 4, 1, 5, 9};
  const uint64_t chain_from = 12345;
  const RowOutput chained{.chain_hash = true, .chain_from = chain_from};
  const RowOutput last{.logits = true, .sampling = &sampling, .history = history, .row_hash = true, .chain_hash = true,
                       .chain_from = chain_from};

  BatchEngine engine(model_, options(16));
  const SequenceId id = engine.open();
  std::vector<BatchRow> rows;
  for (size_t p = 0; p < prompt.size(); ++p)
    rows.push_back({id, prompt[p], p, p >= 6, p + 1 == prompt.size() ? &last : p >= 7 ? &chained : nullptr});
  engine.start(rows);
  const PassOutput output = engine.wait();

  ASSERT_EQ(output.results.size(), 2u);  // rows 7 and 8; row 6 returns its logits alone
  ASSERT_EQ(output.logits.size(), 2 * vocab);
  EXPECT_TRUE(same_row(output.logits.data(), row(6).data(), vocab));
  EXPECT_TRUE(same_row(output.logits.data() + vocab, row(8).data(), vocab));
  const SampledToken expected = sample(row(8), history, sampling, history.size());
  EXPECT_EQ(output.results[1].sampled.token, expected.token);
  EXPECT_EQ(output.results[1].sampled.logprob, expected.logprob);
  ASSERT_EQ(output.results[1].sampled.top.size(), 3u);
  EXPECT_EQ(output.results[1].sampled.top[2].token, expected.top[2].token);
  EXPECT_EQ(output.results[0].sampled.token, -1);
  LogitsHash alone_hash, chain(chain_from);
  alone_hash.update(row(8).data(), vocab);
  EXPECT_EQ(output.results[1].row_hash, alone_hash.value());
  chain.update(row(7).data(), vocab);
  EXPECT_EQ(output.results[0].chain_hash, chain.value());
  chain.update(row(8).data(), vocab);
  EXPECT_EQ(output.results[1].chain_hash, chain.value());
  engine.close(id);
}

// A prompt cached whole still computes its last position, for its logits.
TEST_F(BatchEngineTest, AWholeCachedPromptRecomputesItsLastPosition) {
  BatchEngine engine(model_, options(16));
  const Tokens prompt = tokens(32, 3);
  const SequenceId a = engine.open(prompt);
  feed(engine, a, prompt, 0);
  engine.close(a);
  const SequenceId b = engine.open(prompt);
  EXPECT_EQ(engine.length(b), 31u);
  expect_alone_bits(feed(engine, b, prompt, 31), prompt, 31);
  engine.close(b);
  expect_kv_pool_idle(engine);
}

// Two sequences share a partly filled block and write different tokens after it: each copies
// it first, and neither changes what the other (or a third) reads.
TEST_F(BatchEngineTest, CopyOnWriteLeavesTheOtherSequenceUnchanged) {
  BatchEngine engine(model_, options(16));
  const Tokens shared = tokens(21, 4);  // one full block and 5 positions of the next
  const SequenceId a = engine.open(shared);
  feed(engine, a, shared, 0);
  engine.close(a);

  Tokens x = shared, y = shared;
  for (int32_t id : tokens(30, 5)) x.push_back(id);
  for (int32_t id : tokens(30, 6)) y.push_back(id);
  const SequenceId bx = engine.open(x), by = engine.open(y);
  ASSERT_EQ(engine.length(bx), 21u);
  ASSERT_EQ(engine.length(by), 21u);
  // Interleaved, one position at a time each, in one pass per step.
  std::vector<float> from_x, from_y;
  const size_t vocab = TinyConfig{}.vocab;
  for (size_t p = 21; p < x.size(); ++p) {
    const std::vector<BatchRow> rows = {{bx, x[p], p, true}, {by, y[p], p, true}};
    const auto logits = engine.forward(rows);
    from_x.insert(from_x.end(), logits.begin(), logits.begin() + ptrdiff_t(vocab));
    from_y.insert(from_y.end(), logits.begin() + ptrdiff_t(vocab), logits.end());
  }
  expect_alone_bits(from_x, x, 21);
  expect_alone_bits(from_y, y, 21);
  engine.close(bx), engine.close(by);
  // What they wrote serves again, and the shared block is unchanged: other sequences that start
  // with those positions get their alone bits.
  const SequenceId c = engine.open(x);
  EXPECT_EQ(engine.length(c), x.size() - 1);
  expect_alone_bits(feed(engine, c, x, x.size() - 1), x, x.size() - 1);
  Tokens z = shared;
  for (int32_t id : tokens(4, 15)) z.push_back(id);
  const SequenceId d = engine.open(z);
  EXPECT_EQ(engine.length(d), 21u);
  expect_alone_bits(feed(engine, d, z, 21), z, 21);
  engine.close(c), engine.close(d);
  expect_kv_pool_idle(engine);
}

// A running sequence's full blocks serve a sequence that starts while it runs (its partly
// filled block does not: it is still being written).
TEST_F(BatchEngineTest, RunningSequencesShareTheirFullBlocks) {
  BatchEngine engine(model_, options(16));
  const Tokens a_tokens = tokens(50, 7);
  const SequenceId a = engine.open(a_tokens);
  feed(engine, a, Tokens(a_tokens.begin(), a_tokens.begin() + 35), 0);
  Tokens b_tokens(a_tokens.begin(), a_tokens.begin() + 34);
  for (int32_t id : tokens(6, 8)) b_tokens.push_back(id);
  const SequenceId b = engine.open(b_tokens);
  EXPECT_EQ(engine.length(b), 32u);
  expect_alone_bits(feed(engine, b, b_tokens, 32), b_tokens, 32);
  expect_alone_bits(feed(engine, a, a_tokens, 35), a_tokens, 35);
  engine.close(a), engine.close(b);
  expect_kv_pool_idle(engine);
}

TEST_F(BatchEngineTest, CachedBlocksMakeWayLeastRecentlyUsedFirst) {
  BatchEngine engine(model_, options(4));
  const Tokens one = tokens(32, 9), two = tokens(32, 10);
  for (const Tokens* prompt : {&one, &two}) {
    const SequenceId id = engine.open(*prompt);
    feed(engine, id, *prompt, 0);
    engine.close(id);
  }
  EXPECT_EQ(engine.kv_stats().cached, 4u);
  EXPECT_EQ(engine.kv_stats().free, 0u);
  // A new 20-token sequence needs two blocks: `one`'s, the least recently used, make way.
  const Tokens three = tokens(20, 11);
  const SequenceId id = engine.open(three);
  expect_alone_bits(feed(engine, id, three, 0), three, 0);
  engine.close(id);
  EXPECT_EQ(engine.length(engine.open(two)), 31u);
  EXPECT_EQ(engine.length(engine.open(one)), 0u);
}

// A window of W positions needs at most the blocks that hold the last W positions and the
// chunk being computed: the others go back to the pool (published ones to the prefix cache,
// from which a later sequence with the same beginning still takes them).
TEST(SlidingWindowBlocks, BlocksBehindTheWindowAreReleasedAndStillServeThePrefixCache) {
  const TinyConfig config = testing::tiny_family("mistral");  // window 7 in every layer
  const auto model = Model::load(testing::write_checkpoint(config, "window-blocks"));
  BatchOptions options;
  options.kv_blocks = 40;
  options.block_size = 4;
  BatchEngine engine(model, options);
  SplitMix64 rng(21);
  Tokens prompt(100);
  for (auto& id : prompt) id = int32_t(rng.next() % config.vocab);
  const SequenceId a = engine.open(prompt);
  const size_t chunk = 5, vocab = config.vocab;
  std::vector<float> logits;
  for (size_t at = 0; at < prompt.size(); at += chunk) {
    std::vector<BatchRow> rows;
    for (size_t p = at; p < std::min(at + chunk, prompt.size()); ++p) rows.push_back({a, prompt[p], p, true});
    const auto pass = engine.forward(rows);
    logits.insert(logits.end(), pass.begin(), pass.end());
    // What the next row reads before it, 6 positions, lies in at most 3 blocks of 4.
    EXPECT_LE(engine.kv_stats().used, 3u) << "after position " << at + rows.size();
  }
  const auto expected = alone(model, prompt, DType::F32);
  ASSERT_EQ(logits.size(), expected.size());
  EXPECT_EQ(std::memcmp(logits.data(), expected.data(), logits.size() * sizeof(float)), 0);
  engine.close(a);
  expect_kv_pool_idle(engine);
  EXPECT_EQ(engine.kv_stats().cached, 25u);  // every block of the prompt, released early or not

  // The same prompt again: every block but the last position comes from the cache, and the last
  // position's logits are the alone bits.
  const SequenceId b = engine.open(prompt);
  EXPECT_EQ(engine.length(b), prompt.size() - 1);
  EXPECT_EQ(engine.kv_stats().used, 2u);  // positions 93 .. 98 of blocks 23 and 24
  const auto last = engine.forward(std::vector<BatchRow>{{b, prompt.back(), prompt.size() - 1, true}});
  EXPECT_EQ(std::memcmp(last.data(), &expected[(prompt.size() - 1) * vocab], vocab * sizeof(float)), 0);
  engine.close(b);
  expect_kv_pool_idle(engine);
}

// A model with a layer that sees every position keeps every block (Qwen2's lower layers).
TEST(SlidingWindowBlocks, AGlobalLayerKeepsEveryBlock) {
  const TinyConfig config = testing::tiny_family("qwen2");  // layer 0 global, layer 1 a window of 5
  BatchOptions options;
  options.kv_blocks = 8;
  options.block_size = 4;
  BatchEngine engine(Model::load(testing::write_checkpoint(config, "window-global")), options);
  const SequenceId a = engine.open();
  std::vector<BatchRow> rows;
  for (size_t p = 0; p < 30; ++p) rows.push_back({a, int32_t(p % config.vocab), p, false});
  engine.forward(rows);
  EXPECT_EQ(engine.kv_stats().used, 8u);
  engine.close(a);
  expect_kv_pool_idle(engine);
}

// A model with windowed and global layers (Gemma 3): the blocks behind every window stay for the
// global layers, but their windowed layers give their memory back (to zeros)...
TEST(SlidingWindowBlocks, DroppingAWindowedLayerZeroesItsPagesAndKeepsTheOthers) {
  const TinyConfig config = wide_gemma3();
  const auto model = Model::load(testing::write_checkpoint(config, "window-drop-pool"));
  KVPool pool(model->config(), DType::F32, 4, 3);
  const uint32_t kept = pool.take(), dropped = pool.take();
  const std::vector<float> keys(config.head_dim, 1.5f), values(config.head_dim, -2.0f);
  for (size_t l = 0; l < config.layers; ++l)
    for (uint32_t block : {kept, dropped})
      for (size_t slot = 0; slot < 4; ++slot) pool.layer(l).write(block, slot, keys.data(), values.data());
  pool.drop_window(dropped);
  EXPECT_EQ(pool.window_dropped_blocks(), 1u);
  const size_t floats = 4 * config.head_dim;  // a block of one layer's keys (or values)
  for (size_t l = 0; l < config.layers; ++l) {
    const ref::KVLayerView view = pool.layer(l);
    const bool windowed = model->config().window(l) != 0;
    for (const auto& [base, value] : {std::pair(view.k, 1.5f), std::pair(view.v, -2.0f)})
      for (uint32_t block : {kept, dropped}) {
        const auto* data = reinterpret_cast<const float*>(static_cast<const unsigned char*>(base) + view.offset(block, 0, 0));
        const float expected = windowed && block == dropped ? 0.0f : value;
        EXPECT_EQ(std::count(data, data + floats, expected), ptrdiff_t(floats)) << "layer " << l << ", block " << block;
      }
  }
  pool.release(dropped);
  EXPECT_EQ(pool.take(), dropped);  // the most recently freed
  EXPECT_EQ(pool.window_dropped_blocks(), 0u);
}

// The memory budget counts a dropped block for its global layers alone: the pool holds as many
// blocks as the budget would if all were dropped, and hands out whole ones while the memory holds
// them, cached dropped blocks making way. A block of 2 positions holds no whole page of a layer:
// nothing to count.
TEST(SlidingWindowBlocks, ABlockWithDroppedWindowsCountsOnlyTheMemoryItKeeps) {
  const auto model = Model::load(testing::write_checkpoint(wide_gemma3(), "window-budget"));
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  if (page != 4096) GTEST_SKIP() << "the blocks' sizes assume pages of 4 KiB";
  KVPool small_blocks(model->config(), DType::F32, 2, 3, 0, 0, /*count_dropped=*/true);
  EXPECT_EQ(small_blocks.dropped_block_bytes(), small_blocks.whole_block_bytes());
  EXPECT_EQ(small_blocks.blocks(), 3u);

  KVPool pool(model->config(), DType::F32, 4, 3, 0, 0, /*count_dropped=*/true);
  const size_t whole = 3 * 2 * 4096, dropped = 2 * 4096;  // keys and values of 3 layers; of the global one
  ASSERT_EQ(pool.whole_block_bytes(), whole);
  ASSERT_EQ(pool.dropped_block_bytes(), dropped);
  EXPECT_EQ(pool.budget_bytes(), 3 * whole);
  EXPECT_EQ(pool.blocks(), 9u);
  const uint32_t a = pool.take(), b = pool.take(), c = pool.take();
  EXPECT_EQ(pool.available(), 0u);
  expect_error([&] { pool.take(); }, "the KV pool is full");
  for (uint32_t block : {a, b, c}) pool.drop_window(block);
  EXPECT_EQ(pool.used_bytes(), 3 * dropped);
  EXPECT_EQ(pool.available(), 2u);
  const Tokens first = {1, 2, 3, 4}, second = {5, 6, 7, 8};
  pool.publish(b, pool.publish(a, KVPool::kRoot, first), second);
  pool.release(a);
  pool.release(b);
  EXPECT_EQ(pool.used_bytes(), dropped);  // c; a and b cached
  EXPECT_EQ(pool.available(), 2u);
  const uint32_t d = pool.take(), e = pool.take();  // blocks never used: the memory holds them beside a, b and c
  EXPECT_TRUE(d != a && d != b && e != a && e != b);
  EXPECT_EQ(pool.cached_blocks(), 2u);
  pool.drop_window(d);
  EXPECT_EQ(pool.used_bytes(), 2 * dropped + whole);
  EXPECT_EQ(pool.available(), 1u);
  // a whole block more needs the memory of a, the least recently used cached block: it gives
  // everything back and is taken again, whole.
  EXPECT_EQ(pool.take(), a);
  EXPECT_EQ(pool.cached_blocks(), 1u);
  EXPECT_EQ(pool.used_bytes(), 2 * dropped + 2 * whole);
  EXPECT_EQ(pool.window_dropped_blocks(), 3u);  // b, c, d
  // A free block that was dropped gives everything back; a whole one stays, to be taken first.
  pool.release(c);
  pool.release(e);
  EXPECT_EQ(pool.available(), 1u);
  EXPECT_EQ(pool.take(), e);
  EXPECT_EQ(pool.window_dropped_blocks(), 2u);  // b, d
}

// ... which no row reads again. A sequence written past the windows (opened without a prompt,
// as `ditto bench` computes a context), a second sharing its beginning while it runs, the whole
// of it again from the prefix cache, and a prompt that leaves it deep behind the window (its run
// ends before the dropped blocks: computed from there) get the bits of an engine whose blocks
// hold no whole page (nothing given back); a prompt's own blocks stay whole (opened from the
// cache or not), so that a later prompt that leaves it in the middle still starts from there.
TEST(SlidingWindowBlocks, AWindowedLayerKeepsOnlyItsWindowAndGivesTheSameBits) {
  const TinyConfig config = wide_gemma3();
  const auto model = Model::load(testing::write_checkpoint(config, "window-drop"));
  const size_t vocab = config.vocab;
  SplitMix64 rng(33);
  const auto random_tokens = [&](size_t count) {
    Tokens tokens(count);
    for (auto& id : tokens) id = int32_t(rng.next() % vocab);
    return tokens;
  };
  const Tokens written = random_tokens(100), prompt = random_tokens(100), scored = random_tokens(100);
  const auto branch_of = [&](const Tokens& tokens) {
    Tokens branch(tokens.begin(), tokens.begin() + 60);
    for (int32_t id : random_tokens(20)) branch.push_back(id);
    return branch;
  };
  const Tokens written_branch = branch_of(written), prompt_branch = branch_of(prompt), scored_branch = branch_of(scored);
  const auto run = [&](size_t block_size, bool pages_dropped) {
    BatchOptions options;
    options.kv_blocks = 120;
    options.block_size = block_size;
    BatchEngine engine(model, options);
    std::vector<float> logits;
    const auto feed = [&](SequenceId id, const Tokens& tokens, size_t from, size_t to) {
      for (size_t at = from; at < to; at += 5) {
        std::vector<BatchRow> rows;
        for (size_t p = at; p < std::min(at + 5, to); ++p) rows.push_back({id, tokens[p], p, true});
        const auto pass = engine.forward(rows);
        logits.insert(logits.end(), pass.begin(), pass.end());
      }
    };
    const SequenceId a = engine.open();
    feed(a, written, 0, 40);
    const SequenceId shared = engine.open(Tokens(written.begin(), written.begin() + 50));
    EXPECT_EQ(engine.length(shared), 40u);  // a's 40, in full blocks
    feed(a, written, 40, 60);  // past positions 33 .. 39, which shared's rows still read
    feed(shared, written, 40, 50);
    feed(a, written, 60, written.size());
    engine.close(shared);
    // a's next row reads positions 93 .. 100: the blocks wholly before 93 are dropped, but for
    // those of 32 .. 39, which shared read and its prompt keeps whole.
    if (pages_dropped) EXPECT_EQ(engine.kv_stats().window_dropped, (92 - 8) / block_size);
    engine.close(a);
    const SequenceId again = engine.open(written);
    EXPECT_EQ(engine.length(again), written.size() - 1);
    feed(again, written, written.size() - 1, written.size());
    engine.close(again);
    // Of its 60 cached positions, the run keeps the 40 whose window lies in blocks kept whole.
    const SequenceId b = engine.open(written_branch);
    EXPECT_EQ(engine.length(b), 40u);
    feed(b, written_branch, 40, written_branch.size());
    engine.close(b);

    const size_t dropped = engine.kv_stats().window_dropped;
    const SequenceId c = engine.open(prompt);
    feed(c, prompt, 0, prompt.size());
    engine.close(c);
    EXPECT_EQ(engine.kv_stats().window_dropped, dropped);
    const SequenceId d = engine.open(prompt_branch);
    EXPECT_EQ(engine.length(d), 60u);
    feed(d, prompt_branch, 60, prompt_branch.size());
    engine.close(d);
    // ... and so does a prompt opened to compute every position's logits, not from the cache.
    const SequenceId all_logits = engine.open(scored, false);
    EXPECT_EQ(engine.length(all_logits), 0u);
    feed(all_logits, scored, 0, scored.size());
    engine.close(all_logits);
    const SequenceId e = engine.open(scored_branch);
    EXPECT_EQ(engine.length(e), 60u);
    feed(e, scored_branch, 60, scored_branch.size());
    engine.close(e);
    expect_kv_pool_idle(engine);
    return logits;
  };
  const auto dropped = run(4, true);
  const auto whole = run(2, false);
  ASSERT_EQ(dropped.size(), whole.size());
  EXPECT_EQ(std::memcmp(dropped.data(), whole.data(), dropped.size() * sizeof(float)), 0);
}

TEST_F(BatchEngineTest, AFullPoolRefusesThePassAndChangesNothing) {
  BatchEngine engine(model_, options(3, /*prefix_cache=*/false));
  const Tokens a_tokens = tokens(40, 12), b_tokens = tokens(20, 13);
  const SequenceId a = engine.open(), b = engine.open();
  feed(engine, a, Tokens(a_tokens.begin(), a_tokens.begin() + 30), 0);  // two blocks
  std::vector<BatchRow> rows;
  for (size_t p = 0; p < b_tokens.size(); ++p) rows.push_back({b, b_tokens[p], p, true});  // two more
  EXPECT_EQ(engine.blocks_needed(rows), 2u);
  expect_error([&] { engine.forward(rows); }, "the KV pool is full");
  EXPECT_EQ(engine.length(a), 30u);
  EXPECT_EQ(engine.length(b), 0u);
  EXPECT_EQ(engine.kv_stats().used, 2u);
  // Both carry on: a to the end, then b once a is gone.
  expect_alone_bits(feed(engine, a, a_tokens, 30), a_tokens, 30);
  engine.close(a);
  expect_alone_bits(feed(engine, b, b_tokens, 0), b_tokens, 0);
}

TEST_F(BatchEngineTest, BadRowsAreRefusedAndChangeNothing) {
  BatchEngine engine(model_, options(64));
  const SequenceId a = engine.open();
  feed(engine, a, tokens(5, 14), 0);
  const auto refused = [&](std::vector<BatchRow> rows, const std::string& fragment) {
    expect_error([&] { engine.forward(rows); }, fragment);
    EXPECT_EQ(engine.length(a), 5u);
    EXPECT_EQ(engine.kv_stats().used, 1u);
  };
  refused({}, "at least one row");
  refused({{a, 1, 5, true}, {a + 1, 1, 0, true}}, "does not exist");
  refused({{a, 1, 6, true}}, "continues at 5");
  refused({{a, 1, 5, true}, {a, 1, 5, true}}, "continues at 6");
  refused({{a, 96, 5, true}}, "outside the vocabulary");
  refused({{a, -1, 5, true}}, "outside the vocabulary");
  expect_error([&] { engine.close(a + 7); }, "does not exist");
  expect_error([&] { engine.length(a + 7); }, "does not exist");

  BatchEngine small_context(Model::load(testing::write_gguf("batch-context", testing::tiny_llama(DType::Q8_0).bytes())),
                            options(64));
  const SequenceId s = small_context.open();
  std::vector<BatchRow> rows;
  for (size_t p = 0; p < 257; ++p) rows.push_back({s, 1, p, false});
  expect_error([&] { small_context.forward(rows); }, "past the model's context of 256");
  EXPECT_EQ(small_context.length(s), 0u);
}

}  // namespace
}  // namespace ditto
