// libFuzzer target for the tokenizer: arbitrary bytes must never crash or hang it, and what it
// returns must keep its promises. The first byte chooses what to do with the rest:
//   bit 0 set: the rest is token ids (4 bytes each) for decode and the streaming decoder,
//              which must give the same text;
//   bit 0 clear: the rest is text for encode (bit 1: allow_special, bit 2: add_special_tokens),
//              which must refuse invalid UTF-8 with ditto::Error and otherwise decode back to
//              the text as $DITTO_FUZZ_ROUND_TRIP says:
//                nfc (the default): its NFC, for the Qwen3 file;
//                spaces: the text with each "▁" (U+2581) a space, for a SentencePiece-style file
//                  that puts no "▁" before the text (Gemma's);
//                none: no round trip, for a file whose "▁" prefix and Strip decoder lose spaces
//                  (Llama 2's: " x" comes back as "x").
// Uses the tokenizer.json at $DITTO_FUZZ_TOKENIZER.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ditto/error.h"
#include "ditto/tokenizer.h"
#include "tokenizer/nfc.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/utf8.h"

namespace {

const ditto::Tokenizer& tokenizer() {
  static const ditto::Tokenizer instance = [] {
    const char* path = std::getenv("DITTO_FUZZ_TOKENIZER");
    if (path == nullptr) {
      std::fprintf(stderr, "set DITTO_FUZZ_TOKENIZER to a tokenizer.json\n");
      std::abort();
    }
    return ditto::Tokenizer::from_file(path);
  }();
  return instance;
}

void check(bool promise, const char* what) {
  if (!promise) {
    std::fprintf(stderr, "broken promise: %s\n", what);
    std::abort();
  }
}

void fuzz_decode(const uint8_t* data, size_t size, bool skip_special) {
  std::vector<int32_t> ids(size / 4);
  if (!ids.empty()) std::memcpy(ids.data(), data, ids.size() * 4);
  ditto::StreamDecoder stream(tokenizer(), skip_special);
  std::string streamed;
  for (const int32_t id : ids) streamed += stream.push(id);
  streamed += stream.finish();
  const std::string decoded = tokenizer().decode(ids, skip_special);
  check(streamed == decoded, "streamed text equals decoded text");
  check(ditto::utf8::find_invalid(decoded) == std::string::npos, "decoded text is valid UTF-8");
}

enum class RoundTrip { Nfc, Spaces, None };

RoundTrip round_trip() {
  static const RoundTrip value = [] {
    const char* name = std::getenv("DITTO_FUZZ_ROUND_TRIP");
    if (name == nullptr || std::strcmp(name, "nfc") == 0) return RoundTrip::Nfc;
    if (std::strcmp(name, "spaces") == 0) return RoundTrip::Spaces;
    if (std::strcmp(name, "none") == 0) return RoundTrip::None;
    std::fprintf(stderr, "DITTO_FUZZ_ROUND_TRIP is nfc, spaces or none\n");
    std::abort();
  }();
  return value;
}

void fuzz_encode(std::string_view text, bool allow_special, bool add_special_tokens) {
  if (ditto::utf8::find_invalid(text) != std::string_view::npos) {
    try {
      tokenizer().encode(text, allow_special, add_special_tokens);
    } catch (const ditto::Error&) {
      return;
    }
    check(false, "invalid UTF-8 is refused");
  }
  const std::vector<int32_t> ids = tokenizer().encode(text, allow_special, add_special_tokens);
  const std::string decoded = tokenizer().decode(ids);
  check(ditto::utf8::find_invalid(decoded) == std::string::npos, "decoded text is valid UTF-8");
  if (add_special_tokens) return;  // the post-processor's tokens are not in the text
  if (round_trip() == RoundTrip::Nfc) {
    check(decoded == ditto::to_nfc(text), "decode(encode(text)) == NFC(text)");
  } else if (round_trip() == RoundTrip::Spaces) {
    check(decoded == ditto::replace_all(text, "\u2581", " "), "decode(encode(text)) == text with spaces for \u2581");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  if (mode & 1) {
    fuzz_decode(data + 1, size - 1, mode & 2);
  } else {
    fuzz_encode(std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1), mode & 2, mode & 4);
  }
  return 0;
}
