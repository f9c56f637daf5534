// The tokenizer of a GGUF file (tokenizer.ggml.*) as a tokenizer.json that ditto's tokenizer
// reads unchanged: for a SentencePiece vocabulary ('llama'), the one transformers builds from the
// file (AutoTokenizer.from_pretrained(dir, gguf_file=...)); for a byte-level one ('gpt2'), one
// that splits text as llama.cpp does for the file's pre-tokenizer name. docs/tokenizer.md says
// where transformers and llama.cpp differ on these files.
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "ditto/error.h"
#include "model/gguf.h"
#include "tokenizer/utf8.h"

namespace ditto {

namespace {

using nlohmann::json;

// llama.cpp's token types.
constexpr int kControlToken = 3;
constexpr int kUserDefinedToken = 4;

json split(const std::string& regex) {
  return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
}

json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", use_regex}};
}

// llama.cpp's pre-tokenizer regexes (llama-vocab.cpp, llm_tokenizer_bpe), in tokenizers' terms:
// each splits the pieces of the one before (Isolated), then the pieces go to BPE as bytes.
// (?:'[sS]|...) is how llama.cpp spells Llama 3's (?i:'s|...), for engines without (?i:).
constexpr const char* kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
constexpr const char* kContractions = R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]))";

json byte_level_pre_tokenizer(const std::string& pre) {
  std::vector<json> steps;
  if (pre == "smollm") {
    // Every digit apart, then GPT-2's split (ByteLevel's own regex: the same pieces).
    steps = {split(R"(\p{N})"), byte_level(true)};
  } else if (pre == "qwen2") {
    steps = {split(std::string(kContractions) +
                   R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"),
             byte_level(false)};
  } else if (pre == "llama-bpe") {
    steps = {split(std::string(kContractions) +
                   R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"),
             byte_level(false)};
  } else if (pre == "default") {
    steps = {split(R"([\p{P}\$\+<=>\^~\|]+)"), split(kGpt2Regex), split(R"(\p{N}+)"), split("[0-9][0-9][0-9]"),
             byte_level(false)};
  } else {
    throw Error("GGUF: the tokenizer's pre-tokenizer '" + pre +
                "' is not supported (only 'default', 'llama-bpe', 'qwen2' and 'smollm')");
  }
  return {{"type", "Sequence"}, {"pretokenizers", steps}};
}

bool get_bool(const GgufFile& gguf, const std::string& key, bool otherwise) {
  if (!gguf.has(key)) return otherwise;
  const GgufValue& value = gguf.metadata.at(key);
  if (value.type != GgufType::Bool) throw Error("GGUF metadata '" + key + "' is not a bool");
  return value.numbers[0] != 0;
}

// The vocabulary and its token types, checked against each other.
struct Vocabulary {
  std::vector<std::string> tokens;
  std::vector<double> types;
};

Vocabulary read_vocabulary(const GgufFile& gguf) {
  Vocabulary vocabulary{gguf.get_string_array("tokenizer.ggml.tokens"),
                        gguf.get_number_array("tokenizer.ggml.token_type")};
  if (vocabulary.types.size() != vocabulary.tokens.size())
    throw Error("GGUF: tokenizer.ggml.token_type has " + std::to_string(vocabulary.types.size()) + " entries for " +
                std::to_string(vocabulary.tokens.size()) + " tokens");
  for (size_t id = 0; id < vocabulary.tokens.size(); ++id) {
    if (vocabulary.tokens[id].empty()) throw Error("GGUF: tokenizer.ggml.tokens holds an empty token (id " + std::to_string(id) + ")");
    if (utf8::find_invalid(vocabulary.tokens[id]) != std::string::npos)
      throw Error("GGUF: token " + std::to_string(id) + " in tokenizer.ggml.tokens is not valid UTF-8");
  }
  return vocabulary;
}

json vocab_object(const std::vector<std::string>& tokens) {
  json vocab = json::object();
  for (size_t id = 0; id < tokens.size(); ++id) vocab[tokens[id]] = id;
  if (vocab.size() != tokens.size()) throw Error("GGUF: tokenizer.ggml.tokens holds the same token twice");
  return vocab;
}

// The ids named as bos, eos, unk and pad: transformers makes them special tokens too.
std::vector<int64_t> named_token_ids(const GgufFile& gguf, size_t vocab_size) {
  std::vector<int64_t> ids;
  for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                          "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id"}) {
    if (!gguf.has(key)) continue;
    const uint64_t id = gguf.get_uint(key);
    if (id >= vocab_size) throw Error(std::string("GGUF: ") + key + " " + std::to_string(id) + " is not a token id");
    ids.push_back(static_cast<int64_t>(id));
  }
  return ids;
}

// Control tokens (<|im_start|>, <start_of_turn>) and the named ones are special; user-defined ones
// (<think>, Gemma's "<table>") are matched in text too; none is normalized. `in_vocab` says which
// user-defined tokens transformers keeps (those still spelled as in the file).
json added_tokens(const GgufFile& gguf, const Vocabulary& vocabulary, const std::vector<bool>& in_vocab) {
  const std::vector<int64_t> named = named_token_ids(gguf, vocabulary.tokens.size());
  json added = json::array();
  for (size_t id = 0; id < vocabulary.tokens.size(); ++id) {
    const bool special = vocabulary.types[id] == kControlToken ||
                         std::find(named.begin(), named.end(), static_cast<int64_t>(id)) != named.end();
    const bool user_defined = vocabulary.types[id] == kUserDefinedToken && in_vocab[id];
    if (special || user_defined)
      added.push_back({{"id", id}, {"content", vocabulary.tokens[id]}, {"special", special},
                       {"single_word", false}, {"lstrip", false}, {"rstrip", false}, {"normalized", false}});
  }
  return added;
}

// transformers' post-processor for tokenizer.ggml.add_bos_token / add_eos_token: BOS before the
// text, EOS after it; null if neither.
json post_processor(const GgufFile& gguf, const std::vector<std::string>& tokens, bool add_bos_by_default) {
  json single = json::array();
  json special_tokens = json::object();
  const auto add = [&](const char* id_key) {
    if (!gguf.has(id_key)) throw Error(std::string("GGUF: the tokenizer adds a token but has no ") + id_key);
    const uint64_t id = gguf.get_uint(id_key);
    if (id >= tokens.size()) throw Error(std::string("GGUF: ") + id_key + " " + std::to_string(id) + " is not a token id");
    single.push_back({{"SpecialToken", {{"id", tokens[id]}, {"type_id", 0}}}});
    special_tokens[tokens[id]] = {{"id", tokens[id]}, {"ids", {id}}, {"tokens", {tokens[id]}}};
  };
  const bool add_bos = get_bool(gguf, "tokenizer.ggml.add_bos_token", add_bos_by_default);
  const bool add_eos = get_bool(gguf, "tokenizer.ggml.add_eos_token", false);
  if (!add_bos && !add_eos) return nullptr;
  if (add_bos) add("tokenizer.ggml.bos_token_id");
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  if (add_eos) add("tokenizer.ggml.eos_token_id");
  return {{"type", "TemplateProcessing"}, {"single", single}, {"pair", json::array()}, {"special_tokens", special_tokens}};
}

std::string byte_level_tokenizer_json(const GgufFile& gguf) {
  const Vocabulary vocabulary = read_vocabulary(gguf);
  // A file without tokenizer.ggml.pre gets llama.cpp's default split.
  const std::string pre = gguf.has("tokenizer.ggml.pre") ? gguf.get_string("tokenizer.ggml.pre") : "default";
  const json document = {
      {"version", "1.0"},
      {"added_tokens", added_tokens(gguf, vocabulary, std::vector<bool>(vocabulary.tokens.size(), true))},
      {"normalizer", nullptr},
      {"pre_tokenizer", byte_level_pre_tokenizer(pre)},
      {"post_processor", post_processor(gguf, vocabulary.tokens, false)},
      {"decoder", byte_level(true)},
      {"model",
       // llama.cpp takes a Llama 3 word that is a token whole (ignore_merges) before merging.
       {{"type", "BPE"}, {"dropout", nullptr}, {"byte_fallback", false}, {"ignore_merges", pre == "llama-bpe"},
        {"vocab", vocab_object(vocabulary.tokens)}, {"merges", gguf.get_string_array("tokenizer.ggml.merges")}}},
  };
  return document.dump();
}

// Python's str.isspace(), which transformers' Gemma conversion tests tokens with.
bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Where the code points of a token start, and its end.
std::vector<size_t> char_boundaries(const std::string& token) {
  std::vector<size_t> boundaries;
  for (size_t pos = 0; pos < token.size(); pos += utf8::char_length(static_cast<unsigned char>(token[pos]))) {
    boundaries.push_back(pos);
  }
  boundaries.push_back(token.size());
  return boundaries;
}

// The merges of a SentencePiece vocabulary, which a GGUF file does not store, as transformers
// derives them (generate_merges): every split of a token into two tokens, best token first by
// `scores`, then longer left side, then longer right side, then the order of the vocabulary.
json derived_merges(const std::vector<std::string>& tokens, const std::vector<double>& scores) {
  std::unordered_map<std::string_view, size_t> id_of;
  id_of.reserve(tokens.size());
  for (size_t id = 0; id < tokens.size(); ++id) id_of.emplace(tokens[id], id);
  struct Candidate {
    double score;
    uint32_t left_chars, right_chars;
    uint32_t token;
    uint32_t split;  // bytes in the left side
  };
  std::vector<Candidate> candidates;
  for (size_t id = 0; id < tokens.size(); ++id) {
    const std::string_view token = tokens[id];
    const std::vector<size_t> boundaries = char_boundaries(tokens[id]);
    const auto chars = static_cast<uint32_t>(boundaries.size() - 1);
    for (uint32_t left_chars = 1; left_chars < chars; ++left_chars) {
      const size_t at = boundaries[left_chars];
      if (id_of.count(token.substr(0, at)) && id_of.count(token.substr(at))) {
        candidates.push_back({scores[id], left_chars, chars - left_chars, static_cast<uint32_t>(id),
                              static_cast<uint32_t>(at)});
      }
    }
  }
  // Candidates come in vocabulary order, and a stable sort keeps it among equals.
  std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.left_chars != b.left_chars) return a.left_chars > b.left_chars;
    return a.right_chars > b.right_chars;
  });
  // As "left right" strings, which load faster, unless a token holds a space; then as pairs.
  const bool spaces = std::any_of(tokens.begin(), tokens.end(),
                                  [](const std::string& token) { return token.find(' ') != std::string::npos; });
  json merges = json::array();
  merges.get_ref<json::array_t&>().reserve(candidates.size());
  for (const Candidate& candidate : candidates) {
    const std::string& token = tokens[candidate.token];
    if (spaces) {
      merges.push_back({token.substr(0, candidate.split), token.substr(candidate.split)});
    } else {
      merges.push_back(token.substr(0, candidate.split) + ' ' + token.substr(candidate.split));
    }
  }
  return merges;
}

json sentencepiece_decoder(bool strip_space) {
  json decoders = {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                   {{"type", "ByteFallback"}},
                   {{"type", "Fuse"}}};
  if (strip_space) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  return {{"type", "Sequence"}, {"decoders", decoders}};
}

// A SentencePiece vocabulary ('llama': Llama 2, Mistral, Gemma, Phi-3), as transformers builds it
// for the architecture (integrations/gguf/gguf_tokenizer_mapping.py):
// - Gemma: spaces become "▁" (a Replace normalizer), nothing is put before the text; tokens of
//   spaces only are respelled with "▁", and the merges follow the vocabulary's order;
// - Phi-3: "▁" before every stretch of text and for every space (Prepend and Replace normalizers);
// - the others (LlamaTokenizer): Metaspace, "▁" before the start of the text only (prepend_scheme
//   first); merges by the tokens' scores.
// The decoder takes the space of that "▁" off the start of the text again.
std::string sentencepiece_tokenizer_json(const GgufFile& gguf) {
  Vocabulary vocabulary = read_vocabulary(gguf);
  const size_t size = vocabulary.tokens.size();
  const std::string architecture = gguf.has("general.architecture") ? gguf.get_string("general.architecture") : "";
  const bool gemma = architecture == "gemma" || architecture == "gemma2" || architecture == "gemma3";
  std::vector<double> scores;
  std::vector<bool> in_vocab(size, true);
  if (gemma) {
    for (size_t id = 0; id < size; ++id) {
      std::string& token = vocabulary.tokens[id];
      const std::vector<size_t> boundaries = char_boundaries(token);
      bool all_space = true;
      for (size_t i = 0; i + 1 < boundaries.size(); ++i) all_space &= is_python_space(utf8::code_point_at(token, boundaries[i]));
      if (all_space && token.find(' ') != std::string::npos) {
        std::string respelled;
        for (size_t i = 0; i + 1 < boundaries.size(); ++i) respelled += "\u2581";
        token = respelled;
        in_vocab[id] = false;
      }
      scores.push_back(-static_cast<double>(id));
    }
  } else {
    scores = gguf.get_number_array("tokenizer.ggml.scores");
    if (scores.size() != size)
      throw Error("GGUF: tokenizer.ggml.scores has " + std::to_string(scores.size()) + " entries for " +
                  std::to_string(size) + " tokens");
    for (size_t id = 0; id < size; ++id) {
      if (std::isnan(scores[id])) throw Error("GGUF: the score of token " + std::to_string(id) + " is not a number");
    }
  }
  // transformers ignores add_space_prefix; a file that turns it off gets no "▁" before its text,
  // as llama.cpp reads it (Gemma's files do, and their builder puts none there anyway).
  const bool space_prefix = !gemma && get_bool(gguf, "tokenizer.ggml.add_space_prefix", true);
  const json replace_spaces = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}};
  json normalizer = nullptr, pre_tokenizer = nullptr;
  if (gemma) {
    normalizer = replace_spaces;
    pre_tokenizer = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "MergedWithPrevious"}, {"invert", false}};
  } else if (architecture == "phi3") {
    normalizer = replace_spaces;
    if (space_prefix) {
      normalizer = {{"type", "Sequence"}, {"normalizers", {{{"type", "Prepend"}, {"prepend", "\u2581"}}, replace_spaces}}};
    }
  } else {
    pre_tokenizer = {{"type", "Metaspace"}, {"replacement", "\u2581"},
                     {"prepend_scheme", space_prefix ? "first" : "never"}, {"split", false}};
  }
  const json document = {
      {"version", "1.0"},
      {"added_tokens", added_tokens(gguf, vocabulary, in_vocab)},
      {"normalizer", normalizer},
      {"pre_tokenizer", pre_tokenizer},
      // llama.cpp, and transformers after it, add BOS to a SentencePiece vocabulary that does not say.
      {"post_processor", post_processor(gguf, vocabulary.tokens, true)},
      {"decoder", sentencepiece_decoder(space_prefix)},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"byte_fallback", true}, {"fuse_unk", true}, {"ignore_merges", false},
        {"vocab", vocab_object(vocabulary.tokens)}, {"merges", derived_merges(vocabulary.tokens, scores)}}},
  };
  return document.dump();
}

}  // namespace

std::string gguf_tokenizer_json(const GgufFile& gguf) {
  const std::string model = gguf.get_string("tokenizer.ggml.model");
  if (model == "gpt2") return byte_level_tokenizer_json(gguf);
  if (model == "llama") return sentencepiece_tokenizer_json(gguf);
  throw Error("GGUF: tokenizer model '" + model +
              "' is not supported (only byte-level BPE, 'gpt2', and SentencePiece BPE, 'llama')");
}

}  // namespace ditto
