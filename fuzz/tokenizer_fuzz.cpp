// libFuzzer target for the tokenizer: arbitrary bytes must never crash or hang it, and what it
// returns must keep its promises. The first byte chooses what to do with the rest:
//   bit 0 set: the rest is token ids (4 bytes each) for decode and the streaming decoder,
//              which must give the same text;
//   bit 0 clear: the rest is text for encode (bit 1: allow_special, bit 2: add_special_tokens),
//              which must refuse invalid UTF-8 with ditto::Error and otherwise decode back to
//              the text as $DITTO_FUZZ_ROUND_TRIP says:
//                nfc (the default): for the Qwen3 file, a text canonically equivalent to it
//                  (the same NFC) whose every stretch between added tokens is NFC, not the NFC
//                  of the text: added tokens are split off before the rest is normalized, as
//                  tokenizers does, so NFC cannot compose a character with the end of one
//                  (">" + U+0338 after "<|im_end|>");
//                spaces: the text with each "▁" (U+2581) a space, for a SentencePiece-style file
//                  that puts no "▁" before the text (Gemma's);
//                none: no round trip, for a file whose "▁" prefix and Strip decoder lose spaces
//                  (Llama 2's: " x" comes back as "x").
// Uses the tokenizer.json at $DITTO_FUZZ_TOKENIZER.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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

// The ids of the file's added tokens.
const std::set<int32_t>& added_token_ids() {
  static const std::set<int32_t> ids = [] {
    std::ifstream file(std::getenv("DITTO_FUZZ_TOKENIZER"));
    std::set<int32_t> ids;
    for (const auto& token : nlohmann::json::parse(file).value("added_tokens", nlohmann::json::array()))
      ids.insert(token.at("id").get<int32_t>());
    return ids;
  }();
  return ids;
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
    check(ditto::to_nfc(decoded) == ditto::to_nfc(text), "NFC(decode(encode(text))) == NFC(text)");
    std::vector<int32_t> stretch;
    for (size_t i = 0; i <= ids.size(); ++i) {
      if (i < ids.size() && !added_token_ids().contains(ids[i])) {
        stretch.push_back(ids[i]);
        continue;
      }
      const std::string piece = tokenizer().decode(stretch);
      check(piece == ditto::to_nfc(piece), "each stretch between added tokens decodes to its NFC");
      stretch.clear();
    }
  } else if (round_trip() == RoundTrip::Spaces) {
    check(decoded == ditto::replace_all(text, "\u2581", " "), "decode(encode(text)) == text with spaces for \u2581");
  }
}

}  // namespace

// The tokenizer is loaded before the first input, so that -timeout times inputs, not the loading
// of a 262,144-token file under the sanitizers.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tokenizer();
  return 0;
}

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
