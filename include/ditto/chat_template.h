#pragma once
#include <cstddef>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "ditto/error.h"

namespace ditto {

namespace jinja {
struct Program;
}

// An error in a chat template, or in rendering one, at a place in the template's text. what()
// reads "chat template line L, column C: reason". A template's raise_exception("...") comes out
// as one of these with its message as the reason.
class TemplateError : public Error {
 public:
  TemplateError(std::string reason, int line, int column);
  const std::string& reason() const { return reason_; }
  int line() const { return line_; }
  int column() const { return column_; }

 private:
  std::string reason_;
  int line_;
  int column_;
};

// A template renders at most this much: a template is a program, and these bound its work.
// Chat templates are linear in the conversation and stay far below them.
struct RenderLimits {
  size_t max_steps = 50'000'000;         // loop iterations and macro calls
  size_t max_output_bytes = size_t{1} << 30;  // of the output and of any string it builds
};

// What transformers' apply_chat_template passes to a template besides the messages.
struct ChatInputs {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;  // null: no tools (the template sees `tools` as none)
  bool add_generation_prompt = false;
  // Named special tokens such as bos_token and eos_token, as the tokenizer's special_tokens_map
  // gives them; absent ones stay undefined.
  std::map<std::string, std::string> special_tokens;
  // Further variables, e.g. {"enable_thinking": false}; they override special tokens.
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
};

// A Hugging Face chat template: a Jinja program run as transformers runs it (jinja2's
// ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the loopcontrols
// extension, and the globals raise_exception and strftime_now). docs/chat-templates.md lists
// the part of Jinja it supports; the rest is refused with a TemplateError when parsed.
//
// A parsed template is immutable; render() may be called from several threads.
class ChatTemplate {
 public:
  // Throws TemplateError naming the line and column of the first error in the text.
  static ChatTemplate parse(const std::string& text);

  // Renders with `context` (a JSON object) as the template's variables. Throws TemplateError
  // for errors while rendering (naming the template line), ditto::Error for a bad context.
  std::string render(const nlohmann::ordered_json& context, const RenderLimits& limits = {}) const;

  // Renders a conversation as transformers' apply_chat_template(..., tokenize=False) does:
  // message keys whose value is null are dropped, reasoning given as `reasoning_content`,
  // `thinking` or `reasoning` is passed under all of `thinking` and `reasoning_content`, and the
  // template sees messages, tools, documents (none), add_generation_prompt, the special tokens
  // and the extra variables.
  std::string render_chat(const ChatInputs& inputs, const RenderLimits& limits = {}) const;

 private:
  explicit ChatTemplate(std::shared_ptr<const jinja::Program> program);
  std::shared_ptr<const jinja::Program> program_;
};

}  // namespace ditto
