#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "chat/stop_strings.h"
#include "ditto/tokenizer.h"
#include "runtime/scheduler_thread.h"
#include "serve/api.h"
#include "serve/metrics.h"

namespace ditto::serve {

// One chat or completion request in flight: its choices, each a sequence of the scheduler, what
// they have generated, and its answer in OpenAI's shapes (one JSON reply, or stream chunks).
//
// The scheduler's thread feeds it (tokens, ends); the HTTP thread that holds the request waits
// for news and sends it. Choice k (prompt k / n, its k % n-th) is sampled with seed + k, so
// that a request with a seed gives the same choices every time and choice k equals the only
// choice of the same request with n = 1 and seed + k. A prompt's first choice starts at once
// and the others once it has its first token, so that they find its prompt in the prefix cache.
class Job : public std::enable_shared_from_this<Job> {
 public:
  enum class Kind { Chat, Completion };

  // What the HTTP thread has not been sent yet of one choice.
  struct Delta {
    size_t choice;
    std::string text;
    std::vector<SampledToken> tokens;
    std::vector<size_t> offsets;        // of each token's text in the choice's text, in code points
    bool first = false;                 // nothing of this choice was sent before
    std::optional<std::string> finish;  // "stop" or "length" once it ended
  };

  // One request per prompt (checked by the scheduler, with the base seed), `options.n` choices
  // each; options.stop are found in the text.
  Job(Kind kind, const GenerationOptions& options, std::vector<GenerationRequest> prompts, const Tokenizer& tokenizer,
      const std::string& model, SchedulerThread& scheduler, Metrics& metrics);

  // Submits the first choice of every prompt. Throws ditto::Error if the scheduler refuses one.
  void start();
  // Ends every choice that runs and starts no more (a client that went away).
  void cancel();

  // Waits until there is news for the client and returns it, each choice's in one Delta.
  // Empty once everything was returned.
  std::vector<Delta> next();
  // Waits until every choice has ended.
  void wait();
  // After wait(): true if a choice was cancelled by the server (shutting down, or a failure).
  bool cancelled() const;

  Json response() const;                          // after wait(): the whole answer
  std::vector<Json> chunks(const std::vector<Delta>& deltas) const;  // streamed: one per delta
  Json usage_chunk() const;                       // streamed, last, with include_usage

  const GenerationOptions& options() const { return options_; }

 private:
  struct Choice {
    Choice(size_t prompt, const Tokenizer& tokenizer, const std::vector<std::string>& stop)
        : prompt(prompt), decoder(tokenizer, /*skip_special=*/true), stops(stop) {}
    size_t prompt;
    StreamDecoder decoder;
    StopStrings stops;
    std::string text;                  // shown: without stop strings and what follows them
    std::vector<SampledToken> tokens;  // every token generated
    std::vector<size_t> offsets;       // where each token's text starts in the decoded text
    size_t decoded_chars = 0;
    size_t text_sent = 0, tokens_sent = 0;
    bool started = false, finished = false, reported = false, anything_sent = false;
    std::optional<std::string> finish;  // "stop", "length" or "cancelled"
    SchedulerThread::Ticket ticket = 0;
    size_t cached = 0;
    std::chrono::steady_clock::time_point last_token;
  };
  void submit(size_t choice);  // with mutex_ held
  bool on_token(size_t choice, const SampledToken& token);
  void on_finish(size_t choice, Generation generation);
  Json token_logprob(int32_t token, float logprob) const;
  Json logprobs(const std::vector<SampledToken>& tokens, const std::vector<size_t>& offsets) const;
  Json usage() const;
  Json envelope(const char* object) const;
  std::string token_text(int32_t token) const;

  Kind kind_;
  GenerationOptions options_;
  std::vector<GenerationRequest> prompts_;
  uint64_t seed_;
  const Tokenizer& tokenizer_;
  std::string model_, id_;
  int64_t created_;
  std::chrono::steady_clock::time_point arrived_;
  SchedulerThread& scheduler_;
  Metrics& metrics_;

  mutable std::mutex mutex_;
  std::condition_variable news_;
  std::vector<Choice> choices_;
  size_t unfinished_;
  bool cancelled_ = false;
};

}  // namespace ditto::serve
