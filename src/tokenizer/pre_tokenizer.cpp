#include "tokenizer/pre_tokenizer.h"

namespace ditto {

PreTokenizer::Scratch PreTokenizer::make_scratch() const {
  // One entry per step, so that a step finds its own by index; Metaspace leaves its entry empty.
  Scratch scratch;
  for (const Step& step : steps_) {
    if (const auto* split = std::get_if<Split>(&step)) {
      scratch.push_back(split->pattern.make_match_data());
    } else {
      scratch.push_back({{nullptr, &pcre2_match_data_free}});
    }
  }
  return scratch;
}

}  // namespace ditto
