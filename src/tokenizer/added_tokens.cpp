#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace ditto {
namespace {

// The classes of Rust's regex crate, which tokenizers uses for these rules: \w and \s.
const Regex& word_character() {
  static const Regex regex(R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}])");
  return regex;
}
const Regex& white_space() {
  static const Regex regex(R"(\p{White_Space})");
  return regex;
}

bool ends_with_word_character(std::string_view text, size_t end) {
  if (end == 0) return false;
  Regex::MatchData match_data = word_character().make_match_data();
  return word_character().matches_at(text, utf8::previous_char_start(text, end), match_data);
}

bool starts_with_word_character(std::string_view text, size_t start) {
  if (start == text.size()) return false;
  Regex::MatchData match_data = word_character().make_match_data();
  return word_character().matches_at(text, start, match_data);
}

// Start of the white space that ends at `end`.
size_t white_space_start(std::string_view text, size_t end) {
  Regex::MatchData match_data = white_space().make_match_data();
  while (end > 0) {
    const size_t previous = utf8::previous_char_start(text, end);
    if (!white_space().matches_at(text, previous, match_data)) break;
    end = previous;
  }
  return end;
}

// End of the white space that starts at `start`.
size_t white_space_end(std::string_view text, size_t start) {
  Regex::MatchData match_data = white_space().make_match_data();
  while (start < text.size() && white_space().matches_at(text, start, match_data)) {
    start += utf8::char_length(static_cast<unsigned char>(text[start]));
  }
  return start;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<const AddedToken*> tokens, std::vector<std::string> patterns)
    : nodes_(1) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    // An empty text matches nothing in tokenizers either.
    uint32_t node = 0;
    for (const char c : patterns[i]) {
      const auto byte = static_cast<unsigned char>(c);
      uint32_t next = child(node, byte);
      if (next == 0) {
        next = static_cast<uint32_t>(nodes_.size());
        auto& children = nodes_[node].children;
        children.insert(std::lower_bound(children.begin(), children.end(), std::make_pair(byte, 0u)),
                        {byte, next});
        nodes_.emplace_back();
      }
      node = next;
    }
    // Of two tokens with the same text, the first keeps it.
    if (node != 0 && nodes_[node].token == nullptr) nodes_[node].token = tokens[i];
  }
  for (const auto& [byte, node] : nodes_[0].children) first_byte_nodes_[byte] = node;
}

uint32_t AddedTokenMatcher::child(uint32_t node, unsigned char byte) const {
  const auto& children = nodes_[node].children;
  const auto found = std::lower_bound(children.begin(), children.end(), std::make_pair(byte, 0u));
  return found != children.end() && found->first == byte ? found->second : 0;
}

bool AddedTokenMatcher::find(std::string_view text, size_t from, Match& match) const {
  if (nodes_[0].children.empty()) return false;
  for (size_t pos = from; pos < text.size(); ++pos) {
    uint32_t node = first_byte_nodes_[static_cast<unsigned char>(text[pos])];
    if (node == 0) continue;
    // The longest pattern that starts here.
    const AddedToken* longest = nodes_[node].token;
    size_t end = pos + 1;
    for (size_t at = pos + 1; at < text.size();) {
      node = child(node, static_cast<unsigned char>(text[at++]));
      if (node == 0) break;
      if (nodes_[node].token != nullptr) {
        longest = nodes_[node].token;
        end = at;
      }
    }
    if (longest != nullptr) {
      match = {pos, end, longest};
      return true;
    }
  }
  return false;
}

bool AddedTokenMatcher::apply_token_rules(std::string_view text, size_t done_up_to, Match& match) {
  const AddedToken& token = *match.token;
  if (token.single_word && (ends_with_word_character(text, match.start) ||
                            starts_with_word_character(text, match.end))) {
    return false;
  }
  // White space already taken by the previous token's rstrip stays with it.
  if (token.lstrip) match.start = std::max(white_space_start(text, match.start), done_up_to);
  if (token.rstrip) match.end = white_space_end(text, match.end);
  return true;
}

}  // namespace ditto
