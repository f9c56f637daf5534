// `ditto tokenize` and `ditto detokenize`: text to token ids and back, for inspection.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "ditto/error.h"
#include "ditto/tokenizer.h"
#include "model/gguf.h"
#include "runtime/token_ids.h"

namespace ditto::cli {

ModelTokenizer load_tokenizer(const std::string& model, const std::string& tokenizer_path) {
  if (!tokenizer_path.empty()) return {Tokenizer::from_file(tokenizer_path), ""};
  const std::string model_file = model_path(model);
  if (!std::filesystem::is_directory(model_file)) {  // a GGUF file (or a path that says why not)
    try {
      GgufTokenizer gguf = read_gguf_tokenizer(model_file);
      return {Tokenizer::from_json(gguf.tokenizer_json), std::move(gguf.chat_template)};
    } catch (const Error& e) {
      throw Error("the tokenizer of " + model_file + ": " + e.what());
    }
  }
  const std::filesystem::path beside_model = std::filesystem::path(model_file) / "tokenizer.json";
  if (!std::filesystem::exists(beside_model)) {
    throw Error("no tokenizer.json in " + model_file + ": give one with --tokenizer");
  }
  return {Tokenizer::from_file(beside_model.string()), ""};
}

namespace {

struct TokenizerOptions {
  std::string model;
  std::string tokenizer;
  std::string text;
  bool text_given = false;
  bool special_as_text = false;
  bool show_tokens = false;
  std::vector<int32_t> ids;
  bool skip_special = false;
};

void add_tokenizer_options(CLI::App* command, TokenizerOptions& options) {
  command->add_option("-m,--model", options.model,
                      "GGUF file, or checkpoint directory holding tokenizer.json (default: " +
                          default_model_description() + ")");
  command->add_option("--tokenizer", options.tokenizer, "tokenizer.json to use (instead of the model's)");
}

std::string read_all(std::istream& in) {
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void run_tokenize(const TokenizerOptions& o) {
  const Tokenizer tokenizer = load_tokenizer(o.model, o.tokenizer).tokenizer;
  const std::string text = o.text_given ? o.text : read_all(std::cin);
  const std::vector<int32_t> ids = tokenizer.encode(text, !o.special_as_text);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (o.show_tokens) {
      std::printf("%d\t%s\n", ids[i], tokenizer.id_to_token(ids[i]).value_or("").c_str());
    } else {
      std::printf("%s%d", i ? " " : "", ids[i]);
    }
  }
  if (!o.show_tokens) std::printf("\n");
}

void run_detokenize(const TokenizerOptions& o) {
  const Tokenizer tokenizer = load_tokenizer(o.model, o.tokenizer).tokenizer;
  std::vector<int32_t> ids = o.ids;
  if (ids.empty()) ids = parse_token_ids(read_all(std::cin));
  const std::string text = tokenizer.decode(ids, o.skip_special);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::printf("\n");
}

}  // namespace

void register_tokenize(CLI::App& app) {
  auto options = std::make_shared<TokenizerOptions>();
  CLI::App* tokenize = app.add_subcommand("tokenize", "Print the token ids of a text (from -p or standard input)");
  add_tokenizer_options(tokenize, *options);
  tokenize->add_option("-p,--prompt", options->text, "Text to tokenize; standard input if not given")
      ->each([options](const std::string&) { options->text_given = true; });
  tokenize->add_flag("--special-as-text", options->special_as_text,
                     "Encode special tokens written in the text (such as <|im_end|>) as plain text");
  tokenize->add_flag("--show-tokens", options->show_tokens, "Print one id and its token per line");
  tokenize->callback([options] { run_tokenize(*options); });

  CLI::App* detokenize = app.add_subcommand("detokenize", "Print the text of token ids (arguments or standard input)");
  add_tokenizer_options(detokenize, *options);
  detokenize->add_option("ids", options->ids, "Token ids; standard input if none");
  detokenize->add_flag("--skip-special", options->skip_special, "Leave special tokens out");
  detokenize->callback([options] { run_detokenize(*options); });
}

}  // namespace ditto::cli
