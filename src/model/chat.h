#pragma once
#include <string>

namespace ditto {

// One user message in the chat format a model's template describes, ready to encode, in the
// simplest way that is correct for ChatML templates (SmolLM2, Qwen): the template's default
// system message if it writes one literally, the user turn, and the opening of the assistant
// turn. A template that is not ChatML (or none) leaves the text as it is. Templates in general
// are Jinja programs; this is not an interpreter of them.
std::string chat_prompt(const std::string& chat_template, const std::string& user_text);

}  // namespace ditto
