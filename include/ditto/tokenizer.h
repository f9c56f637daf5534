#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ditto {

// A BPE tokenizer read from a Hugging Face `tokenizer.json`: byte-level (GPT-2, Llama 3, Qwen2,
// Qwen3) or SentencePiece-style over characters with byte fallback (Llama 2, Mistral, Gemma). It
// produces exactly the ids that Hugging Face `tokenizers` produces for the same file;
// docs/tokenizer.md lists what the file may contain and what is refused.
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
  // With add_special_tokens, the ids the file's post-processor puts around the text (such as BOS)
  // are added, as tokenizers' encode(text, add_special_tokens=True) does; without, none are.
  std::vector<int32_t> encode(std::string_view text, bool allow_special = true, bool add_special_tokens = false) const;

  // Ids without a token (beyond the vocabulary) are skipped, as in tokenizers. Byte sequences that
  // are not valid UTF-8 come out as U+FFFD, one for each maximal invalid subpart.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // The token's text as the file spells it (e.g. "Ġthe" byte-level, "▁the" SentencePiece-style);
  // an added token matched after normalizing as the normalizer makes it, as in tokenizers.
  std::optional<std::string> id_to_token(int32_t id) const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The bytes the token decodes to by itself, if the id has one.
  std::optional<std::string> token_bytes(int32_t id) const;
  bool is_special(int32_t id) const;
  // One more than the largest id that has a token.
  size_t vocab_size() const;

  // The insides, defined in src/tokenizer/tokenizer_impl.h.
  struct Impl;

 private:
  friend class StreamDecoder;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Token-by-token text output: push() returns the text that the tokens so far complete, holding
// back what later tokens may still change: the bytes of an unfinished UTF-8 character, or (byte
// fallback) a run of byte tokens such as <0xE6><0x97><0xA5>, which the decoder takes as a whole.
// The concatenation of all push() results and finish() equals Tokenizer::decode of all the ids.
class StreamDecoder {
 public:
  // The tokenizer must outlive the decoder.
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special = false);

  std::string push(int32_t id);
  // Returns what is held back (incomplete characters as U+FFFD) and starts over.
  std::string finish();

  // What decoding carries from one id to the next.
  struct State {
    std::string pending;    // bytes not yet returned
    size_t strip_left = 0;  // copies of the decoder's Strip character still to take off the start
  };

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  State state_;
};

}  // namespace ditto
