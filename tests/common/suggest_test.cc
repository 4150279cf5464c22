#include "common/suggest.h"

#include <gtest/gtest.h>

namespace delayq {
namespace {

TEST(EditDistance, CountsInsertionsDeletionsSubstitutionsAndSwaps) {
  EXPECT_EQ(EditDistance("", ""), 0u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("abc", ""), 3u);
  EXPECT_EQ(EditDistance("reserve", "reserve"), 0u);
  EXPECT_EQ(EditDistance("reserv", "reserve"), 1u);  // insertion
  EXPECT_EQ(EditDistance("finishh", "finish"), 1u);  // deletion
  EXPECT_EQ(EditDistance("--htp-port", "--http-port"), 1u);
  EXPECT_EQ(EditDistance("tuoch", "touch"), 1u);  // a swap is one edit
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("abc", "xyz"), 3u);
}

TEST(Nearest, SuggestsTheClosestCandidate) {
  std::vector<std::string> commands = {"add", "reserve", "finish", "release", "resume", "ping"};
  EXPECT_EQ(Nearest("reserv", commands), "reserve");
  EXPECT_EQ(Nearest("relase", commands), "release");
  EXPECT_EQ(Nearest("fnish", commands), "finish");
  EXPECT_EQ(Nearest("pign", commands), "ping");
  EXPECT_EQ(Nearest("--htp-port", {"--http-host", "--http-port", "--resp-port"}), "--http-port");
}

TEST(Nearest, SuggestsNothingWhenNothingIsClose) {
  std::vector<std::string> commands = {"add", "reserve", "finish", "get"};
  EXPECT_EQ(Nearest("xyz", commands), std::nullopt);
  EXPECT_EQ(Nearest("frobnicate", commands), std::nullopt);
  EXPECT_EQ(Nearest("--verbose", {"--server", "--json"}), std::nullopt);
  EXPECT_EQ(Nearest("", commands), std::nullopt);
  EXPECT_EQ(Nearest("anything", {}), std::nullopt);
}

}  // namespace
}  // namespace delayq
