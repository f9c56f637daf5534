#pragma once
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "ditto/chat_template.h"
#include "ditto/load.h"

namespace ditto {

// A model's chat format: its chat template, or one given instead, with the model's special
// tokens, turning OpenAI-style messages into the prompt the model was trained on.
class ChatFormat {
 public:
  // Throws ditto::Error if the model has no chat template and none is given, TemplateError if
  // the template cannot be parsed.
  explicit ChatFormat(const LoadedModel& model, const std::string& template_text = "");

  // The prompt for a conversation, with the assistant's turn opened when add_generation_prompt;
  // `extra` holds further template variables (e.g. {"enable_thinking": false}).
  std::string render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools = nullptr,
                     bool add_generation_prompt = true,
                     const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

 private:
  ChatTemplate template_;
  std::map<std::string, std::string> special_tokens_;
};

}  // namespace ditto
