// libFuzzer target for the chat-template engine: arbitrary bytes as a template (and as its
// variables) must render or fail with ditto::Error, never crash, hang or leak, and rendering
// twice must give the same text. The first byte chooses what the rest is:
//   bit 0 clear: a template, rendered with a fixed conversation (messages, tools, tokens);
//   bit 0 set:   a template, a NUL byte, then JSON text for its variables.
// The render's work is bounded (RenderLimits) so that loops over range() finish quickly.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ditto/chat_template.h"
#include "ditto/error.h"

namespace {

using nlohmann::ordered_json;

const ordered_json& conversation() {
  static const ordered_json instance = ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Weather in Zürich? 😀"},
      {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Zürich", "days": 2}}}]},
      {"role": "tool", "content": "{\"temp\": 21.5}"},
      {"role": "assistant", "content": "<think>\nhm\n</think>\n\nWarm.", "reasoning_content": "hm"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "enable_thinking": false})");
  return instance;
}

void render(const std::string& text, const ordered_json& context) {
  ditto::RenderLimits limits;
  limits.max_steps = 20000;
  limits.max_output_bytes = 1 << 20;
  try {
    const ditto::ChatTemplate tmpl = ditto::ChatTemplate::parse(text);
    const std::string first = tmpl.render(context, limits);
    if (tmpl.render(context, limits) != first) {
      std::fprintf(stderr, "broken promise: two renders of one template differ\n");
      std::abort();
    }
  } catch (const ditto::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    render(rest, conversation());
    return 0;
  }
  const size_t nul = rest.find('\0');
  if (nul == std::string::npos) return 0;
  const ordered_json context = ordered_json::parse(rest.substr(nul + 1), nullptr, false);
  if (context.is_discarded()) return 0;
  render(rest.substr(0, nul), context);
  return 0;
}
