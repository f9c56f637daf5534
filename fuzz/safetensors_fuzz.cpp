// libFuzzer target: arbitrary bytes as a safetensors file. parse_safetensors must either throw
// ditto::Error or return tensors that lie inside the bytes, each as large as its shape and dtype
// say (each is read here, so that ASan sees one that does not).
#include <cstddef>
#include <cstdint>
#include <span>

#include "ditto/error.h"
#include "model/tensor_store.h"
#include "promises.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto bytes = std::as_bytes(std::span(data, size));
  try {
    unsigned sum = 0;
    for (const auto& [name, tensor] : ditto::parse_safetensors(bytes, "fuzz input")) {
      const auto* begin = static_cast<const std::byte*>(tensor.data);
      ditto::fuzz::check(begin >= bytes.data() && tensor.bytes <= size_t(bytes.data() + size - begin), "tensor inside the file");
      size_t elements = 1;
      for (const size_t d : tensor.shape) elements *= d;
      ditto::fuzz::check(tensor.bytes == elements * ditto::dtype_size(tensor.dtype), "tensor bytes match shape and dtype");
      for (size_t i = 0; i < tensor.bytes; ++i) sum += unsigned(begin[i]);
    }
    static volatile unsigned sink;
    sink = sum;
  } catch (const ditto::Error&) {
  }
  return 0;
}
