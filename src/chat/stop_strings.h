#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace ditto {

// Finds stop strings in text that arrives piece by piece (a generation, token by token), so that
// no stop string, and nothing after one, is ever shown: push() returns the text that can be
// shown now and holds back a tail that could be the start of a stop string, until the next
// pieces tell. Pieces must be whole UTF-8 characters (StreamDecoder gives them so); what push()
// returns is then whole characters too.
class StopStrings {
 public:
  // Empty strings are ignored; one that is not valid UTF-8 is a ditto::Error.
  explicit StopStrings(std::vector<std::string> stops);

  std::string push(std::string_view text);
  // True once a stop string has been found; push() returns nothing after that.
  bool stopped() const { return stopped_; }
  // The text held back, when the generation ends without a stop string.
  std::string finish();

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace ditto
