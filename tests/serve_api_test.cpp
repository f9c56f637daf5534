// Request parsing of the OpenAI-compatible API (src/serve/api.h): each field read with its
// OpenAI / vLLM meaning and default, and every malformed body refused with status 400 and a
// message naming the field.
#include <gtest/gtest.h>

#include <string>

#include "serve/api.h"

namespace ditto::serve {
namespace {

// Expects parse(body) to throw an ApiError with status 400 whose message holds `fragment` and
// whose param is `param` ("" for none).
template <typename Parse>
void expect_refused(Parse parse, const std::string& body, const std::string& fragment, const std::string& param) {
  SCOPED_TRACE(body.substr(0, 200));
  try {
    parse(body);
    ADD_FAILURE() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    const Json body_json = e.body();
    EXPECT_EQ(body_json["error"]["type"], "invalid_request_error");
    EXPECT_EQ(body_json["error"]["message"], e.what());
    if (param.empty()) EXPECT_TRUE(body_json["error"]["param"].is_null());
    else EXPECT_EQ(body_json["error"]["param"], param);
  }
}

const std::string kMessages = R"("messages": [{"role": "user", "content": "Hi"}])";

std::string chat(const std::string& fields) { return "{" + kMessages + (fields.empty() ? "" : ", " + fields) + "}"; }

TEST(ServeApi, ChatDefaultsAreOpenAIs) {
  const ChatRequest r = parse_chat_request(chat(""));
  EXPECT_EQ(r.options.model, "");
  EXPECT_FALSE(r.options.max_tokens.has_value());
  EXPECT_EQ(r.options.n, 1u);
  EXPECT_FALSE(r.options.stream);
  EXPECT_EQ(r.options.sampling.temperature, 1.0);
  EXPECT_EQ(r.options.sampling.top_p, 1.0);
  EXPECT_FALSE(r.options.sampling.seed.has_value());
  EXPECT_FALSE(r.options.sampling.logprobs);
  EXPECT_EQ(r.messages, Json::parse(R"([{"role": "user", "content": "Hi"}])"));
  EXPECT_TRUE(r.tools.is_null());
  EXPECT_EQ(r.template_variables, Json::object());
}

TEST(ServeApi, ChatFieldsAreRead) {
  const ChatRequest r = parse_chat_request(chat(R"(
      "model": "m", "max_tokens": 7, "max_completion_tokens": 9, "stop": ["", "END", "\n\n"], "n": 3,
      "stream": true, "stream_options": {"include_usage": true}, "temperature": 0.5, "top_p": 0.9,
      "top_k": -1, "min_p": 0.05, "presence_penalty": -2, "frequency_penalty": 1.5, "repetition_penalty": 1.1,
      "repeat_last_n": 0, "logit_bias": {"17": -100, "3": 2.5}, "seed": -1, "logprobs": true, "top_logprobs": 20,
      "ignore_eos": true, "return_tokens_as_token_ids": true, "tools": [], "chat_template_kwargs": {"x": 1},
      "user": "ignored", "some_future_parameter": {"a": [1]}, "response_format": null)"));
  const GenerationOptions& o = r.options;
  EXPECT_EQ(o.model, "m");
  EXPECT_EQ(o.max_tokens, 9u);  // max_completion_tokens wins
  EXPECT_EQ(o.stop, (std::vector<std::string>{"END", "\n\n"}));
  EXPECT_EQ(o.n, 3u);
  EXPECT_TRUE(o.stream && o.include_usage && o.ignore_eos && o.tokens_as_ids);
  EXPECT_EQ(o.sampling.temperature, 0.5);
  EXPECT_EQ(o.sampling.top_p, 0.9);
  EXPECT_EQ(o.sampling.top_k, 0);
  EXPECT_EQ(o.sampling.min_p, 0.05);
  EXPECT_EQ(o.sampling.presence_penalty, -2.0);
  EXPECT_EQ(o.sampling.frequency_penalty, 1.5);
  EXPECT_EQ(o.sampling.repetition_penalty, 1.1);
  EXPECT_EQ(o.sampling.penalty_window, 0);
  EXPECT_EQ(o.sampling.logit_bias, (std::map<int32_t, double>{{3, 2.5}, {17, -100.0}}));
  EXPECT_EQ(o.sampling.seed, UINT64_MAX);  // -1 as 64 bits
  EXPECT_TRUE(o.sampling.logprobs);
  EXPECT_EQ(o.sampling.top_logprobs, 20);
  EXPECT_EQ(r.tools, Json::array());
  EXPECT_EQ(r.template_variables, Json::parse(R"({"x": 1})"));
  EXPECT_EQ(parse_chat_request(chat(R"("seed": 18446744073709551615, "stop": "x", "max_tokens": 5)")).options.sampling.seed,
            UINT64_MAX);
  EXPECT_EQ(parse_chat_request(chat(R"("stop": "x", "max_tokens": 5)")).options.stop, std::vector<std::string>{"x"});
  // null is the default, as in OpenAI's API.
  const ChatRequest nulls = parse_chat_request(chat(R"("max_tokens": null, "stop": null, "seed": null, "n": null)"));
  EXPECT_FALSE(nulls.options.max_tokens || nulls.options.sampling.seed);
}

TEST(ServeApi, MessageContentPartsBecomeText) {
  const ChatRequest r = parse_chat_request(R"({"messages": [
      {"role": "system", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "user", "content": "q", "name": "ann"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function",
        "function": {"name": "f", "arguments": "{}"}}]},
      {"role": "tool", "content": "42", "tool_call_id": "1"}]})");
  EXPECT_EQ(r.messages[0]["content"], "a\nb");
  EXPECT_EQ(r.messages[1]["name"], "ann");
  EXPECT_TRUE(r.messages[2]["content"].is_null());
  EXPECT_EQ(r.messages[2]["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(r.messages[3]["tool_call_id"], "1");
}

TEST(ServeApi, MalformedChatRequestsAreRefused) {
  const auto parse = [](const std::string& body) { parse_chat_request(body); };
  const struct {
    std::string body, fragment, param;
  } cases[] = {
      {"", "not valid JSON", ""},
      {"{", "not valid JSON", ""},
      {R"({"messages": [}])", "not valid JSON", ""},
      {"[1, 2]", "must be a JSON object", ""},
      {"\"text\"", "must be a JSON object", ""},
      {"{\"messages\": [{\"role\": \"user\", \"content\": \"\xff\"}]}", "not valid JSON", ""},
      {"{\"messages\": [{\"role\": \"user\", \"content\": \"\xc3\"}]}", "not valid JSON", ""},
      {R"({"messages": [{"role": "user", "content": "\ud800"}]})", "not valid JSON", ""},
      {chat(R"("temperature": 1e999)"), "not valid JSON", ""},
      {std::string(70, '[') + std::string(70, ']'), "deeper than 64", ""},
      {"{}", "'messages' must be a non-empty array", "messages"},
      {R"({"messages": []})", "'messages' must be a non-empty array", "messages"},
      {R"({"messages": "hi"})", "'messages' must be an array", "messages"},
      {R"({"messages": ["hi"]})", "each message must be an object", "messages"},
      {R"({"messages": [{"content": "hi"}]})", "needs a 'role'", "messages"},
      {R"({"messages": [{"role": 1, "content": "hi"}]})", "'role' must be a string", "role"},
      {R"({"messages": [{"role": "wizard", "content": "hi"}]})", "unknown role 'wizard'", "messages"},
      {R"({"messages": [{"role": "user"}]})", "a user message needs 'content'", "messages"},
      {R"({"messages": [{"role": "user", "content": null}]})", "must be a string or an array of text parts", "messages"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "must be a string or an array of text parts", "messages"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})",
       "only text content parts", "messages"},
      {R"({"messages": [{"role": "assistant", "content": "", "tool_calls": {}}]})", "'tool_calls' must be an array",
       "tool_calls"},
      {chat(R"("model": 5)"), "'model' must be a string", "model"},
      {chat(R"("max_tokens": -1)"), "'max_tokens' must be between 1 and", "max_tokens"},
      {chat(R"("max_tokens": 0)"), "'max_tokens' must be between 1 and", "max_tokens"},
      {chat(R"("max_tokens": 1.5)"), "'max_tokens' must be an integer", "max_tokens"},
      {chat(R"("max_tokens": "10")"), "'max_tokens' must be an integer", "max_tokens"},
      {chat(R"("max_tokens": 1e30)"), "'max_tokens' must be an integer", "max_tokens"},
      {chat(R"("max_tokens": 99999999999999999999999)"), "'max_tokens' must be an integer", "max_tokens"},
      {chat(R"("max_tokens": 18446744073709551615)"), "'max_tokens' must be between 1 and", "max_tokens"},
      {chat(R"("max_completion_tokens": -5)"), "'max_completion_tokens' must be between", "max_completion_tokens"},
      {chat(R"("n": 0)"), "'n' must be between 1 and 128", "n"},
      {chat(R"("n": 129)"), "'n' must be between 1 and 128", "n"},
      {chat(R"("n": true)"), "'n' must be an integer", "n"},
      {chat(R"("temperature": -0.1)"), "'temperature' must be in [0, 2], not -0.1", "temperature"},
      {chat(R"("temperature": 1e300)"), "'temperature' must be in [0, 2]", "temperature"},
      {chat(R"("temperature": "hot")"), "'temperature' must be a number", "temperature"},
      {chat(R"("top_p": 0)"), "'top_p' must be in (0, 1], not 0", "top_p"},
      {chat(R"("top_p": 1.01)"), "'top_p' must be in (0, 1]", "top_p"},
      {chat(R"("top_k": -2)"), "'top_k' must be between -1 and", "top_k"},
      {chat(R"("min_p": 2)"), "'min_p' must be in [0, 1]", "min_p"},
      {chat(R"("presence_penalty": 3)"), "'presence_penalty' must be in [-2, 2]", "presence_penalty"},
      {chat(R"("frequency_penalty": -3)"), "'frequency_penalty' must be in [-2, 2]", "frequency_penalty"},
      {chat(R"("repetition_penalty": 0)"), "'repetition_penalty' must be in (0,", "repetition_penalty"},
      {chat(R"("repeat_last_n": -1)"), "'repeat_last_n' must be between 0 and", "repeat_last_n"},
      {chat(R"("seed": 1.5)"), "'seed' must be an integer", "seed"},
      {chat(R"("seed": "1")"), "'seed' must be an integer", "seed"},
      {chat(R"("seed": 1e20)"), "'seed' must be an integer", "seed"},
      {chat(R"("stop": 5)"), "'stop' must be a string or an array of strings", "stop"},
      {chat(R"("stop": ["a", 5])"), "'stop' must be a string or an array of strings", "stop"},
      {chat(R"("stop": ["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"])"),
       "at most 16 strings", "stop"},
      {chat(R"("stream": "yes")"), "'stream' must be a boolean", "stream"},
      {chat(R"("stream_options": {"include_usage": true})"), "only allowed when 'stream' is true", "stream_options"},
      {chat(R"("stream": true, "stream_options": [])"), "'stream_options' must be an object", "stream_options"},
      {chat(R"("stream": true, "stream_options": {"include_usage": 1})"), "'include_usage' must be a boolean",
       "include_usage"},
      {chat(R"("logprobs": 1)"), "'logprobs' must be a boolean", "logprobs"},
      {chat(R"("logprobs": true, "top_logprobs": 21)"), "'top_logprobs' must be between 0 and 20", "top_logprobs"},
      {chat(R"("top_logprobs": 2)"), "'top_logprobs' needs 'logprobs' set to true", "top_logprobs"},
      {chat(R"("logit_bias": [1])"), "'logit_bias' must be an object", "logit_bias"},
      {chat(R"("logit_bias": {"x": 1})"), "keys must be token ids, not 'x'", "logit_bias"},
      {chat(R"("logit_bias": {"-1": 1})"), "keys must be token ids, not '-1'", "logit_bias"},
      {chat(R"("logit_bias": {"1 ": 1})"), "keys must be token ids", "logit_bias"},
      {chat(R"("logit_bias": {"99999999999": 1})"), "keys must be token ids", "logit_bias"},
      {chat(R"("logit_bias": {"1": 101})"), "values must be numbers in [-100, 100]", "logit_bias"},
      {chat(R"("logit_bias": {"1": "a"})"), "values must be numbers in [-100, 100]", "logit_bias"},
      {chat(R"("tools": {})"), "'tools' must be an array", "tools"},
      {chat(R"("chat_template_kwargs": [])"), "'chat_template_kwargs' must be an object", "chat_template_kwargs"},
      {chat(R"("ignore_eos": 1)"), "'ignore_eos' must be a boolean", "ignore_eos"},
  };
  for (const auto& c : cases) expect_refused(parse, c.body, c.fragment, c.param);
}

TEST(ServeApi, CompletionPromptsAndLogprobs) {
  const CompletionRequest text = parse_completion_request(R"({"prompt": "Once upon"})");
  ASSERT_EQ(text.prompts.size(), 1u);
  EXPECT_TRUE(text.prompts[0].is_text);
  EXPECT_EQ(text.prompts[0].text, "Once upon");
  EXPECT_TRUE(text.add_special_tokens);  // vLLM's default for completions
  EXPECT_FALSE(parse_completion_request(R"({"prompt": "a", "add_special_tokens": false})").add_special_tokens);
  EXPECT_FALSE(text.options.max_tokens.has_value());  // the service applies OpenAI's 16
  EXPECT_FALSE(text.options.sampling.logprobs);

  const CompletionRequest ids = parse_completion_request(R"({"prompt": [1, 2, 2147483647], "logprobs": 0, "n": 2})");
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_FALSE(ids.prompts[0].is_text);
  EXPECT_EQ(ids.prompts[0].ids, (std::vector<int32_t>{1, 2, 2147483647}));
  EXPECT_TRUE(ids.options.sampling.logprobs);
  EXPECT_EQ(ids.options.sampling.top_logprobs, 0);

  const CompletionRequest texts = parse_completion_request(R"({"prompt": ["a", "b"], "logprobs": 5, "echo": false})");
  ASSERT_EQ(texts.prompts.size(), 2u);
  EXPECT_EQ(texts.prompts[1].text, "b");
  EXPECT_EQ(texts.options.sampling.top_logprobs, 5);

  const CompletionRequest batches = parse_completion_request(R"({"prompt": [[1], [2, 3]], "best_of": 1})");
  ASSERT_EQ(batches.prompts.size(), 2u);
  EXPECT_EQ(batches.prompts[1].ids, (std::vector<int32_t>{2, 3}));
}

TEST(ServeApi, MalformedCompletionRequestsAreRefused) {
  const auto parse = [](const std::string& body) { parse_completion_request(body); };
  const struct {
    std::string body, fragment, param;
  } cases[] = {
      {"{}", "'prompt' is required", "prompt"},
      {R"({"prompt": 5})", "'prompt' must be a string, an array", "prompt"},
      {R"({"prompt": []})", "'prompt' must be a string, an array", "prompt"},
      {R"({"prompt": ["a", 1]})", "'prompt' must be a string, an array", "prompt"},
      {R"({"prompt": [[1], "a"]})", "'prompt' must be a string, an array", "prompt"},
      {R"({"prompt": [1, -2]})", "token ids must be integers from 0 to 2147483647", "prompt"},
      {R"({"prompt": [1, 2147483648]})", "token ids must be integers from 0 to 2147483647", "prompt"},
      {R"({"prompt": [1, 2.5]})", "token ids must be integers", "prompt"},
      {R"({"prompt": [[1, "a"]]})", "token ids must be integers", "prompt"},
      {R"({"prompt": [{"a": 1}]})", "'prompt' must be a string, an array", "prompt"},
      {R"({"prompt": "a", "logprobs": true})", "'logprobs' must be an integer between 0 and 20", "logprobs"},
      {R"({"prompt": "a", "logprobs": 21})", "'logprobs' must be between 0 and 20", "logprobs"},
      {R"({"prompt": "a", "echo": true})", "'echo' is not supported", "echo"},
      {R"({"prompt": "a", "suffix": "b"})", "'suffix' is not supported", "suffix"},
      {R"({"prompt": "a", "best_of": 3})", "'best_of' other than 'n'", "best_of"},
      {R"({"prompt": ["a", "b", "c"], "n": 50})", "at most 128 choices", "n"},
      {R"({"prompt": "a", "max_tokens": -1})", "'max_tokens' must be between 1", "max_tokens"},
      {R"({"prompt": "a", "add_special_tokens": 1})", "'add_special_tokens' must be a boolean", "add_special_tokens"},
  };
  for (const auto& c : cases) expect_refused(parse, c.body, c.fragment, c.param);
}

TEST(ServeApi, TokenizeAndDetokenize) {
  EXPECT_EQ(parse_tokenize_request(R"({"prompt": "hi"})").prompt, "hi");
  EXPECT_TRUE(parse_tokenize_request(R"({"prompt": "hi"})").add_special_tokens);
  EXPECT_FALSE(parse_tokenize_request(R"({"prompt": "hi", "add_special_tokens": false})").add_special_tokens);
  const TokenizeRequest chat_tokens =
      parse_tokenize_request(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": false})");
  EXPECT_FALSE(chat_tokens.prompt.has_value());
  EXPECT_FALSE(chat_tokens.add_generation_prompt);
  EXPECT_EQ(chat_tokens.model, "m");
  EXPECT_EQ(parse_detokenize_request(R"({"tokens": [0, 5]})").tokens, (std::vector<int32_t>{0, 5}));
  const auto tokenize = [](const std::string& body) { parse_tokenize_request(body); };
  expect_refused(tokenize, "{}", "give 'prompt' (text) or 'messages'", "prompt");
  expect_refused(tokenize, R"({"prompt": 1})", "'prompt' must be a string", "prompt");
  expect_refused(tokenize, R"({"messages": []})", "non-empty array", "messages");
  const auto detokenize = [](const std::string& body) { parse_detokenize_request(body); };
  expect_refused(detokenize, "{}", "'tokens' (an array of token ids) is required", "tokens");
  expect_refused(detokenize, R"({"tokens": [-1]})", "token ids must be integers", "tokens");
  expect_refused(detokenize, R"({"tokens": "1 2"})", "'tokens' must be an array", "tokens");
}

TEST(ServeApi, ErrorBodiesAreOpenAIs) {
  EXPECT_EQ(ApiError(401, "no key", "", "invalid_api_key").body(),
            Json::parse(R"({"error": {"message": "no key", "type": "authentication_error", "param": null,
                                      "code": "invalid_api_key"}})"));
  EXPECT_EQ(ApiError(404, "gone", "model", "model_not_found").body()["error"]["type"], "not_found_error");
  EXPECT_EQ(ApiError(503, "busy").body()["error"]["type"], "service_unavailable");
  EXPECT_EQ(ApiError(500, "bug").body()["error"]["type"], "server_error");
}

}  // namespace
}  // namespace ditto::serve
