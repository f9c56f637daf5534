// `ditto inspect`: what a model file holds, from its header and config.
#include <cstdio>

#include "cli/commands.h"
#include "model/describe.h"

namespace ditto::cli {

void register_inspect(CLI::App& app) {
  auto model = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("inspect", "Show a model's architecture, sizes, tensor types, tokenizer and context");
  cmd->add_option("model", *model,
                  "GGUF file, checkpoint directory or the name of an installed model (" + model_names() +
                      "; default: " + default_model_description() + ")");
  cmd->callback([model] {
    for (const auto& [what, value] : describe_model(model_path(*model)))
      std::printf("%-16s %s\n", (what + ":").c_str(), value.c_str());
  });
}

}  // namespace ditto::cli
