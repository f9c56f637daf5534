// The tokenizer of a GGUF file (tokenizer.ggml.*) as the tokenizer.json that Hugging Face would
// write for it, so that ditto's byte-level BPE tokenizer reads it unchanged.
#include <nlohmann/json.hpp>

#include "ditto/error.h"
#include "model/gguf.h"

namespace ditto {

namespace {

using nlohmann::json;

// llama.cpp's token types.
constexpr int kControlToken = 3;
constexpr int kUserDefinedToken = 4;

// The pre-tokenizer llama.cpp uses for `tokenizer.ggml.pre`, in tokenizers' terms.
json pre_tokenizer(const std::string& pre) {
  const json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  // SmolLM: every digit apart (tokenizers' Digits(individual_digits)), then GPT-2's split.
  if (pre == "smollm")
    return {{"type", "Sequence"},
            {"pretokenizers",
             {{{"type", "Split"}, {"pattern", {{"Regex", "\\p{N}"}}}, {"behavior", "Isolated"}, {"invert", false}},
              byte_level}}};
  throw Error("GGUF: the tokenizer's pre-tokenizer '" + pre + "' is not supported (only 'smollm')");
}

}  // namespace

std::string gguf_tokenizer_json(const GgufFile& gguf) {
  const std::string model = gguf.get_string("tokenizer.ggml.model");
  if (model != "gpt2") throw Error("GGUF: tokenizer model '" + model + "' is not supported (only byte-level BPE, 'gpt2')");
  const std::vector<std::string>& tokens = gguf.get_string_array("tokenizer.ggml.tokens");
  const std::vector<double>& types = gguf.get_number_array("tokenizer.ggml.token_type");
  if (types.size() != tokens.size())
    throw Error("GGUF: tokenizer.ggml.token_type has " + std::to_string(types.size()) + " entries for " +
                std::to_string(tokens.size()) + " tokens");
  json vocab = json::object();
  json added = json::array();
  for (size_t id = 0; id < tokens.size(); ++id) {
    vocab[tokens[id]] = id;
    // Control tokens (<|im_start|>, ...) are special; user-defined ones are matched in text too.
    if (types[id] == kControlToken || types[id] == kUserDefinedToken)
      added.push_back({{"id", id}, {"content", tokens[id]}, {"special", types[id] == kControlToken},
                       {"single_word", false}, {"lstrip", false}, {"rstrip", false}, {"normalized", false}});
  }
  if (vocab.size() != tokens.size()) throw Error("GGUF: tokenizer.ggml.tokens holds the same token twice");
  const json document = {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", pre_tokenizer(gguf.has("tokenizer.ggml.pre") ? gguf.get_string("tokenizer.ggml.pre") : "")},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"byte_fallback", false}, {"ignore_merges", false},
        {"vocab", vocab}, {"merges", gguf.get_string_array("tokenizer.ggml.merges")}}},
  };
  try {
    return document.dump();
  } catch (const json::exception&) {  // a token or merge that is not valid UTF-8
    throw Error("GGUF: the tokenizer's tokens or merges are not valid UTF-8");
  }
}

}  // namespace ditto
