#include "serve/api.h"

#include <charconv>
#include <cstdio>
#include <limits>
#include <map>

namespace ditto::serve {

namespace {

const char* error_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 503: return "service_unavailable";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

ApiError bad(const std::string& param, const std::string& message) { return ApiError(400, message, param); }

// The body as a JSON object; its nesting bounded so that nothing later recurses deeply.
Json parse_object(std::string_view body) {
  Json json;
  try {
    json = Json::parse(body, [](int depth, Json::parse_event_t, Json&) {
      if (depth > kMaxJsonDepth)
        throw ApiError(400, "the body nests arrays and objects deeper than " + std::to_string(kMaxJsonDepth) + " levels");
      return true;
    });
  } catch (const Json::exception& e) {
    // nlohmann's message without its "[json.exception...] " tag and the "last read" text, which
    // may hold the invalid bytes themselves: the error must be valid JSON text.
    std::string reason = e.what();
    reason = reason.substr(reason.find("] ") == std::string::npos ? 0 : reason.find("] ") + 2);
    reason = reason.substr(0, reason.find("; last read"));
    for (char& c : reason)
      if (static_cast<unsigned char>(c) >= 0x80) c = '?';
    throw ApiError(400, "the body is not valid JSON: " + reason);
  }
  if (!json.is_object()) throw ApiError(400, "the body must be a JSON object");
  return json;
}

// The fields of one JSON object, each checked for its type and range; an absent field and a
// null one are the same: the default. Errors name the field.
class Fields {
 public:
  explicit Fields(const Json& object) : object_(object) {}

  const Json* get(const char* name) const {
    const auto found = object_.find(name);
    return found == object_.end() || found->is_null() ? nullptr : &*found;
  }

  bool boolean(const char* name, bool fallback) const {
    const Json* value = get(name);
    if (!value) return fallback;
    if (!value->is_boolean()) throw bad(name, std::string("'") + name + "' must be a boolean");
    return value->get<bool>();
  }

  std::optional<int64_t> integer(const char* name, int64_t min, int64_t max) const {
    const Json* value = get(name);
    if (!value) return std::nullopt;
    const std::string range = " between " + std::to_string(min) + " and " + std::to_string(max);
    if (!value->is_number_integer()) throw bad(name, std::string("'") + name + "' must be an integer" + range);
    const bool outside = value->is_number_unsigned()
                             ? value->get<uint64_t>() > uint64_t(max) || (min > 0 && value->get<uint64_t>() < uint64_t(min))
                             : value->get<int64_t>() < min || value->get<int64_t>() > max;
    if (outside)
      throw bad(name, std::string("'") + name + "' must be" + range + ", not " + value->dump());
    return value->get<int64_t>();
  }

  // A finite number in [min, max] (min excluded if open_min).
  std::optional<double> number(const char* name, double min, double max, bool open_min = false) const {
    const Json* value = get(name);
    if (!value) return std::nullopt;
    if (!value->is_number()) throw bad(name, std::string("'") + name + "' must be a number");
    const double x = value->get<double>();
    if (!(open_min ? x > min : x >= min) || !(x <= max)) {
      char text[160];
      std::snprintf(text, sizeof text, "'%s' must be in %s%g, %g], not %g", name, open_min ? "(" : "[", min, max, x);
      throw bad(name, text);
    }
    return x;
  }

  std::optional<std::string> string(const char* name) const {
    const Json* value = get(name);
    if (!value) return std::nullopt;
    if (!value->is_string()) throw bad(name, std::string("'") + name + "' must be a string");
    return value->get<std::string>();
  }

  const Json* object(const char* name) const {
    const Json* value = get(name);
    if (value && !value->is_object()) throw bad(name, std::string("'") + name + "' must be an object");
    return value;
  }

  const Json* array(const char* name) const {
    const Json* value = get(name);
    if (value && !value->is_array()) throw bad(name, std::string("'") + name + "' must be an array");
    return value;
  }

 private:
  const Json& object_;
};

constexpr double kInt64Max = 9223372036854775807.0;

std::vector<std::string> parse_stop(const Fields& f) {
  const Json* value = f.get("stop");
  if (!value) return {};
  std::vector<std::string> stops;
  const auto add = [&](const Json& item) {
    if (!item.is_string()) throw bad("stop", "'stop' must be a string or an array of strings");
    if (!item.get_ref<const std::string&>().empty()) stops.push_back(item.get<std::string>());
  };
  if (value->is_array()) {
    if (value->size() > kMaxStopStrings)
      throw bad("stop", "'stop' may hold at most " + std::to_string(kMaxStopStrings) + " strings");
    for (const Json& item : *value) add(item);
  } else {
    add(*value);
  }
  return stops;
}

std::map<int32_t, double> parse_logit_bias(const Fields& f) {
  std::map<int32_t, double> bias;
  const Json* value = f.object("logit_bias");
  if (!value) return bias;
  for (const auto& [key, item] : value->items()) {
    int64_t id = -1;
    const auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (error != std::errc() || end != key.data() + key.size() || id < 0 || id > std::numeric_limits<int32_t>::max())
      throw bad("logit_bias", "'logit_bias' keys must be token ids, not '" + key + "'");
    if (!item.is_number() || !(item.get<double>() >= -100.0 && item.get<double>() <= 100.0))
      throw bad("logit_bias", "'logit_bias' values must be numbers in [-100, 100]");
    bias[int32_t(id)] = item.get<double>();
  }
  return bias;
}

// Everything but logprobs, whose form differs between chat and completions.
GenerationOptions parse_options(const Fields& f) {
  GenerationOptions o;
  o.model = f.string("model").value_or("");
  const int64_t context_bound = std::numeric_limits<int64_t>::max();
  if (const auto max = f.integer("max_completion_tokens", 1, context_bound)) o.max_tokens = size_t(*max);
  else if (const auto max = f.integer("max_tokens", 1, context_bound)) o.max_tokens = size_t(*max);
  o.stop = parse_stop(f);
  o.n = size_t(f.integer("n", 1, kMaxChoices).value_or(1));
  o.stream = f.boolean("stream", false);
  if (const Json* options = f.object("stream_options")) {
    if (!o.stream) throw bad("stream_options", "'stream_options' is only allowed when 'stream' is true");
    o.include_usage = Fields(*options).boolean("include_usage", false);
  }
  o.ignore_eos = f.boolean("ignore_eos", false);
  o.tokens_as_ids = f.boolean("return_tokens_as_token_ids", false);

  SamplingParams& s = o.sampling;
  s.temperature = f.number("temperature", 0.0, 2.0).value_or(1.0);
  s.top_p = f.number("top_p", 0.0, 1.0, /*open_min=*/true).value_or(1.0);
  s.top_k = int(std::max<int64_t>(0, f.integer("top_k", -1, std::numeric_limits<int32_t>::max()).value_or(0)));
  s.min_p = f.number("min_p", 0.0, 1.0).value_or(0.0);
  s.presence_penalty = f.number("presence_penalty", -2.0, 2.0).value_or(0.0);
  s.frequency_penalty = f.number("frequency_penalty", -2.0, 2.0).value_or(0.0);
  s.repetition_penalty = f.number("repetition_penalty", 0.0, kInt64Max, /*open_min=*/true).value_or(1.0);
  s.penalty_window = int(f.integer("repeat_last_n", 0, std::numeric_limits<int32_t>::max()).value_or(s.penalty_window));
  s.logit_bias = parse_logit_bias(f);
  if (const Json* seed = f.get("seed")) {
    if (!seed->is_number_integer()) throw bad("seed", "'seed' must be an integer");
    // A negative seed (OpenAI allows them) is its 64-bit two's complement.
    s.seed = seed->is_number_unsigned() ? seed->get<uint64_t>() : uint64_t(seed->get<int64_t>());
  }
  return o;
}

// Message content as text: a string, or an array of text parts joined by newlines (as vLLM does).
Json text_content(const Json& content, bool may_be_null) {
  if (content.is_string()) return content;
  if (content.is_null() && may_be_null) return content;
  if (!content.is_array()) throw bad("messages", "a message's 'content' must be a string or an array of text parts");
  std::string text;
  for (const Json& part : content) {
    const auto type = part.is_object() ? part.find("type") : part.end();
    const auto part_text = part.is_object() ? part.find("text") : part.end();
    if (type == part.end() || *type != "text" || part_text == part.end() || !part_text->is_string())
      throw bad("messages", "only text content parts ({\"type\": \"text\", \"text\": ...}) are supported");
    if (!text.empty()) text += '\n';
    text += part_text->get_ref<const std::string&>();
  }
  return text;
}

Json parse_messages(const Json* messages) {
  if (!messages || messages->empty()) throw bad("messages", "'messages' must be a non-empty array");
  Json checked = Json::array();
  for (const Json& message : *messages) {
    if (!message.is_object()) throw bad("messages", "each message must be an object");
    const Fields m(message);
    const std::optional<std::string> role = m.string("role");
    if (!role) throw bad("messages", "each message needs a 'role'");
    if (*role != "system" && *role != "developer" && *role != "user" && *role != "assistant" && *role != "tool")
      throw bad("messages", "unknown role '" + *role + "': system, developer, user, assistant or tool");
    Json copy = message;
    const auto content = message.find("content");
    const bool assistant = *role == "assistant";
    if (content == message.end() && !assistant) throw bad("messages", "a " + *role + " message needs 'content'");
    if (content != message.end()) copy["content"] = text_content(*content, assistant);
    m.array("tool_calls");
    m.string("name");
    m.string("tool_call_id");
    checked.push_back(std::move(copy));
  }
  return checked;
}

bool is_token_id(const Json& item) {
  if (item.is_number_unsigned()) return item.get<uint64_t>() <= uint64_t(std::numeric_limits<int32_t>::max());
  return false;  // JSON integers below zero are signed, fractions are floats: neither is an id
}

std::vector<int32_t> token_ids(const Json& array, const char* param) {
  std::vector<int32_t> ids;
  for (const Json& item : array) {
    if (!is_token_id(item))
      throw bad(param, std::string("'") + param + "' token ids must be integers from 0 to 2147483647");
    ids.push_back(item.get<int32_t>());
  }
  return ids;
}

std::vector<CompletionPrompt> parse_prompts(const Fields& f) {
  const Json* prompt = f.get("prompt");
  const char* shape = "'prompt' must be a string, an array of strings, an array of token ids or an array of arrays of token ids";
  if (!prompt) throw bad("prompt", "'prompt' is required");
  if (prompt->is_string()) return {{true, prompt->get<std::string>(), {}}};
  if (!prompt->is_array() || prompt->empty()) throw bad("prompt", shape);
  std::vector<CompletionPrompt> prompts;
  const Json& first = prompt->front();
  if (first.is_number()) return {{false, "", token_ids(*prompt, "prompt")}};
  for (const Json& item : *prompt) {
    if (first.is_string() && item.is_string()) prompts.push_back({true, item.get<std::string>(), {}});
    else if (first.is_array() && item.is_array()) prompts.push_back({false, "", token_ids(item, "prompt")});
    else throw bad("prompt", shape);
  }
  return prompts;
}

// chat_template_kwargs: the variables a chat template gets besides the conversation.
Json template_variables(const Fields& f) {
  const Json* variables = f.object("chat_template_kwargs");
  return variables ? *variables : Json::object();
}

}  // namespace

ApiError::ApiError(int status, const std::string& message, std::string param, std::string code)
    : std::runtime_error(message), status_(status), param_(std::move(param)), code_(std::move(code)) {}

Json ApiError::body() const {
  return {{"error",
           {{"message", what()},
            {"type", error_type(status_)},
            {"param", param_.empty() ? Json(nullptr) : Json(param_)},
            {"code", code_.empty() ? Json(nullptr) : Json(code_)}}}};
}

ChatRequest parse_chat_request(std::string_view body) {
  const Json json = parse_object(body);
  const Fields f(json);
  ChatRequest r;
  r.options = parse_options(f);
  r.options.sampling.logprobs = f.boolean("logprobs", false);
  r.options.sampling.top_logprobs = int(f.integer("top_logprobs", 0, SamplingParams::kMaxTopLogprobs).value_or(0));
  if (f.get("top_logprobs") && !r.options.sampling.logprobs)
    throw bad("top_logprobs", "'top_logprobs' needs 'logprobs' set to true");
  r.messages = parse_messages(f.array("messages"));
  if (const Json* tools = f.array("tools")) r.tools = *tools;
  r.template_variables = template_variables(f);
  return r;
}

CompletionRequest parse_completion_request(std::string_view body) {
  const Json json = parse_object(body);
  const Fields f(json);
  CompletionRequest r;
  r.options = parse_options(f);
  // logprobs: how many of the likeliest tokens to list with each token's own log-probability.
  if (const auto top = f.integer("logprobs", 0, SamplingParams::kMaxTopLogprobs)) {
    r.options.sampling.logprobs = true;
    r.options.sampling.top_logprobs = int(*top);
  }
  if (f.boolean("echo", false)) throw bad("echo", "'echo' is not supported");
  if (const auto suffix = f.string("suffix"); suffix && !suffix->empty())
    throw bad("suffix", "'suffix' is not supported");
  if (const auto best_of = f.integer("best_of", 1, kMaxChoices); best_of && size_t(*best_of) != r.options.n)
    throw bad("best_of", "'best_of' other than 'n' is not supported");
  r.prompts = parse_prompts(f);
  r.add_special_tokens = f.boolean("add_special_tokens", true);
  if (r.prompts.size() * r.options.n > kMaxChoices)
    throw bad("n", "a request may ask for at most " + std::to_string(kMaxChoices) + " choices (prompts times n)");
  return r;
}

TokenizeRequest parse_tokenize_request(std::string_view body) {
  const Json json = parse_object(body);
  const Fields f(json);
  TokenizeRequest r;
  r.model = f.string("model").value_or("");
  r.prompt = f.string("prompt");
  if (r.prompt) {
    r.add_special_tokens = f.boolean("add_special_tokens", true);
  } else {
    if (!f.get("messages")) throw bad("prompt", "give 'prompt' (text) or 'messages' (a conversation)");
    r.messages = parse_messages(f.array("messages"));
    if (const Json* tools = f.array("tools")) r.tools = *tools;
    r.add_generation_prompt = f.boolean("add_generation_prompt", true);
  }
  r.template_variables = template_variables(f);
  return r;
}

DetokenizeRequest parse_detokenize_request(std::string_view body) {
  const Json json = parse_object(body);
  const Fields f(json);
  DetokenizeRequest r;
  r.model = f.string("model").value_or("");
  const Json* tokens = f.array("tokens");
  if (!tokens) throw bad("tokens", "'tokens' (an array of token ids) is required");
  r.tokens = token_ids(*tokens, "tokens");
  return r;
}

}  // namespace ditto::serve
