#include "tokenizer/regex.h"

#include "ditto/error.h"

namespace ditto {

Regex::Regex(const std::string& pattern) : code_(nullptr, &pcre2_code_free) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  code_.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                            PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset,
                            nullptr));
  if (!code_) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    throw Error("regex \"" + pattern + "\": " + reinterpret_cast<const char*>(message) +
                " at offset " + std::to_string(error_offset));
  }
  const int jit_result = pcre2_jit_compile(code_.get(), PCRE2_JIT_COMPLETE);
  if (jit_result != 0) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(jit_result, message, sizeof(message));
    throw Error("regex \"" + pattern + "\": JIT compilation failed: " +
                reinterpret_cast<const char*>(message));
  }
}

Regex::MatchData Regex::make_match_data() const {
  MatchData match_data{{pcre2_match_data_create_from_pattern(code_.get(), nullptr), &pcre2_match_data_free}};
  if (!match_data.data) throw Error("out of memory for regex match data");
  return match_data;
}

bool Regex::find(std::string_view text, size_t start, MatchData& match_data, size_t& match_start,
                 size_t& match_end) const {
  // pcre2_jit_match skips the UTF-8 check, which callers have done once for the whole text.
  const int result = pcre2_jit_match(code_.get(), reinterpret_cast<PCRE2_SPTR>(text.data()),
                                     text.size(), start, 0, match_data.data.get(), nullptr);
  if (result == PCRE2_ERROR_NOMATCH) return false;
  if (result < 0) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(result, message, sizeof(message));
    throw Error(std::string("regex match failed: ") + reinterpret_cast<const char*>(message));
  }
  const PCRE2_SIZE* offsets = pcre2_get_ovector_pointer(match_data.data.get());
  match_start = offsets[0];
  match_end = offsets[1];
  return true;
}

bool Regex::matches_at(std::string_view text, size_t pos, MatchData& match_data) const {
  const int result = pcre2_match(code_.get(), reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(),
                                 pos, PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK, match_data.data.get(), nullptr);
  return result >= 0;
}

}  // namespace ditto
