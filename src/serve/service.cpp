#include "serve/service.h"

#include <ctime>

#include "ditto/error.h"

namespace ditto::serve {

namespace {

const Tokenizer& tokenizer_of(const LoadedModel& model) {
  if (!model.tokenizer) throw Error(model.name + " has no tokenizer: the server needs one to read and write text");
  return *model.tokenizer;
}

ApiError context_error(const std::string& message, const std::string& param) {
  return ApiError(400, message, param, "context_length_exceeded");
}

}  // namespace

Service::Service(LoadedModel model, ServiceOptions options)
    : model_(std::move(model)),
      tokenizer_(tokenizer_of(model_)),
      options_(std::move(options)),
      context_(options_.context ? std::min(options_.context, model_.config.max_positions) : model_.config.max_positions),
      created_(int64_t(std::time(nullptr))),
      engine_(model_.model, options_.batch),
      scheduler_(engine_, options_.scheduler) {
  if (!options_.chat_template.empty() || !model_.chat_template.empty()) format_.emplace(model_, options_.chat_template);
}

void Service::check_model(const std::string& requested) const {
  if (!requested.empty() && requested != options_.name)
    throw ApiError(404, "the model '" + requested + "' does not exist: this server serves '" + options_.name + "'",
                   "model", "model_not_found");
}

std::vector<int32_t> Service::encode_chat(const Json& messages, const Json& tools, const Json& variables,
                                          bool add_generation_prompt) const {
  if (!format_) throw ApiError(400, options_.name + " has no chat template: use /v1/completions", "messages");
  Json merged = options_.template_variables;
  merged.update(variables);
  try {
    return tokenizer_.encode(format_->render(messages, tools, add_generation_prompt, merged));
  } catch (const Error& e) {  // the template's raise_exception(), or what it cannot render
    throw ApiError(400, std::string("the messages cannot be rendered with the chat template: ") + e.what(), "messages");
  }
}

std::shared_ptr<Job> Service::start(Job::Kind kind, const GenerationOptions& options,
                                    const std::vector<std::vector<int32_t>>& prompts) {
  const char* prompt_param = kind == Job::Kind::Chat ? "messages" : "prompt";
  const char* max_param = options.max_tokens ? "max_tokens" : prompt_param;
  const SamplingParams sampling = with_seed(options.sampling);  // one seed for the request; choice k takes seed + k
  std::vector<GenerationRequest> requests;
  for (const std::vector<int32_t>& prompt : prompts) {
    GenerationRequest request;
    request.prompt = prompt;
    request.max_length = context_;
    request.sampling = sampling;
    if (!options.ignore_eos) request.stop_tokens = model_.stop_tokens;
    if (prompt.empty()) throw ApiError(400, "the prompt is empty", prompt_param);
    if (prompt.size() >= context_)
      throw context_error("the prompt has " + std::to_string(prompt.size()) + " tokens and the model's context is " +
                              std::to_string(context_) + " positions: it must leave room for at least one token",
                          prompt_param);
    const size_t room = context_ - prompt.size();
    if (options.max_tokens && *options.max_tokens > room)
      throw context_error("max_tokens of " + std::to_string(*options.max_tokens) + " is past the model's context of " +
                              std::to_string(context_) + " positions: the prompt has " + std::to_string(prompt.size()) +
                              " tokens, which leaves room for " + std::to_string(room),
                          max_param);
    // Without max_tokens: up to the end of the context (chat), or 16 tokens (completions, as OpenAI's).
    request.max_tokens = options.max_tokens ? *options.max_tokens : kind == Job::Kind::Chat ? room : std::min<size_t>(16, room);
    try {
      requests.push_back(scheduler_.check(std::move(request)));
    } catch (const Error& e) {
      throw ApiError(400, e.what());
    }
  }
  auto job = std::make_shared<Job>(kind, options, std::move(requests), tokenizer_, options_.name, scheduler_, metrics_);
  job->start();
  return job;
}

std::shared_ptr<Job> Service::chat(const ChatRequest& request) {
  check_model(request.options.model);
  return start(Job::Kind::Chat, request.options,
               {encode_chat(request.messages, request.tools, request.template_variables, true)});
}

std::shared_ptr<Job> Service::complete(const CompletionRequest& request) {
  check_model(request.options.model);
  std::vector<std::vector<int32_t>> prompts;
  for (const CompletionPrompt& prompt : request.prompts) {
    try {
      prompts.push_back(prompt.is_text ? tokenizer_.encode(prompt.text, /*allow_special=*/true, request.add_special_tokens)
                                       : prompt.ids);
    } catch (const Error& e) {
      throw ApiError(400, e.what(), "prompt");
    }
  }
  return start(Job::Kind::Completion, request.options, prompts);
}

Json Service::tokenize(const TokenizeRequest& request) const {
  check_model(request.model);
  std::vector<int32_t> tokens;
  if (request.prompt) {
    try {
      tokens = tokenizer_.encode(*request.prompt, /*allow_special=*/true, request.add_special_tokens);
    } catch (const Error& e) {
      throw ApiError(400, e.what(), "prompt");
    }
  } else {
    tokens = encode_chat(request.messages, request.tools, request.template_variables, request.add_generation_prompt);
  }
  return {{"tokens", tokens}, {"count", tokens.size()}, {"max_model_len", context_}};
}

Json Service::detokenize(const DetokenizeRequest& request) const {
  check_model(request.model);
  const size_t vocab = model_.config.vocab_size;
  for (const int32_t token : request.tokens)
    if (size_t(token) >= vocab)
      throw ApiError(400, "token id " + std::to_string(token) + " is outside the vocabulary (0.." +
                              std::to_string(vocab - 1) + ")", "tokens");
  return {{"prompt", tokenizer_.decode(request.tokens)}};
}

Json Service::models() const { return {{"object", "list"}, {"data", Json::array({*model(options_.name)})}}; }

std::optional<Json> Service::model(const std::string& id) const {
  if (id != options_.name) return std::nullopt;
  return Json{{"id", options_.name}, {"object", "model"}, {"created", created_}, {"owned_by", "ditto"},
              {"max_model_len", context_}};
}

std::string Service::metrics_text() const { return metrics_.render(scheduler_.status()); }

}  // namespace ditto::serve
