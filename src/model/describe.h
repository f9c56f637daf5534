#pragma once
#include <string>
#include <utility>
#include <vector>

namespace ditto {

// What `ditto inspect` shows of a model file (GGUF) or checkpoint directory, as rows of
// (what, value): format, architecture, sizes, parameters, tensor types and counts, tokenizer
// kind, context length. Reads headers and config only. Throws ditto::Error on bad input.
std::vector<std::pair<std::string, std::string>> describe_model(const std::string& path);

}  // namespace ditto
