#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ditto/model.h"
#include "ditto/tokenizer.h"

namespace ditto {

struct LoadOptions {
  bool weights = true;    // false: config, tokenizer and template only (no model)
  bool tokenizer = true;  // false: skip the tokenizer (token ids only)
  std::string tokenizer_file;  // a tokenizer.json to use instead of the model's own
  // How quantised matrices multiply; default: kQuantizedDefault for a file with quantised
  // tensors (none: Exact).
  std::optional<Numerics> numerics;
  // Stage `stage` of `stages` of a pipeline (runtime/pipeline.h) loads its layers only: `split`
  // layers per stage, or (empty) the split that balances the weight bytes the stages multiply with.
  size_t stages = 1, stage = 0;
  std::vector<size_t> split;
};

// What a model file brings: the model, its tokenizer, its chat template and the tokens that
// end a turn.
struct LoadedModel {
  std::shared_ptr<const Model> model;  // null when loaded without weights
  ModelConfig config;
  std::optional<Tokenizer> tokenizer;  // none if the file has none (or none was asked for)
  std::string chat_template;           // "" if none
  // The named special tokens a chat template may use (bos_token, eos_token, unk_token,
  // pad_token), as text; from tokenizer_config.json or, in GGUF, the tokenizer's ids.
  std::map<std::string, std::string> special_tokens;
  std::vector<int32_t> stop_tokens;    // ascending: every end-of-sequence / end-of-turn id the files name
  std::string name;                    // the file or directory name, e.g. to serve the model under
};

// Loads a GGUF file (parsed once: weights, tokenizer.ggml.*, tokenizer.chat_template, end
// tokens) or a Hugging Face checkpoint directory (config.json, safetensors, tokenizer.json,
// tokenizer_config.json or chat_template.jinja for the template, generation_config.json and
// config.json for the end tokens). Throws ditto::Error naming the file on bad input; a missing
// tokenizer is no error (tokenizer stays empty), a tokenizer that cannot be read is.
LoadedModel load_model(const std::string& path, const LoadOptions& options = {});

}  // namespace ditto
