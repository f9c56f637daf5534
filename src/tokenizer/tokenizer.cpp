#include "ditto/tokenizer.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ditto/error.h"
#include "tensor/checked.h"
#include "tensor/limits.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/nfc.h"
#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace ditto {

using nlohmann::json;

namespace {

// The split that tokenizers' ByteLevel pre-tokenizer does itself when use_regex is true.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Pre-tokens longer than this are merged every time rather than cached, to bound the cache.
constexpr size_t kMaxCachedWordBytes = 256;
// The cache starts over when it holds this many pre-tokens.
constexpr size_t kCacheCapacity = 1 << 16;

// tokenizers runs its patterns with Oniguruma, where \s is Unicode White_Space; PCRE2's \s also
// takes U+180E MONGOLIAN VOWEL SEPARATOR. Spelling the property out makes them agree.
std::string to_pcre2_pattern(std::string_view onig_pattern) {
  std::string pattern;
  for (size_t i = 0; i < onig_pattern.size(); ++i) {
    if (onig_pattern[i] == '\\' && i + 1 < onig_pattern.size()) {
      const char escaped = onig_pattern[++i];
      if (escaped == 's') {
        pattern += R"(\p{White_Space})";
      } else if (escaped == 'S') {
        pattern += R"(\P{White_Space})";
      } else {
        pattern += '\\';
        pattern += escaped;
      }
    } else {
      pattern += onig_pattern[i];
    }
  }
  return pattern;
}

std::string type_of(const json& node, const std::string& what) {
  if (!node.is_object() || !node.contains("type") || !node["type"].is_string()) {
    throw Error(what + " has no \"type\"");
  }
  return node["type"].get<std::string>();
}

void require(bool supported, const std::string& what) {
  if (!supported) throw Error(what + " is not supported");
}

// Whether the normalizer is NFC (true) or absent (false).
bool load_normalizer(const json& normalizer) {
  if (normalizer.is_null()) return false;
  const std::string type = type_of(normalizer, "normalizer");
  require(type == "NFC", "normalizer \"" + type + "\" (only NFC or none)");
  return true;
}

void check_byte_level(const json& byte_level, const std::string& where) {
  require(!byte_level.value("add_prefix_space", false), where + " ByteLevel with add_prefix_space");
}

// The regex splits that the pre-tokenizer applies one after the other.
std::vector<Regex> load_pre_tokenizer(const json& pre_tokenizer) {
  require(!pre_tokenizer.is_null(), "a missing pre_tokenizer (byte-level BPE needs ByteLevel)");
  const std::string type = type_of(pre_tokenizer, "pre_tokenizer");
  std::vector<json> steps;
  if (type == "Sequence") {
    steps = pre_tokenizer.at("pretokenizers").get<std::vector<json>>();
  } else {
    steps.push_back(pre_tokenizer);
  }
  require(!steps.empty() && type_of(steps.back(), "pre_tokenizer step") == "ByteLevel",
          "a pre_tokenizer that does not end with ByteLevel");
  std::vector<Regex> splitters;
  for (size_t i = 0; i + 1 < steps.size(); ++i) {
    const std::string step_type = type_of(steps[i], "pre_tokenizer step");
    require(step_type == "Split", "pre_tokenizer \"" + step_type + "\" (only Split, then ByteLevel)");
    const json& pattern = steps[i].at("pattern");
    require(pattern.contains("Regex"), "pre_tokenizer Split with a String pattern (only Regex)");
    const std::string behavior = steps[i].at("behavior").get<std::string>();
    require(behavior == "Isolated", "pre_tokenizer Split with behavior \"" + behavior + "\" (only Isolated)");
    require(!steps[i].value("invert", false), "pre_tokenizer Split with invert");
    splitters.emplace_back(to_pcre2_pattern(pattern.at("Regex").get<std::string>()));
  }
  check_byte_level(steps.back(), "pre_tokenizer");
  if (steps.back().value("use_regex", true)) splitters.emplace_back(to_pcre2_pattern(kGpt2Pattern));
  return splitters;
}

void check_decoder(const json& decoder) {
  require(!decoder.is_null(), "a missing decoder (only ByteLevel)");
  const std::string type = type_of(decoder, "decoder");
  require(type == "ByteLevel", "decoder \"" + type + "\" (only ByteLevel)");
}

// encode() returns what tokenizers' encode(text, add_special_tokens=False) returns, for which
// these post-processors do nothing; adding BOS or a template is the caller's business.
void check_post_processor(const json& post_processor) {
  if (post_processor.is_null()) return;
  const std::string type = type_of(post_processor, "post_processor");
  if (type == "Sequence") {  // Llama 3.1 and later: ByteLevel, then TemplateProcessing
    for (const json& step : post_processor.at("processors")) check_post_processor(step);
    return;
  }
  require(type == "ByteLevel" || type == "TemplateProcessing",
          "post_processor \"" + type + "\" (only ByteLevel, TemplateProcessing, a Sequence of them, or none)");
}

// One id's token: its text in the file, the bytes it decodes to, and whether it is special.
struct TokenEntry {
  bool present = false;
  bool special = false;
  std::string text;
  std::string bytes;
};

// The vocabulary ids of a merge's two sides and result. `joined` is working memory.
BpeMerger::Merge load_merge(const json& merge, size_t rank, const StringMap<int32_t>& vocab, std::string& joined) {
  std::string_view left, right;
  if (merge.is_string()) {
    const std::string_view line = merge.get_ref<const std::string&>();
    const size_t space = line.find(' ');
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
      throw Error("merge " + std::to_string(rank) + " \"" + std::string(line) + "\" is not two tokens separated by a space");
    }
    left = line.substr(0, space);
    right = line.substr(space + 1);
  } else {
    if (!merge.is_array() || merge.size() != 2) throw Error("merge " + std::to_string(rank) + " does not have two sides");
    left = merge[0].get_ref<const std::string&>();
    right = merge[1].get_ref<const std::string&>();
  }
  const auto id_of = [&](std::string_view token) {
    const auto found = vocab.find(token);
    if (found == vocab.end()) {
      throw Error("merge " + std::to_string(rank) + " (\"" + std::string(left) + "\", \"" + std::string(right) +
                  "\"): \"" + std::string(token) + "\" is not in the vocabulary");
    }
    return found->second;
  };
  joined.assign(left).append(right);
  return {id_of(left), id_of(right), id_of(joined)};
}

}  // namespace

struct Tokenizer::Impl {
  bool nfc = false;
  std::vector<Regex> splitters;
  std::unique_ptr<BpeMerger> merger;
  std::array<int32_t, 256> byte_ids{};
  std::vector<AddedToken> added_tokens;
  std::unique_ptr<AddedTokenMatcher> raw_matcher;         // tokens matched before normalizing
  std::unique_ptr<AddedTokenMatcher> normalized_matcher;  // tokens matched after
  std::vector<TokenEntry> entries;                        // by id
  StringMap<int32_t> id_of_text;

  // What encode() changes, guarded by `mutex`.
  struct EncodeState {
    std::vector<Regex::MatchData> match_data;  // one for each splitter
    BpeMerger::Scratch scratch;
    StringMap<std::vector<int32_t>> cache;  // pre-token bytes -> ids
  };
  mutable std::mutex mutex;
  mutable EncodeState state;

  void load(const json& root);
  void load_model(const json& model);
  void load_added_tokens(const json& tokens, size_t model_vocab_size);
  // One entry for every id up to the largest: ids are bounded (limits::kTokenId), and the table's
  // memory is checked before it grows.
  void resize_entries(size_t size) {
    require_memory(checked_mul(size, sizeof(TokenEntry), "the tokenizer's id table"),
                   "the tokenizer's table of ids 0.." + std::to_string(size - 1));
    entries.resize(size);
  }

  void encode_between_raw_tokens(std::string_view text, bool allow_special, std::vector<int32_t>& ids) const;
  void split_and_merge(std::string_view text, size_t splitter, std::vector<int32_t>& ids) const;
  void merge_cached(std::string_view word, std::vector<int32_t>& ids) const;
  const TokenEntry* entry(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < entries.size() && entries[id].present ? &entries[id] : nullptr;
  }
};

void Tokenizer::Impl::load(const json& root) {
  require(root.is_object(), "a top level that is not an object");
  for (const auto& [key, value] : root.items()) {
    static const std::vector<std::string> known = {"version", "truncation", "padding", "added_tokens", "normalizer",
                                                   "pre_tokenizer", "model", "post_processor", "decoder"};
    require(std::find(known.begin(), known.end(), key) != known.end(), "the key \"" + key + "\"");
  }
  require(root.value("truncation", json()).is_null(), "truncation");
  require(root.value("padding", json()).is_null(), "padding");
  nfc = load_normalizer(root.value("normalizer", json()));
  splitters = load_pre_tokenizer(root.value("pre_tokenizer", json()));
  check_decoder(root.value("decoder", json()));
  check_post_processor(root.value("post_processor", json()));
  load_model(root.at("model"));
  load_added_tokens(root.value("added_tokens", json::array()), id_of_text.size());
  for (const Regex& splitter : splitters) state.match_data.push_back(splitter.make_match_data());
}

void Tokenizer::Impl::load_model(const json& model) {
  const std::string type = model.value("type", "BPE");
  require(type == "BPE", "model \"" + type + "\" (only BPE)");
  require(model.value("dropout", json()).is_null(), "BPE dropout");
  require(!model.value("byte_fallback", false), "BPE byte_fallback");
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json value = model.value(affix, json());
    require(value.is_null() || value == "", std::string("BPE ") + affix);
  }
  const bool ignore_merges = model.value("ignore_merges", false);

  int32_t max_id = -1;
  const json& vocab = model.at("vocab");
  require(vocab.is_object(), "a vocab that is not an object");
  if (vocab.empty()) throw Error("the vocabulary is empty: every text would encode to nothing");
  id_of_text.reserve(vocab.size());
  for (const auto& [text, id_json] : vocab.items()) {
    const auto id = static_cast<int32_t>(json_integer(id_json, "the id of vocabulary token \"" + text + "\"", limits::kTokenId));
    id_of_text[text] = id;
    max_id = std::max(max_id, id);
  }
  resize_entries(static_cast<size_t>(max_id) + 1);
  StringMap<int32_t> whole_word_ids;
  for (const auto& [text, id] : id_of_text) {
    entries[id] = {true, false, text, byte_level::decoded_bytes(text)};
    if (ignore_merges) {
      if (std::optional<std::string> bytes = byte_level::to_bytes(text)) whole_word_ids[*bytes] = id;
    }
  }
  for (int byte = 0; byte < 256; ++byte) {
    const auto found = id_of_text.find(byte_level::char_of_byte(static_cast<unsigned char>(byte)));
    byte_ids[byte] = found == id_of_text.end() ? BpeMerger::kNoToken : found->second;
  }
  std::vector<BpeMerger::Merge> merges;
  const json& merges_json = model.at("merges");
  merges.reserve(merges_json.size());
  std::string joined;
  for (size_t rank = 0; rank < merges_json.size(); ++rank) {
    merges.push_back(load_merge(merges_json[rank], rank, id_of_text, joined));
  }
  merger = std::make_unique<BpeMerger>(merges, byte_ids, std::move(whole_word_ids));
}

void Tokenizer::Impl::load_added_tokens(const json& tokens, size_t model_vocab_size) {
  // tokenizers gives each added token the vocabulary's id for its text, or else the next id after
  // the vocabulary and the added tokens so far, whatever the file says; a file whose ids differ
  // from those is refused rather than read two ways.
  int32_t max_added_id = -1;
  for (const json& token_json : tokens) {
    AddedToken token;
    token.id = static_cast<int32_t>(json_integer(token_json.at("id"), "the id of an added token", limits::kTokenId));
    token.content = token_json.at("content").get<std::string>();
    token.special = token_json.value("special", false);
    token.single_word = token_json.value("single_word", false);
    token.lstrip = token_json.value("lstrip", false);
    token.rstrip = token_json.value("rstrip", false);
    token.normalized = token_json.value("normalized", !token.special);
    require(!token.content.empty(), "an added token with empty content");
    if (utf8::find_invalid(token.content) != std::string::npos) {
      throw Error("added token " + std::to_string(token.id) + " is not valid UTF-8");
    }
    const auto in_vocab = id_of_text.find(token.content);
    int32_t expected_id = 0;
    if (in_vocab != id_of_text.end()) {
      expected_id = in_vocab->second;
    } else if (max_added_id < 0) {
      expected_id = static_cast<int32_t>(model_vocab_size);
    } else {
      expected_id = std::max(max_added_id + 1, static_cast<int32_t>(model_vocab_size));
    }
    if (token.id != expected_id) {
      throw Error("added token \"" + token.content + "\" has id " + std::to_string(token.id) +
                  " in the file but would have id " + std::to_string(expected_id) + " in tokenizers");
    }
    max_added_id = std::max(max_added_id, token.id);
    id_of_text[token.content] = token.id;
    if (static_cast<size_t>(token.id) >= entries.size()) resize_entries(static_cast<size_t>(token.id) + 1);
    entries[token.id] = {true, token.special, token.content, byte_level::decoded_bytes(token.content)};
    added_tokens.push_back(std::move(token));
  }
  std::vector<const AddedToken*> raw, normalized;
  std::vector<std::string> raw_patterns, normalized_patterns;
  for (const AddedToken& token : added_tokens) {
    if (token.normalized) {
      normalized.push_back(&token);
      normalized_patterns.push_back(nfc ? to_nfc(token.content) : token.content);
    } else {
      raw.push_back(&token);
      raw_patterns.push_back(token.content);
    }
  }
  raw_matcher = std::make_unique<AddedTokenMatcher>(std::move(raw), std::move(raw_patterns));
  normalized_matcher = std::make_unique<AddedTokenMatcher>(std::move(normalized), std::move(normalized_patterns));
}

void Tokenizer::Impl::encode_between_raw_tokens(std::string_view text, bool allow_special,
                                                std::vector<int32_t>& ids) const {
  std::string normalized;
  if (nfc) {
    normalized = to_nfc(text);
    text = normalized;
  }
  normalized_matcher->split(
      text, allow_special, [&](std::string_view piece) { split_and_merge(piece, 0, ids); },
      [&](int32_t id) { ids.push_back(id); });
}

void Tokenizer::Impl::split_and_merge(std::string_view text, size_t splitter, std::vector<int32_t>& ids) const {
  if (splitter == splitters.size()) {
    merge_cached(text, ids);
    return;
  }
  splitters[splitter].split(text, state.match_data[splitter],
                            [&](std::string_view piece) { split_and_merge(piece, splitter + 1, ids); });
}

void Tokenizer::Impl::merge_cached(std::string_view word, std::vector<int32_t>& ids) const {
  if (word.size() == 1) {
    const int32_t id = byte_ids[static_cast<unsigned char>(word[0])];
    if (id != BpeMerger::kNoToken) ids.push_back(id);
    return;
  }
  if (word.size() > kMaxCachedWordBytes) {
    merger->merge(word, ids, state.scratch);
    return;
  }
  const auto hit = state.cache.find(word);
  if (hit != state.cache.end()) {
    ids.insert(ids.end(), hit->second.begin(), hit->second.end());
    return;
  }
  const size_t first = ids.size();
  merger->merge(word, ids, state.scratch);
  if (state.cache.size() >= kCacheCapacity) state.cache.clear();
  state.cache.emplace(std::string(word), std::vector<int32_t>(ids.begin() + static_cast<ptrdiff_t>(first), ids.end()));
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_json(std::string_view json_text) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& e) {
    throw Error(std::string("not valid JSON: ") + e.what());
  }
  auto impl = std::make_unique<Impl>();
  try {
    impl->load(root);
  } catch (const json::exception& e) {
    throw Error(std::string("malformed: ") + e.what());
  }
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw Error("cannot open tokenizer file " + path);
  std::ostringstream contents;
  contents << file.rdbuf();
  try {
    return from_json(contents.str());
  } catch (const Error& e) {
    throw Error("tokenizer " + path + ": " + e.what());
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool allow_special) const {
  const size_t invalid = utf8::find_invalid(text);
  if (invalid != std::string_view::npos) {
    throw Error("cannot encode text that is not valid UTF-8 (at byte " + std::to_string(invalid) + ")");
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3);
  const std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->raw_matcher->split(
      text, allow_special,
      [&](std::string_view piece) { impl_->encode_between_raw_tokens(piece, allow_special, ids); },
      [&](int32_t id) { ids.push_back(id); });
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string bytes;
  for (const int32_t id : ids) {
    const TokenEntry* token = impl_->entry(id);
    if (token != nullptr && !(skip_special && token->special)) bytes += token->bytes;
  }
  std::string text;
  utf8::append_lossy(bytes, text);
  return text;
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  const TokenEntry* token = impl_->entry(id);
  return token ? std::optional<std::string>(token->text) : std::nullopt;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  const auto found = impl_->id_of_text.find(token);
  return found == impl_->id_of_text.end() ? std::nullopt : std::optional<int32_t>(found->second);
}

std::optional<std::string> Tokenizer::token_bytes(int32_t id) const {
  const TokenEntry* token = impl_->entry(id);
  return token ? std::optional<std::string>(token->bytes) : std::nullopt;
}

bool Tokenizer::is_special(int32_t id) const {
  const TokenEntry* token = impl_->entry(id);
  return token != nullptr && token->special;
}

size_t Tokenizer::vocab_size() const { return impl_->entries.size(); }

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {}

std::string StreamDecoder::push(int32_t id) {
  if (skip_special_ && tokenizer_.is_special(id)) return {};
  const std::optional<std::string> bytes = tokenizer_.token_bytes(id);
  if (!bytes) return {};
  pending_ += *bytes;
  const size_t complete = utf8::complete_prefix_length(pending_);
  std::string text;
  utf8::append_lossy(std::string_view(pending_).substr(0, complete), text);
  pending_.erase(0, complete);
  return text;
}

std::string StreamDecoder::finish() {
  std::string text;
  utf8::append_lossy(pending_, text);
  pending_.clear();
  return text;
}

}  // namespace ditto
