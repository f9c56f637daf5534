// Reading a tokenizer.json into Tokenizer::Impl: what each part may hold, and a ditto::Error
// naming anything else.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "ditto/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace ditto {

using nlohmann::json;

namespace {

// The split that tokenizers' ByteLevel pre-tokenizer does itself when use_regex is true.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

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

// A pattern that matches `text` literally: ASCII punctuation escaped, everything else as it is.
std::string literal_pattern(std::string_view text) {
  std::string pattern;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x80 && !std::isalnum(byte)) pattern += '\\';
    pattern += c;
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

// The steps of a node that may be a Sequence of them (nested Sequences flattened).
void append_steps(const json& node, const char* list_key, const std::string& what, std::vector<json>& steps) {
  if (type_of(node, what) == "Sequence") {
    for (const json& step : node.at(list_key)) append_steps(step, list_key, what, steps);
  } else {
    steps.push_back(node);
  }
}

// A String pattern of a Replace (normalizer or decoder); Regex patterns are refused.
std::string string_pattern(const json& step, const std::string& what) {
  const json& pattern = step.at("pattern");
  require(pattern.contains("String"), what + " with a Regex pattern (only String)");
  std::string text = pattern.at("String").get<std::string>();
  require(!text.empty(), what + " with an empty pattern");
  return text;
}

Normalizer load_normalizer(const json& normalizer) {
  if (normalizer.is_null()) return {};
  std::vector<json> steps;
  append_steps(normalizer, "normalizers", "normalizer", steps);
  std::vector<Normalizer::Step> loaded;
  for (const json& step : steps) {
    const std::string type = type_of(step, "normalizer");
    if (type == "NFC") {
      loaded.push_back({Normalizer::Step::Kind::Nfc, "", ""});
    } else if (type == "Replace") {
      loaded.push_back({Normalizer::Step::Kind::Replace, string_pattern(step, "normalizer Replace"),
                        step.at("content").get<std::string>()});
    } else if (type == "Prepend") {
      loaded.push_back({Normalizer::Step::Kind::Prepend, "", step.at("prepend").get<std::string>()});
    } else {
      require(false, "normalizer \"" + type + "\" (only NFC, Replace, Prepend or a Sequence of them)");
    }
  }
  return Normalizer(std::move(loaded));
}

SplitBehavior split_behavior(const std::string& behavior) {
  if (behavior == "Isolated") return SplitBehavior::Isolated;
  if (behavior == "Removed") return SplitBehavior::Removed;
  if (behavior == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (behavior == "MergedWithNext") return SplitBehavior::MergedWithNext;
  require(false, "pre_tokenizer Split with behavior \"" + behavior + "\"");
  return SplitBehavior::Isolated;
}

PreTokenizer::Metaspace load_metaspace(const json& step) {
  PreTokenizer::Metaspace metaspace;
  metaspace.replacement = step.at("replacement").get<std::string>();
  require(!metaspace.replacement.empty(), "pre_tokenizer Metaspace with an empty replacement");
  // Files older than prepend_scheme say add_prefix_space, which tokenizers reads as always/never.
  const std::string scheme =
      step.contains("prepend_scheme") ? step["prepend_scheme"].get<std::string>()
                                      : (step.value("add_prefix_space", true) ? "always" : "never");
  if (scheme == "always") {
    metaspace.prepend = PreTokenizer::Metaspace::Prepend::Always;
  } else if (scheme == "first") {
    metaspace.prepend = PreTokenizer::Metaspace::Prepend::First;
  } else if (scheme == "never") {
    metaspace.prepend = PreTokenizer::Metaspace::Prepend::Never;
  } else {
    require(false, "pre_tokenizer Metaspace with prepend_scheme \"" + scheme + "\"");
  }
  metaspace.split = step.value("split", true);
  return metaspace;
}

// The pre-tokenizer's steps, and whether it is byte-level (ends with ByteLevel).
PreTokenizer load_pre_tokenizer(const json& pre_tokenizer, bool& byte_level) {
  byte_level = false;
  if (pre_tokenizer.is_null()) return {};
  std::vector<json> steps;
  append_steps(pre_tokenizer, "pretokenizers", "pre_tokenizer", steps);
  std::vector<PreTokenizer::Step> loaded;
  for (size_t i = 0; i < steps.size(); ++i) {
    const json& step = steps[i];
    const std::string type = type_of(step, "pre_tokenizer");
    if (type == "Split") {
      const json& pattern = step.at("pattern");
      std::string regex = pattern.contains("Regex") ? to_pcre2_pattern(pattern.at("Regex").get<std::string>())
                                                    : literal_pattern(pattern.at("String").get<std::string>());
      require(!step.value("invert", false), "pre_tokenizer Split with invert");
      loaded.push_back(PreTokenizer::Split{Regex(regex), split_behavior(step.at("behavior").get<std::string>())});
    } else if (type == "Metaspace") {
      loaded.push_back(load_metaspace(step));
    } else if (type == "ByteLevel") {
      require(i + 1 == steps.size(), "pre_tokenizer ByteLevel before other steps");
      require(!step.value("add_prefix_space", false), "pre_tokenizer ByteLevel with add_prefix_space");
      if (step.value("use_regex", true)) {
        loaded.push_back(PreTokenizer::Split{Regex(to_pcre2_pattern(kGpt2Pattern)), SplitBehavior::Isolated});
      }
      byte_level = true;
    } else {
      require(false, "pre_tokenizer \"" + type + "\" (only Split, Metaspace, ByteLevel or a Sequence of them)");
    }
  }
  const bool has_metaspace = std::any_of(loaded.begin(), loaded.end(), [](const PreTokenizer::Step& step) {
    return std::holds_alternative<PreTokenizer::Metaspace>(step);
  });
  require(!(byte_level && has_metaspace), "pre_tokenizer with both Metaspace and ByteLevel");
  return PreTokenizer(std::move(loaded));
}

// The byte-fallback decoder: a Sequence of Replace steps, ByteFallback, Fuse and a Strip of the
// start, as Llama 2, Mistral and Gemma files have it. Returns the Replace steps (pattern,
// content); sets the Strip.
std::vector<std::pair<std::string, std::string>> load_byte_fallback_decoder(const json& decoder,
                                                                            Tokenizer::Impl& impl) {
  const std::string expected =
      "a decoder other than a Sequence of Replace, ByteFallback, Fuse and Strip in that order "
      "(as byte_fallback BPE needs)";
  require(!decoder.is_null(), "a missing decoder");
  std::vector<json> steps;
  append_steps(decoder, "decoders", "decoder", steps);
  std::vector<std::pair<std::string, std::string>> replacements;
  size_t i = 0;
  for (; i < steps.size() && type_of(steps[i], "decoder") == "Replace"; ++i) {
    replacements.emplace_back(string_pattern(steps[i], "decoder Replace"), steps[i].at("content").get<std::string>());
  }
  require(i < steps.size() && type_of(steps[i], "decoder") == "ByteFallback", expected);
  ++i;
  // Fuse joins the tokens into one text, which the output is anyway; Strip then works on all of it.
  if (i < steps.size() && type_of(steps[i], "decoder") == "Fuse") {
    ++i;
    if (i < steps.size() && type_of(steps[i], "decoder") == "Strip") {
      const json& strip = steps[i];
      impl.strip_char = strip.at("content").get<std::string>();
      require(!impl.strip_char.empty() && utf8::find_invalid(impl.strip_char) == std::string::npos &&
                  utf8::char_length(static_cast<unsigned char>(impl.strip_char[0])) == impl.strip_char.size(),
              "decoder Strip of other than one character");
      require(strip.value("stop", 0) == 0, "decoder Strip of the end of the text");
      impl.strip_count = strip.value("start", 0);
      ++i;
    }
  }
  require(i == steps.size(), expected);
  return replacements;
}

// encode() returns what tokenizers' encode(text, add_special_tokens=False) returns; with
// add_special_tokens, the ids a TemplateProcessing puts around a single text go around it.
void load_post_processor(const json& post_processor, Tokenizer::Impl& impl) {
  if (post_processor.is_null()) return;
  const std::string type = type_of(post_processor, "post_processor");
  if (type == "Sequence") {  // Llama 3.1 and later: ByteLevel, then TemplateProcessing
    for (const json& step : post_processor.at("processors")) load_post_processor(step, impl);
    return;
  }
  if (type == "ByteLevel") return;  // offsets only
  require(type == "TemplateProcessing",
          "post_processor \"" + type + "\" (only ByteLevel, TemplateProcessing, a Sequence of them, or none)");
  std::vector<int32_t> before, after;
  bool seen_text = false;
  for (const json& item : post_processor.at("single")) {
    if (item.contains("Sequence")) {
      require(!seen_text && item["Sequence"].at("id") == "A", "post_processor TemplateProcessing of other than one text");
      seen_text = true;
      continue;
    }
    const std::string name = item.at("SpecialToken").at("id").get<std::string>();
    const json& special = post_processor.at("special_tokens");
    if (!special.contains(name)) throw Error("post_processor TemplateProcessing: no special token \"" + name + "\"");
    for (const json& id : special[name].at("ids")) (seen_text ? after : before).push_back(id.get<int32_t>());
  }
  require(seen_text, "post_processor TemplateProcessing without the text");
  // A later processor wraps what the earlier ones made.
  impl.prefix_ids.insert(impl.prefix_ids.begin(), before.begin(), before.end());
  impl.suffix_ids.insert(impl.suffix_ids.end(), after.begin(), after.end());
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The byte that ByteFallback decodes `token` to: "<0xHH>" whose HH Rust's u8::from_str_radix(_, 16)
// reads (two hex digits, or '+' and one), else -1.
int fallback_byte(std::string_view token) {
  if (token.size() != 6 || !token.starts_with("<0x") || token[5] != '>') return -1;
  const int high = hex_digit(token[3]), low = hex_digit(token[4]);
  if (low < 0) return -1;
  if (token[3] == '+') return low;
  return high < 0 ? -1 : high * 16 + low;
}

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

class Loader {
 public:
  explicit Loader(Tokenizer::Impl& impl) : impl_(impl) {}

  void load(const json& root) {
    require(root.is_object(), "a top level that is not an object");
    for (const auto& [key, value] : root.items()) {
      static const std::vector<std::string> known = {"version",       "truncation", "padding",
                                                     "added_tokens",  "normalizer", "pre_tokenizer",
                                                     "model",         "post_processor", "decoder"};
      require(std::find(known.begin(), known.end(), key) != known.end(), "the key \"" + key + "\"");
    }
    require(root.value("truncation", json()).is_null(), "truncation");
    require(root.value("padding", json()).is_null(), "padding");
    impl_.normalizer = load_normalizer(root.value("normalizer", json()));
    impl_.pre_tokenizer = load_pre_tokenizer(root.value("pre_tokenizer", json()), impl_.byte_level);
    // Without ByteLevel, BPE runs over characters, and a character without a token falls back to
    // its bytes.
    const bool byte_fallback = root.at("model").value("byte_fallback", false);
    require(byte_fallback != impl_.byte_level, impl_.byte_level ? "BPE byte_fallback with a ByteLevel pre_tokenizer"
                                                                  : "BPE over characters without byte_fallback");
    const json decoder = root.value("decoder", json());
    if (impl_.byte_level) {
      require(!decoder.is_null() && type_of(decoder, "decoder") == "ByteLevel",
              "a decoder other than ByteLevel with a ByteLevel pre_tokenizer");
    } else {
      replacements_ = load_byte_fallback_decoder(decoder, impl_);
    }
    load_model(root.at("model"));
    load_added_tokens(root.value("added_tokens", json::array()), impl_.id_of_text.size());
    load_post_processor(root.value("post_processor", json()), impl_);
    for (const int32_t id : impl_.prefix_ids) check_special_id(id);
    for (const int32_t id : impl_.suffix_ids) check_special_id(id);
    impl_.state.pre_tokenizer = impl_.pre_tokenizer.make_scratch();
  }

 private:
  // The decoder's view of a token by itself.
  TokenEntry entry_of(const std::string& text, bool special) const {
    if (impl_.byte_level) return {true, special, text, byte_level::decoded_bytes(text), -1};
    std::string decoded = text;
    for (const auto& [pattern, content] : replacements_) decoded = replace_all(decoded, pattern, content);
    const int byte = fallback_byte(decoded);
    return {true, special, text, byte >= 0 ? std::string(1, static_cast<char>(byte)) : decoded, byte};
  }

  // Where the vocabulary keeps the symbols that merging starts from.
  BpeMerger::Alphabet alphabet() const {
    BpeMerger::Alphabet alphabet;
    alphabet.characters = !impl_.byte_level;
    for (int byte = 0; byte < 256; ++byte) {
      std::string token;
      if (impl_.byte_level) {
        token = byte_level::char_of_byte(static_cast<unsigned char>(byte));
      } else {
        char name[8];
        std::snprintf(name, sizeof(name), "<0x%02X>", byte);
        token = name;
      }
      const auto found = impl_.id_of_text.find(token);
      // A byte-level vocabulary may lack a byte (it is dropped); byte fallback must not, or
      // tokenizers would fall back to its unknown token, which ditto does not do.
      if (found == impl_.id_of_text.end() && !impl_.byte_level) {
        throw Error("BPE byte_fallback without a token for each byte: \"" + token + "\" is missing");
      }
      alphabet.byte_ids[byte] = found == impl_.id_of_text.end() ? BpeMerger::kNoToken : found->second;
    }
    if (!impl_.byte_level) {
      for (const auto& [text, id] : impl_.id_of_text) {
        if (!text.empty() && utf8::char_length(static_cast<unsigned char>(text[0])) == text.size()) {
          alphabet.char_ids[utf8::code_point_at(text, 0)] = id;
        }
      }
    }
    return alphabet;
  }

  void load_model(const json& model) {
    const std::string type = model.value("type", "BPE");
    require(type == "BPE", "model \"" + type + "\" (only BPE)");
    require(model.value("dropout", json()).is_null(), "BPE dropout");
    for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      const json value = model.value(affix, json());
      require(value.is_null() || value == "", std::string("BPE ") + affix);
    }
    const bool ignore_merges = model.value("ignore_merges", false);

    int32_t max_id = -1;
    const json& vocab = model.at("vocab");
    impl_.id_of_text.reserve(vocab.size());
    for (const auto& [text, id_json] : vocab.items()) {
      const int32_t id = id_json.get<int32_t>();
      if (id < 0) throw Error("vocabulary token \"" + text + "\" has a negative id");
      impl_.id_of_text[text] = id;
      max_id = std::max(max_id, id);
    }
    impl_.entries.resize(static_cast<size_t>(max_id + 1));
    StringMap<int32_t> whole_word_ids;
    for (const auto& [text, id] : impl_.id_of_text) {
      impl_.entries[id] = entry_of(text, false);
      if (!ignore_merges) continue;
      if (!impl_.byte_level) {
        whole_word_ids[text] = id;
      } else if (std::optional<std::string> bytes = byte_level::to_bytes(text)) {
        whole_word_ids[*bytes] = id;
      }
    }
    std::vector<BpeMerger::Merge> merges;
    const json& merges_json = model.at("merges");
    merges.reserve(merges_json.size());
    std::string joined;
    for (size_t rank = 0; rank < merges_json.size(); ++rank) {
      merges.push_back(load_merge(merges_json[rank], rank, impl_.id_of_text, joined));
    }
    impl_.merger = std::make_unique<BpeMerger>(merges, alphabet(), std::move(whole_word_ids));
    if (!impl_.byte_level && !ignore_merges) impl_.space_cuts = space_cuts();
  }

  // Where byte-fallback BPE may cut a word (Tokenizer::Impl::SpaceCuts), from the vocabulary.
  Tokenizer::Impl::SpaceCuts space_cuts() const {
    static constexpr std::string_view kMark = "\u2581";
    // Few enough tokens that checking each at each cut costs little.
    constexpr size_t kMaxSpanning = 64;
    Tokenizer::Impl::SpaceCuts cuts;
    if (!impl_.id_of_text.contains(kMark)) return cuts;
    for (const auto& [text, id] : impl_.id_of_text) {
      std::vector<size_t> marks;
      for (size_t mark = text.find(kMark, 1); mark != std::string::npos; mark = text.find(kMark, mark + 1)) {
        if (mark < kMark.size() || text.compare(mark - kMark.size(), kMark.size(), kMark) != 0) marks.push_back(mark);
      }
      if (marks.empty()) continue;
      // A byte token's text ("<0xE2>") inside such a token would not be found in the text.
      if (text.find("<0x") != std::string::npos || cuts.spanning.size() == kMaxSpanning) return {};
      cuts.spanning.emplace_back(text, std::move(marks));
    }
    cuts.enabled = true;
    return cuts;
  }

  void load_added_tokens(const json& tokens, size_t model_vocab_size) {
    // tokenizers gives each added token the vocabulary's id for its text, or else the next id after
    // the vocabulary and the added tokens so far, whatever the file says; a file whose ids differ
    // from those is refused rather than read two ways.
    int32_t max_added_id = -1;
    for (const json& token_json : tokens) {
      AddedToken token;
      token.id = token_json.at("id").get<int32_t>();
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
      const auto in_vocab = impl_.id_of_text.find(token.content);
      int32_t expected_id = 0;
      if (in_vocab != impl_.id_of_text.end()) {
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
      impl_.id_of_text[token.content] = token.id;
      if (static_cast<size_t>(token.id) >= impl_.entries.size()) impl_.entries.resize(static_cast<size_t>(token.id) + 1);
      // tokenizers spells a token matched after normalizing as the normalizer makes it, for
      // id_to_token and decode alike ("▁<tab>" for "<tab>" after Prepend("▁")).
      impl_.entries[token.id] =
          entry_of(token.normalized ? impl_.normalizer.normalize(token.content) : token.content, token.special);
      impl_.added_tokens.push_back(std::move(token));
    }
    std::vector<const AddedToken*> raw, normalized;
    std::vector<std::string> raw_patterns, normalized_patterns;
    for (const AddedToken& token : impl_.added_tokens) {
      if (token.normalized) {
        normalized.push_back(&token);
        normalized_patterns.push_back(impl_.entries[token.id].text);
      } else {
        raw.push_back(&token);
        raw_patterns.push_back(token.content);
      }
    }
    impl_.raw_matcher = std::make_unique<AddedTokenMatcher>(std::move(raw), std::move(raw_patterns));
    impl_.normalized_matcher =
        std::make_unique<AddedTokenMatcher>(std::move(normalized), std::move(normalized_patterns));
  }

  void check_special_id(int32_t id) const {
    if (impl_.entry(id) == nullptr) {
      throw Error("post_processor TemplateProcessing adds id " + std::to_string(id) + ", which has no token");
    }
  }

  Tokenizer::Impl& impl_;
  std::vector<std::pair<std::string, std::string>> replacements_;  // the decoder's Replace steps
};

}  // namespace

void Tokenizer::Impl::load(const json& root) { Loader(*this).load(root); }

}  // namespace ditto
