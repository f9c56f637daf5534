#pragma once
#include <stdexcept>
#include <string>

namespace ditto {

// Every failure a user can cause (bad file, bad config, bad token, prompt too long) is
// reported as a ditto::Error with a message that says what was wrong; never a crash.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace ditto
