// cli/failure.h: how a failed call becomes the line `delayq` prints and its
// exit code, here for a waiting reserve that the server's shutdown ended
// (the network client's kUnavailable "shutting down ..."), which must not
// read as "no job" (exit 3).
#include "cli/failure.h"

#include <gtest/gtest.h>

#include <string>

namespace delayq::cli {
namespace {

const Status kEnded(Code::kUnavailable, "shutting down: the server ended the wait");

TEST(Failure, AWaitEndedByTheServersShutdownIsToldApartWithExit4) {
  EXPECT_TRUE(EndedByShutdown(kEnded));
  EXPECT_EQ(ReserveFailureLine(kEnded, "127.0.0.1:7701"),
            "delayq reserve: the server is shutting down and ended the wait; run it again, or "
            "give another server (--server a,b)");
  EXPECT_EQ(ExitCodeOf(kEnded), kExitUnavailable);
}

TEST(Failure, OnlyAnUnavailableThatStartsWithShuttingDownCounts) {
  EXPECT_FALSE(EndedByShutdown(Status(Code::kInternal, "shutting down")));
  EXPECT_FALSE(EndedByShutdown(Status(Code::kUnavailable, "disk full: /data")));
  EXPECT_FALSE(EndedByShutdown(Status(Code::kUnavailable, "the server is shutting down")));
  // Any other failure of a reserve reads as every command's.
  const Status refused(Code::kUnavailable,
                       "no delayq server answered: 127.0.0.1:7701 "
                       "(Connection refused)");
  EXPECT_EQ(ReserveFailureLine(refused, "127.0.0.1:7701"),
            "delayq reserve: cannot connect to 127.0.0.1:7701: Connection refused \u2014 is "
            "`delayq serve` running?");
  EXPECT_EQ(ReserveFailureLine(Status(Code::kInvalidArgument, "topic: empty"), "h:1"),
            "delayq reserve: INVALID: topic: empty");
}

TEST(Failure, TheWorkersLastErrorTextIsRecognizedToo) {
  // WorkerStats::last_error holds Status::ToString().
  EXPECT_TRUE(EndedByShutdown(kEnded.ToString()));
  EXPECT_FALSE(EndedByShutdown(std::string("unavailable: disk full")));
  EXPECT_FALSE(EndedByShutdown(std::string("internal: shutting down")));
}

}  // namespace
}  // namespace delayq::cli
