#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "chat/chat_format.h"
#include "ditto/batch.h"
#include "ditto/load.h"
#include "runtime/scheduler_thread.h"
#include "serve/api.h"
#include "serve/job.h"
#include "serve/metrics.h"

namespace ditto::serve {

struct ServiceOptions {
  std::string name;          // the model's id in the API
  size_t context = 0;        // positions a sequence may fill; 0: the model's context
  BatchOptions batch;
  SchedulerOptions scheduler;
  std::string chat_template;        // a template to use instead of the model's ("": the model's)
  Json template_variables = Json::object();  // defaults for chat_template_kwargs
};

// The model behind the API: turns checked requests into prompts (the chat template, the
// tokenizer), checks them against the context and the KV pool, and runs them on the batch
// engine through one scheduler thread. HTTP-free; every method may be called from any thread.
class Service {
 public:
  // The model must have a tokenizer. Throws ditto::Error (a bad chat template, a pool too small).
  Service(LoadedModel model, ServiceOptions options);

  // A started job; throws ApiError for what the model refuses (a prompt past the context, a
  // token outside the vocabulary, another model's name, ...).
  std::shared_ptr<Job> chat(const ChatRequest& request);
  std::shared_ptr<Job> complete(const CompletionRequest& request);
  Json tokenize(const TokenizeRequest& request) const;
  Json detokenize(const DetokenizeRequest& request) const;
  Json models() const;                                  // GET /v1/models
  std::optional<Json> model(const std::string& id) const;  // GET /v1/models/{id}
  std::string metrics_text() const;                     // GET /metrics

  Metrics& metrics() { return metrics_; }
  SchedulerThread& scheduler() { return scheduler_; }
  const std::string& name() const { return options_.name; }

 private:
  void check_model(const std::string& requested) const;
  std::vector<int32_t> encode_chat(const Json& messages, const Json& tools, const Json& variables,
                                   bool add_generation_prompt) const;
  std::shared_ptr<Job> start(Job::Kind kind, const GenerationOptions& options,
                             const std::vector<std::vector<int32_t>>& prompts);

  LoadedModel model_;
  const Tokenizer& tokenizer_;
  ServiceOptions options_;
  size_t context_;
  int64_t created_;
  std::optional<ChatFormat> format_;
  BatchEngine engine_;
  Metrics metrics_;
  SchedulerThread scheduler_;  // last: its thread stops before the rest goes
};

}  // namespace ditto::serve
