#include "engine/stop_matcher.h"

#include <gtest/gtest.h>

namespace kvs {
namespace {

TEST(StopMatcher, HoldsBackAPossibleStartAndCutsAtTheMatch) {
  StopMatcher m({"The end"});
  auto r = m.push("and they lived. Th");
  EXPECT_EQ(r.emit, "and they lived. ");  // "Th" might begin "The end"
  EXPECT_FALSE(r.stopped);
  r = m.push("e e");
  EXPECT_EQ(r.emit, "");
  r = m.push("nd!");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.emit, "");
}

TEST(StopMatcher, ReleasesHeldTextWhenItStopsMatching) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.push("ST").emit, "");
  EXPECT_EQ(m.push("AR").emit, "STAR");
  EXPECT_EQ(m.push("S").emit, "");
  EXPECT_EQ(m.finish(), "S");
}

TEST(StopMatcher, EarliestOfSeveralStopsWins) {
  StopMatcher m({"world", "lo"});
  auto r = m.push("hello world");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.emit, "hel");
}

TEST(StopMatcher, NoStopsPassesEverythingThrough) {
  StopMatcher m({});
  EXPECT_EQ(m.push("abc").emit, "abc");
  EXPECT_EQ(m.finish(), "");
}

}  // namespace
}  // namespace kvs
