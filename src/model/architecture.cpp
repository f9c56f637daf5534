#include "model/architecture.h"

namespace ditto {

namespace {

const Architecture* const* registry() {
  static const Architecture* const entries[] = {&qwen3_architecture(),     &llama_architecture(),   &qwen2_architecture(),
                                                &mistral_architecture(),   &phi3_architecture(),    &mixtral_architecture(),
                                                &qwen3_moe_architecture(), &gemma3_architecture(), nullptr};
  return entries;
}

}  // namespace

const Architecture* find_architecture(std::string_view model_type) {
  for (const Architecture* const* a = registry(); *a; ++a)
    if ((*a)->name == model_type) return *a;
  return nullptr;
}

const Architecture* find_gguf_architecture(std::string_view gguf_name, bool experts) {
  for (const Architecture* const* a = registry(); *a; ++a)
    if ((*a)->gguf_name == gguf_name && ((*a)->experts != nullptr) == experts) return *a;
  return nullptr;
}

std::string architecture_names() {
  std::string names;
  for (const Architecture* const* a = registry(); *a; ++a) names += (names.empty() ? "" : ", ") + std::string((*a)->name);
  return names;
}

}  // namespace ditto
