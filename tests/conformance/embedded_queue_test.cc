// Runs the Queue conformance suite on the embedded store (store "embedded",
// each queue in a fresh data directory): on a ManualClock; on the system
// clock with fsync always, where every change waits for its fdatasync; loop-
// driven with caller_loop, as `delayq serve` runs it; and on a ManualClock
// closing and reopening the queue before every call, so that every test also
// checks that what it relies on survives a restart.
#include <stdlib.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>

#include "conformance/local_queue_harness.h"
#include "conformance/queue_conformance.h"
#include "delayq/clock.h"
#include "delayq/queue.h"

namespace delayq::conformance {
namespace {

// Fresh data directories under one temporary directory, removed at the end.
class DataDirs {
 public:
  DataDirs() {
    const char* base = getenv("TMPDIR");
    std::string tmpl = std::string(base ? base : "/tmp") + "/delayq-conformance.XXXXXX";
    root_ = mkdtemp(tmpl.data());
  }
  ~DataDirs() { std::system(("rm -rf '" + root_ + "'").c_str()); }
  std::string Next() { return root_ + "/q" + std::to_string(next_++); }

 private:
  std::string root_;
  int next_ = 0;
};

// window_ms: QueueOptions::memory_window_ms (-1: every job in memory; 0:
// every delayed job leaves memory and comes back from the log when due).
// The far jobs' time index keeps 2 entries in memory: the rest is in runs
// on disk, read back as they come due.
// window_bytes: QueueOptions::memory_window_bytes (1: past the budget as
// soon as one job is in memory).
OptionsMaker Embedded(std::shared_ptr<DataDirs> dirs, FsyncPolicy fsync, int64_t window_ms = -1,
                      uint64_t window_bytes = 0) {
  return [dirs, fsync, window_ms, window_bytes] {
    QueueOptions o;
    o.store = StoreKind::kEmbedded;
    o.data_dir = dirs->Next();
    o.fsync = fsync;
    o.memory_window_ms = window_ms;
    o.far_index_memory_entries = 2;
    o.memory_window_bytes = window_bytes;
    return o;
  };
}

// Closes and reopens the queue on the same directory before every call
// made while no reserve is waiting and no other call is under way. The
// counters of Stats are since start, so they are carried over by hand.
class ReopeningQueue final : public Queue {
 public:
  ReopeningQueue(QueueOptions options) : options_(std::move(options)) { Reopen(); }

  Result<AddResult> Add(const JobSpec& s) override {
    return Call([&](Queue& q) { return q.Add(s); });
  }
  uint64_t ReserveAsync(const ReserveRequest& r, ReserveCallback done) override {
    return Call([&](Queue& q) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++pending_;
      }
      // Counted down after `done` returns: a callback that calls the queue
      // must not reopen it under itself.
      return q.ReserveAsync(r, [this, done = std::move(done)](Result<Deliveries> got) {
        done(std::move(got));
        std::lock_guard<std::mutex> lock(mu_);
        --pending_;
      });
    });
  }
  bool CancelReserve(uint64_t t) override {
    bool cancelled = Call([&](Queue& q) { return q.CancelReserve(t); });
    if (cancelled) {
      std::lock_guard<std::mutex> lock(mu_);
      --pending_;
    }
    return cancelled;
  }
  Status Finish(std::string_view id, std::string_view r) override {
    return Call([&](Queue& q) { return q.Finish(id, r); });
  }
  Status Delete(std::string_view id) override {
    return Call([&](Queue& q) { return q.Delete(id); });
  }
  Status Release(std::string_view id, std::string_view r, int64_t d, std::string_view e) override {
    return Call([&](Queue& q) { return q.Release(id, r, d, e); });
  }
  Status Touch(std::string_view id, std::string_view r) override {
    return Call([&](Queue& q) { return q.Touch(id, r); });
  }
  Status Unreserve(std::string_view id, std::string_view r) override {
    return Call([&](Queue& q) { return q.Unreserve(id, r); });
  }
  Status Bury(std::string_view id, std::string_view r, std::string_view why) override {
    return Call([&](Queue& q) { return q.Bury(id, r, why); });
  }
  Status Kick(std::string_view id) override {
    return Call([&](Queue& q) { return q.Kick(id); });
  }
  Result<uint64_t> KickTopic(std::string_view t, uint64_t n) override {
    return Call([&](Queue& q) { return q.KickTopic(t, n); });
  }
  Result<JobInfo> Get(std::string_view id) override {
    return Call([&](Queue& q) { return q.Get(id); });
  }
  Result<JobInfo> Peek(std::string_view t, JobState s) override {
    return Call([&](Queue& q) { return q.Peek(t, s); });
  }
  Status Pause(std::string_view t, int64_t ms) override {
    return Call([&](Queue& q) { return q.Pause(t, ms); });
  }
  Status Resume(std::string_view t) override {
    return Call([&](Queue& q) { return q.Resume(t); });
  }
  Result<std::vector<TopicInfo>> Topics() override {
    return Call([&](Queue& q) { return q.Topics(); });
  }
  Result<TopicInfo> Topic(std::string_view t) override {
    return Call([&](Queue& q) { return q.Topic(t); });
  }
  Result<QueueStats> Stats() override {
    auto s = Call([&](Queue& q) { return q.Stats(); });
    if (!s.ok()) return s;
    std::lock_guard<std::mutex> lock(mu_);
    for (auto [field, carried] : Counters(*s, carried_)) *field += carried;
    return s;
  }

 private:
  // The fields of QueueStats counted since start, paired with `from`'s.
  static std::vector<std::pair<uint64_t*, uint64_t>> Counters(QueueStats& s,
                                                              const QueueStats& from) {
    return {{&s.added, from.added},         {&s.replaced, from.replaced},
            {&s.reserves, from.reserves},   {&s.finished, from.finished},
            {&s.deleted, from.deleted},     {&s.released, from.released},
            {&s.timed_out, from.timed_out}, {&s.buried_total, from.buried_total},
            {&s.kicked, from.kicked}};
  }

  void Reopen() {  // REQUIRES: mu_, or the constructor
    if (q_) {
      auto s = q_->Stats();
      ASSERT_TRUE(s.ok());
      QueueStats now = *s;
      for (auto [field, carried] : Counters(carried_, now)) *field += carried;
      q_.reset();
    }
    auto q = OpenQueue(options_);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    q_ = std::move(q).value();
  }

  template <typename F>
  std::invoke_result_t<F, Queue&> Call(F&& fn) {
    Queue* q;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (pending_ == 0 && in_flight_ == 0) Reopen();
      ++in_flight_;
      q = q_.get();
    }
    auto result = fn(*q);
    std::lock_guard<std::mutex> lock(mu_);
    --in_flight_;
    return result;
  }

  const QueueOptions options_;
  std::mutex mu_;
  std::unique_ptr<Queue> q_;
  int pending_ = 0;     // reserve callbacks not yet finished
  int in_flight_ = 0;   // calls under way
  QueueStats carried_;  // counters of the queues closed so far
};

class ReopeningHarness final : public QueueHarness {
 public:
  explicit ReopeningHarness(int64_t window_ms = -1) : window_ms_(window_ms) {}
  std::unique_ptr<Queue> Open() override {
    QueueOptions o = Embedded(dirs_, FsyncPolicy::kNever, window_ms_)();
    o.clock = clock_;
    return std::make_unique<ReopeningQueue>(o);
  }
  void AdvanceMs(int64_t ms) override { clock_->Advance(ms); }
  int64_t NowMs() override { return clock_->NowMs(); }
  bool exact_time() const override { return true; }

 private:
  const int64_t window_ms_;
  std::shared_ptr<DataDirs> dirs_ = std::make_shared<DataDirs>();
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
};

// Contract violations of the embedded store found by the suite: none known.
const std::set<std::string> kEmbeddedKnownBugs = {};

INSTANTIATE_TEST_SUITE_P(
    Embedded, QueueConformance,
    testing::Values(
        QueueImpl{.name = "ManualClock",
                  .make =
                      [] {
                        return std::make_unique<ManualClockHarness>(
                            Embedded(std::make_shared<DataDirs>(), FsyncPolicy::kEverySec), false);
                      },
                  .known_bugs = kEmbeddedKnownBugs},
        QueueImpl{.name = "ManualClockReopenEveryCall",
                  .make = [] { return std::make_unique<ReopeningHarness>(); },
                  .known_bugs = kEmbeddedKnownBugs},
        QueueImpl{.name = "SystemClockFsyncAlways",
                  .make =
                      [] {
                        return std::make_unique<SystemClockHarness>(
                            Embedded(std::make_shared<DataDirs>(), FsyncPolicy::kAlways), false);
                      },
                  .known_bugs = kEmbeddedKnownBugs},
        QueueImpl{.name = "SystemClockCallerLoop",
                  .make =
                      [] {
                        return std::make_unique<SystemClockHarness>(
                            Embedded(std::make_shared<DataDirs>(), FsyncPolicy::kEverySec), true);
                      },
                  .known_bugs = kEmbeddedKnownBugs},
        // With a memory window: every delayed job (window 0), or those due
        // over a second ahead, live in the log only until they come near;
        // the answers must be the same.
        QueueImpl{.name = "ManualClockWindow0",
                  .make =
                      [] {
                        return std::make_unique<ManualClockHarness>(
                            Embedded(std::make_shared<DataDirs>(), FsyncPolicy::kEverySec, 0),
                            false);
                      },
                  .known_bugs = kEmbeddedKnownBugs},
        QueueImpl{.name = "ManualClockWindow1s",
                  .make =
                      [] {
                        return std::make_unique<ManualClockHarness>(
                            Embedded(std::make_shared<DataDirs>(), FsyncPolicy::kEverySec, 1000),
                            false);
                      },
                  .known_bugs = kEmbeddedKnownBugs},
        QueueImpl{.name = "ManualClockWindow1h",
                  .make =
                      [] {
                        return std::make_unique<ManualClockHarness>(
                            Embedded(std::make_shared<DataDirs>(), FsyncPolicy::kEverySec,
                                     3'600'000),
                            false);
                      },
                  .known_bugs = kEmbeddedKnownBugs},
        QueueImpl{.name = "ManualClockWindow1hByteBudget",
                  .make =
                      [] {
                        return std::make_unique<ManualClockHarness>(
                            Embedded(std::make_shared<DataDirs>(), FsyncPolicy::kEverySec,
                                     3'600'000, 1),
                            false);
                      },
                  .known_bugs = kEmbeddedKnownBugs},
        QueueImpl{.name = "ManualClockReopenEveryCallWindow0",
                  .make = [] { return std::make_unique<ReopeningHarness>(0); },
                  .known_bugs = kEmbeddedKnownBugs},
        QueueImpl{.name = "SystemClockCallerLoopWindow0",
                  .make =
                      [] {
                        return std::make_unique<SystemClockHarness>(
                            Embedded(std::make_shared<DataDirs>(), FsyncPolicy::kEverySec, 0),
                            true);
                      },
                  .known_bugs = kEmbeddedKnownBugs}),
    QueueImplName);

}  // namespace
}  // namespace delayq::conformance
