#pragma once
#include <cstddef>
#include <string_view>

namespace ditto {

// What a split does with the matches of its pattern: tokenizers' SplitDelimiterBehavior.
enum class SplitBehavior {
  Isolated,            // every match and every stretch between matches is a piece
  Removed,             // the stretches between matches are the pieces
  MergedWithPrevious,  // a match ends the stretch before it (a match after a match stands alone)
  MergedWithNext,      // a match starts the stretch after it (a match before a match stands alone)
};

// Turns the matches of a pattern in a text, given in order, into the pieces of a behavior and
// calls on_piece(piece) for each non-empty one. Call match() for each match, then finish().
template <class OnPiece>
class PieceMaker {
 public:
  PieceMaker(std::string_view text, SplitBehavior behavior, OnPiece& on_piece)
      : text_(text), behavior_(behavior), on_piece_(on_piece) {}

  void match(size_t start, size_t end) {
    if (start > done_) segment(done_, start, false);
    segment(start, end, true);
    done_ = end;
  }

  void finish() {
    if (done_ < text_.size()) segment(done_, text_.size(), false);
    if (pending_) emit(pending_start_, pending_end_);
  }

 private:
  // One match or stretch between matches; tokenizers' fold over them, done as they come with at
  // most one piece held back.
  void segment(size_t start, size_t end, bool is_match) {
    switch (behavior_) {
      case SplitBehavior::Isolated:
        emit(start, end);
        return;
      case SplitBehavior::Removed:
        if (!is_match) emit(start, end);
        return;
      case SplitBehavior::MergedWithPrevious:
        // A stretch is held back until we know whether a match ends it.
        if (pending_) {
          emit(pending_start_, is_match ? end : pending_end_);
          pending_ = false;
          if (is_match) return;
        }
        if (is_match) {
          emit(start, end);
        } else {
          hold(start, end);
        }
        return;
      case SplitBehavior::MergedWithNext:
        // A match is held back until we know whether a stretch follows it.
        if (pending_) {
          emit(pending_start_, is_match ? pending_end_ : end);
          pending_ = false;
          if (!is_match) return;
        }
        if (is_match) {
          hold(start, end);
        } else {
          emit(start, end);
        }
        return;
    }
  }

  void hold(size_t start, size_t end) {
    pending_ = true;
    pending_start_ = start;
    pending_end_ = end;
  }

  void emit(size_t start, size_t end) {
    if (end > start) on_piece_(text_.substr(start, end - start));
  }

  std::string_view text_;
  SplitBehavior behavior_;
  OnPiece& on_piece_;
  size_t done_ = 0;  // end of the last match
  bool pending_ = false;
  size_t pending_start_ = 0, pending_end_ = 0;
};

}  // namespace ditto
