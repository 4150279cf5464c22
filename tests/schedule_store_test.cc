// Schedules on the in-process stores (src/local): the store calls of
// ServingQueue (PutScheduleAsync, DeleteScheduleAsync, SchedulesAsync,
// FireScheduleAsync) on the memory store and the embedded one, and on the
// embedded store what the log does with them — the SCHEDULE record, a
// restart brings back schedules with their firing state and forgets deleted
// ones, compaction copies live ones forward, a version-3 log is read and
// continued, and under fsync always a firing is answered only once synced.
// Real files in a temporary directory, a ManualClock.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "delayq/clock.h"
#include "delayq/schedule.h"
#include "gtest/gtest.h"
#include "local/local_queue.h"
#include "log/log_format.h"
#include "log/store_testing.h"
#include "queue/open.h"
#include "server/held_sync_file_system.h"
#include "testing/poll.h"

namespace delayq {
namespace {

using store::Segments;
using store::TempDir;

constexpr auto kDeadline = std::chrono::seconds(10);
// How long a test waits for an answer that must not come yet.
constexpr auto kQuiet = std::chrono::milliseconds(20);

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// What an async call answered (within kDeadline).
template <typename T>
Result<T> Await(const std::function<void(std::function<void(Result<T>)>)>& call) {
  auto answer = std::make_shared<std::promise<Result<T>>>();
  auto future = answer->get_future();
  call([answer](Result<T> r) { answer->set_value(std::move(r)); });
  if (future.wait_for(kDeadline) != std::future_status::ready) {
    return Internal("the call was not answered within the deadline");
  }
  return future.get();
}

Result<Schedule> Put(ServingQueue& q, const Schedule& s) {
  return Await<Schedule>([&](auto done) { q.PutScheduleAsync(s, std::move(done)); });
}
Result<Schedule> Remove(ServingQueue& q, std::string_view name) {
  return Await<Schedule>([&](auto done) { q.DeleteScheduleAsync(name, std::move(done)); });
}
Result<std::vector<Schedule>> List(ServingQueue& q, std::string_view name = "") {
  return Await<std::vector<Schedule>>([&](auto done) { q.SchedulesAsync(name, std::move(done)); });
}
Result<ScheduleFired> Fire(ServingQueue& q, const ScheduleFiring& f) {
  return Await<ScheduleFired>([&](auto done) { q.FireScheduleAsync(f, std::move(done)); });
}

Schedule MustPut(ServingQueue& q, const Schedule& s) {
  Result<Schedule> r = Put(q, s);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : Schedule{};
}
std::vector<Schedule> MustList(ServingQueue& q) {
  auto r = List(q);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<Schedule>{};
}
ScheduleFired MustFire(ServingQueue& q, const ScheduleFiring& f) {
  Result<ScheduleFired> r = Fire(q, f);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : ScheduleFired{};
}
std::vector<std::string> Names(const std::vector<Schedule>& list) {
  std::vector<std::string> out;
  for (const Schedule& s : list) out.push_back(s.name);
  return out;
}

Schedule Definition(std::string name) {
  Schedule s;
  s.name = std::move(name);
  s.cron = "*/5 * * * *";
  s.topic = "reports";
  return s;
}

// Every field set, none to its default.
Schedule Full(std::string name) {
  Schedule s = Definition(std::move(name));
  s.cron = "0 9 * * MON-FRI";
  s.timezone = "Europe/Paris";
  s.body = "{\"report\":\"daily\"}";
  s.ttr_ms = 45'000;
  s.priority = 3;
  s.max_attempts = 5;
  s.catchup = Catchup::kAll;
  s.catchup_window_ms = 3'600'000;
  s.overlap = Overlap::kBufferOne;
  s.pause_on_failure = true;
  return s;
}

// A firing state with every field set.
Schedule FiringState(int64_t base_ms) {
  Schedule st;
  st.next_fire_at_ms = base_ms + 60'000;
  st.planned_version = 1;
  st.last_fire_at_ms = base_ms;
  st.first_fire_at_ms = base_ms - 600'000;
  st.gaps = {{base_ms - 300'000, base_ms - 240'000}, {base_ms - 120'000, base_ms - 120'000}};
  st.buffered_fire_at_ms = base_ms - 60'000;
  st.paused_at_ms = base_ms - 1;
  st.pause_reason = "job \"x@1\" buried";
  st.firings = 17;
  st.skipped = 4;
  return st;
}

testing::AssertionResult SameSchedule(const Schedule& a, const Schedule& b) {
#define DELAYQ_SAME(field) \
  if (!(a.field == b.field)) return testing::AssertionFailure() << #field " differs"
  DELAYQ_SAME(name);
  DELAYQ_SAME(cron);
  DELAYQ_SAME(timezone);
  DELAYQ_SAME(topic);
  DELAYQ_SAME(body);
  DELAYQ_SAME(ttr_ms);
  DELAYQ_SAME(priority);
  DELAYQ_SAME(max_attempts);
  DELAYQ_SAME(catchup);
  DELAYQ_SAME(catchup_window_ms);
  DELAYQ_SAME(overlap);
  DELAYQ_SAME(paused);
  DELAYQ_SAME(pause_on_failure);
  DELAYQ_SAME(revision);
  DELAYQ_SAME(version);
  DELAYQ_SAME(created_ms);
  DELAYQ_SAME(updated_ms);
  DELAYQ_SAME(next_fire_at_ms);
  DELAYQ_SAME(planned_version);
  DELAYQ_SAME(last_fire_at_ms);
  DELAYQ_SAME(first_fire_at_ms);
  DELAYQ_SAME(gaps);
  DELAYQ_SAME(buffered_fire_at_ms);
  DELAYQ_SAME(paused_at_ms);
  DELAYQ_SAME(pause_reason);
  DELAYQ_SAME(firings);
  DELAYQ_SAME(skipped);
#undef DELAYQ_SAME
  return testing::AssertionSuccess();
}

// Whether a and b have the same firing state (the fields a firing writes),
// whatever their definitions and store fields.
testing::AssertionResult SameFiringState(const Schedule& a, const Schedule& b) {
  const Schedule& x = b;
  Schedule y = a;
  y.name = x.name;
  y.cron = x.cron;
  y.timezone = x.timezone;
  y.topic = x.topic;
  y.body = x.body;
  y.ttr_ms = x.ttr_ms;
  y.priority = x.priority;
  y.max_attempts = x.max_attempts;
  y.catchup = x.catchup;
  y.catchup_window_ms = x.catchup_window_ms;
  y.overlap = x.overlap;
  y.paused = x.paused;
  y.pause_on_failure = x.pause_on_failure;
  y.revision = x.revision;
  y.version = x.version;
  y.created_ms = x.created_ms;
  y.updated_ms = x.updated_ms;
  return SameSchedule(y, x);
}

JobSpec FiringJob(const std::string& schedule, int64_t fire_at_ms, std::string body = "") {
  JobSpec spec;
  spec.id = FiringId(schedule, fire_at_ms);
  spec.topic = "reports";
  spec.run_at_ms = fire_at_ms;
  spec.body = std::move(body);
  return spec;
}

ScheduleFiring Firing(const Schedule& stored, Schedule state, std::vector<JobSpec> jobs = {},
                      std::vector<std::string> withdraw = {}) {
  ScheduleFiring f;
  f.name = stored.name;
  f.revision = stored.revision;
  f.state = std::move(state);
  f.jobs = std::move(jobs);
  f.withdraw = std::move(withdraw);
  return f;
}

QueueOptions Embedded(const std::string& dir, std::shared_ptr<Clock> clock,
                      FsyncPolicy fsync = FsyncPolicy::kAlways) {
  QueueOptions o;
  o.store = StoreKind::kEmbedded;
  o.data_dir = dir;
  o.fsync = fsync;
  o.clock = std::move(clock);
  return o;
}

std::unique_ptr<ServingQueue> MustOpen(const QueueOptions& o, const OpenOptions& open = {}) {
  auto q = OpenServingQueue(o, open);
  EXPECT_TRUE(q.ok()) << q.status().ToString();
  return q.ok() ? std::move(q).value() : nullptr;
}

// --- both stores -------------------------------------------------------------------

class ScheduleStore : public testing::TestWithParam<StoreKind> {
 protected:
  void SetUp() override {
    QueueOptions o;
    o.store = GetParam();
    o.clock = clock_;
    if (GetParam() == StoreKind::kEmbedded) o = Embedded(tmp_.data(), clock_);
    q_ = MustOpen(o);
    ASSERT_NE(q_, nullptr);
  }
  ServingQueue& q() { return *q_; }
  int64_t Now() const { return clock_->NowMs(); }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  TempDir tmp_;
  std::unique_ptr<ServingQueue> q_;
};

TEST_P(ScheduleStore, PutGetListAndDelete) {
  Schedule b = MustPut(q(), Full("billing"));
  MustPut(q(), Definition("audit"));
  MustPut(q(), Definition("cleanup"));
  EXPECT_EQ(Names(MustList(q())), (std::vector<std::string>{"audit", "billing", "cleanup"}));
  auto one = List(q(), "billing");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_TRUE(SameSchedule((*one)[0], b));
  Schedule want = Full("billing");
  want.version = want.revision = 1;
  want.created_ms = want.updated_ms = Now();
  EXPECT_TRUE(SameSchedule(b, want));

  Result<Schedule> removed = Remove(q(), "billing");
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_TRUE(SameSchedule(*removed, b));
  EXPECT_EQ(Names(MustList(q())), (std::vector<std::string>{"audit", "cleanup"}));
  auto gone = List(q(), "billing");
  EXPECT_EQ(gone.status().code(), Code::kNotFound);
  EXPECT_EQ(gone.status().message(), "schedule \"billing\" not found");
  removed = Remove(q(), "billing");
  EXPECT_EQ(removed.status().code(), Code::kNotFound);
  EXPECT_EQ(removed.status().message(), "schedule \"billing\" not found");
}

TEST_P(ScheduleStore, APutBumpsVersionAndRevisionAndKeepsCreated) {
  Schedule first = MustPut(q(), Definition("app"));
  EXPECT_EQ(first.version, 1u);
  EXPECT_EQ(first.revision, 1u);
  EXPECT_EQ(first.created_ms, Now());
  EXPECT_EQ(first.updated_ms, Now());
  clock_->Advance(1'500);
  Schedule second = MustPut(q(), Full("app"));
  EXPECT_EQ(second.version, 2u);
  EXPECT_EQ(second.revision, 2u);
  EXPECT_EQ(second.created_ms, first.created_ms);
  EXPECT_EQ(second.updated_ms, Now());
  EXPECT_EQ(second.cron, Full("app").cron);
  EXPECT_EQ(second.body, Full("app").body);
  EXPECT_EQ(second.overlap, Overlap::kBufferOne);
  // A firing moves the revision only.
  ScheduleFired fired = MustFire(q(), Firing(second, FiringState(Now())));
  ASSERT_TRUE(fired.applied);
  EXPECT_EQ(fired.schedule.revision, 3u);
  EXPECT_EQ(fired.schedule.version, 2u);
  Schedule third = MustPut(q(), Full("app"));
  EXPECT_EQ(third.version, 3u);
  EXPECT_EQ(third.revision, 4u);
}

TEST_P(ScheduleStore, APutKeepsTheFiringStateAndAResumingPutClearsThePauseReason) {
  Schedule s = MustPut(q(), Definition("app"));
  Schedule state = FiringState(Now());
  state.paused = true;
  ScheduleFired fired = MustFire(q(), Firing(s, state));
  ASSERT_TRUE(fired.applied);
  EXPECT_TRUE(fired.schedule.paused) << "a firing that pauses sets paused";
  EXPECT_TRUE(SameFiringState(fired.schedule, state));

  // Still paused: everything kept, the reason too.
  Schedule paused = Full("app");
  paused.paused = true;
  Schedule put = MustPut(q(), paused);
  EXPECT_TRUE(put.paused);
  EXPECT_TRUE(SameFiringState(put, state));
  // Resumed: the reason goes, the rest of the firing state stays (the
  // scheduler reads paused_at_ms to catch up).
  put = MustPut(q(), Full("app"));
  EXPECT_FALSE(put.paused);
  Schedule resumed = state;
  resumed.pause_reason.clear();
  EXPECT_TRUE(SameFiringState(put, resumed));
  EXPECT_EQ(put.paused_at_ms, state.paused_at_ms);
  auto stored = List(q(), "app");
  ASSERT_TRUE(stored.ok());
  EXPECT_TRUE(SameSchedule((*stored)[0], put));
}

TEST_P(ScheduleStore, AnInvalidDefinitionIsRefusedAndNothingIsStored) {
  Schedule no_topic = Definition("app");
  no_topic.topic.clear();
  Schedule at_name = Definition("app@1");
  Schedule no_cron = Definition("app");
  no_cron.cron.clear();
  Schedule window = Definition("app");
  window.catchup_window_ms = 0;
  for (const Schedule& bad : {no_topic, at_name, no_cron, window}) {
    Result<Schedule> r = Put(q(), bad);
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << bad.name;
  }
  EXPECT_TRUE(MustList(q()).empty());
  EXPECT_EQ(List(q(), "app@1").status().code(), Code::kInvalidArgument);
}

TEST_P(ScheduleStore, AFiringAppliesOnItsRevisionAndNotOnAStaleOne) {
  Schedule s = MustPut(q(), Definition("app"));
  Schedule state = FiringState(Now());
  ScheduleFired fired = MustFire(q(), Firing(s, state, {FiringJob("app", Now() + 60'000)}));
  ASSERT_TRUE(fired.applied);
  EXPECT_EQ(fired.added, 1u);
  EXPECT_EQ(fired.schedule.revision, s.revision + 1);
  EXPECT_TRUE(SameFiringState(fired.schedule, state));
  EXPECT_FALSE(fired.schedule.paused);

  // Another server's firing, made from the revision before: not applied,
  // and none of its jobs added.
  Schedule other = FiringState(Now() + 1);
  ScheduleFired stale =
      MustFire(q(), Firing(s, other, {FiringJob("app", Now() + 120'000)}, {"app@1"}));
  EXPECT_FALSE(stale.applied);
  EXPECT_EQ(stale.added, 0u);
  EXPECT_TRUE(SameSchedule(stale.schedule, fired.schedule));
  EXPECT_EQ(q().Get(FiringId("app", Now() + 120'000)).status().code(), Code::kNotFound);
  auto stored = List(q(), "app");
  ASSERT_TRUE(stored.ok());
  EXPECT_TRUE(SameSchedule((*stored)[0], fired.schedule));
}

TEST_P(ScheduleStore, FiringAScheduleThatIsGoneIsNotFound) {
  Schedule s = MustPut(q(), Definition("app"));
  ASSERT_TRUE(Remove(q(), "app").ok());
  Result<ScheduleFired> r = Fire(q(), Firing(s, FiringState(Now()), {FiringJob("app", Now())}));
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_EQ(q().Get(FiringId("app", Now())).status().code(), Code::kNotFound);
}

TEST_P(ScheduleStore, AFiringAddsItsJobsAndCountsThem) {
  Schedule s = MustPut(q(), Full("app"));
  const int64_t t1 = Now() + 60'000;
  const int64_t t2 = Now() + 120'000;
  JobSpec j1 = FiringJob("app", t1, "one");
  j1.priority = 3;
  j1.ttr_ms = 45'000;
  ScheduleFired fired = MustFire(q(), Firing(s, FiringState(Now()), {j1, FiringJob("app", t2)}));
  ASSERT_TRUE(fired.applied);
  EXPECT_EQ(fired.added, 2u);
  Result<JobInfo> job = q().Get(FiringId("app", t1));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->state, JobState::kDelayed);
  EXPECT_EQ(job->run_at_ms, t1);
  EXPECT_EQ(job->topic, "reports");
  EXPECT_EQ(job->body, "one");
  EXPECT_EQ(job->priority, 3u);
  EXPECT_EQ(job->ttr_ms, 45'000u);
  job = q().Get(FiringId("app", t2));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->run_at_ms, t2);
}

TEST_P(ScheduleStore, AJobAlreadyThereInAnyStateIsLeftAloneAndNotCounted) {
  Schedule s = MustPut(q(), Definition("app"));
  const int64_t now = Now();
  // Delayed, ready, reserved and buried jobs with firing ids.
  JobSpec delayed = FiringJob("app", now + 60'000, "mine");
  ASSERT_TRUE(q().Add(delayed).ok());
  JobSpec ready = FiringJob("app", now - 2'000, "ready");
  ASSERT_TRUE(q().Add(ready).ok());
  JobSpec reserved = FiringJob("app", now - 1'000, "reserved");
  reserved.topic = "held";
  ASSERT_TRUE(q().Add(reserved).ok());
  ReserveRequest req;
  req.topics = {"held"};
  auto got = q().Reserve(req);
  ASSERT_TRUE(got.ok() && got->size() == 1u);
  const std::string receipt = (*got)[0].receipt;
  JobSpec buried = FiringJob("app", now - 3'000, "buried");
  buried.topic = "dead";
  ASSERT_TRUE(q().Add(buried).ok());
  req.topics = {"dead"};
  auto dead = q().Reserve(req);
  ASSERT_TRUE(dead.ok() && dead->size() == 1u);
  ASSERT_TRUE(q().Bury((*dead)[0].id, (*dead)[0].receipt, "failed").ok());

  const int64_t fresh = now + 120'000;
  std::vector<JobSpec> jobs;
  for (int64_t t : {now + 60'000, now - 2'000, now - 1'000, now - 3'000, fresh}) {
    jobs.push_back(FiringJob("app", t, "from the firing"));
  }
  ScheduleFired fired = MustFire(q(), Firing(s, FiringState(now), jobs));
  ASSERT_TRUE(fired.applied);
  EXPECT_EQ(fired.added, 1u) << "only the fresh id is added";

  EXPECT_EQ(q().Get(delayed.id)->body, "mine");
  EXPECT_EQ(q().Get(delayed.id)->run_at_ms, now + 60'000);
  EXPECT_EQ(q().Get(ready.id)->state, JobState::kReady);
  EXPECT_EQ(q().Get(ready.id)->body, "ready");
  Result<JobInfo> r = q().Get(reserved.id);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state, JobState::kReserved);
  EXPECT_EQ(r->receipt, receipt);
  EXPECT_EQ(r->topic, "held");
  EXPECT_EQ(q().Get(buried.id)->state, JobState::kBuried);
  EXPECT_EQ(q().Get(FiringId("app", fresh))->body, "from the firing");
}

TEST_P(ScheduleStore, AWithdrawDeletesOnlyADelayedJob) {
  Schedule s = MustPut(q(), Definition("app"));
  const int64_t now = Now();
  JobSpec delayed = FiringJob("app", now + 60'000);
  JobSpec ready = FiringJob("app", now - 1'000);
  JobSpec reserved = FiringJob("app", now - 2'000);
  reserved.topic = "held";
  for (const JobSpec& j : {delayed, ready, reserved}) ASSERT_TRUE(q().Add(j).ok());
  ReserveRequest req;
  req.topics = {"held"};
  auto got = q().Reserve(req);
  ASSERT_TRUE(got.ok() && got->size() == 1u);

  ScheduleFired fired = MustFire(
      q(), Firing(s, FiringState(now), {}, {delayed.id, ready.id, reserved.id, "app@404"}));
  ASSERT_TRUE(fired.applied);
  EXPECT_EQ(fired.added, 0u);
  EXPECT_EQ(q().Get(delayed.id).status().code(), Code::kNotFound);
  EXPECT_EQ(q().Get(ready.id)->state, JobState::kReady);
  EXPECT_EQ(q().Get(reserved.id)->state, JobState::kReserved);
}

TEST_P(ScheduleStore, AFiringWithAJobWithoutAnIdChangesNothing) {
  Schedule s = MustPut(q(), Definition("app"));
  JobSpec no_id = FiringJob("app", Now());
  no_id.id.clear();
  JobSpec ok = FiringJob("app", Now() + 1'000);
  Result<ScheduleFired> r = Fire(q(), Firing(s, FiringState(Now()), {ok, no_id}));
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(q().Get(ok.id).status().code(), Code::kNotFound);
  auto stored = List(q(), "app");
  ASSERT_TRUE(stored.ok());
  EXPECT_TRUE(SameSchedule((*stored)[0], s));
}

INSTANTIATE_TEST_SUITE_P(Stores, ScheduleStore,
                         testing::Values(StoreKind::kMemory, StoreKind::kEmbedded),
                         [](const testing::TestParamInfo<StoreKind>& info) {
                           return std::string(info.param == StoreKind::kMemory ? "memory"
                                                                               : "embedded");
                         });

// --- the record ----------------------------------------------------------------------

TEST(ScheduleRecord, APutAndARemovalReadBackAsWritten) {
  Schedule s = Full("billing");
  s.paused = true;
  s.revision = 9;
  s.version = 4;
  s.created_ms = 1'700'000'000'000;
  s.updated_ms = 1'700'000'060'000;
  Schedule state = FiringState(1'700'000'100'000);
  s.next_fire_at_ms = state.next_fire_at_ms;
  s.planned_version = state.planned_version;
  s.last_fire_at_ms = state.last_fire_at_ms;
  s.first_fire_at_ms = state.first_fire_at_ms;
  s.gaps = state.gaps;
  s.buffered_fire_at_ms = state.buffered_fire_at_ms;
  s.paused_at_ms = state.paused_at_ms;
  s.pause_reason = state.pause_reason;
  s.firings = state.firings;
  s.skipped = state.skipped;
  std::string bytes;
  store::EncodeSchedule(s, 9, &bytes);
  EXPECT_LE(bytes.size(), store::ScheduleBound(s));
  const size_t put_size = bytes.size();
  // What compaction weighs it as: near its size.
  EXPECT_NEAR(static_cast<double>(store::ScheduleBytes(s)), static_cast<double>(put_size), 40);
  store::EncodeUnschedule("billing", 9, &bytes);
  EXPECT_LE(bytes.size() - put_size, store::UnscheduleBound(7));

  store::Record r;
  size_t size = 0;
  std::string error;
  ASSERT_EQ(store::ReadRecord(bytes, 9, &r, &size, &error), store::ReadOutcome::kRecord) << error;
  EXPECT_EQ(size, put_size);
  EXPECT_EQ(r.type, store::RecordType::kSchedule);
  EXPECT_FALSE(r.unschedule);
  ASSERT_NE(r.schedule, nullptr);
  EXPECT_TRUE(SameSchedule(*r.schedule, s));

  std::string_view rest = std::string_view(bytes).substr(size);
  ASSERT_EQ(store::ReadRecord(rest, 9, &r, &size, &error), store::ReadOutcome::kRecord) << error;
  EXPECT_EQ(r.type, store::RecordType::kSchedule);
  EXPECT_TRUE(r.unschedule);
  EXPECT_EQ(r.schedule->name, "billing");
  EXPECT_EQ(store::ReadRecord(bytes, 10, &r, &size, &error), store::ReadOutcome::kCorrupt);
}

TEST(ScheduleRecord, EveryCutIsIncompleteAndEveryFlippedBitIsCorrupt) {
  Schedule s = Full("a");
  s.gaps = {{1, 2}};
  s.pause_reason = "r";
  std::string bytes;
  store::EncodeSchedule(s, 1, &bytes);
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    store::Record r;
    size_t size = 0;
    std::string error;
    EXPECT_EQ(store::ReadRecord(std::string_view(bytes).substr(0, cut), 1, &r, &size, &error),
              store::ReadOutcome::kIncomplete)
        << cut;
  }
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = bytes;
      bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
      store::Record r;
      size_t size = 0;
      std::string error;
      EXPECT_NE(store::ReadRecord(bad, 1, &r, &size, &error), store::ReadOutcome::kRecord)
          << i << "/" << bit;
    }
  }
}

// --- the embedded store: restart, compaction, versions, replies -----------------------

TEST(EmbeddedSchedules, SchedulesAndTheirFiringStateSurviveAReopen) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  QueueOptions o = Embedded(tmp.data(), clock);
  std::vector<Schedule> before;
  const int64_t fire_at = clock->NowMs() + 60'000;
  {
    auto q = MustOpen(o);
    Schedule a = MustPut(*q, Full("a"));
    MustPut(*q, Definition("b"));
    clock->Advance(500);
    Schedule state = FiringState(clock->NowMs());
    state.paused = true;
    ScheduleFired fired = MustFire(*q, Firing(a, state, {FiringJob("a", fire_at, "job")}));
    ASSERT_TRUE(fired.applied);
    MustPut(*q, Definition("b"));  // version 2
    before = MustList(*q);
  }
  ASSERT_EQ(Names(before), (std::vector<std::string>{"a", "b"}));
  for (int restart = 0; restart < 2; ++restart) {
    auto q = MustOpen(o);
    std::vector<Schedule> after = MustList(*q);
    ASSERT_EQ(after.size(), before.size());
    for (size_t i = 0; i < after.size(); ++i) EXPECT_TRUE(SameSchedule(after[i], before[i])) << i;
    Result<JobInfo> job = q->Get(FiringId("a", fire_at));
    ASSERT_TRUE(job.ok()) << job.status().ToString();
    EXPECT_EQ(job->run_at_ms, fire_at);
  }
  // The compare-and-set goes on from the revision stored.
  auto q = MustOpen(o);
  ScheduleFired fired = MustFire(*q, Firing(before[0], FiringState(clock->NowMs())));
  EXPECT_TRUE(fired.applied);
  EXPECT_EQ(fired.schedule.revision, before[0].revision + 1);
}

TEST(EmbeddedSchedules, ADeletionSurvivesAReopen) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  QueueOptions o = Embedded(tmp.data(), clock, FsyncPolicy::kNever);
  {
    auto q = MustOpen(o);
    MustPut(*q, Definition("a"));
    MustPut(*q, Definition("b"));
    ASSERT_TRUE(Remove(*q, "a").ok());
  }
  {
    auto q = MustOpen(o);
    EXPECT_EQ(Names(MustList(*q)), std::vector<std::string>{"b"});
    // Put again after its removal: a new schedule.
    Schedule again = MustPut(*q, Definition("a"));
    EXPECT_EQ(again.version, 1u);
  }
  auto q = MustOpen(o);
  EXPECT_EQ(Names(MustList(*q)), (std::vector<std::string>{"a", "b"}));
}

// Jobs added and finished roll the log over many small segments; the first,
// which holds the schedules' records, is deleted by compaction only once the
// live ones were copied forward, and a restart finds those and not the
// deleted one.
TEST(EmbeddedSchedules, CompactionKeepsLiveSchedulesAndForgetsDeletedOnes) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  QueueOptions o = Embedded(tmp.data(), clock, FsyncPolicy::kNever);
  o.segment_bytes = 4096;
  const std::string first = tmp.data() + "/log-0000000000000001.dq";
  std::vector<Schedule> kept;
  {
    auto q = MustOpen(o);
    for (int i = 0; i < 5; ++i) MustPut(*q, Full("s" + std::to_string(i)));
    ASSERT_TRUE(Remove(*q, "s4").ok());
    Schedule s0 = MustList(*q)[0];
    ASSERT_TRUE(MustFire(*q, Firing(s0, FiringState(clock->NowMs()))).applied);
    kept = MustList(*q);
    ASSERT_EQ(kept.size(), 4u);
    const std::string body(200, 'x');
    ASSERT_TRUE(PollUntil(
        [&] {
          for (int i = 0; i < 20; ++i) {
            JobSpec spec;
            spec.topic = "t";
            spec.body = body;
            if (!q->Add(spec).ok()) return false;
            ReserveRequest r;
            r.topics = {"t"};
            auto got = q->Reserve(r);
            if (!got.ok() || got->size() != 1) return false;
            if (!q->Finish((*got)[0].id, (*got)[0].receipt).ok()) return false;
          }
          return access(first.c_str(), F_OK) != 0;
        },
        std::chrono::seconds(20), std::chrono::milliseconds(0)))
        << "the first segment is still there, of " << Segments(tmp.data()).size();
    EXPECT_GT(dynamic_cast<LocalQueue&>(*q).store_stats().log.removed_segments, 0u);
    EXPECT_EQ(MustList(*q).size(), kept.size());
  }
  auto q = MustOpen(o);
  std::vector<Schedule> after = MustList(*q);
  ASSERT_EQ(Names(after), (std::vector<std::string>{"s0", "s1", "s2", "s3"}));
  for (size_t i = 0; i < after.size(); ++i) EXPECT_TRUE(SameSchedule(after[i], kept[i])) << i;
}

// Schedules alone: once a segment holds no live schedule's latest record
// (all put again since), it goes without being read, and the log settles.
TEST(EmbeddedSchedules, SegmentsOfSupersededSchedulesAreDeleted) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  QueueOptions o = Embedded(tmp.data(), clock, FsyncPolicy::kNever);
  o.segment_bytes = 4096;
  auto q = MustOpen(o, OpenOptions{.caller_loop = true, .file_system = nullptr});
  QueueDriver* driver = q->driver();
  ASSERT_NE(driver, nullptr);
  driver->RunDue();
  std::vector<Schedule> current;
  for (int i = 0; i < 10; ++i) current.push_back(MustPut(*q, Full("s" + std::to_string(i))));
  for (int round = 0; round < 20; ++round) {
    for (Schedule& s : current) {
      ScheduleFired fired = MustFire(*q, Firing(s, FiringState(clock->NowMs() + round)));
      ASSERT_TRUE(fired.applied);
      s = fired.schedule;
      driver->Flush();
      driver->RunDue();
    }
  }
  ASSERT_TRUE(PollUntil(
      [&] {
        driver->RunDue();
        driver->Flush();
        return dynamic_cast<LocalQueue&>(*q).store_stats().log.removed_segments > 0;
      },
      std::chrono::seconds(20), std::chrono::milliseconds(0)));
  std::vector<Schedule> before = MustList(*q);
  ASSERT_EQ(before.size(), 10u);
  q.reset();
  q = MustOpen(o);
  std::vector<Schedule> after = MustList(*q);
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i) EXPECT_TRUE(SameSchedule(after[i], before[i])) << i;
}

// A data directory of a delayq before schedules (format version 3) is read,
// and its schedules go to a segment of the current version.
TEST(EmbeddedSchedules, AVersion3LogIsReadAndAScheduleGoesToANewSegment) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  QueueOptions o = Embedded(tmp.data(), clock);
  {
    auto q = MustOpen(o);
    JobSpec spec;
    spec.topic = "v";
    spec.id = "old";
    spec.body = "from version 3";
    ASSERT_TRUE(q->Add(spec).ok());
  }
  std::vector<std::string> segs = Segments(tmp.data());
  ASSERT_EQ(segs.size(), 1u);
  {
    std::fstream f(segs[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8);
    f.put(3);  // version 3: its records are the same bytes
  }
  const std::string old = ReadAll(segs[0]);
  {
    auto q = MustOpen(o);
    EXPECT_EQ(q->Get("old")->body, "from version 3");
    MustPut(*q, Definition("app"));
  }
  if (access(segs[0].c_str(), F_OK) == 0) {
    EXPECT_EQ(ReadAll(segs[0]), old) << "a version-3 segment was written to";
  }
  for (const std::string& path : Segments(tmp.data())) {
    if (path == segs[0]) continue;
    store::SegmentHeader h;
    ASSERT_TRUE(store::DecodeSegmentHeader(ReadAll(path), &h).ok()) << path;
    EXPECT_EQ(h.version, store::kFormatVersion) << path;
  }
  auto q = MustOpen(o);
  EXPECT_EQ(q->Get("old")->body, "from version 3");
  EXPECT_EQ(Names(MustList(*q)), std::vector<std::string>{"app"});
}

// Called directly (no caller_loop), a firing under fsync always returns only
// once the fdatasync that covers its jobs and its record has.
TEST(EmbeddedSchedules, UnderFsyncAlwaysAFiringIsAnsweredOnlyOnceItIsSynced) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  auto fs = std::make_shared<server::testing::HeldSyncFileSystem>();
  auto q = MustOpen(Embedded(tmp.data(), clock), OpenOptions{.file_system = fs});
  Schedule s = MustPut(*q, Definition("app"));
  fs->Hold();
  std::promise<Result<ScheduleFired>> answer;
  auto answered = answer.get_future();
  ScheduleFiring f = Firing(s, FiringState(clock->NowMs()), {FiringJob("app", clock->NowMs())});
  std::thread caller([&] {
    q->FireScheduleAsync(f, [&](Result<ScheduleFired> r) { answer.set_value(std::move(r)); });
  });
  ASSERT_TRUE(fs->WaitHeld(kDeadline)) << "no fdatasync began";
  EXPECT_EQ(answered.wait_for(kQuiet), std::future_status::timeout)
      << "answered before its fdatasync returned";
  fs->Release();
  ASSERT_EQ(answered.wait_for(kDeadline), std::future_status::ready);
  caller.join();
  Result<ScheduleFired> r = answered.get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->applied);
  EXPECT_EQ(r->added, 1u);
}

// Driven by a caller's loop (as delayq serve runs it), a firing is answered
// at once and the loop holds the reply until Released() reaches the Mark().
TEST(EmbeddedSchedules, UnderFsyncAlwaysTheLoopMayReleaseAFiringOnlyOnceSynced) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  auto fs = std::make_shared<server::testing::HeldSyncFileSystem>();
  auto q =
      MustOpen(Embedded(tmp.data(), clock), OpenOptions{.caller_loop = true, .file_system = fs});
  QueueDriver* driver = q->driver();
  ASSERT_NE(driver, nullptr);
  driver->RunDue();
  Schedule s = MustPut(*q, Definition("app"));
  driver->FlushIdle();
  fs->Hold();
  bool answered = false;
  q->FireScheduleAsync(Firing(s, FiringState(clock->NowMs()), {FiringJob("app", clock->NowMs())}),
                       [&](Result<ScheduleFired> r) {
                         EXPECT_TRUE(r.ok() && r->applied) << r.status().ToString();
                         answered = true;
                       });
  EXPECT_TRUE(answered);
  uint64_t mark = driver->Mark();
  driver->Flush();
  ASSERT_TRUE(fs->WaitHeld(kDeadline)) << "no fdatasync began";
  EXPECT_LT(driver->Released(), mark);
  fs->Release();
  EXPECT_TRUE(PollUntil([&] { return driver->Released() >= mark; }, kDeadline,
                        std::chrono::milliseconds(1)));
}

}  // namespace
}  // namespace delayq
