#include "serve/job.h"

#include <atomic>
#include <ctime>
#include <random>

#include "ditto/error.h"

namespace ditto::serve {

namespace {

double seconds_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

size_t code_points(std::string_view text) {
  size_t count = 0;
  for (const char c : text) count += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return count;
}

// "chatcmpl-…" / "cmpl-…": a random part per process and a counter.
std::string request_id(const char* prefix) {
  static const uint64_t process = std::random_device{}() | uint64_t(std::random_device{}()) << 32;
  static std::atomic<uint64_t> counter = 0;
  char text[64];
  std::snprintf(text, sizeof text, "%s-%016llx%08llx", prefix, (unsigned long long)process,
                (unsigned long long)counter++);
  return text;
}

const char* finish_reason(StopReason reason, bool stop_string) {
  switch (reason) {
    case StopReason::StopToken: return "stop";
    case StopReason::Stopped: return stop_string ? "stop" : "cancelled";  // else the client went away
    case StopReason::MaxTokens:
    case StopReason::ContextFull: return "length";
    case StopReason::Cancelled: return "cancelled";
  }
  return "cancelled";
}

}  // namespace

Job::Job(Kind kind, const GenerationOptions& options, std::vector<GenerationRequest> prompts,
         const Tokenizer& tokenizer, const std::string& model, SchedulerThread& scheduler, Metrics& metrics)
    : kind_(kind),
      options_(options),
      prompts_(std::move(prompts)),
      seed_(*prompts_.at(0).sampling.seed),
      tokenizer_(tokenizer),
      model_(model),
      id_(request_id(kind == Kind::Chat ? "chatcmpl" : "cmpl")),
      created_(int64_t(std::time(nullptr))),
      arrived_(std::chrono::steady_clock::now()),
      scheduler_(scheduler),
      metrics_(metrics) {
  for (size_t p = 0; p < prompts_.size(); ++p)
    for (size_t j = 0; j < options_.n; ++j)
      choices_.emplace_back(p, tokenizer_, options_.stop);
  unfinished_ = choices_.size();
}

void Job::submit(size_t k) {
  Choice& choice = choices_[k];
  GenerationRequest request = prompts_[choice.prompt];
  request.sampling.seed = seed_ + k;  // wraps around 2^64
  const size_t prompt_tokens = request.prompt.size();
  auto self = shared_from_this();
  choice.ticket = scheduler_.submit(
      std::move(request), [self, k](const SampledToken& token) { return self->on_token(k, token); },
      [self, k](Generation generation) { self->on_finish(k, std::move(generation)); });
  choice.started = true;
  metrics_.count_sequence(prompt_tokens);
}

void Job::start() {
  std::lock_guard lock(mutex_);
  for (size_t p = 0; p < prompts_.size(); ++p) submit(p * options_.n);
}

void Job::cancel() {
  std::vector<SchedulerThread::Ticket> tickets;
  {
    std::lock_guard lock(mutex_);
    cancelled_ = true;
    for (const Choice& choice : choices_)
      if (choice.started && !choice.finished) tickets.push_back(choice.ticket);
  }
  for (const auto ticket : tickets) scheduler_.cancel(ticket);
}

bool Job::on_token(size_t k, const SampledToken& token) {
  const auto now = std::chrono::steady_clock::now();
  bool go_on;
  {
    std::lock_guard lock(mutex_);
    Choice& choice = choices_[k];
    const bool first = choice.tokens.empty();
    metrics_.count_token(first, seconds_between(first ? arrived_ : choice.last_token, now));
    choice.last_token = now;
    choice.offsets.push_back(choice.decoded_chars);
    const std::string piece = choice.decoder.push(token.token);
    choice.decoded_chars += code_points(piece);
    choice.text += choice.stops.push(piece);
    choice.tokens.push_back(token);
    // The prompt is in the prefix cache now (all but its partial last block): start the others.
    if (first && k % options_.n == 0 && !cancelled_)
      for (size_t j = 1; j < options_.n; ++j) submit(k + j);
    go_on = !choice.stops.stopped() && !cancelled_;
  }
  news_.notify_all();
  return go_on;
}

void Job::on_finish(size_t k, Generation generation) {
  {
    std::lock_guard lock(mutex_);
    Choice& choice = choices_[k];
    choice.text += choice.stops.push(choice.decoder.finish());
    choice.text += choice.stops.finish();
    choice.finished = true;
    choice.finish = finish_reason(generation.stop, choice.stops.stopped());
    choice.cached = generation.cached_positions;
    metrics_.count_finished(*choice.finish);
    --unfinished_;
    // A first choice that ended before its first token leaves its prompt's others unstarted.
    if (k % options_.n == 0)
      for (size_t j = 1; j < options_.n; ++j)
        if (Choice& other = choices_[k + j]; !other.started) {
          other.finished = true;
          other.finish = "cancelled";
          --unfinished_;
        }
  }
  news_.notify_all();
}

std::vector<Job::Delta> Job::next() {
  std::unique_lock lock(mutex_);
  const auto news = [](const Choice& c) {
    return c.text.size() > c.text_sent || c.tokens.size() > c.tokens_sent || (c.finished && !c.reported);
  };
  news_.wait(lock, [&] {
    bool all_reported = true;
    for (const Choice& c : choices_) {
      if (news(c)) return true;
      all_reported = all_reported && c.reported;
    }
    return all_reported;
  });
  std::vector<Delta> deltas;
  for (size_t k = 0; k < choices_.size(); ++k) {
    Choice& c = choices_[k];
    if (!news(c)) continue;
    Delta delta{k, c.text.substr(c.text_sent), {c.tokens.begin() + ptrdiff_t(c.tokens_sent), c.tokens.end()},
                {c.offsets.begin() + ptrdiff_t(c.tokens_sent), c.offsets.end()}, !c.anything_sent, std::nullopt};
    c.text_sent = c.text.size();
    c.tokens_sent = c.tokens.size();
    c.anything_sent = true;
    if (c.finished) delta.finish = c.finish, c.reported = true;
    deltas.push_back(std::move(delta));
  }
  return deltas;
}

void Job::wait() {
  std::unique_lock lock(mutex_);
  news_.wait(lock, [&] { return unfinished_ == 0; });
}

bool Job::cancelled() const {
  std::lock_guard lock(mutex_);
  for (const Choice& choice : choices_)
    if (choice.finish == "cancelled") return true;
  return false;
}

std::string Job::token_text(int32_t token) const {
  if (options_.tokens_as_ids) return "token_id:" + std::to_string(token);
  return tokenizer_.decode(std::span(&token, 1));
}

Json Job::token_logprob(int32_t token, float logprob) const {
  const std::optional<std::string> bytes = tokenizer_.token_bytes(token);
  Json byte_values = nullptr;
  if (bytes) {
    byte_values = Json::array();
    for (const char c : *bytes) byte_values.push_back(int(static_cast<unsigned char>(c)));
  }
  return {{"token", token_text(token)}, {"logprob", logprob}, {"bytes", std::move(byte_values)}};
}

Json Job::logprobs(const std::vector<SampledToken>& tokens, const std::vector<size_t>& offsets) const {
  if (!options_.sampling.logprobs) return nullptr;
  if (kind_ == Kind::Chat) {
    Json content = Json::array();
    for (const SampledToken& token : tokens) {
      Json entry = token_logprob(token.token, token.logprob);
      Json top = Json::array();
      for (const TokenLogprob& t : token.top) top.push_back(token_logprob(t.token, t.logprob));
      entry["top_logprobs"] = std::move(top);
      content.push_back(std::move(entry));
    }
    return {{"content", std::move(content)}, {"refusal", nullptr}};
  }
  Json texts = Json::array(), values = Json::array(), tops = Json::array();
  for (const SampledToken& token : tokens) {
    texts.push_back(token_text(token.token));
    values.push_back(token.logprob);
    Json top = Json::object();
    for (const TokenLogprob& t : token.top) top[token_text(t.token)] = t.logprob;
    tops.push_back(std::move(top));
  }
  return {{"tokens", std::move(texts)}, {"token_logprobs", std::move(values)}, {"top_logprobs", std::move(tops)},
          {"text_offset", offsets}};
}

Json Job::usage() const {
  size_t prompt_tokens = 0, completion_tokens = 0, cached = 0;
  for (const GenerationRequest& prompt : prompts_) prompt_tokens += prompt.prompt.size();
  for (size_t k = 0; k < choices_.size(); ++k) {
    completion_tokens += choices_[k].tokens.size();
    if (k % options_.n == 0) cached += choices_[k].cached;
  }
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

Json Job::envelope(const char* object) const {
  return {{"id", id_}, {"object", object}, {"created", created_}, {"model", model_},
          {"seed", seed_}, {"choices", Json::array()}};
}

Json Job::response() const {
  std::lock_guard lock(mutex_);
  Json reply = envelope(kind_ == Kind::Chat ? "chat.completion" : "text_completion");
  for (size_t k = 0; k < choices_.size(); ++k) {
    const Choice& c = choices_[k];
    Json choice = {{"index", k}};
    if (kind_ == Kind::Chat) choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    else choice["text"] = c.text;
    choice["logprobs"] = logprobs(c.tokens, c.offsets);
    choice["finish_reason"] = c.finish ? Json(*c.finish) : Json(nullptr);
    reply["choices"].push_back(std::move(choice));
  }
  reply["usage"] = usage();
  return reply;
}

std::vector<Json> Job::chunks(const std::vector<Delta>& deltas) const {
  std::vector<Json> chunks;
  for (const Delta& d : deltas) {
    // A choice the server cancelled ends without a finish reason (the stream ends in an error).
    const bool cancelled = d.finish == "cancelled";
    if (cancelled && d.text.empty() && d.tokens.empty()) continue;
    Json chunk = envelope(kind_ == Kind::Chat ? "chat.completion.chunk" : "text_completion");
    Json choice = {{"index", d.choice}};
    if (kind_ == Kind::Chat) {
      Json delta = Json::object();
      if (d.first) delta["role"] = "assistant";
      if (d.first || !d.text.empty() || !d.tokens.empty()) delta["content"] = d.text;
      choice["delta"] = std::move(delta);
    } else {
      choice["text"] = d.text;
    }
    choice["logprobs"] = d.tokens.empty() ? Json(nullptr) : logprobs(d.tokens, d.offsets);
    choice["finish_reason"] = d.finish && !cancelled ? Json(*d.finish) : Json(nullptr);
    chunk["choices"].push_back(std::move(choice));
    if (options_.include_usage) chunk["usage"] = nullptr;
    chunks.push_back(std::move(chunk));
  }
  return chunks;
}

Json Job::usage_chunk() const {
  std::lock_guard lock(mutex_);
  Json chunk = envelope(kind_ == Kind::Chat ? "chat.completion.chunk" : "text_completion");
  chunk["usage"] = usage();
  return chunk;
}

}  // namespace ditto::serve
