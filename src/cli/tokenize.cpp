// `ditto tokenize` and `ditto detokenize`: text to token ids and back, for inspection.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/options.h"
#include "ditto/error.h"
#include "ditto/load.h"
#include "ditto/tokenizer.h"
#include "runtime/token_ids.h"

namespace ditto::cli {

const Tokenizer& require_tokenizer(const LoadedModel& loaded, const std::string& path) {
  if (!loaded.tokenizer)
    throw Error(std::filesystem::is_directory(path) ? "no tokenizer.json in " + path + ": give one with --tokenizer"
                                                    : "no tokenizer in " + path + "'s metadata: give one with --tokenizer");
  return *loaded.tokenizer;
}

Tokenizer load_tokenizer(const std::string& model, const std::string& tokenizer_file) {
  if (!tokenizer_file.empty()) return Tokenizer::from_file(tokenizer_file);
  const std::string path = model_path(model);
  LoadOptions options;
  options.weights = false;
  LoadedModel loaded = load_model(path, options);
  require_tokenizer(loaded, path);
  return std::move(*loaded.tokenizer);
}

namespace {

struct TokenizerOptions {
  std::string model;
  std::string tokenizer;
  std::string text;
  bool text_given = false;
  bool special_as_text = false;
  bool show_tokens = false;
  std::vector<std::string> ids;  // as given, read like the standard input's
  bool skip_special = false;
};

void add_tokenizer_options(CLI::App* command, TokenizerOptions& options) {
  add_model_option(command, options.model);
  add_tokenizer_option(command, options.tokenizer);
}

std::string read_all(std::istream& in) {
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void run_tokenize(const TokenizerOptions& o) {
  const Tokenizer tokenizer = load_tokenizer(o.model, o.tokenizer);
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
  const Tokenizer tokenizer = load_tokenizer(o.model, o.tokenizer);
  std::string words;
  for (const std::string& id : o.ids) words += id + " ";
  const std::vector<int32_t> ids = parse_token_ids(o.ids.empty() ? read_all(std::cin) : words);
  // Tokenizer::decode skips ids without a token, as tokenizers does; asked for by hand, they are refused.
  for (const int32_t id : ids)
    if (!tokenizer.id_to_token(id))
      throw Error("token id " + std::to_string(id) + " is not in the vocabulary (ids 0.." +
                  std::to_string(tokenizer.vocab_size() - 1) + ")");
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
