#include "ditto/chat_template.h"

#include "chat/interpreter.h"
#include "chat/parser.h"

namespace ditto {

using nlohmann::ordered_json;

TemplateError::TemplateError(std::string reason, int line, int column)
    : Error("chat template line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + reason),
      reason_(std::move(reason)),
      line_(line),
      column_(column) {}

ChatTemplate::ChatTemplate(std::shared_ptr<const jinja::Program> program) : program_(std::move(program)) {}

ChatTemplate ChatTemplate::parse(const std::string& text) {
  return ChatTemplate(jinja::parse(text));
}

std::string ChatTemplate::render(const ordered_json& context, const RenderLimits& limits) const {
  if (!context.is_object()) throw Error("the context of a chat template must be a JSON object");
  const jinja::Value variables = jinja::from_json(context);
  return jinja::Interpreter(*program_, limits).render(*variables.dict());
}

namespace {

// transformers' _normalize_chat_messages and _alias_reasoning_fields: keys whose value is null
// are dropped, and reasoning under any of its names is passed as `thinking` (first) and
// `reasoning_content`.
ordered_json normalize_message(const ordered_json& message) {
  if (!message.is_object()) {
    throw Error("chat messages must be JSON objects, got " + message.dump());
  }
  ordered_json kept = ordered_json::object();
  for (const auto& [key, value] : message.items()) {
    if (!value.is_null()) kept[key] = value;
  }
  const ordered_json* reasoning = nullptr;
  for (const char* name : {"reasoning_content", "thinking", "reasoning"}) {
    if (kept.contains(name)) {
      reasoning = &kept[name];
      break;
    }
  }
  if (reasoning == nullptr) return kept;
  ordered_json aliased = ordered_json::object();
  aliased["thinking"] = *reasoning;
  for (const auto& [key, value] : kept.items()) aliased[key] = value;
  aliased["reasoning_content"] = *reasoning;
  return aliased;
}

}  // namespace

std::string ChatTemplate::render_chat(const ChatInputs& inputs, const RenderLimits& limits) const {
  if (!inputs.messages.is_array()) throw Error("chat messages must be a JSON array");
  if (!inputs.extra.is_object()) throw Error("extra template variables must be a JSON object");
  ordered_json context = ordered_json::object();
  for (const auto& [name, token] : inputs.special_tokens) context[name] = token;
  for (const auto& [key, value] : inputs.extra.items()) {
    if (key == "messages" || key == "tools" || key == "documents" || key == "add_generation_prompt") {
      throw Error("'" + key + "' cannot be passed as an extra template variable");
    }
    context[key] = value;
  }
  ordered_json messages = ordered_json::array();
  for (const ordered_json& message : inputs.messages) messages.push_back(normalize_message(message));
  context["messages"] = std::move(messages);
  context["tools"] = inputs.tools;
  context["documents"] = nullptr;
  context["add_generation_prompt"] = inputs.add_generation_prompt;
  return render(context, limits);
}

}  // namespace ditto
