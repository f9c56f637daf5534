#include "ditto/tokenizer.h"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "ditto/error.h"
#include "tokenizer/byte_level.h"

namespace ditto {
namespace {

using nlohmann::json;
using Ids = std::vector<int32_t>;

// A byte-level BPE whose first 256 ids are the bytes, with the given merges; the merged tokens
// get the ids after them in order.
json tiny_tokenizer(const std::vector<std::pair<std::string, std::string>>& merges) {
  json vocab = json::object();
  for (int byte = 0; byte < 256; ++byte) vocab[byte_level::char_of_byte(static_cast<unsigned char>(byte))] = byte;
  json merge_list = json::array();
  for (const auto& [left, right] : merges) {
    if (!vocab.contains(left + right)) vocab[left + right] = vocab.size();
    merge_list.push_back(json::array({left, right}));
  }
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", json::array()},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"byte_fallback", false},
                 {"vocab", vocab}, {"merges", merge_list}}},
  };
}

std::vector<std::string> tokens_of(const Tokenizer& tokenizer, std::string_view text) {
  std::vector<std::string> tokens;
  for (const int32_t id : tokenizer.encode(text)) tokens.push_back(*tokenizer.id_to_token(id));
  return tokens;
}

using Strings = std::vector<std::string>;

TEST(Bpe, LowestRankMergesFirstWhereverItIs) {
  const Tokenizer tokenizer = Tokenizer::from_json(tiny_tokenizer({{"b", "c"}, {"a", "b"}}).dump());
  EXPECT_EQ(tokens_of(tokenizer, "abc"), (Strings{"a", "bc"}));
  EXPECT_EQ(tokens_of(tokenizer, "abd"), (Strings{"ab", "d"}));
}

TEST(Bpe, LeftmostOfEqualRanksMergesFirst) {
  const Tokenizer tokenizer = Tokenizer::from_json(tiny_tokenizer({{"a", "a"}}).dump());
  EXPECT_EQ(tokens_of(tokenizer, "aaa"), (Strings{"aa", "a"}));
  EXPECT_EQ(tokens_of(tokenizer, "aaaaa"), (Strings{"aa", "aa", "a"}));
}

TEST(Bpe, MergedTokensMergeFurther) {
  const Tokenizer tokenizer = Tokenizer::from_json(tiny_tokenizer({{"a", "a"}, {"aa", "aa"}, {"Ġ", "aaaa"}}).dump());
  EXPECT_EQ(tokens_of(tokenizer, "aaaa aaaa aaaaaa"), (Strings{"aaaa", "Ġaaaa", "Ġaaaa", "aa"}));
}

TEST(Bpe, TheSameWordGivesTheSameTokensFromTheCache) {
  const Tokenizer tokenizer = Tokenizer::from_json(tiny_tokenizer({{"a", "b"}, {"ab", "c"}}).dump());
  EXPECT_EQ(tokenizer.encode("abc"), (Ids{257}));
  // The second and third are " abc" pieces, in which Ġ has no merge.
  EXPECT_EQ(tokenizer.encode("abc abc abc"), (Ids{257, ' ', 257, ' ', 257}));
}

TEST(Bpe, IgnoreMergesTakesAWholeVocabularyWordAsIs) {
  json file = tiny_tokenizer({{"a", "b"}, {"b", "c"}});
  file["model"]["vocab"]["abc"] = 300;  // reachable by no merge
  EXPECT_EQ(tokens_of(Tokenizer::from_json(file.dump()), "abc"), (Strings{"ab", "c"}));
  file["model"]["ignore_merges"] = true;
  EXPECT_EQ(tokens_of(Tokenizer::from_json(file.dump()), "abc"), (Strings{"abc"}));
}

// A byte the vocabulary has no token for is dropped before merging, as tokenizers does without
// an unk_token (SmolLM2's vocabulary lacks 21 bytes), so its neighbours may merge.
TEST(Bpe, AByteWithoutATokenIsDropped) {
  json file = tiny_tokenizer({{"a", "b"}});
  file["model"]["vocab"].erase("c");
  const Tokenizer tokenizer = Tokenizer::from_json(file.dump());
  EXPECT_EQ(tokens_of(tokenizer, "acb"), (Strings{"ab"}));
  EXPECT_EQ(tokens_of(tokenizer, "c"), (Strings{}));
  EXPECT_EQ(tokens_of(tokenizer, "x c"), (Strings{"x", "Ġ"}));
}

TEST(Bpe, MergesAsStringsEqualMergesAsPairs) {
  json file = tiny_tokenizer({{"a", "b"}, {"ab", "c"}});
  const Tokenizer pairs = Tokenizer::from_json(file.dump());
  for (json& merge : file["model"]["merges"]) merge = merge[0].get<std::string>() + " " + merge[1].get<std::string>();
  const Tokenizer strings = Tokenizer::from_json(file.dump());
  EXPECT_EQ(strings.encode("abcab abc"), pairs.encode("abcab abc"));
  EXPECT_EQ(tokens_of(strings, "abcab"), (Strings{"abc", "ab"}));
}

// Each unsupported feature is refused with a message that names it.
struct Refusal {
  std::string name;
  std::function<void(json&)> change;
  std::string message;
};

class Refused : public testing::TestWithParam<Refusal> {};

TEST_P(Refused, WithAMessageNamingWhat) {
  json file = tiny_tokenizer({{"a", "b"}});
  GetParam().change(file);
  try {
    Tokenizer::from_json(file.dump());
    FAIL() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(GetParam().message), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Tokenizer, Refused,
    testing::Values(
        Refusal{"normalizer", [](json& f) { f["normalizer"] = {{"type", "Lowercase"}}; }, "normalizer \"Lowercase\""},
        Refusal{"split_behavior",
                [](json& f) {
                  f["pre_tokenizer"] = {{"type", "Sequence"},
                                        {"pretokenizers", {{{"type", "Split"}, {"pattern", {{"Regex", "\\s+"}}},
                                                            {"behavior", "Contiguous"}, {"invert", false}},
                                                           {{"type", "ByteLevel"}, {"use_regex", false}}}}};
                },
                "behavior \"Contiguous\""},
        Refusal{"pre_tokenizer_type",
                [](json& f) {
                  f["pre_tokenizer"] = {{"type", "Sequence"},
                                        {"pretokenizers", {{{"type", "Whitespace"}}, {{"type", "ByteLevel"}}}}};
                },
                "pre_tokenizer \"Whitespace\""},
        Refusal{"no_byte_level", [](json& f) { f["pre_tokenizer"] = nullptr; },
                "BPE over characters without byte_fallback"},
        Refusal{"byte_level_not_last",
                [](json& f) {
                  f["pre_tokenizer"] = {{"type", "Sequence"},
                                        {"pretokenizers", {{{"type", "ByteLevel"}},
                                                           {{"type", "Split"}, {"pattern", {{"String", " "}}},
                                                            {"behavior", "Isolated"}}}}};
                },
                "ByteLevel before other steps"},
        Refusal{"prefix_space", [](json& f) { f["pre_tokenizer"]["add_prefix_space"] = true; }, "add_prefix_space"},
        Refusal{"bad_regex",
                [](json& f) {
                  f["pre_tokenizer"] = {{"type", "Sequence"},
                                        {"pretokenizers", {{{"type", "Split"}, {"pattern", {{"Regex", "(a"}}},
                                                            {"behavior", "Isolated"}, {"invert", false}},
                                                           {{"type", "ByteLevel"}, {"use_regex", false}}}}};
                },
                "regex \"(a\""},
        Refusal{"model", [](json& f) { f["model"]["type"] = "WordPiece"; }, "model \"WordPiece\""},
        Refusal{"byte_fallback", [](json& f) { f["model"]["byte_fallback"] = true; }, "byte_fallback"},
        Refusal{"dropout", [](json& f) { f["model"]["dropout"] = 0.1; }, "dropout"},
        Refusal{"subword_prefix", [](json& f) { f["model"]["continuing_subword_prefix"] = "##"; },
                "continuing_subword_prefix"},
        Refusal{"decoder", [](json& f) { f["decoder"] = {{"type", "WordPiece"}}; },
                "a decoder other than ByteLevel with a ByteLevel pre_tokenizer"},
        Refusal{"post_processor", [](json& f) { f["post_processor"] = {{"type", "BertProcessing"}}; },
                "post_processor \"BertProcessing\""},
        Refusal{"truncation", [](json& f) { f["truncation"] = {{"max_length", 8}}; }, "truncation"},
        Refusal{"unknown_key", [](json& f) { f["chat_template"] = "x"; }, "the key \"chat_template\""},
        Refusal{"merge_result",
                [](json& f) { f["model"]["merges"].push_back(json::array({"x", "y"})); },
                "\"xy\" is not in the vocabulary"},
        Refusal{"merge_form", [](json& f) { f["model"]["merges"].push_back("x y z"); },
                "is not two tokens separated by a space"},
        Refusal{"added_token_id",
                [](json& f) {
                  f["added_tokens"].push_back({{"id", 400}, {"content", "<s>"}, {"special", true}});
                },
                "would have id 257"},
        Refusal{"not_json", [](json& f) { f = "{"; }, "top level that is not an object"}),
    [](const testing::TestParamInfo<Refusal>& info) { return info.param.name; });

// Llama 3.1's post-processor: ByteLevel (offsets only), then BOS before the text.
TEST(Tokenizer, PostProcessorsAddTheirTokensOnlyWhenAsked) {
  json file = tiny_tokenizer({{"a", "b"}});
  file["added_tokens"] = {{{"id", 257}, {"content", "<s>"}, {"special", true}, {"normalized", false}}};
  file["post_processor"] = {
      {"type", "Sequence"},
      {"processors", {{{"type", "ByteLevel"}, {"trim_offsets", false}},
                      {{"type", "TemplateProcessing"},
                       {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}}}}}},
                       {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {257}}, {"tokens", {"<s>"}}}}}}}}}};
  const Tokenizer tokenizer = Tokenizer::from_json(file.dump());
  EXPECT_EQ(tokenizer.encode("ab"), (Ids{256}));
  EXPECT_EQ(tokenizer.encode("ab", true, /*add_special_tokens=*/true), (Ids{257, 256}));
  file["post_processor"]["processors"].push_back({{"type", "RobertaProcessing"}});
  EXPECT_THROW(Tokenizer::from_json(file.dump()), Error);
}

TEST(Tokenizer, BrokenJsonAndMissingFilesAreErrors) {
  EXPECT_THROW(Tokenizer::from_json("{\"model\": "), Error);
  try {
    Tokenizer::from_file("/nonexistent/tokenizer.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/tokenizer.json"), std::string::npos);
  }
}

// Invalid UTF-8 is refused rather than guessed at: tokenizers only ever sees valid text (a
// Python str), so there is no reference behaviour to follow.
TEST(Tokenizer, InvalidUtf8IsRefusedWithItsOffset) {
  const Tokenizer tokenizer = Tokenizer::from_json(tiny_tokenizer({}).dump());
  for (const std::string& text : {std::string("ab\xFF"), std::string("ab\xC3"), std::string("ab\xED\xA0\x80")}) {
    try {
      tokenizer.encode(text);
      FAIL() << "encoded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("not valid UTF-8 (at byte 2)"), std::string::npos) << e.what();
    }
  }
}

TEST(Tokenizer, AddedTokensFollowTheirFlags) {
  json file = tiny_tokenizer({});
  file["added_tokens"] = {
      {{"id", 256}, {"content", "<s>"}, {"special", true}, {"lstrip", true}, {"rstrip", true}, {"normalized", false}},
      {{"id", 257}, {"content", "cat"}, {"special", false}, {"single_word", true}, {"normalized", false}},
  };
  const Tokenizer tokenizer = Tokenizer::from_json(file.dump());
  EXPECT_EQ(tokenizer.encode("a  <s>  b"), (Ids{'a', 256, 'b'}));
  EXPECT_EQ(tokenizer.encode("a  <s>  b", false).size(), 9u);
  EXPECT_EQ(tokenizer.encode("cat"), (Ids{257}));
  EXPECT_EQ(tokenizer.encode("a cat."), (Ids{'a', ' ', 257, '.'}));
  EXPECT_EQ(tokenizer.encode("cats").size(), 4u) << "cat is not a single word in cats";
  EXPECT_TRUE(tokenizer.is_special(256));
  EXPECT_FALSE(tokenizer.is_special(257));
  EXPECT_EQ(tokenizer.decode(Ids{'a', 256, 257}), "a<s>cat");
  EXPECT_EQ(tokenizer.decode(Ids{'a', 256, 257}, true), "acat");
}

class Qwen3 : public testing::Test {
 protected:
  static void SetUpTestSuite() { tokenizer_ = new Tokenizer(Tokenizer::from_file(DITTO_QWEN3_TOKENIZER)); }
  static void TearDownTestSuite() { delete tokenizer_; }
  static const Tokenizer& tokenizer() { return *tokenizer_; }

 private:
  static Tokenizer* tokenizer_;
};
Tokenizer* Qwen3::tokenizer_ = nullptr;

// The reference rows of the seed report decode to what tokenizers decodes them to.
TEST_F(Qwen3, DecodesTheSeedReferenceRows) {
  const std::vector<std::pair<Ids, std::string>> rows = {
      {{576, 4226, 374, 1112, 30, 6771, 752, 1744}, " The answer is...? Let me think"},
      {{4710, 26567, 702, 11537, 264, 2205, 44378, 4712}, " \n\nApple has implemented a local inference engine"},
      {{576, 4718, 1265, 614, 264, 897, 315, 330}, " The JSON should have a value of \""},
      {{7281, 11, 10339, 304, 1378, 22870, 3170, 279}, " Also, explain in two sentences why the"},
      {{576, 729, 1265, 470, 279, 2629, 315, 279}, " The function should return the sum of the"},
      {{576, 4226, 1265, 387, 304, 264, 3175, 11652}, " The answer should be in a single sentence"},
      {{362, 13, 8162, 362, 13, 8162, 425, 13}, " A. Apple A. Apple B."},
      {{3555, 374, 279, 6672, 1948, 15279, 2142, 323}, " What is the difference between parallelism and"},
  };
  for (const auto& [ids, text] : rows) EXPECT_EQ(tokenizer().decode(ids), text);
}

TEST_F(Qwen3, EncodesTextAndSpecialTokens) {
  EXPECT_EQ(tokenizer().encode(" The answer is...? Let me think"), (Ids{576, 4226, 374, 1112, 30, 6771, 752, 1744}));
  EXPECT_EQ(tokenizer().encode("<|im_start|>user\nhi<|im_end|>"), (Ids{151644, 872, 198, 6023, 151645}));
  EXPECT_EQ(tokenizer().encode("e\xCC\x81"), tokenizer().encode("\xC3\xA9")) << "NFC composes e + U+0301";
  EXPECT_EQ(tokenizer().vocab_size(), 151669u);
  EXPECT_EQ(tokenizer().token_to_id("<|im_end|>"), 151645);
}

TEST_F(Qwen3, StreamingHoldsBackBytesUntilACharacterIsWhole) {
  // "👩‍👩": the zero-width joiner U+200D (E2 80 8D) is split over tokens 378 and 235.
  const Ids ids = tokenizer().encode("\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA9");
  ASSERT_EQ(ids, (Ids{145233, 378, 235, 145233}));
  StreamDecoder stream(tokenizer());
  EXPECT_EQ(stream.push(ids[0]), "\xF0\x9F\x91\xA9");
  EXPECT_EQ(stream.push(ids[1]), "");
  EXPECT_EQ(stream.push(ids[2]), "\xE2\x80\x8D");
  EXPECT_EQ(stream.push(ids[3]), "\xF0\x9F\x91\xA9");
  EXPECT_EQ(stream.finish(), "");
  EXPECT_EQ(stream.push(378), "");
  EXPECT_EQ(stream.finish(), "\xEF\xBF\xBD") << "an unfinished character is flushed as U+FFFD";
}

TEST_F(Qwen3, StreamingGivesWhatDecodeGives) {
  std::mt19937 random(7);
  std::uniform_int_distribution<int32_t> any_id(0, static_cast<int32_t>(tokenizer().vocab_size()) + 10);
  for (int trial = 0; trial < 2000; ++trial) {
    Ids ids(1 + trial % 16);
    for (int32_t& id : ids) id = trial % 2 ? any_id(random) : 378 + static_cast<int32_t>(random() % 3);
    for (const bool skip_special : {false, true}) {
      StreamDecoder stream(tokenizer(), skip_special);
      std::string streamed;
      for (const int32_t id : ids) streamed += stream.push(id);
      streamed += stream.finish();
      ASSERT_EQ(streamed, tokenizer().decode(ids, skip_special));
    }
  }
}

}  // namespace
}  // namespace ditto
