// net::EventLoop's turn end: told whether the loop is idle, so that work
// which blocks briefly (an fdatasync) runs only when nothing else waits.
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

}  // namespace
}  // namespace delayq::net
