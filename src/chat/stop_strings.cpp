#include "chat/stop_strings.h"

#include <algorithm>

#include "ditto/error.h"
#include "tokenizer/utf8.h"

namespace ditto {

StopStrings::StopStrings(std::vector<std::string> stops) : stops_(std::move(stops)) {
  // Text comes in whole characters, so a stop string that is not UTF-8 could only match inside
  // one, and cut the text there.
  for (size_t i = 0; i < stops_.size(); ++i)
    if (const size_t at = utf8::find_invalid(stops_[i]); at != std::string::npos)
      throw Error("stop string " + std::to_string(i + 1) + " is not valid UTF-8 (at byte " + std::to_string(at) + ")");
  stops_.erase(std::remove(stops_.begin(), stops_.end(), std::string()), stops_.end());
}

std::string StopStrings::push(std::string_view text) {
  if (stopped_) return "";
  held_ += text;
  size_t first = std::string::npos;
  for (const std::string& stop : stops_) first = std::min(first, held_.find(stop));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string shown = held_.substr(0, first);
    held_.clear();
    return shown;
  }
  // Hold back the longest tail that is the start of a stop string.
  size_t keep = 0;
  for (const std::string& stop : stops_)
    for (size_t length = std::min(stop.size() - 1, held_.size()); length > keep; --length)
      if (held_.compare(held_.size() - length, length, stop, 0, length) == 0) {
        keep = length;
        break;
      }
  std::string shown = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return shown;
}

std::string StopStrings::finish() {
  std::string rest = std::move(held_);
  held_.clear();
  return stopped_ ? std::string() : rest;
}

}  // namespace ditto
