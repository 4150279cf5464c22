// The scheduler in-process: a real memory store on a ManualClock, driven by a
// real net::EventLoop on a thread of the test (as `delayq serve` drives it).
// Time moves only when the test moves it, so each firing's id and run_at,
// catch-up after an outage, overlap, pause and backfill are checked exactly.
#include "schedule/scheduler.h"

#include <gtest/gtest.h>

#include <future>
#include <set>
#include <thread>

#include "delayq/queue.h"
#include "net/event_loop.h"
#include "queue/open.h"
#include "server/queue_on_loop.h"
#include "testing/poll.h"

namespace delayq::schedule {
namespace {

using namespace std::chrono_literals;
constexpr auto kWait = 10s;
// 2023-11-14T22:13:20Z: the manual clock's start, a multiple of 10 s.
constexpr int64_t kT0 = 1'700'000'000'000;

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clock_ = std::make_shared<ManualClock>(kT0);
    QueueOptions qo;
    qo.store = StoreKind::kMemory;
    qo.clock = clock_;
    OpenOptions oo;
    oo.caller_loop = true;
    auto q = OpenServingQueue(qo, oo);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    queue_ = std::move(*q);
    auto loop = net::EventLoop::Create();
    ASSERT_TRUE(loop.ok());
    loop_ = std::move(*loop);
    auto on_loop = server::QueueOnLoop::Attach(loop_.get(), queue_.get());
    ASSERT_TRUE(on_loop.ok());
    on_loop_ = std::move(*on_loop);
    thread_ = std::thread([this] { loop_->Run(); });
    schedulers_.resize(1);
    StartScheduler(0);
  }

  void TearDown() override {
    OnLoop([this] { schedulers_.clear(); });
    if (thread_.joinable()) {
      loop_->Stop();
      thread_.join();
    }
    on_loop_.reset();
  }

  void StartScheduler(size_t i) {
    SchedulerOptions so;
    so.clock = clock_;
    so.check_ms = 50;
    so.plan_after_due_ms = 0;  // the firing after is planned the moment one falls due
    auto s = Scheduler::Create(loop_.get(), queue_.get(), so);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    if (schedulers_.size() <= i) schedulers_.resize(i + 1);
    OnLoop([&] {
      schedulers_[i] = std::move(*s);
      schedulers_[i]->Start();
    });
  }
  // The server going down: its scheduler is gone, the store stays.
  void StopScheduler(size_t i) {
    OnLoop([&] { schedulers_[i].reset(); });
  }

  void OnLoop(std::function<void()> fn) {
    std::promise<void> done;
    loop_->Post([&] {
      fn();
      done.set_value();
    });
    done.get_future().wait();
  }

  template <typename T, typename Call>
  Result<T> Ask(Call call) {
    std::promise<Result<T>> got;
    OnLoop([&] { call([&](Result<T> r) { got.set_value(std::move(r)); }); });
    return got.get_future().get();
  }

  Result<Schedule> Put(const Schedule& s) {
    return Ask<Schedule>([&](auto done) { schedulers_[0]->Put(s, done); });
  }
  Result<Schedule> GetSchedule(const std::string& name) {
    return Ask<Schedule>([&](auto done) { schedulers_[0]->Get(name, done); });
  }
  Result<Schedule> SetPaused(const std::string& name, bool paused) {
    return Ask<Schedule>([&](auto done) { schedulers_[0]->SetPaused(name, paused, done); });
  }
  Result<Schedule> Delete(const std::string& name) {
    return Ask<Schedule>([&](auto done) { schedulers_[0]->Delete(name, done); });
  }
  Result<BackfillResult> Backfill(const std::string& name, int64_t from, int64_t to,
                                  Overlap overlap = Overlap::kAllow) {
    return Ask<BackfillResult>(
        [&](auto done) { schedulers_[0]->Backfill(name, from, to, overlap, done); });
  }

  Result<JobInfo> Job(const std::string& id) {
    std::optional<Result<JobInfo>> r;
    OnLoop([&] { r.emplace(queue_->Get(id)); });
    return std::move(*r);
  }
  bool Exists(const std::string& id) { return Job(id).ok(); }
  std::string Id(const std::string& name, int64_t at) { return FiringId(name, at); }

  void Advance(int64_t ms) {
    OnLoop([&] { clock_->Advance(ms); });
  }

  // Waits until the stored schedule satisfies `pred`.
  bool WaitSchedule(const std::string& name, const std::function<bool(const Schedule&)>& pred) {
    return PollUntil(
        [&] {
          auto s = GetSchedule(name);
          return s.ok() && pred(*s);
        },
        kWait);
  }
  bool WaitNext(const std::string& name, int64_t next) {
    return WaitSchedule(name, [&](const Schedule& s) { return s.next_fire_at_ms == next; });
  }

  Schedule Every10s(const std::string& name = "tick") {
    Schedule s;
    s.name = name;
    s.cron = "@every 10s";
    s.topic = "ticks";
    s.body = R"({"tick":true})";
    return s;
  }

  // Reserves and finishes the job `id` (the worker did its work).
  void Finish(const std::string& id) {
    OnLoop([&] {
      auto j = queue_->Get(id);
      ASSERT_TRUE(j.ok()) << id;
      ASSERT_TRUE(queue_->Delete(id).ok());
    });
  }

  std::shared_ptr<ManualClock> clock_;
  std::unique_ptr<ServingQueue> queue_;
  std::unique_ptr<net::EventLoop> loop_;
  std::unique_ptr<server::QueueOnLoop> on_loop_;
  std::vector<std::unique_ptr<Scheduler>> schedulers_;
  std::thread thread_;
};

TEST_F(SchedulerTest, TheNextFiringIsInTheQueueAheadWithItsIdAndRunAt) {
  auto put = Put(Every10s());
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(put->next_fire_at_ms, kT0 + 10'000) << "answered once planned";
  ASSERT_TRUE(WaitNext("tick", kT0 + 10'000));
  auto job = Job(Id("tick", kT0 + 10'000));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->state, JobState::kDelayed);
  EXPECT_EQ(job->run_at_ms, kT0 + 10'000);
  EXPECT_EQ(job->topic, "ticks");
  EXPECT_EQ(job->body, R"({"tick":true})");

  // It falls due: delivered like any job; the one after is added ahead.
  Advance(10'000);
  ASSERT_TRUE(WaitNext("tick", kT0 + 20'000));
  EXPECT_EQ(Job(Id("tick", kT0 + 10'000))->state, JobState::kReady);
  EXPECT_EQ(Job(Id("tick", kT0 + 20'000))->state, JobState::kDelayed);
  auto s = GetSchedule("tick");
  EXPECT_EQ(s->last_fire_at_ms, kT0 + 10'000);
  EXPECT_EQ(s->firings, 2u);  // 10 s, and 20 s ahead
}

TEST_F(SchedulerTest, AFiringFinishedIsNeverAddedAgain) {
  ASSERT_TRUE(Put(Every10s()).ok());
  ASSERT_TRUE(WaitNext("tick", kT0 + 10'000));
  Advance(10'000);
  ASSERT_TRUE(WaitNext("tick", kT0 + 20'000));
  Finish(Id("tick", kT0 + 10'000));
  // A restart: a new scheduler reads the record and must not re-add it.
  StopScheduler(0);
  StartScheduler(0);
  ASSERT_TRUE(WaitNext("tick", kT0 + 20'000));
  Advance(1);
  EXPECT_FALSE(Exists(Id("tick", kT0 + 10'000)));
}

TEST_F(SchedulerTest, CatchupLastAddsOneJobForTheLatestMissedTime) {
  ASSERT_TRUE(Put(Every10s()).ok());
  ASSERT_TRUE(WaitNext("tick", kT0 + 10'000));
  StopScheduler(0);
  Advance(65'000);  // down through 10, 20, ... 60 s
  StartScheduler(0);
  ASSERT_TRUE(WaitNext("tick", kT0 + 70'000));
  // The firing added ahead before the outage happened (late); the missed ones
  // at 20..60 s give one job, for 60 s; 20..50 s are skipped.
  EXPECT_TRUE(Exists(Id("tick", kT0 + 10'000)));
  EXPECT_TRUE(Exists(Id("tick", kT0 + 60'000)));
  for (int64_t t : {20'000, 30'000, 40'000, 50'000}) EXPECT_FALSE(Exists(Id("tick", kT0 + t)));
  auto s = GetSchedule("tick");
  EXPECT_EQ(s->last_fire_at_ms, kT0 + 60'000);
  EXPECT_EQ(s->skipped, 4u);
}

TEST_F(SchedulerTest, CatchupNoneSkipsEveryMissedTime) {
  Schedule d = Every10s();
  d.catchup = Catchup::kNone;
  ASSERT_TRUE(Put(d).ok());
  ASSERT_TRUE(WaitNext("tick", kT0 + 10'000));
  StopScheduler(0);
  Advance(65'000);
  StartScheduler(0);
  ASSERT_TRUE(WaitNext("tick", kT0 + 70'000));
  for (int64_t t : {20'000, 30'000, 40'000, 50'000, 60'000}) {
    EXPECT_FALSE(Exists(Id("tick", kT0 + t)));
  }
  EXPECT_EQ(GetSchedule("tick")->skipped, 5u);
}

TEST_F(SchedulerTest, CatchupAllAddsEveryMissedTimeWithinTheWindow) {
  Schedule d = Every10s();
  d.catchup = Catchup::kAll;
  d.catchup_window_ms = 35'000;  // back to 30 s before the restart at 65 s
  ASSERT_TRUE(Put(d).ok());
  ASSERT_TRUE(WaitNext("tick", kT0 + 10'000));
  StopScheduler(0);
  Advance(65'000);
  StartScheduler(0);
  ASSERT_TRUE(WaitNext("tick", kT0 + 70'000));
  for (int64_t t : {40'000, 50'000, 60'000}) {
    auto j = Job(Id("tick", kT0 + t));
    ASSERT_TRUE(j.ok()) << t;
    EXPECT_EQ(j->run_at_ms, kT0 + t);
  }
  for (int64_t t : {20'000, 30'000}) EXPECT_FALSE(Exists(Id("tick", kT0 + t)));
  EXPECT_EQ(GetSchedule("tick")->skipped, 2u);
}

TEST_F(SchedulerTest, OverlapSkipDropsAFiringWhileThePreviousJobIsLive) {
  Schedule d = Every10s();
  d.overlap = Overlap::kSkip;
  ASSERT_TRUE(Put(d).ok());
  ASSERT_TRUE(WaitNext("tick", kT0 + 10'000));
  EXPECT_FALSE(Exists(Id("tick", kT0 + 10'000))) << "decided when due, so not added ahead";
  Advance(10'000);
  ASSERT_TRUE(WaitNext("tick", kT0 + 20'000));
  ASSERT_TRUE(Exists(Id("tick", kT0 + 10'000)));
  Advance(10'000);  // 10 s's job still live: 20 s is skipped
  ASSERT_TRUE(WaitNext("tick", kT0 + 30'000));
  EXPECT_FALSE(Exists(Id("tick", kT0 + 20'000)));
  EXPECT_EQ(GetSchedule("tick")->skipped, 1u);
  Finish(Id("tick", kT0 + 10'000));
  Advance(10'000);
  ASSERT_TRUE(WaitNext("tick", kT0 + 40'000));
  EXPECT_TRUE(Exists(Id("tick", kT0 + 30'000)));
}

TEST_F(SchedulerTest, OverlapBufferOneRunsTheHeldFiringOnceTheLiveJobEnds) {
  Schedule d = Every10s();
  d.overlap = Overlap::kBufferOne;
  ASSERT_TRUE(Put(d).ok());
  ASSERT_TRUE(WaitNext("tick", kT0 + 10'000));
  Advance(10'000);
  ASSERT_TRUE(WaitNext("tick", kT0 + 20'000));
  Advance(10'000);  // held
  ASSERT_TRUE(WaitSchedule("tick", [](const Schedule& s) {
    return s.buffered_fire_at_ms == kT0 + 20'000 && s.next_fire_at_ms == kT0 + 30'000;
  }));
  EXPECT_FALSE(Exists(Id("tick", kT0 + 20'000)));
  Finish(Id("tick", kT0 + 10'000));
  Advance(100);  // the check after check_ms sees it gone
  ASSERT_TRUE(PollUntil([&] { return Exists(Id("tick", kT0 + 20'000)); }, kWait));
  auto j = Job(Id("tick", kT0 + 20'000));
  EXPECT_EQ(j->run_at_ms, kT0 + 20'000);
  EXPECT_EQ(j->state, JobState::kReady);
  EXPECT_EQ(GetSchedule("tick")->buffered_fire_at_ms, 0);
}

TEST_F(SchedulerTest, PauseWithdrawsTheFiringAheadAndResumeCatchesUp) {
  ASSERT_TRUE(Put(Every10s()).ok());
  ASSERT_TRUE(WaitNext("tick", kT0 + 10'000));
  auto p = SetPaused("tick", true);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->next_fire_at_ms, 0) << "answered once the firing ahead is withdrawn";
  ASSERT_TRUE(WaitSchedule("tick", [](const Schedule& s) { return s.paused_at_ms != 0; }));
  EXPECT_FALSE(Exists(Id("tick", kT0 + 10'000)));
  EXPECT_EQ(GetSchedule("tick")->next_fire_at_ms, 0);
  Advance(35'000);  // 10, 20, 30 s pass while paused
  ASSERT_TRUE(SetPaused("tick", false).ok());
  ASSERT_TRUE(WaitNext("tick", kT0 + 40'000));
  EXPECT_TRUE(Exists(Id("tick", kT0 + 30'000)));  // catchup last
  EXPECT_FALSE(Exists(Id("tick", kT0 + 20'000)));
  EXPECT_TRUE(Exists(Id("tick", kT0 + 40'000)));
}

TEST_F(SchedulerTest, ChangingTheCronReplacesTheFiringAhead) {
  ASSERT_TRUE(Put(Every10s()).ok());
  ASSERT_TRUE(WaitNext("tick", kT0 + 10'000));
  Schedule d = Every10s();
  d.cron = "@every 1m";
  ASSERT_TRUE(Put(d).ok());
  ASSERT_TRUE(WaitNext("tick", kT0 + 40'000));  // 1700000040000 is a multiple of 60 s
  EXPECT_FALSE(Exists(Id("tick", kT0 + 10'000)));
  EXPECT_TRUE(Exists(Id("tick", kT0 + 40'000)));
}

TEST_F(SchedulerTest, DeleteWithdrawsTheFiringAhead) {
  ASSERT_TRUE(Put(Every10s()).ok());
  ASSERT_TRUE(WaitNext("tick", kT0 + 10'000));
  ASSERT_TRUE(Delete("tick").ok());
  ASSERT_TRUE(PollUntil([&] { return !Exists(Id("tick", kT0 + 10'000)); }, kWait));
  EXPECT_EQ(GetSchedule("tick").status().code(), Code::kNotFound);
  EXPECT_EQ(Delete("tick").status().code(), Code::kNotFound);
}

TEST_F(SchedulerTest, ABuriedFiringPausesTheScheduleWhenAsked) {
  Schedule d = Every10s();
  d.pause_on_failure = true;
  ASSERT_TRUE(Put(d).ok());
  ASSERT_TRUE(WaitNext("tick", kT0 + 10'000));
  Advance(10'000);
  ASSERT_TRUE(WaitNext("tick", kT0 + 20'000));
  OnLoop([&] {
    std::vector<Delivery> got;
    ReserveRequest req;
    req.topics = {"ticks"};
    auto r = queue_->Reserve(req);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->size(), 1u);
    ASSERT_TRUE(queue_->Bury((*r)[0].id, (*r)[0].receipt, "boom").ok());
  });
  Advance(1'000);
  ASSERT_TRUE(WaitSchedule("tick", [](const Schedule& s) { return s.paused; }));
  auto s = GetSchedule("tick");
  EXPECT_NE(s->pause_reason.find("tick@" + std::to_string(kT0 + 10'000)), std::string::npos)
      << s->pause_reason;
  ASSERT_TRUE(PollUntil([&] { return !Exists(Id("tick", kT0 + 20'000)); }, kWait));
  // Resumed by hand: the reason goes.
  ASSERT_TRUE(SetPaused("tick", false).ok());
  ASSERT_TRUE(WaitSchedule("tick", [](const Schedule& s) {
    return !s.paused && s.pause_reason.empty() && s.next_fire_at_ms != 0;
  }));
}

TEST_F(SchedulerTest, BackfillAddsThePastRangeOnce) {
  ASSERT_TRUE(Put(Every10s()).ok());
  ASSERT_TRUE(WaitNext("tick", kT0 + 10'000));
  auto b = Backfill("tick", kT0 - 60'000, kT0 - 1);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->in_range, 6u);
  EXPECT_EQ(b->added, 6u);
  for (int64_t t = kT0 - 60'000; t < kT0; t += 10'000) {
    auto j = Job(Id("tick", t));
    ASSERT_TRUE(j.ok()) << t;
    EXPECT_EQ(j->run_at_ms, t);
    Finish(Id("tick", t));
  }
  // Done and gone: a second backfill of the range adds nothing.
  auto again = Backfill("tick", kT0 - 60'000, kT0 - 1);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->added, 0u);
  EXPECT_EQ(again->already, 6u);
  EXPECT_EQ(Backfill("tick", kT0, kT0 + 60'000).status().code(), Code::kInvalidArgument);
}

TEST_F(SchedulerTest, TwoSchedulersOnOneStoreFireEachTimeOnce) {
  StartScheduler(1);
  ASSERT_TRUE(Put(Every10s()).ok());
  ASSERT_TRUE(WaitNext("tick", kT0 + 10'000));
  for (int i = 1; i <= 20; ++i) {
    Advance(10'000);
    ASSERT_TRUE(WaitNext("tick", kT0 + (i + 1) * 10'000LL));
    // The worker finishes each at once: an id alone would not stop a second add.
    Finish(Id("tick", kT0 + i * 10'000LL));
  }
  uint64_t firings = 0;
  OnLoop([&] {
    for (auto& s : schedulers_) firings += s->stats().firings;
  });
  EXPECT_EQ(firings, 21u);  // 10..210 s, the last one ahead
}

TEST_F(SchedulerTest, BadExpressionsAreRefusedNamingThePosition) {
  Schedule d = Every10s();
  d.cron = "0 25 * * *";
  auto r = Put(d);
  ASSERT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("hour"), std::string::npos) << r.status().message();
  d.cron = "@hourly";
  d.timezone = "Mars/Olympus";
  EXPECT_EQ(Put(d).status().code(), Code::kInvalidArgument);
  d.timezone = "";
  d.name = "a@b";
  EXPECT_EQ(Put(d).status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace delayq::schedule
