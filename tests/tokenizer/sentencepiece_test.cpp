// SentencePiece-style BPE in tokenizer.json (Llama 2, Mistral, Gemma): BPE over characters with
// byte fallback, the normalizers and pre-tokenizers that put "▁" for spaces, the decoder chain,
// and TemplateProcessing. The expected tokens are what tokenizers gives for the same files.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "ditto/error.h"
#include "ditto/tokenizer.h"
#include "tokenizer/split.h"

namespace ditto {
namespace {

using nlohmann::json;
using Ids = std::vector<int32_t>;
using Strings = std::vector<std::string>;

constexpr const char* kSpace = "\u2581";  // "▁"

// <unk>, <s>, </s> (ids 0-2), the byte tokens <0x00>..<0xFF> (3-258), then "▁" (259), "a"
// (260), "b" (261), "x" (262), then a token for each merge, in order. Llama 2's normalizer and
// decoder; <s> an added special token.
json spm_tokenizer(const std::vector<std::pair<std::string, std::string>>& merges) {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int byte = 0; byte < 256; ++byte) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", byte);
    vocab[name] = vocab.size();
  }
  for (const char* token : {kSpace, "a", "b", "x"}) vocab[token] = vocab.size();
  json merge_list = json::array();
  for (const auto& [left, right] : merges) {
    if (!vocab.contains(left + right)) vocab[left + right] = vocab.size();
    merge_list.push_back(json::array({left, right}));
  }
  const json replace_space = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpace}};
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", {{{"id", 1}, {"content", "<s>"}, {"special", true}, {"normalized", false}}}},
      {"normalizer", {{"type", "Sequence"}, {"normalizers", {{{"type", "Prepend"}, {"prepend", kSpace}}, replace_space}}}},
      {"pre_tokenizer", nullptr},
      {"post_processor", nullptr},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders", {{{"type", "Replace"}, {"pattern", {{"String", kSpace}}}, {"content", " "}},
                      {{"type", "ByteFallback"}},
                      {{"type", "Fuse"}},
                      {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
      {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", "<unk>"}, {"fuse_unk", true},
                 {"byte_fallback", true}, {"vocab", vocab}, {"merges", merge_list}}},
  };
}

// The merges that make "▁a", "ab", "▁ab" and "b▁" (ids 263-266).
const std::vector<std::pair<std::string, std::string>> kMerges = {
    {kSpace, "a"}, {"a", "b"}, {std::string(kSpace) + "a", "b"}, {"b", kSpace}};

json metaspace(const std::string& prepend_scheme, bool split) {
  return {{"type", "Metaspace"}, {"replacement", kSpace}, {"prepend_scheme", prepend_scheme}, {"split", split}};
}

// The same vocabulary with a Metaspace pre-tokenizer instead of the normalizers (Mistral).
json with_metaspace(const std::string& prepend_scheme, bool split) {
  json file = spm_tokenizer(kMerges);
  file["normalizer"] = nullptr;
  file["pre_tokenizer"] = metaspace(prepend_scheme, split);
  return file;
}

Strings tokens_of(const Tokenizer& tokenizer, std::string_view text) {
  Strings tokens;
  for (const int32_t id : tokenizer.encode(text)) tokens.push_back(*tokenizer.id_to_token(id));
  return tokens;
}

const std::string a_ = std::string(kSpace) + "a";
const std::string ab_ = std::string(kSpace) + "ab";

TEST(ByteFallback, ACharacterWithoutATokenIsItsBytes) {
  const Tokenizer tokenizer = Tokenizer::from_json(spm_tokenizer(kMerges).dump());
  EXPECT_EQ(tokens_of(tokenizer, "ab"), (Strings{ab_}));
  EXPECT_EQ(tokens_of(tokenizer, "\xC3\xA9" "b"), (Strings{kSpace, "<0xC3>", "<0xA9>", "b"}));
  EXPECT_EQ(tokens_of(tokenizer, "\n"), (Strings{kSpace, "<0x0A>"}));
}

TEST(ByteFallback, Llama2NormalizersPutASpaceBeforeEveryStretchOfText) {
  const Tokenizer tokenizer = Tokenizer::from_json(spm_tokenizer(kMerges).dump());
  EXPECT_EQ(tokens_of(tokenizer, "ab ab"), (Strings{ab_, ab_}));
  EXPECT_EQ(tokens_of(tokenizer, " ab"), (Strings{kSpace, ab_}));
  EXPECT_EQ(tokens_of(tokenizer, "<s>ab<s>"), (Strings{"<s>", ab_, "<s>"}));
  EXPECT_EQ(tokens_of(tokenizer, "b b"), (Strings{kSpace, "b" + std::string(kSpace), "b"}));
}

TEST(ByteFallback, AddedTokensMatchedAfterNormalizingAreNormalizedToo) {
  json file = spm_tokenizer(kMerges);
  file["added_tokens"].push_back({{"id", 267}, {"content", "xa"}, {"special", false}, {"normalized", true}});
  const Tokenizer tokenizer = Tokenizer::from_json(file.dump());
  // Its pattern is "▁xa", the normalizer's text for "xa": only where a stretch starts with it.
  EXPECT_EQ(tokenizer.encode("xab"), (Ids{267, 261}));
  EXPECT_EQ(tokens_of(tokenizer, "bxa"), (Strings{kSpace, "b", "x", "a"}));
  // tokenizers spells it so too, and decodes it so.
  EXPECT_EQ(*tokenizer.id_to_token(267), std::string(kSpace) + "xa");
  EXPECT_EQ(tokenizer.token_to_id("xa"), 267);
  EXPECT_EQ(tokenizer.decode(Ids{261, 267}), "b xa");
}

TEST(Metaspace, PrependSchemes) {
  const auto tokens = [](const std::string& scheme, std::string_view text) {
    return tokens_of(Tokenizer::from_json(with_metaspace(scheme, false).dump()), text);
  };
  EXPECT_EQ(tokens("first", "ab<s>ab"), (Strings{ab_, "<s>", "ab"}));
  EXPECT_EQ(tokens("always", "ab<s>ab"), (Strings{ab_, "<s>", ab_}));
  EXPECT_EQ(tokens("never", "ab<s>ab"), (Strings{"ab", "<s>", "ab"}));
  EXPECT_EQ(tokens("first", "<s>ab"), (Strings{"<s>", "ab"})) << "the text after a token does not start the input";
  EXPECT_EQ(tokens("first", " ab"), (Strings{ab_})) << "no second ▁ before a space";
  EXPECT_EQ(tokens("always", "  ab"), (Strings{kSpace, ab_}));
}

TEST(Metaspace, SplitCutsBeforeEachReplacement) {
  const std::string b_ = "b" + std::string(kSpace);
  EXPECT_EQ(tokens_of(Tokenizer::from_json(with_metaspace("never", false).dump()), "b b"), (Strings{b_, "b"}));
  EXPECT_EQ(tokens_of(Tokenizer::from_json(with_metaspace("never", true).dump()), "b b"), (Strings{"b", kSpace, "b"}));
}

// Gemma's files: spaces replaced by a normalizer, then a Split on " " that finds none.
TEST(Split, OnAStringWithEachBehavior) {
  const auto pieces = [](SplitBehavior behavior) {
    const std::string text = "a-b--c-";
    Strings out;
    const auto on_piece = [&](std::string_view piece) { out.emplace_back(piece); };
    PieceMaker maker(text, behavior, on_piece);
    for (size_t i = 0; i < text.size(); ++i)
      if (text[i] == '-') maker.match(i, i + 1);
    maker.finish();
    return out;
  };
  // What tokenizers' Split("-", behavior) gives for "a-b--c-".
  EXPECT_EQ(pieces(SplitBehavior::Isolated), (Strings{"a", "-", "b", "-", "-", "c", "-"}));
  EXPECT_EQ(pieces(SplitBehavior::Removed), (Strings{"a", "b", "c"}));
  EXPECT_EQ(pieces(SplitBehavior::MergedWithPrevious), (Strings{"a-", "b-", "-", "c-"}));
  EXPECT_EQ(pieces(SplitBehavior::MergedWithNext), (Strings{"a", "-b", "-", "-c", "-"}));
}

TEST(Split, AStringPatternIsLiteral) {
  json file = spm_tokenizer(kMerges);
  file["normalizer"] = nullptr;
  file["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", "."}}}, {"behavior", "Isolated"}, {"invert", false}};
  EXPECT_EQ(tokens_of(Tokenizer::from_json(file.dump()), "ab.ab"), (Strings{"ab", "<0x2E>", "ab"}));
}

TEST(ByteFallbackDecoder, ARunOfByteTokensIsItsTextIfValidElseOneReplacementEach) {
  const Tokenizer tokenizer = Tokenizer::from_json(spm_tokenizer(kMerges).dump());
  const auto byte = [](int value) { return 3 + value; };
  EXPECT_EQ(tokenizer.decode(Ids{byte(0xE6), byte(0x97), byte(0xA5)}), "\xE6\x97\xA5");
  EXPECT_EQ(tokenizer.decode(Ids{byte(0xE6), byte(0x97)}), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(tokenizer.decode(Ids{byte(0xE6), 260, byte(0x97)}), "\xEF\xBF\xBD" "a" "\xEF\xBF\xBD");
  EXPECT_EQ(tokenizer.decode(Ids{byte('A'), byte(0xFF), byte('A')}), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(ByteFallbackDecoder, StripTakesOneSpaceOffTheStartOfTheText) {
  const Tokenizer tokenizer = Tokenizer::from_json(spm_tokenizer(kMerges).dump());
  EXPECT_EQ(tokenizer.decode(Ids{265, 265}), "ab ab");
  EXPECT_EQ(tokenizer.decode(Ids{259, 265}), " ab");
  EXPECT_EQ(tokenizer.decode(Ids{1, 265}), "<s> ab");
  EXPECT_EQ(tokenizer.decode(Ids{1, 265}, /*skip_special=*/true), "ab");
  EXPECT_EQ(tokenizer.decode(Ids{3 + ' ', 260}), "a") << "a space from a byte token is stripped too";
  EXPECT_EQ(*tokenizer.token_bytes(265), " ab");
}

TEST(ByteFallbackDecoder, StreamingHoldsARunOfByteTokensUntilItEnds) {
  const Tokenizer tokenizer = Tokenizer::from_json(spm_tokenizer(kMerges).dump());
  StreamDecoder stream(tokenizer);
  EXPECT_EQ(stream.push(263), "a");
  EXPECT_EQ(stream.push(3 + 0xE6), "");
  EXPECT_EQ(stream.push(3 + 0x97), "");
  EXPECT_EQ(stream.push(3 + 0xA5), "");
  EXPECT_EQ(stream.push(265), "\xE6\x97\xA5 ab");
  EXPECT_EQ(stream.push(3 + 0xE6), "");
  EXPECT_EQ(stream.finish(), "\xEF\xBF\xBD");
  EXPECT_EQ(stream.push(265), "ab") << "finish() starts over, Strip included";
}

TEST(ByteFallbackDecoder, StreamingGivesWhatDecodeGives) {
  const Tokenizer tokenizer = Tokenizer::from_json(spm_tokenizer(kMerges).dump());
  std::mt19937 random(11);
  // Mostly byte tokens of multi-byte characters, and the other tokens, and ids without one.
  const Ids pool = {3 + 0xE6, 3 + 0x97, 3 + 0xA5, 3 + 0xF0, 3 + 0x9F, 3 + 0x91, 3 + 0xA9, 3 + ' ', 0, 1, 2,
                    259,      260,      263,      265,      266,      300,      -1};
  for (int trial = 0; trial < 3000; ++trial) {
    Ids ids(1 + trial % 12);
    for (int32_t& id : ids) id = pool[random() % pool.size()];
    for (const bool skip_special : {false, true}) {
      StreamDecoder stream(tokenizer, skip_special);
      std::string streamed;
      for (const int32_t id : ids) streamed += stream.push(id);
      streamed += stream.finish();
      ASSERT_EQ(streamed, tokenizer.decode(ids, skip_special));
    }
  }
}

TEST(TemplateProcessing, AddsItsTokensOnlyWhenAsked) {
  json file = spm_tokenizer(kMerges);
  file["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                  {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                  {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}}},
      {"pair", json::array()},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}},
                          {"</s>", {{"id", "</s>"}, {"ids", {2}}, {"tokens", {"</s>"}}}}}}};
  const Tokenizer tokenizer = Tokenizer::from_json(file.dump());
  EXPECT_EQ(tokenizer.encode("ab"), (Ids{265}));
  EXPECT_EQ(tokenizer.encode("ab", true, /*add_special_tokens=*/true), (Ids{1, 265, 2}));
  EXPECT_EQ(tokenizer.encode("", true, true), (Ids{1, 2}));
}

struct Refusal {
  std::string name;
  std::function<void(json&)> change;
  std::string message;
};

class RefusedByteFallback : public testing::TestWithParam<Refusal> {};

TEST_P(RefusedByteFallback, WithAMessageNamingWhat) {
  json file = spm_tokenizer(kMerges);
  GetParam().change(file);
  try {
    Tokenizer::from_json(file.dump());
    FAIL() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(GetParam().message), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Tokenizer, RefusedByteFallback,
    testing::Values(
        Refusal{"missing_byte", [](json& f) { f["model"]["vocab"].erase("<0x7F>"); }, "\"<0x7F>\" is missing"},
        Refusal{"no_byte_fallback", [](json& f) { f["model"]["byte_fallback"] = false; },
                "BPE over characters without byte_fallback"},
        Refusal{"decoder_order",
                [](json& f) { std::swap(f["decoder"]["decoders"][1], f["decoder"]["decoders"][2]); },
                "a decoder other than a Sequence of Replace, ByteFallback, Fuse and Strip"},
        Refusal{"byte_level_decoder", [](json& f) { f["decoder"] = {{"type", "ByteLevel"}}; },
                "a decoder other than a Sequence of Replace, ByteFallback, Fuse and Strip"},
        Refusal{"strip_end", [](json& f) { f["decoder"]["decoders"][3]["stop"] = 1; }, "Strip of the end"},
        Refusal{"regex_replace",
                [](json& f) { f["normalizer"]["normalizers"][1]["pattern"] = {{"Regex", " +"}}; },
                "normalizer Replace with a Regex pattern"},
        Refusal{"contiguous",
                [](json& f) {
                  f["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Contiguous"}};
                },
                "behavior \"Contiguous\""},
        Refusal{"metaspace_and_byte_level",
                [](json& f) {
                  f["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {metaspace("first", true), {{"type", "ByteLevel"}}}}};
                },
                "both Metaspace and ByteLevel"},
        Refusal{"prepend_scheme", [](json& f) { f["pre_tokenizer"] = metaspace("sometimes", true); },
                "prepend_scheme \"sometimes\""},
        Refusal{"template_without_text",
                [](json& f) {
                  f["post_processor"] = {{"type", "TemplateProcessing"},
                                         {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}}},
                                         {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}}}}}};
                },
                "TemplateProcessing without the text"},
        Refusal{"template_unknown_id",
                [](json& f) {
                  f["post_processor"] = {{"type", "TemplateProcessing"},
                                         {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                                     {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
                                         {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {9999}}}}}}};
                },
                "adds id 9999, which has no token"}),
    [](const testing::TestParamInfo<Refusal>& info) { return info.param.name; });

}  // namespace
}  // namespace ditto
