#pragma once
// Pipeline stages over MPI (`mpirun -np K ditto ... --stages K`): process r holds the layers of
// stage r (model/stages.h) and the KV cache of those layers. Stage 0, the head, runs the command:
// its BatchEngine computes its layers of a pass, hands the hidden state of the rows on, and gets
// back from the last stage what the logit rows return (ditto/batch.h: RowOutput): the tokens
// drawn there, with their logprobs and hashes if asked, and logits only where asked. The hidden
// state crosses as the f32 values it is and the split lies between layers, so every bit is the
// one a single process computes. A pass is cut into micro-batches that follow each other through
// the stages, so that the stages work at once.
//
// Every wait during a pass is bounded by the timeout, and every MPI error is a PipelineError: a
// stage that dies or a link that breaks ends the run instead of hanging it.
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ditto/dtype.h"
#include "ditto/error.h"
#include "ditto/model.h"
#include "model/decoder.h"
#include "runtime/row_outputs.h"

namespace ditto {

class PipelineError : public Error {
 public:
  using Error::Error;
};

// The first `slots` positions of block `from` copied into block `to`, before the pass writes it
// (a shared block's copy).
struct BlockCopy {
  uint32_t from, to, slots;
};

// One micro-batch of a pass as the stages after the head get it: what the decoder needs besides
// the tokens (which only the head's embedding reads), and what the last stage computes from the
// logits of its logit rows (the sampler's inputs: no stage keeps any state of a sequence).
struct StagePass {
  std::vector<size_t> positions;
  std::vector<KVSlot> slots;
  std::vector<std::vector<uint32_t>> tables;  // the block tables of the sequences it holds rows of
  std::vector<uint32_t> table_of;             // each row's index into tables
  std::vector<size_t> logit_rows;
  std::vector<RowInputs> outputs;             // one per logit row; history: the penalties' window
  std::vector<BlockCopy> copies;              // made before any row is computed
  std::vector<uint32_t> window_drops;         // blocks whose windowed layers the head dropped since
                                              // its last pass (KVPool::drop_window), dropped first
  bool first = false;                         // the first micro-batch of its pass
  // What outputs point to, in a pass decoded from a message.
  std::deque<RowOutput> held_outputs;
  std::deque<SamplingParams> held_sampling;
  std::deque<std::vector<int32_t>> held_histories;

  bool returns_results() const;  // whether a logit row has an output
  size_t logit_floats(size_t vocab) const;  // of the rows that return their logits
};

// The messages between the processes, over MPI or anything that moves them alike.
class PipelineLink {
 public:
  virtual ~PipelineLink() = default;
  virtual size_t rank() const = 0;
  virtual size_t size() const = 0;
  // Posts a send; the link keeps the buffer until it is sent.
  virtual void send(size_t to, int tag, std::vector<uint64_t> words) = 0;
  virtual void send(size_t to, int tag, std::vector<float> floats) = 0;
  // Posts the receive of `count` floats into `into`; wait_receives(n) completes the oldest n.
  virtual void receive(size_t from, int tag, float* into, size_t count) = 0;
  // The next message of words from `from`; without a time limit if `idle` (waiting for work).
  virtual std::vector<uint64_t> receive_words(size_t from, int tag, bool idle, const std::string& what) = 0;
  virtual void wait_receives(size_t count, const std::string& what) = 0;
  virtual void wait_sends(const std::string& what) = 0;
  virtual void stop() = 0;      // any thread: every wait fails from now on
  virtual void finalize() = 0;  // after a clean end
};

class Pipeline {
 public:
  // Starts MPI in a process of `mpirun -np stages`. Throws ditto::Error if this ditto was built
  // without MPI, or if mpirun started another number of processes.
  static std::unique_ptr<Pipeline> start(size_t stages, double timeout_seconds);
  explicit Pipeline(std::unique_ptr<PipelineLink> link);
  ~Pipeline();

  size_t stage() const { return link_->rank(); }
  size_t stages() const { return link_->size(); }
  bool head() const { return stage() == 0; }
  bool last() const { return stage() + 1 == stages(); }

  // The head's side, for its BatchEngine. configure(): a new engine's KV pool and thread count on
  // every stage; release(): the engine ends.
  void configure(size_t kv_blocks, size_t block_size, DType cache, int threads);
  void release();
  // Hands a micro-batch on (hidden: its rows' hidden state after the head's layers) and, if
  // some of its logit rows return their logits, posts the receive of those from the last stage
  // into `logits` (logit_floats: pass.logit_floats(vocab)). Micro-batches of later passes may
  // follow before those come.
  void send_pass(const StagePass& pass, std::vector<float> hidden, float* logits, size_t logit_floats);
  // Waits for what the last stage sends back of the oldest micro-batches: `result_messages` of
  // them returning results (appended to `results`), `logit_messages` logits. Throws ditto::Error
  // (after all have come) if a row's sampling failed there.
  void receive_outputs(size_t result_messages, size_t logit_messages, std::vector<RowResult>& results);
  // The bytes of the head's passes, to stage 1 (orders and hidden states) and back from the
  // last stage (results and logits), so far.
  struct Traffic {
    size_t sent = 0, received = 0;
  };
  Traffic traffic() const { return traffic_; }
  // The head, while it has nothing in flight: an order through every stage that the last one
  // answers, within the timeout; a PipelineError (and failed()) if it does not come. An idle
  // server sends one every second, so that a stage gone silent is noticed without a request.
  void heartbeat();
  // Ends the run cleanly: the head tells every stage, then every process ends MPI.
  void finish();
  // Any thread: every wait in progress or to come fails (a server that stops).
  void stop() { link_->stop(); }
  // Any thread: whether a pass failed (a stage gone, a link down, stopped), and why.
  bool failed() const { return failed_; }
  std::string failure() const;

  // A stage after the head: computes the head's passes with the model's layers (the model holds
  // this stage's part) until the head finishes.
  void run_stage(const Model& model);

 private:
  // Runs the head's part of a pass, remembering a failure before it goes on up.
  template <class Step>
  void guarded(Step step);

  std::unique_ptr<PipelineLink> link_;
  Traffic traffic_;
  std::atomic<bool> failed_{false};
  mutable std::mutex mutex_;
  std::string failure_;  // guarded by mutex_
};

}  // namespace ditto
