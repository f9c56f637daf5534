#include "runtime/pipeline.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "model/weights.h"
#include "runtime/kv_pool.h"

namespace ditto {

#ifdef DITTO_MPI
std::unique_ptr<PipelineLink> open_mpi_link(double timeout_seconds);  // runtime/mpi_link.cpp
#endif

namespace {

// Tags: the head's orders (and passes), the hidden state of a pass's rows, the logits back, the
// results of the rows with an output back.
constexpr int kOrders = 1, kHidden = 2, kLogits = 3, kResults = 4, kHeartbeatAnswer = 5;
enum Order : uint64_t { kConfigure = 1, kRelease = 2, kPass = 3, kFinish = 4, kHeartbeat = 5 };
// What a logit row asks for: the bits of its first word.
constexpr uint64_t kHasOutput = 1, kWholeRow = 2, kSample = 4, kRowHash = 8, kChainHash = 16;

uint64_t bits_of(double value) { return std::bit_cast<uint64_t>(value); }
uint64_t bits_of(float value) { return std::bit_cast<uint32_t>(value); }

// The words of a message, read in order; one that ends early or says what cannot be is a bug
// or another program.
class Reader {
 public:
  Reader(const std::vector<uint64_t>& words, size_t at, std::string what)
      : words_(words), at_(at), what_(std::move(what)) {}
  uint64_t next() {
    if (at_ >= words_.size()) throw PipelineError(what_ + " ends early");
    return words_[at_++];
  }
  // A count of values that follow, each at least a word.
  size_t count() {
    const uint64_t n = next();
    if (n > words_.size() - at_) fail("says " + std::to_string(n) + " values follow, but " +
                                      std::to_string(words_.size() - at_) + " words do");
    return size_t(n);
  }
  double next_double() { return std::bit_cast<double>(next()); }
  float next_float() { return std::bit_cast<float>(uint32_t(next())); }
  bool done() const { return at_ == words_.size(); }
  [[noreturn]] void fail(const std::string& why) const { throw PipelineError(what_ + " " + why); }

 private:
  const std::vector<uint64_t>& words_;
  size_t at_;
  std::string what_;
};

void encode(const SamplingParams& p, std::vector<uint64_t>& words) {
  words.insert(words.end(), {bits_of(p.temperature), uint64_t(int64_t(p.top_k)), bits_of(p.top_p), bits_of(p.min_p),
                             bits_of(p.repetition_penalty), bits_of(p.presence_penalty), bits_of(p.frequency_penalty),
                             uint64_t(int64_t(p.penalty_window)), p.seed.has_value(), p.seed.value_or(0), p.logprobs,
                             uint64_t(int64_t(p.top_logprobs)), p.logit_bias.size()});
  for (const auto& [token, bias] : p.logit_bias) words.insert(words.end(), {uint64_t(int64_t(token)), bits_of(bias)});
}

SamplingParams decode_sampling(Reader& in) {
  SamplingParams p;
  p.temperature = in.next_double();
  p.top_k = int(int64_t(in.next()));
  p.top_p = in.next_double();
  p.min_p = in.next_double();
  p.repetition_penalty = in.next_double();
  p.presence_penalty = in.next_double();
  p.frequency_penalty = in.next_double();
  p.penalty_window = int(int64_t(in.next()));
  const bool seeded = in.next() != 0;
  const uint64_t seed = in.next();
  if (seeded) p.seed = seed;
  p.logprobs = in.next() != 0;
  p.top_logprobs = int(int64_t(in.next()));
  for (size_t b = 0, biases = in.count(); b < biases; ++b) {
    const auto token = int32_t(int64_t(in.next()));
    p.logit_bias[token] = in.next_double();
  }
  return p;
}

void encode(const RowInputs& row, std::vector<uint64_t>& words) {
  const RowOutput* output = row.output;
  if (!output) return words.push_back(0);
  words.push_back(kHasOutput | (output->logits ? kWholeRow : 0) | (output->sampling ? kSample : 0) |
                  (output->row_hash ? kRowHash : 0) | (output->chain_hash ? kChainHash : 0));
  words.insert(words.end(), {row.sequence, row.position, output->chain_from});
  if (output->sampling) encode(*output->sampling, words);
  words.push_back(row.history.size());
  for (const int32_t token : row.history) words.push_back(uint64_t(int64_t(token)));
}

void decode_output(Reader& in, StagePass& pass) {
  const uint64_t bits = in.next();
  if (!(bits & kHasOutput)) return pass.outputs.push_back({nullptr, {}, 0, 0});
  RowOutput& output = pass.held_outputs.emplace_back();
  output.logits = bits & kWholeRow;
  output.row_hash = bits & kRowHash;
  output.chain_hash = bits & kChainHash;
  const SequenceId sequence = in.next();
  const uint64_t position = in.next();
  output.chain_from = in.next();
  if (bits & kSample) output.sampling = &pass.held_sampling.emplace_back(decode_sampling(in));
  std::vector<int32_t>& history = pass.held_histories.emplace_back(in.count());
  for (int32_t& token : history) token = int32_t(int64_t(in.next()));
  pass.outputs.push_back({&output, history, position, sequence});
}

// The results of a micro-batch's rows with an output, or the error that stopped them.
std::vector<uint64_t> encode(const ComputedRows& computed) {
  if (!computed.error.empty()) {
    std::vector<uint64_t> words = {1, computed.error.size()};
    for (const char c : computed.error) words.push_back(uint8_t(c));
    return words;
  }
  std::vector<uint64_t> words = {0};
  for (const RowResult& r : computed.output.results) {
    words.insert(words.end(), {uint64_t(int64_t(r.sampled.token)), bits_of(r.sampled.logprob), r.sampled.top.size()});
    for (const TokenLogprob& top : r.sampled.top)
      words.insert(words.end(), {uint64_t(int64_t(top.token)), bits_of(top.logprob)});
    words.insert(words.end(), {r.row_hash, r.chain_hash});
  }
  return words;
}

// Appends the results in `words` to `results`; returns the error the last stage sent, if any.
std::string decode_results(const std::vector<uint64_t>& words, std::vector<RowResult>& results) {
  Reader in(words, 0, "a message of results from the last stage");
  if (in.next() != 0) {
    std::string error(in.count(), ' ');
    for (char& c : error) c = char(in.next());
    return error;
  }
  while (!in.done()) {
    RowResult& r = results.emplace_back();
    r.sampled.token = int32_t(int64_t(in.next()));
    r.sampled.logprob = in.next_float();
    const size_t top = in.next();
    if (top > size_t(SamplingParams::kMaxTopLogprobs)) in.fail("has " + std::to_string(top) + " top logprobs");
    for (size_t k = 0; k < top; ++k) {
      const auto token = int32_t(int64_t(in.next()));
      r.sampled.top.push_back({token, in.next_float()});
    }
    r.row_hash = in.next();
    r.chain_hash = in.next();
  }
  return {};
}

std::vector<uint64_t> encode(const StagePass& pass) {
  std::vector<uint64_t> words = {kPass, pass.first, pass.positions.size(), pass.logit_rows.size(), pass.copies.size(),
                                 pass.window_drops.size(), pass.tables.size()};
  for (const BlockCopy& copy : pass.copies) words.insert(words.end(), {copy.from, copy.to, copy.slots});
  words.insert(words.end(), pass.window_drops.begin(), pass.window_drops.end());
  for (const auto& table : pass.tables) {
    words.push_back(table.size());
    words.insert(words.end(), table.begin(), table.end());
  }
  for (size_t t = 0; t < pass.positions.size(); ++t)
    words.insert(words.end(), {pass.positions[t], pass.slots[t].block, pass.slots[t].slot, pass.table_of[t]});
  words.insert(words.end(), pass.logit_rows.begin(), pass.logit_rows.end());
  for (const RowInputs& row : pass.outputs) encode(row, words);
  return words;
}

// The head sends what encode() makes.
StagePass decode(const std::vector<uint64_t>& words) {
  Reader in(words, 1, "a pass message from the head");
  const auto next = [&] { return in.next(); };
  StagePass pass;
  pass.first = next() != 0;
  const size_t rows = next(), logit_rows = next(), copies = next(), drops = next(), tables = next();
  for (size_t c = 0; c < copies; ++c) pass.copies.push_back({uint32_t(next()), uint32_t(next()), uint32_t(next())});
  for (size_t d = 0; d < drops; ++d) pass.window_drops.push_back(uint32_t(next()));
  for (size_t s = 0; s < tables; ++s) {
    pass.tables.emplace_back(in.count());
    for (uint32_t& block : pass.tables.back()) block = uint32_t(next());
  }
  for (size_t t = 0; t < rows; ++t) {
    pass.positions.push_back(next());
    pass.slots.push_back({uint32_t(next()), uint32_t(next())});
    pass.table_of.push_back(uint32_t(next()));
    if (pass.table_of.back() >= tables) in.fail("names a block table it does not hold");
  }
  for (size_t i = 0; i < logit_rows; ++i) pass.logit_rows.push_back(next());
  for (size_t i = 0; i < logit_rows; ++i) decode_output(in, pass);
  return pass;
}

std::string stage_name(size_t stage, size_t stages) {
  return "stage " + std::to_string(stage) + " of " + std::to_string(stages);
}

}  // namespace

std::unique_ptr<Pipeline> Pipeline::start(size_t stages, double timeout_seconds) {
#ifdef DITTO_MPI
  auto pipeline = std::make_unique<Pipeline>(open_mpi_link(timeout_seconds));
  if (pipeline->stages() != stages)
    throw Error("--stages " + std::to_string(stages) + " needs as many processes, but mpirun started " +
                std::to_string(pipeline->stages()) + ": run it as `mpirun -np " + std::to_string(stages) + " ditto ...`");
  return pipeline;
#else
  (void)timeout_seconds;
  throw Error("--stages " + std::to_string(stages) +
              ": this ditto was built without MPI; install OpenMPI (Debian: openmpi-bin libopenmpi-dev, as "
              "scripts/setup.sh does) and build it again");
#endif
}

Pipeline::Pipeline(std::unique_ptr<PipelineLink> link) : link_(std::move(link)) {}

Pipeline::~Pipeline() = default;

void Pipeline::configure(size_t kv_blocks, size_t block_size, DType cache, int threads) {
  link_->send(1, kOrders, std::vector<uint64_t>{kConfigure, kv_blocks, block_size, uint64_t(cache), uint64_t(threads)});
}

void Pipeline::release() { link_->send(1, kOrders, std::vector<uint64_t>{kRelease}); }

template <class Step>
void Pipeline::guarded(Step step) {
  try {
    step();
  } catch (const PipelineError& e) {
    std::lock_guard lock(mutex_);
    if (!failed_) failure_ = e.what();
    failed_ = true;
    throw;
  }
}

std::string Pipeline::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

bool StagePass::returns_results() const {
  return std::any_of(outputs.begin(), outputs.end(), [](const RowInputs& row) { return row.output; });
}

size_t StagePass::logit_floats(size_t vocab) const {
  return vocab * size_t(std::count_if(outputs.begin(), outputs.end(),
                                      [](const RowInputs& row) { return !row.output || row.output->logits; }));
}

void Pipeline::send_pass(const StagePass& pass, std::vector<float> hidden, float* logits, size_t logit_floats) {
  guarded([&] {
    if (logit_floats) link_->receive(stages() - 1, kLogits, logits, logit_floats);
    std::vector<uint64_t> order = encode(pass);
    traffic_.sent += order.size() * sizeof(uint64_t) + hidden.size() * sizeof(float);
    traffic_.received += logit_floats * sizeof(float);
    link_->send(1, kOrders, std::move(order));
    link_->send(1, kHidden, std::move(hidden));
  });
}

void Pipeline::receive_outputs(size_t result_messages, size_t logit_messages, std::vector<RowResult>& results) {
  std::string error;
  guarded([&] {
    for (size_t m = 0; m < result_messages; ++m) {
      const std::vector<uint64_t> words =
          link_->receive_words(stages() - 1, kResults, /*idle=*/false, "the sampled tokens from the last stage");
      traffic_.received += words.size() * sizeof(uint64_t);
      const std::string failed = decode_results(words, results);
      if (error.empty()) error = failed;
    }
    link_->wait_receives(logit_messages, "the logits from the last stage");
  });
  if (!error.empty()) throw Error(error);
}

void Pipeline::heartbeat() {
  guarded([&] {
    link_->send(1, kOrders, std::vector<uint64_t>{kHeartbeat});
    link_->receive_words(stages() - 1, kHeartbeatAnswer, /*idle=*/false,
                         "the answer to a heartbeat from the last stage");
  });
}

void Pipeline::finish() {
  if (head()) link_->send(1, kOrders, std::vector<uint64_t>{kFinish});
  link_->wait_sends("the end of the run");
  link_->finalize();
}

void Pipeline::run_stage(const Model& model) {
  const ModelConfig& config = model.config();
  const std::string from_previous = "the head's next order through " + stage_name(stage() - 1, stages());
  std::unique_ptr<KVPool> pool;
  std::vector<ref::KVLayerView> views;
  DecoderScratch scratch;
  std::vector<float> hidden;
  std::vector<ref::AttentionRow> attention;
  RowOutputs outputs;  // the last stage's
  int threads = 1;
  for (;;) {
    std::vector<uint64_t> order = link_->receive_words(stage() - 1, kOrders, /*idle=*/true, from_previous);
    if (order.empty()) throw PipelineError("an empty order from the head");
    switch (order[0]) {
      case kFinish:
        if (!last()) link_->send(stage() + 1, kOrders, std::move(order));
        return;
      case kConfigure:
        if (order.size() != 5) throw PipelineError("a configure order of the wrong length");
        threads = int(order[4]);
        views.clear();
        pool.reset();
        pool = std::make_unique<KVPool>(config, DType(order[3]), order[2], order[1], model.weights().part.first_layer,
                                        model.weights().layers.size());
        for (size_t l = 0; l < model.weights().layers.size(); ++l) views.push_back(pool->layer(l));
        if (!last()) link_->send(stage() + 1, kOrders, std::move(order));
        break;
      case kHeartbeat:
        link_->send(last() ? 0 : stage() + 1, last() ? kHeartbeatAnswer : kOrders, std::move(order));
        break;
      case kRelease:
        views.clear();
        pool.reset();
        if (!last()) link_->send(stage() + 1, kOrders, std::move(order));
        break;
      case kPass: {
        if (!pool) throw PipelineError("a pass before the head configured the KV cache");
        const StagePass pass = decode(order);
        const size_t rows = pass.positions.size();
        hidden.resize(rows * config.hidden_size);
        link_->receive(stage() - 1, kHidden, hidden.data(), hidden.size());
        link_->wait_receives(1, "the hidden state from " + stage_name(stage() - 1, stages()));
        for (const BlockCopy& copy : pass.copies) pool->copy(copy.from, copy.to, copy.slots);
        for (const uint32_t block : pass.window_drops) pool->drop_window(block);
        attention.clear();
        for (size_t t = 0; t < rows; ++t) attention.push_back({pass.tables[pass.table_of[t]].data(), pass.positions[t]});
        std::vector<float> logits(last() ? pass.logit_rows.size() * config.vocab_size : 0);
        decoder_forward(model, views, {{}, pass.positions, pass.slots, attention, pass.logit_rows, hidden.data()},
                        logits.data(), threads, scratch);
        if (last()) {
          if (pass.first) outputs.begin_pass();
          ComputedRows computed = compute_rows(outputs, std::move(logits), config.vocab_size, pass.outputs);
          // After an error the head still waits for the logits it asked for: they come, as NaN.
          if (!computed.error.empty()) computed.output.logits.assign(pass.logit_floats(config.vocab_size), NAN);
          if (pass.returns_results()) link_->send(0, kResults, encode(computed));
          if (!computed.output.logits.empty()) link_->send(0, kLogits, std::move(computed.output.logits));
        } else {
          link_->send(stage() + 1, kOrders, std::move(order));
          link_->send(stage() + 1, kHidden, std::vector<float>(scratch.x.begin(), scratch.x.begin() + ptrdiff_t(hidden.size())));
        }
        break;
      }
      default:
        throw PipelineError("an order the stages do not know: " + std::to_string(order[0]));
    }
  }
}

}  // namespace ditto
