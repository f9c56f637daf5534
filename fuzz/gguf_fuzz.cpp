// libFuzzer target: arbitrary bytes as a GGUF file. parse_gguf must either throw ditto::Error or
// return a header whose every tensor lies inside the bytes (each is read here, so ASan sees any
// that does not); the model config read from the metadata likewise.
#include <cstddef>
#include <cstdint>
#include <span>

#include "ditto/error.h"
#include "model/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto bytes = std::as_bytes(std::span(data, size));
  try {
    const ditto::GgufFile gguf = ditto::parse_gguf(bytes, "fuzz input");
    unsigned sum = 0;
    for (const ditto::GgufTensorInfo& tensor : gguf.tensors) {
      const std::byte* begin = bytes.data() + gguf.data_offset + tensor.offset;
      for (size_t i = 0; i < tensor.bytes; ++i) sum += unsigned(begin[i]);
    }
    static volatile unsigned sink;
    sink = sum;
    ditto::gguf_model_config(gguf);
  } catch (const ditto::Error&) {
  }
  return 0;
}
