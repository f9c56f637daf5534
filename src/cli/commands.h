#pragma once
#include <CLI/CLI.hpp>

namespace ditto::cli {

// Each command adds its subcommand, with its options and the callback that runs it.
void register_generate(CLI::App& app);

}  // namespace ditto::cli
