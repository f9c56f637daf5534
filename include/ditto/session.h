#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "ditto/batch.h"
#include "ditto/dtype.h"
#include "ditto/model.h"

namespace ditto {

struct SessionOptions {
  size_t capacity = 0;          // KV cache positions, at most the model's max_positions (0: that)
  DType cache_dtype = DType::F32;
  int threads = 1;
  ForwardObserver* observer = nullptr;  // not owned; must outlive the session's calls
  Pipeline* pipeline = nullptr;         // the head of a pipeline (BatchOptions::pipeline)
};

// Which positions of a prefill call get logits.
enum class Logits { None, Last, All };

// One sequence: the simple API on top of BatchEngine (ditto/batch.h), with a KV cache of
// `capacity` positions. prefill() writes the new positions into the cache, then attends over the cache up to
// them (update, then fetch, at cache precision), so logits are bitwise the same whatever
// the chunking, the thread count or whether a position came from prefill or decode.
class Session {
 public:
  Session(std::shared_ptr<const Model> model, SessionOptions options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Appends tokens; returns logits as rows x vocab floats (rows = tokens, 1 or 0 as asked).
  // Throws ditto::Error, leaving the session unchanged, for an empty call, a token outside
  // the vocabulary or more tokens than the cache has room for.
  std::vector<float> prefill(std::span<const int32_t> tokens, Logits which = Logits::Last);
  // prefill() of one token, returning its logits.
  std::vector<float> decode(int32_t token);

  size_t position() const;
  size_t capacity() const { return options_.capacity; }
  void reset();  // starts the sequence over, empty
  const Model& model() const { return *model_; }

 private:
  struct State;
  std::shared_ptr<const Model> model_;
  SessionOptions options_;
  std::unique_ptr<State> state_;
};

}  // namespace ditto
