#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ditto {

// A byte-level BPE tokenizer read from a Hugging Face `tokenizer.json` (the kind used by GPT-2,
// Llama 3, Qwen2 and Qwen3). It produces exactly the ids that Hugging Face `tokenizers` produces
// for the same file; docs/tokenizer.md lists what the file may contain and what is refused.
//
// encode() may be called from several threads; the calls then take turns on the pre-token cache.
class Tokenizer {
 public:
  // Throws ditto::Error naming the file and what in it is unsupported or malformed.
  static Tokenizer from_file(const std::string& path);
  static Tokenizer from_json(std::string_view json_text);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // `text` must be valid UTF-8, else ditto::Error says at which byte it is not. With
  // allow_special, special tokens written in the text (such as "<|im_end|>") become their ids;
  // without it they are encoded as the plain text they are, like tokenizers'
  // `encode_special_tokens = True`. Added tokens that are not special are always matched.
  std::vector<int32_t> encode(std::string_view text, bool allow_special = true) const;

  // Ids without a token (beyond the vocabulary) are skipped, as in tokenizers. Byte sequences that
  // are not valid UTF-8 come out as U+FFFD, one for each maximal invalid subpart.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // The token's text as the file spells it (byte-level form, e.g. "Ġthe"), if the id has one.
  std::optional<std::string> id_to_token(int32_t id) const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The bytes the token decodes to, if the id has one.
  std::optional<std::string> token_bytes(int32_t id) const;
  bool is_special(int32_t id) const;
  // One more than the largest id that has a token.
  size_t vocab_size() const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Token-by-token text output: push() returns the text that the tokens so far complete, holding
// back the bytes of a UTF-8 character that later tokens may still complete. The concatenation of
// all push() results and finish() equals Tokenizer::decode of all the ids.
class StreamDecoder {
 public:
  // The tokenizer must outlive the decoder.
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special = false);

  std::string push(int32_t id);
  // Returns what is held back (incomplete characters, as U+FFFD) and starts over.
  std::string finish();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::string pending_;  // bytes not yet returned: at most the start of one UTF-8 character
};

}  // namespace ditto
