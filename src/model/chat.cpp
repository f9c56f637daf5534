#include "model/chat.h"

namespace ditto {

namespace {

// The system message a ChatML template writes when the conversation has none, if it is a literal
// (as in SmolLM2's "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, ...").
std::string default_system_message(const std::string& chat_template) {
  const std::string open = "<|im_start|>system\n";
  const size_t start = chat_template.find(open);
  if (start == std::string::npos) return "";
  const size_t end = chat_template.find("<|im_end|>", start + open.size());
  if (end == std::string::npos) return "";
  const std::string message = chat_template.substr(start + open.size(), end - start - open.size());
  // Jinja expressions (quotes closing the string, variables) mean it is not a literal.
  if (message.find_first_of("'\"{}+") != std::string::npos) return "";
  return message;
}

}  // namespace

std::string chat_prompt(const std::string& chat_template, const std::string& user_text) {
  if (chat_template.find("<|im_start|>") == std::string::npos) return user_text;
  std::string prompt;
  const std::string system = default_system_message(chat_template);
  if (!system.empty()) prompt += "<|im_start|>system\n" + system + "<|im_end|>\n";
  return prompt + "<|im_start|>user\n" + user_text + "<|im_end|>\n<|im_start|>assistant\n";
}

}  // namespace ditto
