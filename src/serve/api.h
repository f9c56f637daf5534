#pragma once
// The requests of the OpenAI-compatible API, read from their JSON bodies and checked. Whatever a
// client can get wrong here is an ApiError carrying the HTTP status and OpenAI's error object;
// nothing here needs the model (the checks that do, such as the context length, come later).
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/sampler.h"

namespace ditto::serve {

using Json = nlohmann::ordered_json;

// An error to answer with: the HTTP status and OpenAI's error object,
// {"error": {"message", "type", "param", "code"}}.
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, const std::string& message, std::string param = "", std::string code = "");
  int status() const { return status_; }
  Json body() const;

 private:
  int status_;
  std::string param_, code_;
};

// Bounds on what one request may ask for.
inline constexpr size_t kMaxChoices = 128;      // n times the prompts of a completion request
inline constexpr size_t kMaxStopStrings = 16;
inline constexpr int kMaxJsonDepth = 64;        // nesting of the body's arrays and objects

// What chat and completion requests share.
struct GenerationOptions {
  std::string model;                 // "" when not given: the served model
  std::optional<size_t> max_tokens;  // max_completion_tokens or max_tokens; none: to the end of the context
  std::vector<std::string> stop;     // stop strings (empty ones dropped)
  SamplingParams sampling;           // OpenAI's defaults (temperature 1); the seed if given
  size_t n = 1;
  bool stream = false;
  bool include_usage = false;        // stream_options.include_usage
  bool ignore_eos = false;           // vLLM's: go on past the model's end tokens
  bool tokens_as_ids = false;        // vLLM's return_tokens_as_token_ids: logprob tokens as "token_id:N"
};

struct ChatRequest {
  GenerationOptions options;
  Json messages;             // an array of messages; text content arrays joined into strings
  Json tools;                // null when none
  Json template_variables;   // chat_template_kwargs: an object
};

// A /v1/completions prompt: text, or token ids.
struct CompletionPrompt {
  bool is_text = true;
  std::string text;
  std::vector<int32_t> ids;
};

struct CompletionRequest {
  GenerationOptions options;
  std::vector<CompletionPrompt> prompts;  // one or more: choice i * n + j is prompt i's choice j
  bool add_special_tokens = true;         // vLLM's: text prompts get what the tokenizer adds (BOS)
};

// /tokenize: text, or a conversation rendered with the chat template.
struct TokenizeRequest {
  std::string model;
  std::optional<std::string> prompt;
  Json messages;  // when there is no prompt
  Json tools;
  Json template_variables;
  bool add_generation_prompt = true;
  bool add_special_tokens = true;  // to a prompt (vLLM's default); a conversation's template has its own
};

struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> tokens;
};

// Each throws ApiError (status 400) naming the first thing wrong with the body.
ChatRequest parse_chat_request(std::string_view body);
CompletionRequest parse_completion_request(std::string_view body);
TokenizeRequest parse_tokenize_request(std::string_view body);
DetokenizeRequest parse_detokenize_request(std::string_view body);

}  // namespace ditto::serve
