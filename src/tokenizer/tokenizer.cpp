#include "ditto/tokenizer.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ditto/error.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace ditto {

using nlohmann::json;

namespace {

// Words longer than this are merged every time rather than cached, to bound the cache.
constexpr size_t kMaxCachedWordBytes = 256;
// The cache starts over when it holds this many words.
constexpr size_t kCacheCapacity = 1 << 16;

constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";
constexpr std::string_view kSpaceMark = "\u2581";  // "▁"

}  // namespace

void Tokenizer::Impl::encode_between_raw_tokens(std::string_view text, bool at_text_start, bool allow_special,
                                                std::vector<int32_t>& ids) const {
  std::string normalized;
  if (!normalizer.empty()) {
    normalized = normalizer.normalize(text);
    text = normalized;
  }
  normalized_matcher->split(
      text, allow_special,
      [&](std::string_view piece) {
        pre_tokenizer.split(piece, at_text_start && piece.data() == text.data(), state.pre_tokenizer,
                            [&](std::string_view word) { merge_word(word, ids); });
      },
      [&](int32_t id) { ids.push_back(id); });
}

bool Tokenizer::Impl::spanned_at(std::string_view word, size_t cut) const {
  for (const auto& [token, marks] : space_cuts.spanning) {
    for (const size_t mark : marks) {
      if (mark <= cut && word.substr(cut - mark, token.size()) == token) return true;
    }
  }
  return false;
}

void Tokenizer::Impl::merge_word(std::string_view word, std::vector<int32_t>& ids) const {
  if (!space_cuts.enabled) {
    merge_cached(word, ids);
    return;
  }
  size_t piece_start = 0;
  for (size_t mark = word.find(kSpaceMark, 1); mark != std::string_view::npos; mark = word.find(kSpaceMark, mark + 1)) {
    const bool after_mark = mark >= kSpaceMark.size() && word.substr(mark - kSpaceMark.size(), kSpaceMark.size()) == kSpaceMark;
    if (after_mark || spanned_at(word, mark)) continue;
    merge_cached(word.substr(piece_start, mark - piece_start), ids);
    piece_start = mark;
  }
  merge_cached(word.substr(piece_start), ids);
}

void Tokenizer::Impl::merge_cached(std::string_view word, std::vector<int32_t>& ids) const {
  if (word.size() == 1 || word.size() > kMaxCachedWordBytes) {
    merger->merge(word, ids, state.merge);
    return;
  }
  const auto hit = state.cache.find(word);
  if (hit != state.cache.end()) {
    ids.insert(ids.end(), hit->second.begin(), hit->second.end());
    return;
  }
  const size_t first = ids.size();
  merger->merge(word, ids, state.merge);
  if (state.cache.size() >= kCacheCapacity) state.cache.clear();
  state.cache.emplace(std::string(word), std::vector<int32_t>(ids.begin() + static_cast<ptrdiff_t>(first), ids.end()));
}

void Tokenizer::Impl::append_stripped(std::string_view text, StreamDecoder::State& state, std::string& out) const {
  while (state.strip_left > 0 && text.starts_with(strip_char)) {
    text.remove_prefix(strip_char.size());
    --state.strip_left;
  }
  if (!text.empty()) state.strip_left = 0;  // Strip takes only from the start of the whole text
  out.append(text);
}

// Byte-level: the tokens' bytes joined, each maximal invalid UTF-8 subpart one U+FFFD (Rust's
// from_utf8_lossy). Byte fallback: tokenizers' Replace, ByteFallback, Fuse, Strip: a run of byte
// tokens is its text if the whole run is valid UTF-8, else one U+FFFD per byte token.
void Tokenizer::Impl::decode_next(int32_t id, bool skip_special, StreamDecoder::State& state, std::string& out) const {
  const TokenEntry* token = entry(id);
  if (token == nullptr || (skip_special && token->special)) return;
  if (byte_level) {
    state.pending += token->bytes;
    const size_t complete = utf8::complete_prefix_length(state.pending);
    utf8::append_lossy(std::string_view(state.pending).substr(0, complete), out);
    state.pending.erase(0, complete);
    return;
  }
  if (token->byte >= 0) {
    state.pending.push_back(static_cast<char>(token->byte));
    return;
  }
  finish_decoding(state, out);
  append_stripped(token->bytes, state, out);
}

void Tokenizer::Impl::finish_decoding(StreamDecoder::State& state, std::string& out) const {
  if (byte_level) {
    utf8::append_lossy(state.pending, out);
  } else if (utf8::find_invalid(state.pending) == std::string::npos) {
    append_stripped(state.pending, state, out);
  } else {
    std::string replaced;
    for (size_t i = 0; i < state.pending.size(); ++i) replaced += kReplacementCharacter;
    append_stripped(replaced, state, out);
  }
  state.pending.clear();
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

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool allow_special, bool add_special_tokens) const {
  const size_t invalid = utf8::find_invalid(text);
  if (invalid != std::string_view::npos) {
    throw Error("cannot encode text that is not valid UTF-8 (at byte " + std::to_string(invalid) + ")");
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3);
  if (add_special_tokens) ids = impl_->prefix_ids;
  {
    const std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->raw_matcher->split(
        text, allow_special,
        [&](std::string_view piece) {
          impl_->encode_between_raw_tokens(piece, piece.data() == text.data(), allow_special, ids);
        },
        [&](int32_t id) { ids.push_back(id); });
  }
  if (add_special_tokens) ids.insert(ids.end(), impl_->suffix_ids.begin(), impl_->suffix_ids.end());
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  StreamDecoder::State state;
  state.strip_left = impl_->strip_count;
  std::string text;
  for (const int32_t id : ids) impl_->decode_next(id, skip_special, state, text);
  impl_->finish_decoding(state, text);
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
    : tokenizer_(tokenizer), skip_special_(skip_special) {
  state_.strip_left = tokenizer_.impl_->strip_count;
}

std::string StreamDecoder::push(int32_t id) {
  std::string text;
  tokenizer_.impl_->decode_next(id, skip_special_, state_, text);
  return text;
}

std::string StreamDecoder::finish() {
  std::string text;
  tokenizer_.impl_->finish_decoding(state_, text);
  state_ = State{};
  state_.strip_left = tokenizer_.impl_->strip_count;
  return text;
}

}  // namespace ditto
