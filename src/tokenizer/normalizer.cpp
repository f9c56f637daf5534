#include "tokenizer/normalizer.h"

#include "tokenizer/nfc.h"

namespace ditto {
std::string replace_all(std::string_view text, std::string_view pattern, std::string_view content) {
  std::string out;
  out.reserve(text.size());
  size_t copied_to = 0;
  for (size_t found = text.find(pattern); found != std::string_view::npos; found = text.find(pattern, copied_to)) {
    out.append(text.substr(copied_to, found - copied_to)).append(content);
    copied_to = found + pattern.size();
  }
  out.append(text.substr(copied_to));
  return out;
}

std::string Normalizer::normalize(std::string_view text) const {
  // NFC alone (Qwen, Llama 3) normalizes without a copy first.
  if (steps_.size() == 1 && steps_[0].kind == Step::Kind::Nfc) return to_nfc(text);
  std::string normalized(text);
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Step::Kind::Nfc:
        normalized = to_nfc(normalized);
        break;
      case Step::Kind::Replace:
        normalized = replace_all(normalized, step.pattern, step.content);
        break;
      case Step::Kind::Prepend:
        if (!normalized.empty()) normalized.insert(0, step.content);
        break;
    }
  }
  return normalized;
}

}  // namespace ditto
