#include "tokenizer/utf8.h"

#include <gtest/gtest.h>

namespace ditto::utf8 {
namespace {

std::string lossy(std::string_view bytes) {
  std::string out;
  append_lossy(bytes, out);
  return out;
}

const std::string kReplacement = "\xEF\xBF\xBD";

TEST(Utf8, ValidTextIsCopied) {
  const std::string text = "a\xC3\xA9\xE6\x97\xA5\xF0\x9F\x91\x8D";  // a é 日 👍
  EXPECT_EQ(lossy(text), text);
  EXPECT_EQ(find_invalid(text), std::string::npos);
  EXPECT_EQ(complete_prefix_length(text), text.size());
}

// One U+FFFD for each maximal subpart, as Rust's String::from_utf8_lossy (used by tokenizers).
TEST(Utf8, InvalidBytesBecomeOneReplacementPerMaximalSubpart) {
  const std::string r = kReplacement;
  EXPECT_EQ(lossy("\xFF"), r);
  EXPECT_EQ(lossy("a\x80" "b"), "a" + r + "b");
  EXPECT_EQ(lossy("\xC0\xAF"), r + r);              // overlong lead bytes are never valid
  EXPECT_EQ(lossy("\xE0\x80\x80"), r + r + r);      // E0 needs A0..BF next
  EXPECT_EQ(lossy("\xED\xA0\x80"), r + r + r);      // a surrogate
  EXPECT_EQ(lossy("\xF4\x90\x80\x80"), r + r + r + r);  // beyond U+10FFFF
  EXPECT_EQ(lossy("\xF0\x9F\x91" "a"), r + "a");    // a cut 4-byte character is one subpart
  EXPECT_EQ(lossy("\xE6\x97"), r);                  // cut at the end
  EXPECT_EQ(lossy("\xF0\x9F\xF0\x9F\x91\x8D"), r + "\xF0\x9F\x91\x8D");
}

TEST(Utf8, FindInvalidGivesTheOffset) {
  EXPECT_EQ(find_invalid("abc\xC3"), 3u);
  EXPECT_EQ(find_invalid("ab\xC3\xA9\xFF"), 4u);
  EXPECT_EQ(find_invalid("\xED\xA0\x80"), 0u);
}

TEST(Utf8, CompletePrefixHoldsBackOnlyAnUnfinishedCharacter) {
  EXPECT_EQ(complete_prefix_length("ab\xF0\x9F"), 2u);
  EXPECT_EQ(complete_prefix_length("ab\xF0\x9F\x91"), 2u);
  EXPECT_EQ(complete_prefix_length("ab\xF0\x9F\x91\x8D"), 6u);
  // Bytes that no continuation can make valid are not held back.
  EXPECT_EQ(complete_prefix_length("ab\xFF"), 3u);
  EXPECT_EQ(complete_prefix_length("ab\xF0" "a"), 4u);
  EXPECT_EQ(complete_prefix_length("\xE0\x80"), 2u);
}

}  // namespace
}  // namespace ditto::utf8
