#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ditto {

// A token of the file's "added_tokens": matched in the text before pre-tokenization.
struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool single_word = false;  // only where no word character touches it on either side
  bool lstrip = false;       // swallows the white space before it
  bool rstrip = false;       // swallows the white space after it
  bool normalized = false;   // matched in the normalized text rather than the raw text
};

// Finds added tokens in a text the way tokenizers' AddedVocabulary does: non-overlapping
// leftmost-longest matches of the tokens' texts, then the single_word, lstrip and rstrip rules.
class AddedTokenMatcher {
 public:
  // `patterns[i]` is the text that `tokens[i]` is matched by. The tokens must outlive the matcher.
  AddedTokenMatcher(std::vector<const AddedToken*> tokens, std::vector<std::string> patterns);

  // Calls on_text(piece) and on_token(id) for the parts of `text` in order; with
  // allow_special false, special tokens are not matched. Empty text pieces are left out.
  template <class OnText, class OnToken>
  void split(std::string_view text, bool allow_special, OnText&& on_text, OnToken&& on_token) const;

 private:
  struct Match {
    size_t start, end;
    const AddedToken* token;
  };
  // The leftmost-longest match at or after `from`, if any.
  bool find(std::string_view text, size_t from, Match& match) const;
  // Applies single_word, lstrip and rstrip to a match; false if single_word rejects it.
  static bool apply_token_rules(std::string_view text, size_t done_up_to, Match& match);

  // A trie of the patterns' bytes (Gemma has thousands of added tokens); nodes_[0] is the root.
  struct Node {
    const AddedToken* token = nullptr;                        // the token whose pattern ends here
    std::vector<std::pair<unsigned char, uint32_t>> children;  // by byte, ascending
  };
  // The child of `node` for `byte`, or 0 (the root is no one's child).
  uint32_t child(uint32_t node, unsigned char byte) const;

  std::vector<Node> nodes_;
  std::array<uint32_t, 256> first_byte_nodes_{};  // the root's children by byte, 0 for none
};

template <class OnText, class OnToken>
void AddedTokenMatcher::split(std::string_view text, bool allow_special, OnText&& on_text,
                              OnToken&& on_token) const {
  size_t done_up_to = 0;  // end of the last token taken, stripped white space included
  Match match{};
  for (size_t from = 0; from < text.size() && find(text, from, match);) {
    // The search goes on after the match as found, even when its rules reject it.
    from = match.end;
    if (!allow_special && match.token->special) continue;
    if (!apply_token_rules(text, done_up_to, match)) continue;
    if (match.start > done_up_to) on_text(text.substr(done_up_to, match.start - done_up_to));
    on_token(match.token->id);
    done_up_to = match.end;
  }
  if (done_up_to < text.size()) on_text(text.substr(done_up_to));
}

}  // namespace ditto
