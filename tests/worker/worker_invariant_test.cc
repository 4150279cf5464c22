// The worker's invariant under faults (the fault tier of issue 23): many
// jobs with short TTRs on the memory store and the real clock, handlers of
// random duration (a quarter longer than half their TTR, some longer than
// the TTR, so touches matter), a FaultyQueue failing reserves, touches and
// acks at random (some after applying them: a lost reply), and Stop(drain)
// plus a new Worker a few times mid-run. It asserts:
//  - no job's handler runs while another attempt of the same job runs;
//  - every job's handler returns Success exactly once, and the store ends
//    empty: nothing lost, nothing run twice.
// The faults never outlast a TTR (at most one in a row per job and call),
// which is the condition under which the worker promises both.
//
// DELAYQ_INVARIANT_SEED=<n> picks the run (the default is fixed); a failure
// prints it.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "delayq/clock.h"
#include "delayq/queue.h"
#include "delayq/worker.h"
#include "testing/poll.h"
#include "worker/faulty_queue.h"

namespace delayq {
namespace {

constexpr int kJobs = 300;
constexpr int kRestarts = 3;
constexpr uint32_t kThreads = 16;
constexpr int64_t kDrainMs = 5000;  // longer than any handler: Stop abandons none

uint64_t Seed() {
  const char* env = std::getenv("DELAYQ_INVARIANT_SEED");
  return env != nullptr ? std::strtoull(env, nullptr, 10) : 23;
}

// The faults: a seeded draw per call, but never two in a row for the same
// job and kind of call, so a touch or an ack that fails is taken on its
// next try, well within the TTR. Reserves (no job yet) fail at random.
class Faults {
 public:
  explicit Faults(uint64_t seed) : rng_(seed) {}

  FaultyQueue::Fault Pick(FaultyQueue::Op op, std::string_view id) {
    using F = FaultyQueue::Fault;
    if (op == FaultyQueue::Op::kUnreserve) return F::kNone;
    std::lock_guard<std::mutex> l(mu_);
    const std::string key = std::to_string(static_cast<int>(op)) + ":" + std::string(id);
    if (!id.empty() && failed_last_.erase(key) != 0) return F::kNone;
    const double r = std::uniform_real_distribution<double>(0, 1)(rng_);
    const F f = r < 0.07 ? F::kFail : r < 0.12 ? F::kLoseReply : F::kNone;
    if (f != F::kNone && !id.empty()) failed_last_.insert(key);
    return f;
  }

 private:
  std::mutex mu_;
  std::mt19937_64 rng_;                // GUARDED_BY(mu_)
  std::set<std::string> failed_last_;  // GUARDED_BY(mu_)
};

// What the handlers saw, per job.
class Record {
 public:
  void Begin(const std::string& id) {
    std::lock_guard<std::mutex> l(mu_);
    if (!running_.insert(id).second) overlaps_.push_back(id);
  }
  void End(const std::string& id, bool success) {
    std::lock_guard<std::mutex> l(mu_);
    running_.erase(id);
    if (success) {
      ++successes_[id];
      ++total_successes_;
    }
  }
  int total_successes() {
    std::lock_guard<std::mutex> l(mu_);
    return total_successes_;
  }
  std::vector<std::string> overlaps() {
    std::lock_guard<std::mutex> l(mu_);
    return overlaps_;
  }
  std::map<std::string, int> successes() {
    std::lock_guard<std::mutex> l(mu_);
    return successes_;
  }

 private:
  std::mutex mu_;
  std::set<std::string> running_;         // GUARDED_BY(mu_)
  std::vector<std::string> overlaps_;     // GUARDED_BY(mu_): ids begun while running
  std::map<std::string, int> successes_;  // GUARDED_BY(mu_)
  int total_successes_ = 0;               // GUARDED_BY(mu_)
};

struct Plan {
  std::vector<uint32_t> ttr_ms;   // per job
  std::vector<int64_t> run_ms;    // per job: how long its handler works
  std::vector<bool> retry_first;  // per job: the first attempt asks for a retry
};

Plan MakePlan(uint64_t seed) {
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ULL);
  Plan p;
  for (int i = 0; i < kJobs; ++i) {
    const uint32_t ttr = std::uniform_int_distribution<uint32_t>(500, 900)(rng);
    const bool slow = std::uniform_real_distribution<double>(0, 1)(rng) < 0.25;
    const int64_t run =
        slow ? static_cast<int64_t>(ttr * std::uniform_real_distribution<double>(0.6, 1.3)(rng))
             : std::uniform_int_distribution<int64_t>(0, 30)(rng);
    p.ttr_ms.push_back(ttr);
    p.run_ms.push_back(run);
    p.retry_first.push_back(std::uniform_real_distribution<double>(0, 1)(rng) < 0.1);
  }
  return p;
}

std::unique_ptr<Worker> StartWorker(Queue& q, const Plan& plan, Record& record) {
  WorkerOptions o;
  o.threads = kThreads;
  o.clock = SystemClock();
  auto w = Worker::Create(q, o);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  if (!w.ok()) return nullptr;
  TopicOptions t;
  t.backoff = {0, 2.0, 0};  // a retry is due at once
  Status s = (*w)->Handle(
      "inv",
      [&plan, &record](const Delivery& d) {
        const int i = std::stoi(d.id.substr(1));
        record.Begin(d.id);
        std::this_thread::sleep_for(std::chrono::milliseconds(plan.run_ms[i]));  // the job's work
        const bool retry = plan.retry_first[i] && d.attempts == 1;
        record.End(d.id, !retry);
        return retry ? Outcome::Retry("first attempt asks for another") : Outcome::Success();
      },
      t);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE((*w)->Start().ok());
  return std::move(w).value();
}

TEST(WorkerInvariant, NoJobRunsTwiceAtOnceAndEachFinishesOnceUnderFaults) {
  const uint64_t seed = Seed();
  SCOPED_TRACE("DELAYQ_INVARIANT_SEED=" + std::to_string(seed));
  QueueOptions qo;
  qo.store = StoreKind::kMemory;
  qo.clock = SystemClock();
  auto real = OpenQueue(qo);
  ASSERT_TRUE(real.ok()) << real.status().ToString();
  FaultyQueue q(**real);
  Faults faults(seed);
  q.set_policy([&](FaultyQueue::Op op, std::string_view id) { return faults.Pick(op, id); });
  const Plan plan = MakePlan(seed);
  for (int i = 0; i < kJobs; ++i) {
    JobSpec spec;
    spec.topic = "inv";
    spec.id = "j" + std::to_string(i);
    spec.ttr_ms = plan.ttr_ms[i];
    spec.body = "work " + std::to_string(plan.run_ms[i]) + " ms";
    ASSERT_TRUE(q.Add(spec).ok());
  }
  Record record;
  auto w = StartWorker(q, plan, record);
  ASSERT_NE(w, nullptr);
  uint64_t errors = 0;
  for (int r = 1; r <= kRestarts; ++r) {
    const int at = kJobs * r / (kRestarts + 1);
    ASSERT_TRUE(PollWhileProgressing([&] { return record.total_successes() >= at; },
                                     [&] { return uint64_t(record.total_successes()); },
                                     std::chrono::seconds(10)))
        << "stalled at " << record.total_successes() << " of " << kJobs;
    w->Stop(kDrainMs);
    errors += w->Stats().errors;
    w = StartWorker(q, plan, record);
    ASSERT_NE(w, nullptr);
  }
  const bool empty = PollWhileProgressing([&] { return q.Stats().ok() && q.Stats()->jobs == 0; },
                                          [&] { return uint64_t(record.total_successes()); },
                                          std::chrono::seconds(10));
  w->Stop(kDrainMs);
  errors += w->Stats().errors;
  EXPECT_TRUE(empty) << q.Stats()->jobs << " jobs left";
  EXPECT_GT(q.faults.load(), 0);
  EXPECT_GT(errors, 0u);  // the faults were seen
  EXPECT_EQ(record.overlaps(), std::vector<std::string>{}) << "jobs begun while running";
  const std::map<std::string, int> successes = record.successes();
  EXPECT_EQ(successes.size(), size_t{kJobs});
  for (const auto& [id, n] : successes) EXPECT_EQ(n, 1) << id << " succeeded " << n << " times";
}

}  // namespace
}  // namespace delayq
