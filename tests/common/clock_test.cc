// ManualClock: time moves only when the test moves it, and subscribers hear
// of every move. SystemClock: real time, never notifies.
#include "delayq/clock.h"

#include <gtest/gtest.h>

#include <memory>

namespace delayq {
namespace {

TEST(ManualClock, StartsAtGivenWallTimeAndMonotonicZero) {
  ManualClock clock(1'000);
  EXPECT_EQ(clock.NowMs(), 1'000);
  EXPECT_EQ(clock.MonotonicMs(), 0);
  EXPECT_FALSE(clock.IsRealTime());
}

TEST(ManualClock, DefaultStartIsFixed) {
  ManualClock clock;
  EXPECT_EQ(clock.NowMs(), 1'700'000'000'000);
  EXPECT_EQ(clock.MonotonicMs(), 0);
}

TEST(ManualClock, AdvanceMovesBothClocks) {
  ManualClock clock(5'000);
  clock.Advance(250);
  EXPECT_EQ(clock.NowMs(), 5'250);
  EXPECT_EQ(clock.MonotonicMs(), 250);
  clock.Advance(0);
  EXPECT_EQ(clock.NowMs(), 5'250);
  EXPECT_EQ(clock.MonotonicMs(), 250);
}

TEST(ManualClock, StepWallMovesOnlyWallClockEitherWay) {
  ManualClock clock(5'000);
  clock.StepWall(1'000);
  EXPECT_EQ(clock.NowMs(), 6'000);
  EXPECT_EQ(clock.MonotonicMs(), 0);
  clock.StepWall(-3'000);
  EXPECT_EQ(clock.NowMs(), 3'000);
  EXPECT_EQ(clock.MonotonicMs(), 0);
}

TEST(ManualClock, SubscribersHearEveryMove) {
  ManualClock clock;
  int calls = 0;
  clock.Subscribe([&calls] { ++calls; });
  clock.Advance(1);
  EXPECT_EQ(calls, 1);
  clock.StepWall(-5);
  EXPECT_EQ(calls, 2);
  clock.StepWall(5);
  EXPECT_EQ(calls, 3);
}

TEST(ManualClock, EverySubscriberIsCalled) {
  ManualClock clock;
  int a = 0, b = 0;
  int ta = clock.Subscribe([&a] { ++a; });
  int tb = clock.Subscribe([&b] { ++b; });
  EXPECT_NE(ta, tb);
  clock.Advance(10);
  EXPECT_EQ(a, 1);
  EXPECT_EQ(b, 1);
}

TEST(ManualClock, UnsubscribedCallbackIsNotCalled) {
  ManualClock clock;
  int a = 0, b = 0;
  int ta = clock.Subscribe([&a] { ++a; });
  clock.Subscribe([&b] { ++b; });
  clock.Unsubscribe(ta);
  clock.Advance(10);
  EXPECT_EQ(a, 0);
  EXPECT_EQ(b, 1);
  clock.Unsubscribe(ta);  // twice is harmless
  clock.Unsubscribe(12345);
  clock.Advance(10);
  EXPECT_EQ(a, 0);
  EXPECT_EQ(b, 2);
}

TEST(SystemClock, IsRealTimeAndSane) {
  std::shared_ptr<Clock> clock = SystemClock();
  ASSERT_NE(clock, nullptr);
  EXPECT_TRUE(clock->IsRealTime());
  EXPECT_EQ(SystemClock(), clock);
  // After 2020-01-01 and before 2200.
  EXPECT_GT(clock->NowMs(), 1'577'836'800'000);
  EXPECT_LT(clock->NowMs(), 7'258'118'400'000);
  int64_t a = clock->MonotonicMs();
  int64_t b = clock->MonotonicMs();
  EXPECT_LE(a, b);
  EXPECT_EQ(clock->Subscribe([] {}), 0);
  clock->Unsubscribe(0);
}

}  // namespace
}  // namespace delayq
