// Stop strings in streamed text: found across pieces, never shown, nor anything after them.
#include <gtest/gtest.h>

#include "chat/stop_strings.h"
#include "ditto/error.h"

namespace ditto {
namespace {

// Pushes the pieces and returns everything shown, with finish().
std::string shown(StopStrings& stops, const std::vector<std::string>& pieces) {
  std::string text;
  for (const std::string& piece : pieces) text += stops.push(piece);
  return text + stops.finish();
}

TEST(StopStrings, AStopSplitAcrossPiecesIsFoundAndNotShown) {
  StopStrings stops({"<end>"});
  EXPECT_EQ(stops.push("Hello <e"), "Hello ");  // "<e" might begin the stop: held back
  EXPECT_FALSE(stops.stopped());
  EXPECT_EQ(stops.push("n"), "");
  EXPECT_EQ(stops.push("d> and more"), "");
  EXPECT_TRUE(stops.stopped());
  EXPECT_EQ(stops.push("after"), "");
  EXPECT_EQ(stops.finish(), "");
}

TEST(StopStrings, HeldTextThatIsNotAStopComesOutLater) {
  StopStrings stops({"<end>"});
  EXPECT_EQ(stops.push("a <e"), "a ");
  EXPECT_EQ(stops.push("x"), "<ex");
  EXPECT_EQ(stops.push("<"), "");
  EXPECT_EQ(stops.finish(), "<");  // the generation ended: what was held is shown
}

TEST(StopStrings, AStopStringThatIsNotUtf8IsRefused) {
  // "\xc3" alone would match inside "é" and cut the text in the middle of the character.
  try {
    StopStrings stops({"ok", "\xc3"});
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "stop string 2 is not valid UTF-8 (at byte 0)");
  }
  StopStrings stops({"", "\u00e9"});  // an empty one is no stop
  EXPECT_EQ(shown(stops, {"caf", "\u00e9!"}), "caf");
}

TEST(StopStrings, TheEarliestOfSeveralStopsWins) {
  StopStrings stops({"world", "lo w", "xyz"});
  EXPECT_EQ(shown(stops, {"hel", "lo", " wor", "ld"}), "hel");
  EXPECT_TRUE(stops.stopped());
}

TEST(StopStrings, AStopInsideOnePieceCutsThatPiece) {
  StopStrings stops({"\n\n"});
  EXPECT_EQ(shown(stops, {"one\n", "two\n\nthree"}), "one\ntwo");
}

TEST(StopStrings, OverlappingPrefixesAreHeldTheLongestWay) {
  // "aab" ends with "a" and with "aa": both could begin "aaa!".
  StopStrings stops({"aaa!"});
  EXPECT_EQ(stops.push("xaa"), "x");
  EXPECT_EQ(stops.push("a"), "");
  EXPECT_EQ(stops.push("a!"), "a");  // "xaaaa!": the stop starts at the second a
  EXPECT_TRUE(stops.stopped());
  EXPECT_EQ(stops.finish(), "");
}

TEST(StopStrings, MultiByteCharactersAreNeverCut) {
  StopStrings stops({"é!"});
  EXPECT_EQ(stops.push("caf"), "caf");
  EXPECT_EQ(stops.push("é"), "");  // whole, and held
  EXPECT_EQ(stops.push("?"), "é?");
  EXPECT_EQ(shown(stops, {"ü", "é", "!"}), "ü");
}

TEST(StopStrings, NoStopsOrEmptyOnesShowEverything) {
  StopStrings none({});
  EXPECT_EQ(shown(none, {"a", "b"}), "ab");
  StopStrings empty({""});
  EXPECT_EQ(shown(empty, {"a", "b"}), "ab");
  EXPECT_FALSE(empty.stopped());
}

}  // namespace
}  // namespace ditto
