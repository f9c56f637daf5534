#include "chat/chat_format.h"

namespace ditto {

namespace {

const std::string& template_of(const LoadedModel& model, const std::string& template_text) {
  if (!template_text.empty()) return template_text;
  if (model.chat_template.empty())
    throw Error(model.name + " has no chat template: give one with --chat-template FILE (completion works without)");
  return model.chat_template;
}

}  // namespace

ChatFormat::ChatFormat(const LoadedModel& model, const std::string& template_text)
    : template_(ChatTemplate::parse(template_of(model, template_text))), special_tokens_(model.special_tokens) {}

std::string ChatFormat::render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                               bool add_generation_prompt, const nlohmann::ordered_json& extra) const {
  ChatInputs inputs;
  inputs.messages = messages;
  inputs.tools = tools;
  inputs.add_generation_prompt = add_generation_prompt;
  inputs.special_tokens = special_tokens_;
  inputs.extra = extra;
  return template_.render_chat(inputs);
}

}  // namespace ditto
