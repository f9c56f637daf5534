#pragma once
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tokenizer/normalizer.h"
#include "tokenizer/regex.h"
#include "tokenizer/split.h"

namespace ditto {

// The pre-tokenizer: cuts the text between added tokens into the words that BPE merges one by
// one. Its steps run one after the other, each on every piece the step before made, as in a
// Sequence of tokenizers' pre-tokenizers. No steps: the whole text is one word.
class PreTokenizer {
 public:
  // Split (and ByteLevel's own GPT-2 split, which is Isolated).
  struct Split {
    Regex pattern;
    SplitBehavior behavior;
  };
  // Metaspace: spaces become `replacement` (U+2581 "▁"), which is also put before the piece
  // (Always), or before it only where it starts the whole text (First), unless the piece already
  // starts with it; with `split`, the piece is cut before each replacement.
  struct Metaspace {
    enum class Prepend { Always, First, Never };
    std::string replacement;
    Prepend prepend;
    bool split;
  };
  using Step = std::variant<Split, Metaspace>;

  PreTokenizer() = default;
  explicit PreTokenizer(std::vector<Step> steps) : steps_(std::move(steps)) {}

  // Match state of the regexes, for one thread at a time.
  using Scratch = std::vector<Regex::MatchData>;
  Scratch make_scratch() const;

  // Calls on_word(word) for each word of `text` in order. `at_text_start`: the text starts the
  // whole input (Metaspace First).
  template <class OnWord>
  void split(std::string_view text, bool at_text_start, Scratch& scratch, OnWord&& on_word) const {
    split_from(0, text, at_text_start, scratch, on_word);
  }

 private:
  template <class OnWord>
  void split_from(size_t step, std::string_view text, bool at_text_start, Scratch& scratch, OnWord& on_word) const;

  std::vector<Step> steps_;
};

template <class OnWord>
void PreTokenizer::split_from(size_t step, std::string_view text, bool at_text_start, Scratch& scratch,
                              OnWord& on_word) const {
  if (step == steps_.size()) {
    on_word(text);
    return;
  }
  if (const auto* split = std::get_if<Split>(&steps_[step])) {
    // A piece starts the whole text if it starts a text that does.
    split->pattern.split(text, scratch[step], split->behavior, [&, start = text.data()](std::string_view piece) {
      split_from(step + 1, piece, at_text_start && piece.data() == start, scratch, on_word);
    });
    return;
  }
  const auto& metaspace = std::get<Metaspace>(steps_[step]);
  std::string replaced = replace_all(text, " ", metaspace.replacement);
  const bool prepend = metaspace.prepend == Metaspace::Prepend::Always ||
                       (metaspace.prepend == Metaspace::Prepend::First && at_text_start);
  if (prepend && !replaced.starts_with(metaspace.replacement)) replaced.insert(0, metaspace.replacement);
  const std::string_view whole = replaced;
  const auto piece_of_whole = [&, start = whole.data()](std::string_view piece) {
    split_from(step + 1, piece, at_text_start && piece.data() == start, scratch, on_word);
  };
  if (!metaspace.split) {
    piece_of_whole(whole);
    return;
  }
  PieceMaker pieces(whole, SplitBehavior::MergedWithNext, piece_of_whole);
  for (size_t found = whole.find(metaspace.replacement); found != std::string_view::npos;
       found = whole.find(metaspace.replacement, found + metaspace.replacement.size())) {
    pieces.match(found, found + metaspace.replacement.size());
  }
  pieces.finish();
}

}  // namespace ditto
