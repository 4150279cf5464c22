// net::EventLoop: its turn end, told whether the loop is idle, so that work
// which blocks briefly (an fdatasync) runs only when nothing else waits; and
// its dispatch, which gives each registration only its own events.
#include "net/event_loop.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <vector>

#include "gtest/gtest.h"

namespace delayq::net {
namespace {

TEST(EventLoopTurnEnd, SaysIdleOnlyWhenNothingIsReady) {
  auto loop = EventLoop::Create();
  ASSERT_TRUE(loop.ok()) << loop.status().ToString();
  EventLoop* l = loop->get();
  int p[2];
  ASSERT_EQ(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
  ASSERT_EQ(write(p[1], "x", 1), 1);  // ready before the loop starts
  int reads = 0;
  ASSERT_TRUE(l->Add(p[0], EPOLLIN, [&](uint32_t) {
                 char c;
                 while (read(p[0], &c, 1) == 1) ++reads;
               }).ok());
  std::vector<bool> idle;
  l->SetTurnEnd(
      [&](bool i) {
        idle.push_back(i);
        if (i) l->Stop();
      },
      /*tell_idle=*/true);
  l->Run();
  // First: the pipe was ready, so not idle; then, the byte read, idle.
  EXPECT_EQ(idle, (std::vector<bool>{false, true}));
  EXPECT_EQ(reads, 1);
  l->Remove(p[0]);
  close(p[0]);
  close(p[1]);
}

TEST(EventLoopTurnEnd, WithoutTellIdleIsNeverIdle) {
  auto loop = EventLoop::Create();
  ASSERT_TRUE(loop.ok()) << loop.status().ToString();
  EventLoop* l = loop->get();
  std::vector<bool> idle;
  l->SetTurnEnd([&](bool i) {
    idle.push_back(i);
    if (idle.size() == 1) l->Stop();  // nothing is ready: it would sleep
  });
  l->Run();
  EXPECT_EQ(idle, (std::vector<bool>{false}));
}

// A descriptor closed by one handler and reused (by accept, here by dup2)
// within the same epoll batch: the events the batch still holds for the old
// one must not reach the new one's handler (a stale EPOLLHUP would close a
// fresh connection; a stale EPOLLIN read from it).
TEST(EventLoopDispatch, AnFdClosedAndReusedWithinABatchGetsNoneOfTheOldOnesEvents) {
  auto loop = EventLoop::Create();
  ASSERT_TRUE(loop.ok()) << loop.status().ToString();
  EventLoop* l = loop->get();
  int a[2], b[2];
  ASSERT_EQ(pipe2(a, O_NONBLOCK | O_CLOEXEC), 0);
  ASSERT_EQ(pipe2(b, O_NONBLOCK | O_CLOEXEC), 0);
  ASSERT_EQ(write(a[1], "x", 1), 1);  // both ready before the loop starts: one batch
  ASSERT_EQ(write(b[1], "x", 1), 1);
  int ends[2] = {a[0], b[0]};
  int first = -1;     // the one whose handler ran first
  int new_calls = 0;  // calls to the handler of the reused descriptor
  int fresh[2] = {-1, -1};
  auto handler = [&](int self) {
    return [&, self](uint32_t) {
      if (first >= 0) return;  // the other one: replaced already, or reached after
      first = self;
      int other = ends[0] == self ? ends[1] : ends[0];
      // As a connection's close, then an accept that gets the same number.
      l->Remove(other);
      ASSERT_EQ(pipe2(fresh, O_NONBLOCK | O_CLOEXEC), 0);
      ASSERT_EQ(dup2(fresh[0], other), other);  // closes the old one, reuses its number
      close(fresh[0]);
      fresh[0] = other;
      ASSERT_TRUE(l->Add(other, EPOLLIN, [&](uint32_t) { ++new_calls; }).ok());
      l->Stop();  // after this batch
    };
  };
  ASSERT_TRUE(l->Add(a[0], EPOLLIN, handler(a[0])).ok());
  ASSERT_TRUE(l->Add(b[0], EPOLLIN, handler(b[0])).ok());
  l->Run();
  ASSERT_GE(first, 0);
  EXPECT_EQ(new_calls, 0);  // the new pipe never became readable
  l->Remove(first);
  l->Remove(fresh[0]);
  for (int fd : {a[0], a[1], b[0], b[1], fresh[1]}) close(fd);
}

}  // namespace
}  // namespace delayq::net
