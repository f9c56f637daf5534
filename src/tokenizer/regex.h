#pragma once
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>
#include <string>
#include <string_view>

#include "tokenizer/split.h"

namespace ditto {

// A PCRE2 pattern compiled for UTF-8 with Unicode properties (\p{L}, \s as Unicode white space)
// and JIT-compiled.
class Regex {
 public:
  // Throws ditto::Error with PCRE2's message and the offset in the pattern.
  explicit Regex(const std::string& pattern);

  // Match state for one thread at a time; make one per caller.
  struct MatchData {
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data;
  };
  MatchData make_match_data() const;

  // Calls on_piece(piece) for the pieces that `behavior` makes of the matches and the stretches
  // between them, in order. `text` must be valid UTF-8. Empty matches split nothing.
  template <class OnPiece>
  void split(std::string_view text, MatchData& match_data, SplitBehavior behavior, OnPiece&& on_piece) const;

  // Whether the pattern matches at exactly `pos` (anchored there). `text` must be valid UTF-8.
  bool matches_at(std::string_view text, size_t pos, MatchData& match_data) const;

 private:
  // Finds the next match at or after `start`; returns false if there is none.
  bool find(std::string_view text, size_t start, MatchData& match_data, size_t& match_start,
            size_t& match_end) const;

  std::unique_ptr<pcre2_code, decltype(&pcre2_code_free)> code_;
};

template <class OnPiece>
void Regex::split(std::string_view text, MatchData& match_data, SplitBehavior behavior, OnPiece&& on_piece) const {
  PieceMaker pieces(text, behavior, on_piece);
  size_t search_from = 0;
  size_t match_start = 0, match_end = 0;
  while (search_from < text.size() && find(text, search_from, match_data, match_start, match_end)) {
    if (match_end == match_start) {
      // Step over one character so the search moves on; the empty match splits nothing.
      search_from = match_start + 1;
      while (search_from < text.size() && (static_cast<unsigned char>(text[search_from]) & 0xC0) == 0x80) {
        ++search_from;
      }
      continue;
    }
    pieces.match(match_start, match_end);
    search_from = match_end;
  }
  pieces.finish();
}

}  // namespace ditto
