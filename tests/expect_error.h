#pragma once
// A GoogleTest expectation on ditto's errors; apart from test_checkpoint.h, which the benchmarks
// (built without GoogleTest) include too.
#include <string>

#include <gtest/gtest.h>

#include "ditto/error.h"

namespace ditto::testing {

// Expects `action` to throw a ditto::Error whose message contains `fragment`.
template <typename Action>
void expect_error(Action action, const std::string& fragment) {
  try {
    action();
    ADD_FAILURE() << "expected an error containing '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

}  // namespace ditto::testing
