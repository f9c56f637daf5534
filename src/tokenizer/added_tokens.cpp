#include "tokenizer/added_tokens.h"

#include <algorithm>
#include <cstring>

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

AddedTokenMatcher::AddedTokenMatcher(std::vector<const AddedToken*> tokens, std::vector<std::string> patterns) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (patterns[i].empty()) continue;  // an empty text matches nothing in tokenizers either
    is_first_byte_[static_cast<unsigned char>(patterns[i][0])] = true;
    patterns_.push_back({std::move(patterns[i]), tokens[i]});
  }
  std::stable_sort(patterns_.begin(), patterns_.end(),
                   [](const Pattern& a, const Pattern& b) { return a.text.size() > b.text.size(); });
}

bool AddedTokenMatcher::find(std::string_view text, size_t from, Match& match) const {
  for (size_t pos = from; pos < text.size(); ++pos) {
    if (!is_first_byte_[static_cast<unsigned char>(text[pos])]) continue;
    for (const Pattern& pattern : patterns_) {
      if (pattern.text.size() <= text.size() - pos &&
          std::memcmp(pattern.text.data(), text.data() + pos, pattern.text.size()) == 0) {
        match = {pos, pos + pattern.text.size(), pattern.token};
        return true;
      }
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
