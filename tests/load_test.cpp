// load_model: one call gives a model file's model, tokenizer, chat template and end tokens, from
// a checkpoint directory or a GGUF file (read once).
#include <gtest/gtest.h>

#include <filesystem>

#include "ditto/load.h"
#include "expect_error.h"
#include "test_checkpoint.h"
#include "test_gguf.h"

namespace ditto {
namespace {

using testing::expect_error;
using testing::TinyConfig;
using testing::write_text;

// A byte-level BPE tokenizer.json of four tokens, two of them special.
const char* kTokenizerJson = R"({
  "version": "1.0",
  "added_tokens": [
    {"id": 2, "content": "<|im_end|>", "special": true, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false},
    {"id": 3, "content": "<|endoftext|>", "special": true, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false}
  ],
  "normalizer": null,
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
  "post_processor": null,
  "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
  "model": {"type": "BPE", "dropout": null, "byte_fallback": false, "ignore_merges": false,
            "vocab": {"a": 0, "b": 1, "<|im_end|>": 2, "<|endoftext|>": 3}, "merges": []}
})";

TEST(Load, ACheckpointBringsItsTokenizerTemplateAndEveryEndToken) {
  const std::string dir = testing::write_checkpoint(TinyConfig{}, "load-full");
  write_text(dir + "/tokenizer.json", kTokenizerJson);
  write_text(dir + "/tokenizer_config.json",
             R"({"eos_token": "<|endoftext|>", "pad_token": null, "chat_template": "{{ messages }}"})");
  write_text(dir + "/generation_config.json", R"({"eos_token_id": [2, 7]})");
  const LoadedModel loaded = load_model(dir);
  ASSERT_TRUE(loaded.model);
  EXPECT_EQ(loaded.config.vocab_size, 96u);
  ASSERT_TRUE(loaded.tokenizer);
  EXPECT_EQ(loaded.tokenizer->encode("ab"), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(loaded.chat_template, "{{ messages }}");
  EXPECT_EQ(loaded.stop_tokens, (std::vector<int32_t>{2, 3, 7}));
  EXPECT_EQ(loaded.special_tokens, (std::map<std::string, std::string>{{"eos_token", "<|endoftext|>"}}));
  EXPECT_EQ(loaded.name, std::filesystem::path(dir).filename().string());

  // chat_template.jinja wins over tokenizer_config.json, as in transformers.
  write_text(dir + "/chat_template.jinja", "{{ bos_token }}");
  EXPECT_EQ(load_model(dir).chat_template, "{{ bos_token }}");
}

TEST(Load, WhatIsNotThereIsNotLoaded) {
  const std::string dir = testing::write_checkpoint(TinyConfig{}, "load-bare");
  LoadOptions options;
  options.weights = false;
  const LoadedModel bare = load_model(dir, options);
  EXPECT_FALSE(bare.model);
  EXPECT_FALSE(bare.tokenizer);
  EXPECT_EQ(bare.chat_template, "");
  EXPECT_TRUE(bare.stop_tokens.empty());
  EXPECT_EQ(bare.config.layers, 2u);

  // A tokenizer given by path, and a list of named templates.
  write_text(dir + "/other-tokenizer.json", kTokenizerJson);
  write_text(dir + "/tokenizer_config.json",
             R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})");
  options.tokenizer_file = dir + "/other-tokenizer.json";
  const LoadedModel given = load_model(dir, options);
  ASSERT_TRUE(given.tokenizer);
  EXPECT_EQ(given.tokenizer->vocab_size(), 4u);
  EXPECT_EQ(given.chat_template, "D");
}

TEST(Load, AGgufFileBringsItsEndTokens) {
  testing::GgufWriter g = testing::tiny_llama(DType::Q8_0);
  g.u32("tokenizer.ggml.eot_token_id", 5);
  LoadOptions options;
  options.tokenizer = false;
  const LoadedModel loaded = load_model(testing::write_gguf("load", g.bytes()), options);
  ASSERT_TRUE(loaded.model);
  EXPECT_EQ(loaded.stop_tokens, (std::vector<int32_t>{2, 5}));
  EXPECT_FALSE(loaded.tokenizer);
  EXPECT_EQ(loaded.name, "model.gguf");
}

TEST(Load, BadFilesAreRefusedByName) {
  const std::string dir = testing::write_checkpoint(TinyConfig{}, "load-bad");
  write_text(dir + "/generation_config.json", "{not json");
  expect_error([&] { load_model(dir); }, "generation_config.json' is not valid JSON");
  std::filesystem::remove(dir + "/generation_config.json");
  write_text(dir + "/tokenizer.json", "{}");
  expect_error([&] { load_model(dir); }, "tokenizer.json");
  expect_error([&] { load_model(dir + "/nowhere"); }, "is not a checkpoint directory");
}

}  // namespace
}  // namespace ditto
