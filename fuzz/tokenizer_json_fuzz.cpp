// libFuzzer target: arbitrary bytes as a tokenizer.json, then (after a NUL byte, if any) a text.
// Tokenizer::from_json must either throw ditto::Error or give a tokenizer that keeps its promises
// on that text and a fixed one: every id encode() returns has a token, below vocab_size() (at most
// 2^24), and decode() and the streaming decoder give the same valid UTF-8.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ditto/error.h"
#include "ditto/tokenizer.h"
#include "promises.h"
#include "tokenizer/utf8.h"

namespace {

void encode_and_decode(const ditto::Tokenizer& tokenizer, std::string_view text) {
  std::vector<int32_t> ids;
  try {
    ids = tokenizer.encode(text);
  } catch (const ditto::Error&) {
    return;  // e.g. a regex that exceeds PCRE2's match limit on this text
  }
  for (const int32_t id : ids) {
    ditto::fuzz::check(id >= 0 && size_t(id) < tokenizer.vocab_size(), "encoded ids below vocab_size");
    ditto::fuzz::check(tokenizer.id_to_token(id).has_value(), "every encoded id has a token");
  }
  const std::string decoded = tokenizer.decode(ids);
  ditto::fuzz::check(ditto::utf8::find_invalid(decoded) == std::string::npos, "decoded text is valid UTF-8");
  ditto::StreamDecoder stream(tokenizer);
  std::string streamed;
  for (const int32_t id : ids) streamed += stream.push(id);
  ditto::fuzz::check(streamed + stream.finish() == decoded, "streamed text equals decoded text");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  try {
    const ditto::Tokenizer tokenizer = ditto::Tokenizer::from_json(input.substr(0, nul));
    ditto::fuzz::check(tokenizer.vocab_size() <= size_t(ditto::limits::kVocabSize.max), "vocab_size at most 2^24");
    encode_and_decode(tokenizer, "Hello <|im_end|> world's 12345 \xc3\xa9t\xc3\xa9 \xf0\x9f\x98\x80\n\n  x");
    if (nul != std::string_view::npos && ditto::utf8::find_invalid(input.substr(nul + 1)) == std::string_view::npos)
      encode_and_decode(tokenizer, input.substr(nul + 1));
  } catch (const ditto::Error&) {
  }
  return 0;
}
