// libFuzzer target for the server's request parsing (src/serve/api.h): arbitrary bytes as the
// body of a request must parse or be refused with an ApiError of status 400, never crash, hang
// or leak; what parses must hold what the parser promises, and a parsed conversation must render
// with a chat template or fail with ditto::Error. The first byte chooses the endpoint:
//   0: /v1/chat/completions (then rendered with SmolLM2's ChatML template), 1: /v1/completions,
//   2: /tokenize, 3: /detokenize.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ditto/chat_template.h"
#include "ditto/error.h"
#include "serve/api.h"

namespace {

using namespace ditto::serve;

void require(bool condition, const char* promise) {
  if (!condition) {
    std::fprintf(stderr, "broken promise: %s\n", promise);
    std::abort();
  }
}

const ditto::ChatTemplate& chatml() {
  static const ditto::ChatTemplate instance = ditto::ChatTemplate::parse(
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
      "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
      "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
      "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}");
  return instance;
}

void check_options(const GenerationOptions& o) {
  require(o.n >= 1 && o.n <= kMaxChoices, "1 <= n <= 128");
  require(!o.max_tokens || *o.max_tokens >= 1, "max_tokens >= 1");
  require(o.stop.size() <= kMaxStopStrings, "at most 16 stop strings");
  for (const std::string& stop : o.stop) require(!stop.empty(), "no empty stop string");
  require(o.sampling.temperature >= 0 && o.sampling.temperature <= 2, "temperature in [0, 2]");
  require(o.sampling.top_p > 0 && o.sampling.top_p <= 1, "top_p in (0, 1]");
  require(o.sampling.top_k >= 0, "top_k >= 0");
  require(o.sampling.top_logprobs >= 0 && o.sampling.top_logprobs <= 20, "top_logprobs in [0, 20]");
  require(o.sampling.top_logprobs == 0 || o.sampling.logprobs, "top_logprobs needs logprobs");
  require(!o.include_usage || o.stream, "include_usage needs stream");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 4) {
      case 0: {
        const ChatRequest r = parse_chat_request(body);
        check_options(r.options);
        require(r.messages.is_array() && !r.messages.empty(), "messages is a non-empty array");
        for (const auto& message : r.messages) {
          const auto content = message.find("content");
          require(content == message.end() ? message.at("role") == "assistant" : content->is_string() || content->is_null(),
                  "content is text or null, and only an assistant's may be missing");
        }
        ditto::ChatInputs inputs;
        inputs.messages = r.messages;
        inputs.tools = r.tools;
        inputs.add_generation_prompt = true;
        inputs.extra = r.template_variables;
        try {
          chatml().render_chat(inputs, {20000, 1 << 20});
        } catch (const ditto::Error&) {
        }
        break;
      }
      case 1: {
        const CompletionRequest r = parse_completion_request(body);
        check_options(r.options);
        require(!r.prompts.empty() && r.prompts.size() * r.options.n <= kMaxChoices, "1 to 128 choices");
        for (const CompletionPrompt& prompt : r.prompts)
          for (const int32_t id : prompt.ids) require(id >= 0, "token ids >= 0");
        break;
      }
      case 2: {
        const TokenizeRequest r = parse_tokenize_request(body);
        require(r.prompt || (r.messages.is_array() && !r.messages.empty()), "a prompt or messages");
        break;
      }
      default:
        for (const int32_t id : parse_detokenize_request(body).tokens) require(id >= 0, "token ids >= 0");
    }
  } catch (const ApiError& e) {
    require(e.status() == 400, "a refused body is a 400");
    e.body().dump();  // the error body is valid JSON text
  }
  return 0;
}
