#pragma once
#include <string>
#include <vector>

namespace ditto::verify {

struct ChildResult {
  int exit_code = 0;     // the exit status if the child exited
  int signal = 0;        // the signal that killed it, if one did
  std::string out, err;  // everything it wrote to stdout and stderr
};

// Runs argv[0] (a path, not searched in PATH) with argv and waits for it, collecting its output.
// Throws ditto::Error if it cannot be started.
ChildResult run_child(const std::vector<std::string>& argv);

}  // namespace ditto::verify
