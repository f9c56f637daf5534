// libFuzzer target: arbitrary bytes as a GGUF file. parse_gguf must either throw ditto::Error or
// return a header whose every tensor lies inside the bytes (each is read here, so ASan sees any
// that does not); the model config read from the metadata must keep its promises (every number
// in its range, fuzz/promises.h), and the tokenizer built from tokenizer.ggml.* must load or be
// refused with ditto::Error, and encode a text into ids that have tokens.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ditto/error.h"
#include "ditto/tokenizer.h"
#include "model/gguf.h"
#include "promises.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto bytes = std::as_bytes(std::span(data, size));
  ditto::GgufFile gguf;
  try {
    gguf = ditto::parse_gguf(bytes, "fuzz input");
  } catch (const ditto::Error&) {
    return 0;
  }
  unsigned sum = 0;
  for (const ditto::GgufTensorInfo& tensor : gguf.tensors) {
    const std::byte* begin = bytes.data() + gguf.data_offset + tensor.offset;
    for (size_t i = 0; i < tensor.bytes; ++i) sum += unsigned(begin[i]);
  }
  static volatile unsigned sink;
  sink = sum;
  try {
    ditto::fuzz::check_config(ditto::gguf_model_config(gguf));
  } catch (const ditto::Error&) {
  }
  try {
    if (!gguf.has("tokenizer.ggml.model")) return 0;
    const ditto::Tokenizer tokenizer = ditto::Tokenizer::from_json(ditto::gguf_tokenizer_json(gguf));
    for (const int32_t id : tokenizer.encode("Hello world, 12345 \xc3\xa9t\xc3\xa9"))
      ditto::fuzz::check(tokenizer.id_to_token(id).has_value(), "every encoded id has a token");
  } catch (const ditto::Error&) {
  }
  return 0;
}
