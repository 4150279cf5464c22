// The Redis store's schedules (src/redis_store/redis_schedule.h): the record
// (put, get, list, delete; version and revision; the firing state kept by a
// put) and the firing's three steps (claim in bucket 0, the jobs in their
// buckets, clear), against a real redis-server this process starts once,
// each test on a fresh prefix, with 1 bucket and with 4 (so that a firing's
// jobs land in buckets other than the schedule's). Two RedisQueue objects on
// one prefix stand for two servers. A server that died between the steps is
// played by running the scripts of its first steps from the test
// (EVALSHA); what finishes its claim is then polled for with a deadline,
// never slept for.
#include "redis_store/redis_schedule.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "delayq/schedule.h"
#include "queue/open.h"
#include "redis/redis_harness.h"
#include "redis_store/redis_queue.h"

namespace delayq {
namespace {

using redis_harness::RedisCluster;
using redis_harness::RedisServer;
using redis_harness::WaitFor;

RedisServer* Server() {
  static std::unique_ptr<RedisServer> server = [] {
    auto s = RedisServer::Start();
    if (!s.ok()) ADD_FAILURE() << "redis-server: " << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }();
  return server.get();
}

std::string FreshPrefix() {
  static std::atomic<int> next{0};
  return "sched" + std::to_string(getpid()) + "." + std::to_string(next.fetch_add(1));
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

template <typename T, typename Start>
Result<T> Await(Start start) {
  auto p = std::make_shared<std::promise<Result<T>>>();
  auto f = p->get_future();
  start([p](Result<T> r) { p->set_value(std::move(r)); });
  if (f.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    return Internal("no answer within 10 s");
  }
  return f.get();
}

Schedule Def(std::string name) {
  Schedule s;
  s.name = std::move(name);
  s.cron = "*/5 * * * *";
  s.timezone = "Europe/Paris";
  s.topic = "reports";
  s.body = "{\"kind\":\"daily\"}";
  s.ttr_ms = 45'000;
  s.priority = 7;
  s.max_attempts = 3;
  s.catchup = Catchup::kAll;
  s.catchup_window_ms = 3'600'000;
  s.overlap = Overlap::kBufferOne;
  s.pause_on_failure = true;
  return s;
}

JobSpec FiringJob(const std::string& name, int64_t fire_at_ms, std::string body = "b") {
  JobSpec j;
  j.id = FiringId(name, fire_at_ms);
  j.topic = "reports";
  j.run_at_ms = fire_at_ms;
  j.body = std::move(body);
  j.priority = 7;
  j.ttr_ms = 45'000;
  return j;
}

class RedisSchedule : public ::testing::TestWithParam<uint32_t> {
 protected:
  void SetUp() override {
    ASSERT_NE(Server(), nullptr);
    prefix_ = FreshPrefix();
    a_ = Open();
    b_ = Open();
    ASSERT_TRUE(a_ && b_);
  }
  std::unique_ptr<RedisQueue> Open() {
    QueueOptions o;
    o.redis_url = Server()->url();
    o.redis_prefix = prefix_;
    o.redis_buckets = GetParam();
    auto q = RedisQueue::Open(o);
    EXPECT_TRUE(q.ok()) << q.status().ToString();
    return q.ok() ? std::move(q).value() : nullptr;
  }
  std::string Tag(uint32_t bucket) const {
    return "{" + prefix_ + ":" + std::to_string(bucket) + "}";
  }

  static Result<Schedule> Put(ServingQueue& q, const Schedule& s) {
    return Await<Schedule>([&](auto done) { q.PutScheduleAsync(s, std::move(done)); });
  }
  static Result<Schedule> Del(ServingQueue& q, std::string_view name) {
    return Await<Schedule>([&](auto done) { q.DeleteScheduleAsync(name, std::move(done)); });
  }
  static Result<std::vector<Schedule>> List(ServingQueue& q, std::string_view name = "") {
    return Await<std::vector<Schedule>>(
        [&](auto done) { q.SchedulesAsync(name, std::move(done)); });
  }
  static Result<ScheduleFired> Fire(ServingQueue& q, const ScheduleFiring& f) {
    return Await<ScheduleFired>([&](auto done) { q.FireScheduleAsync(f, std::move(done)); });
  }
  static ScheduleFiring Firing(const Schedule& stored, std::vector<JobSpec> jobs,
                               std::vector<std::string> withdraw = {}) {
    ScheduleFiring f;
    f.name = stored.name;
    f.revision = stored.revision;
    f.state = stored;
    f.state.firings += jobs.size();
    if (!jobs.empty()) f.state.next_fire_at_ms = *jobs.back().run_at_ms;
    f.jobs = std::move(jobs);
    f.withdraw = std::move(withdraw);
    return f;
  }

  // Step 1 alone, as a server that dies right after it: the claim of
  // `stored`'s revision, leaving a PENDING of `jobs`. Returns the reply.
  Result<redis::Reply> ClaimOnly(const Schedule& stored, const std::vector<JobSpec>& jobs) {
    Schedule state = stored;
    state.firings += jobs.size();
    auto r = Server()->Command({"EVALSHA", rq::ScriptOf(rq::Lua::kSchedules).sha1(), "1", Tag(0),
                                "claim", stored.name, std::to_string(stored.revision), "0",
                                rq::EncodeScheduleState(state), "",
                                rq::EncodeFiringPayload(jobs, {}, NowMs())});
    // Claims come in batches: the reply is one per item.
    if (!r.ok() || !r->is_array() || r->elements().size() != 1) return r;
    redis::Reply first = r->elements()[0];
    return first;
  }
  // Step 2 alone for `jobs`, each in its bucket.
  void FireOnly(const std::vector<JobSpec>& jobs) {
    for (const JobSpec& j : jobs) {
      const int64_t now = NowMs();
      auto r = Server()->Command(
          {"EVALSHA", rq::ScriptOf(rq::Lua::kScheduleFire).sha1(), "1", Tag(a_->BucketOf(j.id)),
           std::to_string(now), "a", j.id,
           rq::NewRecord(j, now, *j.run_at_ms, static_cast<uint64_t>(now) * 1024)});
      ASSERT_TRUE(r.ok() && r->is_array()) << (r.ok() ? r->ToString() : r.status().ToString());
    }
  }
  bool HasPending(const std::string& name) const {
    auto r = Server()->Command({"HEXISTS", Tag(0) + ":sched:pending", name});
    return r.ok() && r->is_integer() && r->integer() == 1;
  }
  // Jobs added since the prefix was first used, over every bucket.
  uint64_t Added() {
    auto s = a_->Stats();
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? s->added : 0;
  }

  std::string prefix_;
  std::unique_ptr<RedisQueue> a_;
  std::unique_ptr<RedisQueue> b_;
};

INSTANTIATE_TEST_SUITE_P(Buckets, RedisSchedule, ::testing::Values(1u, 4u),
                         [](const auto& info) { return "b" + std::to_string(info.param); });

// --- the record ---------------------------------------------------------------------

TEST(RedisScheduleRecord, EveryFieldSurvivesEncodingAndDecoding) {
  Schedule s = Def("billing.daily");
  s.paused = true;
  s.pause_reason = "job 'billing.daily@1000' buried";
  s.next_fire_at_ms = 1'700'000'300'000;
  s.planned_version = 4;
  s.last_fire_at_ms = 1'700'000'000'000;
  s.first_fire_at_ms = 1'600'000'000'000;
  s.gaps = {{1, 2}, {-5, 1'700'000'000'000}};
  s.buffered_fire_at_ms = 99;
  s.paused_at_ms = 1'700'000'000'001;
  s.firings = 123456789;
  s.skipped = 42;
  auto back = rq::DecodeScheduleRecord(rq::EncodeScheduleRecord(s));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->name, s.name);
  EXPECT_EQ(back->cron, s.cron);
  EXPECT_EQ(back->timezone, s.timezone);
  EXPECT_EQ(back->topic, s.topic);
  EXPECT_EQ(back->body, s.body);
  EXPECT_EQ(back->ttr_ms, s.ttr_ms);
  EXPECT_EQ(back->priority, s.priority);
  EXPECT_EQ(back->max_attempts, s.max_attempts);
  EXPECT_EQ(back->catchup, s.catchup);
  EXPECT_EQ(back->catchup_window_ms, s.catchup_window_ms);
  EXPECT_EQ(back->overlap, s.overlap);
  EXPECT_TRUE(back->paused);
  EXPECT_TRUE(back->pause_on_failure);
  EXPECT_EQ(back->pause_reason, s.pause_reason);
  EXPECT_EQ(back->next_fire_at_ms, s.next_fire_at_ms);
  EXPECT_EQ(back->planned_version, s.planned_version);
  EXPECT_EQ(back->last_fire_at_ms, s.last_fire_at_ms);
  EXPECT_EQ(back->first_fire_at_ms, s.first_fire_at_ms);
  EXPECT_EQ(back->gaps, s.gaps);
  EXPECT_EQ(back->buffered_fire_at_ms, s.buffered_fire_at_ms);
  EXPECT_EQ(back->paused_at_ms, s.paused_at_ms);
  EXPECT_EQ(back->firings, s.firings);
  EXPECT_EQ(back->skipped, s.skipped);
  EXPECT_EQ(back->revision, 0u);  // the script writes these
  EXPECT_EQ(back->created_ms, 0);
}

TEST(RedisScheduleRecord, AnotherVersionOrACutRecordIsRefusedNamingWhy) {
  std::string rec = rq::EncodeScheduleRecord(Def("a"));
  std::string v2 = rec;
  v2[0] = 2;
  auto other = rq::DecodeScheduleRecord(v2);
  EXPECT_EQ(other.status().code(), Code::kInternal);
  EXPECT_NE(other.status().message().find("version 2"), std::string::npos);
  auto cut = rq::DecodeScheduleRecord(rec.substr(0, rec.size() - 3));
  EXPECT_EQ(cut.status().code(), Code::kInternal);
  EXPECT_NE(cut.status().message().find("cut short"), std::string::npos);
}

TEST_P(RedisSchedule, PutGetListAndDelete) {
  auto put = Put(*a_, Def("nightly"));
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(put->version, 1u);
  EXPECT_EQ(put->revision, 1u);
  EXPECT_GT(put->created_ms, 0);
  EXPECT_EQ(put->updated_ms, put->created_ms);
  EXPECT_EQ(put->cron, "*/5 * * * *");
  ASSERT_TRUE(Put(*a_, Def("hourly")).ok());
  auto all = List(*b_);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].name, "hourly");  // by name
  EXPECT_EQ((*all)[1].name, "nightly");
  EXPECT_EQ((*all)[1].body, Def("x").body);
  auto one = List(*b_, "nightly");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].created_ms, put->created_ms);
  auto gone = Del(*b_, "nightly");
  ASSERT_TRUE(gone.ok()) << gone.status().ToString();
  EXPECT_EQ(gone->name, "nightly");
  EXPECT_EQ(List(*a_, "nightly").status().code(), Code::kNotFound);
  EXPECT_EQ(Del(*a_, "nightly").status().code(), Code::kNotFound);
  EXPECT_EQ(List(*a_)->size(), 1u);
  // Bad input never reaches Redis.
  EXPECT_EQ(List(*a_, "a@b").status().code(), Code::kInvalidArgument);
  Schedule bad = Def("x");
  bad.topic.clear();
  EXPECT_EQ(Put(*a_, bad).status().code(), Code::kInvalidArgument);
}

TEST_P(RedisSchedule, APutReplacesTheDefinitionAndKeepsTheFiringState) {
  auto first = Put(*a_, Def("s"));
  ASSERT_TRUE(first.ok());
  const int64_t t = NowMs() + 3'600'000;
  ScheduleFiring f = Firing(*first, {FiringJob("s", t)});
  f.state.last_fire_at_ms = t - 300'000;
  f.state.paused = true;
  f.state.pause_reason = "job 's@1' buried";
  auto fired = Fire(*a_, f);
  ASSERT_TRUE(fired.ok()) << fired.status().ToString();
  ASSERT_TRUE(fired->applied);
  EXPECT_EQ(fired->schedule.revision, 2u);
  EXPECT_EQ(fired->schedule.version, 1u);
  EXPECT_TRUE(fired->schedule.paused) << "a firing may pause";
  EXPECT_EQ(fired->schedule.pause_reason, "job 's@1' buried");

  Schedule changed = Def("s");
  changed.cron = "0 * * * *";
  changed.next_fire_at_ms = 1;  // not the caller's to set: kept
  changed.paused = true;
  auto second = Put(*b_, changed);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->version, 2u);
  EXPECT_EQ(second->revision, 3u);
  EXPECT_EQ(second->created_ms, first->created_ms);
  EXPECT_GE(second->updated_ms, first->updated_ms);
  EXPECT_EQ(second->cron, "0 * * * *");
  EXPECT_EQ(second->next_fire_at_ms, t);
  EXPECT_EQ(second->last_fire_at_ms, t - 300'000);
  EXPECT_EQ(second->firings, 1u);
  EXPECT_EQ(second->pause_reason, "job 's@1' buried") << "still paused: the reason stays";

  changed.paused = false;
  auto resumed = Put(*b_, changed);
  ASSERT_TRUE(resumed.ok());
  EXPECT_FALSE(resumed->paused);
  EXPECT_EQ(resumed->pause_reason, "") << "a put that resumes clears the reason";
  EXPECT_EQ(resumed->version, 3u);
  EXPECT_EQ(resumed->revision, 4u);
}

// --- firings ------------------------------------------------------------------------

TEST_P(RedisSchedule, AFiringAtTheStoredRevisionAddsItsJobsAndAStaleOneChangesNothing) {
  auto put = Put(*a_, Def("s"));
  ASSERT_TRUE(put.ok());
  const int64_t t = NowMs() + 3'600'000;
  std::vector<JobSpec> jobs;
  std::set<uint32_t> buckets;
  for (int i = 0; i < 8; ++i) {
    jobs.push_back(FiringJob("s", t + i * 60'000, "body" + std::to_string(i)));
    buckets.insert(a_->BucketOf(jobs.back().id));
  }
  if (GetParam() > 1) {
    ASSERT_GT(buckets.size(), 1u) << "the jobs should spread over buckets";
  }
  auto fired = Fire(*b_, Firing(*put, jobs));
  ASSERT_TRUE(fired.ok()) << fired.status().ToString();
  EXPECT_TRUE(fired->applied);
  EXPECT_EQ(fired->added, 8u);
  EXPECT_EQ(fired->schedule.revision, 2u);
  EXPECT_EQ(fired->schedule.firings, 8u);
  for (int i = 0; i < 8; ++i) {
    auto job = a_->Get(jobs[i].id);
    ASSERT_TRUE(job.ok()) << jobs[i].id << ": " << job.status().ToString();
    EXPECT_EQ(job->topic, "reports");
    EXPECT_EQ(job->state, JobState::kDelayed);
    EXPECT_EQ(job->run_at_ms, t + i * 60'000);
    EXPECT_EQ(job->body, "body" + std::to_string(i));
    EXPECT_EQ(job->priority, 7u);
  }
  EXPECT_FALSE(HasPending("s")) << "cleared after its jobs were made";

  // The same revision again: the record moved on.
  auto stale = Fire(*a_, Firing(*put, {FiringJob("s", t + 3'600'000)}));
  ASSERT_TRUE(stale.ok()) << stale.status().ToString();
  EXPECT_FALSE(stale->applied);
  EXPECT_EQ(stale->added, 0u);
  EXPECT_EQ(stale->schedule.revision, 2u);
  EXPECT_EQ(a_->Get(FiringId("s", t + 3'600'000)).status().code(), Code::kNotFound);
  EXPECT_EQ(Added(), 8u);

  ScheduleFiring none = Firing(*put, {});
  none.name = "nothing";
  EXPECT_EQ(Fire(*a_, none).status().code(), Code::kNotFound);
}

// One bucket: the jobs live with the schedules, so the claim and the jobs are
// one schedule_fire call, and T:fired (the guard of a step run again) is
// never written. Several buckets: three steps, the added ids in T:fired.
TEST_P(RedisSchedule, OneBucketClaimsAndAddsInOneStepWithoutTheFiredGuard) {
  auto put = Put(*a_, Def("s"));
  ASSERT_TRUE(put.ok());
  const int64_t t = NowMs() + 3'600'000;
  std::vector<JobSpec> jobs;
  for (int i = 0; i < 4; ++i) jobs.push_back(FiringJob("s", t + i * 60'000));
  auto fired = Fire(*b_, Firing(*put, jobs));
  ASSERT_TRUE(fired.ok()) << fired.status().ToString();
  EXPECT_TRUE(fired->applied);
  EXPECT_EQ(fired->added, 4u);
  EXPECT_FALSE(HasPending("s"));
  uint64_t guarded = 0;
  for (uint32_t bucket = 0; bucket < GetParam(); ++bucket) {
    auto n = Server()->Command({"ZCARD", Tag(bucket) + ":fired"});
    ASSERT_TRUE(n.ok() && n->is_integer()) << (n.ok() ? n->ToString() : n.status().ToString());
    guarded += static_cast<uint64_t>(n->integer());
  }
  EXPECT_EQ(guarded, GetParam() == 1 ? 0u : 4u);

  // A firing of the stale revision changes nothing either way.
  auto stale = Fire(*a_, Firing(*put, {FiringJob("s", t + 3'600'000)}));
  ASSERT_TRUE(stale.ok()) << stale.status().ToString();
  EXPECT_FALSE(stale->applied);
  EXPECT_EQ(a_->Get(FiringId("s", t + 3'600'000)).status().code(), Code::kNotFound);
  EXPECT_EQ(Added(), 4u);
}

TEST_P(RedisSchedule, AJobAlreadyThereIsLeftAsItIsAndNotCounted) {
  auto put = Put(*a_, Def("s"));
  ASSERT_TRUE(put.ok());
  const int64_t t = NowMs() + 3'600'000;
  JobSpec mine = FiringJob("s", t, "added by hand");
  mine.priority = 1;
  ASSERT_TRUE(a_->Add(mine).ok());
  auto fired = Fire(*b_, Firing(*put, {FiringJob("s", t), FiringJob("s", t + 1)}));
  ASSERT_TRUE(fired.ok()) << fired.status().ToString();
  EXPECT_TRUE(fired->applied);
  EXPECT_EQ(fired->added, 1u);
  auto job = a_->Get(mine.id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->body, "added by hand");
  EXPECT_EQ(job->priority, 1u);
}

TEST_P(RedisSchedule, AWithdrawalDeletesOnlyADelayedJob) {
  auto put = Put(*a_, Def("s"));
  ASSERT_TRUE(put.ok());
  const int64_t now = NowMs();
  JobSpec ahead = FiringJob("s", now + 3'600'000);
  JobSpec due = FiringJob("s", now - 1'000);
  ASSERT_TRUE(a_->Add(ahead).ok());
  ASSERT_TRUE(a_->Add(due).ok());
  auto fired = Fire(*b_, Firing(*put, {}, {ahead.id, due.id, FiringId("s", now + 7'200'000)}));
  ASSERT_TRUE(fired.ok()) << fired.status().ToString();
  EXPECT_TRUE(fired->applied);
  EXPECT_EQ(a_->Get(ahead.id).status().code(), Code::kNotFound) << "delayed: withdrawn";
  auto kept = a_->Get(due.id);
  ASSERT_TRUE(kept.ok()) << "ready: kept";
  EXPECT_EQ(kept->state, JobState::kReady);
}

TEST_P(RedisSchedule, AFireTimePlannedAgainIsWithdrawnThenAddedAndAResumeMayAddItAgain) {
  auto put = Put(*a_, Def("s"));
  ASSERT_TRUE(put.ok());
  const int64_t t = NowMs() + 3'600'000;
  const std::string id = FiringId("s", t);
  auto first = Fire(*a_, Firing(*put, {FiringJob("s", t, "v1")}));
  ASSERT_TRUE(first.ok() && first->applied);
  // A new definition plans the same fire time again: the old job goes, the new one comes.
  auto replanned = Fire(*b_, Firing(first->schedule, {FiringJob("s", t, "v2")}, {id}));
  ASSERT_TRUE(replanned.ok()) << replanned.status().ToString();
  ASSERT_TRUE(replanned->applied);
  EXPECT_EQ(replanned->added, 1u);
  auto job = a_->Get(id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->body, "v2");
  // Paused (withdrawn), then resumed before the fire time (added again).
  auto paused = Fire(*a_, Firing(replanned->schedule, {}, {id}));
  ASSERT_TRUE(paused.ok() && paused->applied);
  EXPECT_EQ(a_->Get(id).status().code(), Code::kNotFound);
  auto resumed = Fire(*b_, Firing(paused->schedule, {FiringJob("s", t, "v3")}));
  ASSERT_TRUE(resumed.ok() && resumed->applied);
  EXPECT_EQ(resumed->added, 1u) << "a withdrawn fire time is not 'already fired'";
  job = a_->Get(id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->body, "v3");
}

TEST_P(RedisSchedule, TwoServersFiringOneRevisionTogetherApplyOnceAndAddEachJobOnce) {
  auto put = Put(*a_, Def("s"));
  ASSERT_TRUE(put.ok());
  Schedule stored = *put;
  const int64_t t0 = NowMs() + 3'600'000;
  uint64_t added = 0;
  for (int round = 0; round < 20; ++round) {
    std::vector<JobSpec> jobs = {FiringJob("s", t0 + round * 1000),
                                 FiringJob("s", t0 + round * 1000 + 500)};
    ScheduleFiring f = Firing(stored, jobs);
    std::promise<Result<ScheduleFired>> pa, pb;
    a_->FireScheduleAsync(f, [&](Result<ScheduleFired> r) { pa.set_value(std::move(r)); });
    b_->FireScheduleAsync(f, [&](Result<ScheduleFired> r) { pb.set_value(std::move(r)); });
    auto ra = pa.get_future().get();
    auto rb = pb.get_future().get();
    ASSERT_TRUE(ra.ok() && rb.ok()) << ra.status().ToString() << " " << rb.status().ToString();
    ASSERT_NE(ra->applied, rb->applied) << "round " << round << ": exactly one applies";
    const ScheduleFired& won = ra->applied ? *ra : *rb;
    EXPECT_EQ(won.added, 2u);
    EXPECT_EQ(won.schedule.revision, stored.revision + 1);
    added += ra->added + rb->added;
    stored = won.schedule;
  }
  EXPECT_EQ(added, 40u);
  EXPECT_EQ(Added(), 40u) << "no job added twice";
  EXPECT_EQ(stored.firings, 40u);
}

// --- a server that died between the steps -------------------------------------------

TEST_P(RedisSchedule, AClaimLeftPendingIsFinishedOnceByTheNextFiringOfAnotherServer) {
  auto put = Put(*a_, Def("s"));
  ASSERT_TRUE(put.ok());
  const int64_t t = NowMs() + 3'600'000;
  std::vector<JobSpec> pending = {FiringJob("s", t), FiringJob("s", t + 1000),
                                  FiringJob("s", t + 2000)};
  auto claim = ClaimOnly(*put, pending);
  ASSERT_TRUE(claim.ok() && claim->is_array()) << (claim.ok() ? claim->ToString() : "");
  ASSERT_EQ(claim->elements()[0].str(), "applied");
  ASSERT_TRUE(HasPending("s"));
  for (const JobSpec& j : pending) EXPECT_EQ(a_->Get(j.id).status().code(), Code::kNotFound);

  // Another server fires from the revision the dead one's claim made: it
  // finishes that claim first, then makes its own.
  auto now = List(*b_, "s");
  ASSERT_TRUE(now.ok());
  ASSERT_EQ((*now)[0].revision, 2u);
  auto fired = Fire(*b_, Firing((*now)[0], {FiringJob("s", t + 3000)}));
  ASSERT_TRUE(fired.ok()) << fired.status().ToString();
  EXPECT_TRUE(fired->applied);
  EXPECT_EQ(fired->added, 1u) << "only its own jobs are counted";
  EXPECT_EQ(fired->schedule.revision, 3u);
  for (const JobSpec& j : pending) EXPECT_TRUE(a_->Get(j.id).ok()) << j.id;
  EXPECT_TRUE(a_->Get(FiringId("s", t + 3000)).ok());
  EXPECT_FALSE(HasPending("s"));
  EXPECT_EQ(Added(), 4u);
}

TEST_P(RedisSchedule, AClaimLeftPendingIsFinishedByAReadOnceItIsTwoSecondsOld) {
  auto put = Put(*a_, Def("s"));
  ASSERT_TRUE(put.ok());
  const int64_t t = NowMs() + 3'600'000;
  std::vector<JobSpec> pending = {FiringJob("s", t), FiringJob("s", t + 1000)};
  auto claim = ClaimOnly(*put, pending);
  ASSERT_TRUE(claim.ok() && claim->is_array());
  // Reads from both servers until one of them has finished it (after 2 s).
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitFor(
      [&] {
        EXPECT_TRUE(List(*a_).ok());
        EXPECT_TRUE(List(*b_, "s").ok());
        return !HasPending("s");
      },
      10'000));
  EXPECT_GE(redis_harness::ElapsedMs(start), rq::kPendingStaleMs - 100)
      << "a fresh claim is its server's to finish";
  for (const JobSpec& j : pending) EXPECT_TRUE(a_->Get(j.id).ok()) << j.id;
  EXPECT_EQ(Added(), 2u) << "each job once, however many reads met it";
}

TEST_P(RedisSchedule, AJobFinishedBeforeItsPendingRunsAgainIsNotAddedAgain) {
  auto put = Put(*a_, Def("s"));
  ASSERT_TRUE(put.ok());
  const int64_t now = NowMs();
  JobSpec job = FiringJob("s", now - 10);  // due: it can be reserved and finished at once
  auto claim = ClaimOnly(*put, {job});
  ASSERT_TRUE(claim.ok() && claim->is_array());
  FireOnly({job});  // the dead server made its jobs, but did not clear
  ASSERT_TRUE(HasPending("s"));
  ReserveRequest req;
  req.topics = {"reports"};
  auto got = a_->Reserve(req);
  ASSERT_TRUE(got.ok() && got->size() == 1) << got.status().ToString();
  ASSERT_EQ((*got)[0].id, job.id);
  ASSERT_TRUE(a_->Finish(job.id, (*got)[0].receipt).ok());

  auto stored = List(*b_, "s");
  ASSERT_TRUE(stored.ok());
  auto fired = Fire(*b_, Firing((*stored)[0], {}));
  ASSERT_TRUE(fired.ok()) << fired.status().ToString();
  EXPECT_TRUE(fired->applied);
  EXPECT_FALSE(HasPending("s"));
  EXPECT_EQ(a_->Get(job.id).status().code(), Code::kNotFound) << "finished, not added again";
  EXPECT_EQ(Added(), 1u);
}

TEST_P(RedisSchedule, DeletingASchedulesDropsItsPendingClaim) {
  auto put = Put(*a_, Def("s"));
  ASSERT_TRUE(put.ok());
  JobSpec job = FiringJob("s", NowMs() + 3'600'000);
  ASSERT_TRUE(ClaimOnly(*put, {job}).ok());
  ASSERT_TRUE(HasPending("s"));
  ASSERT_TRUE(Del(*b_, "s").ok());
  EXPECT_FALSE(HasPending("s")) << "a deleted schedule's firing is not made later";
}

// On a cluster each bucket is its own slot: the claim and the clear run on
// bucket 0's master, each job's step on its bucket's (a script that touched
// two slots would be refused).
TEST(RedisScheduleCluster, AFiringMakesItsJobsInTheirBucketsOnAnyMaster) {
  auto cluster = RedisCluster::Start(3);
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  QueueOptions o;
  o.redis_url = (*cluster)->url();
  o.redis_prefix = FreshPrefix();
  o.redis_buckets = 16;
  auto a = RedisQueue::Open(o);
  auto b = RedisQueue::Open(o);
  ASSERT_TRUE(a.ok() && b.ok());
  auto put = Await<Schedule>([&](auto done) { (*a)->PutScheduleAsync(Def("s"), std::move(done)); });
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  const int64_t t = NowMs() + 3'600'000;
  ScheduleFiring f;
  f.name = "s";
  f.revision = put->revision;
  f.state = *put;
  std::set<uint32_t> buckets;
  for (int i = 0; i < 16; ++i) {
    f.jobs.push_back(FiringJob("s", t + i));
    buckets.insert((*a)->BucketOf(f.jobs.back().id));
  }
  ASSERT_GT(buckets.size(), 3u);
  auto fired =
      Await<ScheduleFired>([&](auto done) { (*b)->FireScheduleAsync(f, std::move(done)); });
  ASSERT_TRUE(fired.ok()) << fired.status().ToString();
  EXPECT_TRUE(fired->applied);
  EXPECT_EQ(fired->added, 16u);
  for (const JobSpec& j : f.jobs) EXPECT_TRUE((*a)->Get(j.id).ok()) << j.id;
  auto listed =
      Await<std::vector<Schedule>>([&](auto done) { (*a)->SchedulesAsync("", std::move(done)); });
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].revision, 2u);
  EXPECT_EQ((*listed)[0].firings, 0u) << "the firing's state is the caller's";
}

}  // namespace
}  // namespace delayq
