#include "runtime/pipeline.h"

#include <algorithm>

#include "model/weights.h"
#include "runtime/kv_pool.h"

namespace ditto {

#ifdef DITTO_MPI
std::unique_ptr<PipelineLink> open_mpi_link(double timeout_seconds);  // runtime/mpi_link.cpp
#endif

namespace {

// Tags: the head's orders (and passes), the hidden state of a pass's rows, the logits back.
constexpr int kOrders = 1, kHidden = 2, kLogits = 3;
enum Order : uint64_t { kConfigure = 1, kRelease = 2, kPass = 3, kFinish = 4 };

std::vector<uint64_t> encode(const StagePass& pass) {
  std::vector<uint64_t> words = {kPass, pass.positions.size(), pass.logit_rows.size(), pass.copies.size(),
                                 pass.tables.size()};
  for (const BlockCopy& copy : pass.copies) words.insert(words.end(), {copy.from, copy.to, copy.slots});
  for (const auto& table : pass.tables) {
    words.push_back(table.size());
    words.insert(words.end(), table.begin(), table.end());
  }
  for (size_t t = 0; t < pass.positions.size(); ++t)
    words.insert(words.end(), {pass.positions[t], pass.slots[t].block, pass.slots[t].slot, pass.table_of[t]});
  words.insert(words.end(), pass.logit_rows.begin(), pass.logit_rows.end());
  return words;
}

// The head sends what encode() makes; a message that does not parse is a bug or another program.
StagePass decode(const std::vector<uint64_t>& words) {
  size_t at = 1;
  const auto next = [&] {
    if (at >= words.size()) throw PipelineError("a pass message from the head ends early");
    return words[at++];
  };
  StagePass pass;
  const size_t rows = next(), logit_rows = next(), copies = next(), tables = next();
  for (size_t c = 0; c < copies; ++c) pass.copies.push_back({uint32_t(next()), uint32_t(next()), uint32_t(next())});
  for (size_t s = 0; s < tables; ++s) {
    pass.tables.emplace_back(next());
    for (uint32_t& block : pass.tables.back()) block = uint32_t(next());
  }
  for (size_t t = 0; t < rows; ++t) {
    pass.positions.push_back(next());
    pass.slots.push_back({uint32_t(next()), uint32_t(next())});
    pass.table_of.push_back(uint32_t(next()));
    if (pass.table_of.back() >= tables) throw PipelineError("a pass message names a block table it does not hold");
  }
  for (size_t i = 0; i < logit_rows; ++i) pass.logit_rows.push_back(next());
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

void Pipeline::send_pass(const StagePass& pass, std::vector<float> hidden, float* logits, size_t logit_floats) {
  guarded([&] {
    if (logit_floats) link_->receive(stages() - 1, kLogits, logits, logit_floats);
    link_->send(1, kOrders, encode(pass));
    link_->send(1, kHidden, std::move(hidden));
  });
}

void Pipeline::receive_logits(size_t micro_batches) {
  guarded([&] { link_->wait_receives(micro_batches, "the logits from the last stage"); });
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
        pool = std::make_unique<KVPool>(config, DType(order[3]), order[2], order[1], model.weights().layers.size());
        for (size_t l = 0; l < model.weights().layers.size(); ++l) views.push_back(pool->layer(l));
        if (!last()) link_->send(stage() + 1, kOrders, std::move(order));
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
        attention.clear();
        for (size_t t = 0; t < rows; ++t) attention.push_back({pass.tables[pass.table_of[t]].data(), pass.positions[t]});
        std::vector<float> logits(last() ? pass.logit_rows.size() * config.vocab_size : 0);
        decoder_forward(model, views, {{}, pass.positions, pass.slots, attention, pass.logit_rows, hidden.data()},
                        logits.data(), threads, scratch);
        if (last()) {
          if (!logits.empty()) link_->send(0, kLogits, std::move(logits));
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
