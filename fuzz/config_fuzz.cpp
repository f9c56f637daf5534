// libFuzzer target: arbitrary bytes as a config.json. parse_hf_config must either throw
// ditto::Error or return a config whose every number lies in its range (fuzz/promises.h).
#include <cstddef>
#include <cstdint>
#include <string>

#include "ditto/error.h"
#include "model/config.h"
#include "promises.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    ditto::fuzz::check_config(ditto::parse_hf_config(std::string(reinterpret_cast<const char*>(data), size)));
  } catch (const ditto::Error&) {
  }
  return 0;
}
