#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace ditto {

// The normalizers of tokenizers that ditto applies to the text between added tokens (and to
// the text of added tokens matched after normalizing), one step after the other: a Sequence of
// NFC, Replace of a literal string and Prepend.
class Normalizer {
 public:
  struct Step {
    enum class Kind { Nfc, Replace, Prepend };
    Kind kind;
    std::string pattern;  // Replace: the text replaced (not empty)
    std::string content;  // Replace: what replaces it; Prepend: what goes before a non-empty text
  };

  Normalizer() = default;
  explicit Normalizer(std::vector<Step> steps) : steps_(std::move(steps)) {}

  bool empty() const { return steps_.empty(); }
  // `text` must be valid UTF-8.
  std::string normalize(std::string_view text) const;

 private:
  std::vector<Step> steps_;
};

// Every occurrence of `pattern` (not empty) in `text`, left to right without overlap, replaced
// by `content`.
std::string replace_all(std::string_view text, std::string_view pattern, std::string_view content);

}  // namespace ditto
