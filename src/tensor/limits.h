#pragma once
// The accepted range of every number that enters ditto from outside: model files (GGUF metadata,
// safetensors headers), config.json, tokenizer.json and the command line. docs/limits.md lists
// each with its reason; keep the two in step. The bounds lie far beyond any real model, and are
// chosen so that every size computed from them fits in 64 bits and no table a file asks for grows
// much larger than the file.
//
// An error names the field, the value and the range:
//   config.json: hidden_size is 1099511627776, outside the accepted range 1..1048576
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "ditto/error.h"

namespace ditto {

// Whole numbers from min to max, both included.
struct Range {
  int64_t min, max;
};

namespace limits {

inline constexpr Range kTokenId{0, (int64_t(1) << 24) - 1};  // token ids, in every file and argument
inline constexpr Range kVocabSize{1, int64_t(1) << 24};      // vocab_size: ids 0 .. vocab_size - 1
inline constexpr Range kWidth{1, int64_t(1) << 20};          // hidden_size, intermediate_size
inline constexpr Range kLayers{1, int64_t(1) << 16};         // num_hidden_layers
inline constexpr Range kHeads{1, int64_t(1) << 16};          // num_attention_heads, num_key_value_heads
inline constexpr Range kHeadDim{2, int64_t(1) << 16};        // head_dim (also even)
inline constexpr Range kPositions{1, int64_t(1) << 28};      // max_position_embeddings; what -c, -n may ask
inline constexpr double kMaxRmsNormEps = 1.0;                // rms_norm_eps in [0, 1]
// rope_theta: from 1 up no RoPE angle (position / theta^(2i/d)) exceeds its position; at most
// what a float holds.
inline constexpr double kMinRopeTheta = 1.0;
inline constexpr double kMaxRopeTheta = std::numeric_limits<float>::max();
// llama3 rope scaling's factor (from 1), low_freq_factor and high_freq_factor.
inline constexpr double kMinRopeFactor = 1.0 / (1 << 24);
inline constexpr double kMaxRopeFactor = double(1 << 24);
inline constexpr Range kExperts{1, 1 << 16};                 // num_local_experts / num_experts, num_experts_per_tok
// Gemma's query_pre_attn_scalar (scores are scaled by its inverse square root): real ones are
// 128 to 256.
inline constexpr double kMinQueryPreAttnScalar = 1.0;
inline constexpr double kMaxQueryPreAttnScalar = double(int64_t(1) << 24);
// A logit softcap (tanh(z / cap) * cap): positive; real ones are 30.
inline constexpr double kMinSoftcap = std::numeric_limits<float>::min();
inline constexpr double kMaxSoftcap = std::numeric_limits<float>::max();
inline constexpr uint64_t kMaxTensorElements = uint64_t(1) << 48;        // one tensor of a GGUF or safetensors file
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;      // as the safetensors format says
inline constexpr Range kThreads{1, 1024};                                // -t
inline constexpr Range kParallel{1, 4096};                               // --parallel
inline constexpr Range kRepetitions{1, 1'000'000};                       // bench -r, verify -r
inline constexpr Range kStripCount{0, 1 << 16};                          // tokenizer.json: a decoder Strip's start, stop
inline constexpr size_t kMaxSentencePieceTokenBytes = 256;              // a GGUF SentencePiece token (real ones: 48)
inline constexpr int kMaxJsonDepth = 256;                                // arrays and objects in a JSON document

}  // namespace limits

namespace detail {

inline std::string range_text(Range range) { return std::to_string(range.min) + ".." + std::to_string(range.max); }

// A JSON value for a message, cut short: a field may hold a megabyte.
inline std::string json_text(const nlohmann::json& value) {
  const std::string text = value.dump();
  return text.size() <= 40 ? text : text.substr(0, 40) + "...";
}

[[noreturn]] inline void out_of_range(std::string_view field, const std::string& value, const std::string& range) {
  throw Error(std::string(field) + " is " + value + ", outside the accepted range " + range);
}

}  // namespace detail

// A JSON document from outside (a file, an argument) whose arrays and objects nest at most
// limits::kMaxJsonDepth deep: nlohmann parses without recursion, but copying, comparing and
// printing a value recurse, and a file of a million '[' overflowed the stack. `what` names the
// document in errors: "'dir/config.json' is not valid JSON: ...".
template <typename Json = nlohmann::json>
Json parse_json(std::string_view text, const std::string& what) {
  const auto bounded = [&](int depth, typename Json::parse_event_t event, Json&) {
    const bool opens = event == Json::parse_event_t::array_start || event == Json::parse_event_t::object_start;
    if (opens && depth >= limits::kMaxJsonDepth)
      throw Error(what + " nests arrays and objects more than " + std::to_string(limits::kMaxJsonDepth) + " deep");
    return true;
  };
  try {
    return Json::parse(text, bounded);
  } catch (const nlohmann::json::exception& e) {
    throw Error(what + " is not valid JSON: " + e.what());
  }
}

// `value` if it lies in `range`; else a ditto::Error naming the field, the value and the range.
inline int64_t in_range(std::string_view field, int64_t value, Range range) {
  if (value < range.min || value > range.max) detail::out_of_range(field, std::to_string(value), detail::range_text(range));
  return value;
}
inline int64_t in_range(std::string_view field, uint64_t value, Range range) {
  if (value > uint64_t(range.max)) detail::out_of_range(field, std::to_string(value), detail::range_text(range));
  return in_range(field, int64_t(value), range);
}

// A finite `value` in [min, max]; NaN and infinities are outside every range.
inline double in_range(std::string_view field, double value, double min, double max) {
  if (!(value >= min && value <= max)) {
    char text[3][32];
    std::snprintf(text[0], sizeof text[0], "%g", value);
    std::snprintf(text[1], sizeof text[1], "%g", min);
    std::snprintf(text[2], sizeof text[2], "%g", max);
    detail::out_of_range(field, text[0], std::string(text[1]) + ".." + text[2]);
  }
  return value;
}

// A whole number of a JSON document (config.json, tokenizer.json) in `range`. A float, even 2.0,
// a string or anything else is refused: nlohmann's get<int>() would silently truncate it.
inline int64_t json_integer(const nlohmann::json& value, std::string_view field, Range range) {
  if (value.is_number_unsigned()) return in_range(field, value.get<uint64_t>(), range);
  if (value.is_number_integer()) return in_range(field, value.get<int64_t>(), range);
  throw Error(std::string(field) + " is " + detail::json_text(value) + ", not a whole number in " + detail::range_text(range));
}

// A number of a JSON document (an integer or a float) in [min, max].
inline double json_number(const nlohmann::json& value, std::string_view field, double min, double max) {
  if (!value.is_number()) throw Error(std::string(field) + " is " + detail::json_text(value) + ", not a number");
  return in_range(field, value.get<double>(), min, max);
}

}  // namespace ditto
