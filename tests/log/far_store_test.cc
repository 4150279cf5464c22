// Far-future jobs on the embedded store (QueueOptions::memory_window_ms): a
// delayed job due beyond the window keeps only a slot in memory and its
// record in the log. Real files, the real log, a ManualClock; what is
// checked is what a client sees (Queue) plus the store's far_* figures.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "delayq/clock.h"
#include "delayq/queue.h"
#include "far/index_files.h"
#include "gtest/gtest.h"
#include "local/local_queue.h"
#include "log/faulty_file_system.h"
#include "log/store_testing.h"

namespace delayq::store {
namespace {

constexpr int64_t kMinute = 60'000;
constexpr int64_t kHour = 60 * kMinute;
constexpr int64_t kDay = 24 * kHour;

uint64_t Figure(Queue& q, std::string_view name) {
  for (const auto& [n, v] : dynamic_cast<LocalQueue&>(q).Figures().fields) {
    if (n == name) return v;
  }
  ADD_FAILURE() << "no figure " << name;
  return 0;
}

// The far jobs' time index keeps 16 entries in memory: the rest goes to
// runs on disk.
QueueOptions Windowed(const std::string& dir, std::shared_ptr<Clock> clock, int64_t window_ms,
                      std::string_view fsync = "never") {
  QueueOptions o = Embedded(dir, fsync);
  o.clock = std::move(clock);
  o.memory_window_ms = window_ms;
  o.far_index_memory_entries = 16;
  return o;
}

size_t RunFiles(const std::string& dir) {
  size_t n = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) n += std::string_view(e->d_name).starts_with("run-");
    closedir(d);
  }
  return n;
}

std::string Body(int i) { return "body of job " + std::to_string(i) + std::string(80, '.'); }

// Reserves until `n` jobs came or nothing more is ready; their bodies by id.
std::map<std::string, Delivery> ReserveAll(Queue& q, const std::string& topic, size_t n) {
  std::map<std::string, Delivery> got;
  while (got.size() < n) {
    ReserveRequest r;
    r.topics = {topic};
    r.count = 100;
    auto d = q.Reserve(r);
    if (!d.ok() || d->empty()) break;
    for (Delivery& one : *d) got[one.id] = std::move(one);
  }
  return got;
}

TEST(FarFutureJobs, LeaveMemoryAndComeBackBeforeTheyAreDue) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  auto q = MustOpen(Windowed(tmp.data(), clock, kHour));
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(q->Add(Spec("t", "far" + std::to_string(i), Body(i), 2 * kHour)).ok());
  }
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(q->Add(Spec("t", "near" + std::to_string(i), Body(i), 10 * kMinute)).ok());
  }
  EXPECT_EQ(Figure(*q, "far_jobs"), 100u);
  EXPECT_GE(Figure(*q, "far_index_runs"), 6u);  // 100 entries, 16 at most in memory
  EXPECT_EQ(q->Stats()->delayed, 110u);
  EXPECT_EQ(q->Topic("t")->delayed, 110u);
  auto far = q->Get("far7");
  ASSERT_TRUE(far.ok()) << far.status().ToString();
  EXPECT_EQ(far->body, Body(7));
  EXPECT_EQ(far->state, JobState::kDelayed);
  EXPECT_EQ(far->run_at_ms, far->created_at_ms + 2 * kHour);
  // The earliest delayed job is a near one.
  EXPECT_EQ(q->Peek("t", JobState::kDelayed)->id.substr(0, 4), "near");

  // An hour and a minute on: the far jobs are in memory again, not yet due.
  clock->Advance(kHour + kMinute);
  EXPECT_TRUE(Eventually([&] { return Figure(*q, "far_jobs") == 0; }));
  EXPECT_EQ(Figure(*q, "far_loads"), 100u);
  auto near = ReserveAll(*q, "t", 10);  // the near ones, due since
  ASSERT_EQ(near.size(), 10u);
  for (const auto& [id, d] : near) ASSERT_TRUE(q->Finish(id, d.receipt).ok());
  EXPECT_EQ(q->Stats()->delayed, 100u);
  clock->Advance(kHour - kMinute - 1);
  auto early = ReserveAll(*q, "t", 1);
  EXPECT_TRUE(early.empty()) << "never early: " << early.begin()->first << " due "
                             << early.begin()->second.run_at_ms << " now " << clock->NowMs();
  clock->Advance(1);
  auto got = ReserveAll(*q, "t", 100);
  ASSERT_EQ(got.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(got["far" + std::to_string(i)].body, Body(i));
  // Runs used up are gone, files and all.
  EXPECT_EQ(Figure(*q, "far_index_runs"), 0u);
  EXPECT_EQ(RunFiles(tmp.data() + "/far"), 0u);
  EXPECT_EQ(Figure(*q, "far_index_errors"), 0u);
}

// A run of the time index that does not check out is not trusted: the index
// is made again from the far jobs' records, and every job still comes.
TEST(FarFutureJobs, ADamagedIndexRunIsRebuiltFromTheLog) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  QueueOptions o = Windowed(tmp.data(), clock, kMinute);
  // One run of 5,000, read back from its file as it comes due.
  o.far_index_memory_entries = 5000;
  auto q = MustOpen(o);
  for (int i = 0; i < 5000; ++i) {
    ASSERT_TRUE(q->Add(Spec("t", "j" + std::to_string(i), Body(i), kHour + i)).ok());
  }
  ASSERT_EQ(Figure(*q, "far_index_runs"), 1u);
  // Flip a byte in the run's second block, once it is written whole (on the
  // index's own thread).
  std::string path;
  const uint64_t size = far::kRunHeaderBytes + (4096 * 24 + 8) + (5000 - 4096) * 24 + 8;
  ASSERT_TRUE(Eventually([&] {
    if (DIR* d = opendir((tmp.data() + "/far").c_str())) {
      while (dirent* e = readdir(d)) {
        if (std::string_view(e->d_name).starts_with("run-")) {
          path = tmp.data() + "/far/" + e->d_name;
        }
      }
      closedir(d);
    }
    return !path.empty() && FileSize(path) == size;
  }));
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    const std::streamoff at = far::kRunHeaderBytes + 4096 * 24 + 8 + 100;
    f.seekg(at);
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x5a);
    f.seekp(at);
    f.write(&c, 1);
  }
  clock->Advance(kHour + 5000);
  auto got = ReserveAll(*q, "t", 5000);
  EXPECT_EQ(got.size(), 5000u);
  EXPECT_EQ(got["j4242"].body, Body(4242));
  EXPECT_EQ(Figure(*q, "far_index_rebuilds"), 1u);
  EXPECT_GE(Figure(*q, "far_index_errors"), 1u);
  EXPECT_EQ(Figure(*q, "far_lost"), 0u);
}

// Past the byte budget, jobs inside the window stay in the log until due,
// and still come on time.
TEST(FarFutureJobs, PastTheByteBudgetJobsComeIntoMemoryOnlyWhenDue) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  QueueOptions o = Windowed(tmp.data(), clock, kHour);
  o.memory_window_bytes = 8 << 10;  // ~50 jobs of these
  auto q = MustOpen(o);
  for (int i = 0; i < 500; ++i) {
    ASSERT_TRUE(q->Add(Spec("t", "j" + std::to_string(i), Body(i), 10 * kMinute + i)).ok());
  }
  EXPECT_GT(Figure(*q, "far_jobs"), 400u);  // most stay out, though inside the window
  EXPECT_EQ(q->Stats()->delayed, 500u);
  clock->Advance(10 * kMinute - 1);
  EXPECT_TRUE(ReserveAll(*q, "t", 1).empty()) << "never early";
  size_t got = 0;
  for (int i = 0; i < 500; ++i) {
    clock->Advance(1);
    auto d = ReserveAll(*q, "t", 500);
    for (const auto& [id, one] : d) {
      EXPECT_EQ(one.run_at_ms, clock->NowMs()) << id << ": on time, not later";
      ASSERT_TRUE(q->Finish(id, one.receipt).ok());
    }
    got += d.size();
  }
  EXPECT_EQ(got, 500u);
}

// A far job whose record is in a write that failed part-way is not lost:
// reading it says the store cannot write, and once writes work again it is
// read, and comes when due.
TEST(FarFutureJobs, ARecordInAWriteThatFailedPartWayIsNotTakenForLost) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  auto fs = std::make_shared<FaultyFileSystem>();
  QueueOptions o = Windowed(tmp.data(), clock, 0, "everysec");
  auto q = MustOpen(o, OpenOptions{.file_system = fs});
  ASSERT_TRUE(q->Add(Spec("t", "before", "kept", kMinute)).ok());
  fs->torn_bytes = 5;  // the failing write gets a few bytes of the record out
  fs->fail_writes = true;
  EXPECT_EQ(q->Add(Spec("t", "during", "d", kMinute)).status().code(), Code::kUnavailable);
  auto read = q->Get("during");
  EXPECT_EQ(read.status().code(), Code::kUnavailable) << read.status().ToString();
  clock->Advance(kMinute);  // due while unreadable: tried again, not dropped
  EXPECT_EQ(Figure(*q, "far_lost"), 0u);
  fs->fail_writes = false;
  ASSERT_TRUE(Eventually([&] { return q->Get("during").ok(); }));
  EXPECT_EQ(q->Get("during")->body, "d");
  clock->Advance(2000);  // past the second the loading waits after a failed read
  auto got = ReserveAll(*q, "t", 2);
  EXPECT_EQ(got.size(), 2u);
  EXPECT_EQ(got["during"].body, "d");
  EXPECT_EQ(Figure(*q, "far_lost"), 0u);
}

// A start that fails after the replay sealed runs of the index ends cleanly.
TEST(FarFutureJobs, AStartThatFailsAfterSealingRunsEndsCleanly) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  QueueOptions o = Windowed(tmp.data(), clock, 0);
  o.segment_bytes = 4096;
  {
    auto q = MustOpen(o);
    for (int i = 0; i < 200; ++i) {
      ASSERT_TRUE(q->Add(Spec("t", "j" + std::to_string(i), Body(i), kDay)).ok());
    }
  }
  // As after a crash: no checkpoint, so the whole log is replayed (a
  // checkpoint's start would not read the far records until they are due).
  ASSERT_EQ(unlink((tmp.data() + "/far/checkpoint.dq").c_str()), 0);
  std::vector<std::string> segments = Segments(tmp.data());
  ASSERT_GE(segments.size(), 3u);
  {
    // Damage amid the records of an older segment: the start stops there.
    std::fstream f(segments[segments.size() - 2], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.write("garbage!", 8);
  }
  auto q = OpenServingQueue(o);
  EXPECT_FALSE(q.ok());
  EXPECT_EQ(q.status().code(), Code::kInternal) << q.status().ToString();
}

// PEEK finds a topic's earliest far job wherever its entry is: in memory or
// in any run, behind entries of other topics and of jobs gone.
TEST(FarFutureJobs, PeekFindsTheEarliestOfATopicAcrossRuns) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  auto q = MustOpen(Windowed(tmp.data(), clock, 0));
  for (int i = 0; i < 200; ++i) {
    std::string topic = i % 10 == 7 ? "rare" : "busy";
    ASSERT_TRUE(q->Add(Spec(topic, "j" + std::to_string(i), Body(i), kDay - i * 1000)).ok());
  }
  // The earliest of "rare" is j197 (due first of its topic); then j187.
  EXPECT_EQ(q->Peek("rare", JobState::kDelayed)->id, "j197");
  ASSERT_TRUE(q->Delete("j197").ok());
  EXPECT_EQ(q->Peek("rare", JobState::kDelayed)->id, "j187");
  EXPECT_EQ(q->Peek("busy", JobState::kDelayed)->id, "j199");
  EXPECT_EQ(q->Topic("rare")->delayed, 19u);
  EXPECT_EQ(q->Peek("none", JobState::kDelayed).status().code(), Code::kNotFound);
}

TEST(FarFutureJobs, EveryOperationAnswersAsForAJobInMemory) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  auto q = MustOpen(Windowed(tmp.data(), clock, 0));  // every delayed job is far
  ASSERT_TRUE(q->Add(Spec("t", "order-1", "one", kDay)).ok());
  auto generated = q->Add(Spec("t", "", "generated", 2 * kDay));
  ASSERT_TRUE(generated.ok());
  EXPECT_EQ(Figure(*q, "far_jobs"), 2u);

  // Read: GET by either kind of id; PEEK gives the earliest.
  EXPECT_EQ(q->Get(generated->id)->body, "generated");
  EXPECT_EQ(q->Get("order-1")->body, "one");
  EXPECT_EQ(q->Peek("t", JobState::kDelayed)->id, "order-1");
  EXPECT_EQ(q->Get("order-2").status().code(), Code::kNotFound);
  // A generated id's text with another seq is not the job.
  std::string stale = generated->id;
  stale[15] = stale[15] == '0' ? '1' : '0';
  EXPECT_EQ(q->Get(stale).status().code(), Code::kNotFound);

  // Acks need a reservation: the same answers as for a delayed job in memory.
  EXPECT_EQ(q->Finish("order-1", "").code(), Code::kNotReserved);
  EXPECT_EQ(q->Touch("order-1", std::string(24, '0')).code(), Code::kStaleReceipt);
  EXPECT_EQ(q->Finish("nope", "").code(), Code::kNotFound);

  // An add of its id: exists; with replace: the new job (and the old one gone).
  EXPECT_EQ(q->Add(Spec("t", "order-1", "again", kDay)).status().code(), Code::kExists);
  JobSpec replace = Spec("t", "order-1", "replaced", 3 * kDay);
  replace.replace = true;
  ASSERT_TRUE(q->Add(replace).ok());
  EXPECT_EQ(q->Get("order-1")->body, "replaced");
  EXPECT_EQ(q->Stats()->jobs, 2u);
  EXPECT_EQ(q->Stats()->replaced, 1u);
  EXPECT_EQ(q->Peek("t", JobState::kDelayed)->id, generated->id);
  // Replaced by a job due now: it comes into memory, ready.
  JobSpec now = Spec("t", "order-1", "now", 0);
  now.replace = true;
  ASSERT_TRUE(q->Add(now).ok());
  EXPECT_EQ(q->Get("order-1")->state, JobState::kReady);
  EXPECT_EQ(Figure(*q, "far_jobs"), 1u);

  // Kick: due now, in memory.
  ASSERT_TRUE(q->Kick(generated->id).ok());
  EXPECT_EQ(q->Get(generated->id)->state, JobState::kReady);
  EXPECT_EQ(Figure(*q, "far_jobs"), 0u);
  auto got = ReserveAll(*q, "t", 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[generated->id].body, "generated");

  // Delete of a far job, by either kind of id.
  ASSERT_TRUE(q->Add(Spec("u", "x", "x", kDay)).ok());
  auto y = q->Add(Spec("u", "", "y", kDay));
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(q->Topic("u")->delayed, 2u);
  ASSERT_TRUE(q->Delete("x").ok());
  ASSERT_TRUE(q->Delete(y->id).ok());
  EXPECT_EQ(q->Delete("x").code(), Code::kNotFound);
  EXPECT_EQ(q->Topic("u")->delayed, 0u);
  EXPECT_EQ(q->Peek("u", JobState::kDelayed).status().code(), Code::kNotFound);
  EXPECT_EQ(Figure(*q, "far_jobs"), 0u);
  // Gone for good: a day on, nothing comes.
  clock->Advance(kDay + 1);
  EXPECT_TRUE(ReserveAll(*q, "u", 1).empty());
}

TEST(FarFutureJobs, AReleaseWithALongDelayIsWrittenInFullAndLeavesMemory) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  QueueOptions o = Windowed(tmp.data(), clock, kMinute);
  {
    auto q = MustOpen(o);
    ASSERT_TRUE(q->Add(Spec("t", "retry", "payload")).ok());
    Delivery d = ReserveOne(*q, "t");
    ASSERT_TRUE(q->Release(d.id, d.receipt, kDay, "try tomorrow").ok());
    EXPECT_TRUE(Eventually([&] { return Figure(*q, "far_jobs") == 1; }));
    EXPECT_EQ(Figure(*q, "far_stores"), 1u);
    auto info = q->Get("retry");
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->attempts, 1u);
    EXPECT_EQ(info->last_error, "try tomorrow");
    EXPECT_EQ(info->body, "payload");
  }
  auto q = MustOpen(o);
  EXPECT_EQ(Figure(*q, "far_jobs"), 1u);
  EXPECT_EQ(q->Get("retry")->last_error, "try tomorrow");
  clock->Advance(kDay);
  Delivery d = ReserveOne(*q, "t");
  EXPECT_EQ(d.id, "retry");
  EXPECT_EQ(d.attempts, 2u);
  EXPECT_EQ(d.body, "payload");
}

// Far jobs pin the segments they were added in; compaction copies their
// records forward as read, and each slot follows its record.
TEST(FarFutureJobs, CompactionMovesFarRecordsAndARestartFindsThem) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  QueueOptions o = Windowed(tmp.data(), clock, kMinute);
  o.segment_bytes = 16 << 10;
  {
    auto q = MustOpen(o);
    for (int i = 0; i < 200; ++i) {
      std::string id = i % 2 == 0 ? "far" + std::to_string(i) : "";
      auto added = q->Add(Spec("far", id, Body(i), kHour + i));
      ASSERT_TRUE(added.ok());
    }
    ASSERT_EQ(Figure(*q, "far_jobs"), 200u);
    for (int i = 0; i < 5000; ++i) {
      ASSERT_TRUE(q->Add(Spec("t", "", std::string(100, 'x'))).ok());
      Delivery d = ReserveOne(*q, "t");
      ASSERT_TRUE(q->Finish(d.id, d.receipt).ok());
    }
    EXPECT_TRUE(Eventually([&] { return DiskBytes(*q) < 5 * o.segment_bytes + 40'000; }))
        << DiskBytes(*q);
    auto& local = dynamic_cast<LocalQueue&>(*q);
    EXPECT_GT(local.store_stats().log.removed_segments, 10u);
    EXPECT_GT(local.store_stats().log.rewritten_bytes, 20'000u);
    EXPECT_EQ(q->Get("far0")->body, Body(0));
    EXPECT_EQ(q->Get("far198")->body, Body(198));
    EXPECT_EQ(Figure(*q, "far_read_errors"), 0u);
  }
  auto q = MustOpen(o);
  EXPECT_EQ(Figure(*q, "far_jobs"), 200u);
  EXPECT_EQ(q->Get("far100")->body, Body(100));
  clock->Advance(kHour + 200);
  auto got = ReserveAll(*q, "far", 200);
  ASSERT_EQ(got.size(), 200u);
  std::set<std::string> bodies;
  for (const auto& [id, d] : got) bodies.insert(d.body);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(bodies.count(Body(i)), 1u) << i;
  EXPECT_EQ(Figure(*q, "far_lost"), 0u);
}

TEST(FarFutureJobs, TheWindowMayChangeAcrossRestarts) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  std::vector<std::string> ids;
  {
    auto q = MustOpen(Windowed(tmp.data(), clock, -1));  // all in memory
    for (int i = 0; i < 50; ++i) {
      auto added = q->Add(Spec("t", i % 2 ? "" : "c" + std::to_string(i), Body(i), kDay + i));
      ASSERT_TRUE(added.ok());
      ids.push_back(added->id);
    }
  }
  {
    auto q = MustOpen(Windowed(tmp.data(), clock, kHour));
    EXPECT_EQ(Figure(*q, "far_jobs"), 50u);
    for (int i = 0; i < 50; ++i) EXPECT_EQ(q->Get(ids[i])->body, Body(i)) << ids[i];
    ASSERT_TRUE(q->Delete(ids[3]).ok());
  }
  auto q = MustOpen(Windowed(tmp.data(), clock, -1));
  EXPECT_EQ(q->Stats()->jobs, 49u);
  clock->Advance(kDay + 50);
  auto got = ReserveAll(*q, "t", 50);
  EXPECT_EQ(got.size(), 49u);
  EXPECT_EQ(got.count(ids[3]), 0u);
  EXPECT_EQ(got[ids[4]].body, Body(4));
}

// The crash test of the log with far jobs: a workload of far adds, deletes,
// replaces and long releases crashes at every write and sync point; after
// reopening (with the window, and without), every acknowledged job is there
// with its body, and nothing acknowledged as gone came back.
bool FarCrashAt(uint64_t crash_at, size_t torn, int64_t reopen_window) {
  TempDir tmp;
  auto fs = std::make_shared<FaultyFileSystem>();
  fs->crash_at = crash_at;
  fs->torn_bytes = torn;
  auto clock = std::make_shared<ManualClock>();
  QueueOptions o = Windowed(tmp.data(), clock, 0, "always");
  o.segment_bytes = 4096;
  OpenOptions open{.file_system = fs};
  std::map<std::string, std::string> acked;  // id -> body
  std::set<std::string> gone;
  std::set<std::string> tried;
  {
    auto q = OpenServingQueue(o, open);
    if (!q.ok()) return true;
    for (int i = 0; i < 40; ++i) {
      std::string id = "j" + std::to_string(i);
      std::string body = std::string(60, static_cast<char>('a' + i % 26)) + id;
      if ((*q)->Add(Spec("t", id, body, i % 4 == 0 ? 0 : kDay)).ok()) acked[id] = body;
      if (i % 3 == 2) {
        std::string victim = "j" + std::to_string(i - 1);
        tried.insert(victim);
        if ((*q)->Delete(victim).ok()) gone.insert(victim);
      }
      if (i % 7 == 6) {
        JobSpec s = Spec("t", id, body + "+", kDay);
        s.replace = true;
        tried.insert(id);
        if ((*q)->Add(s).ok()) acked[id] = body + "+";
      }
      if (i % 4 == 0) {
        auto got = (*q)->Reserve(ReserveRequest{.topics = {"t"}});
        if (got.ok() && !got->empty()) {
          const Delivery& d = (*got)[0];
          (void)(*q)->Release(d.id, d.receipt, kDay, "later");
        }
      }
    }
  }
  bool reached = fs->crashed;
  auto q = OpenQueue(Windowed(tmp.data(), clock, reopen_window, "always"));
  EXPECT_TRUE(q.ok()) << "crash at " << crash_at << ": " << q.status().ToString();
  if (!q.ok()) return false;
  // An add with replace ("+") not acknowledged may have been made all the same.
  ExpectAcknowledgedKept(**q, crash_at, acked, gone, tried, "+");
  return reached;
}

TEST(FarFutureJobs, CrashAtEveryWriteAndSyncPointLosesNothingAcknowledged) {
  for (int64_t reopen_window : {int64_t{0}, int64_t{-1}}) {
    for (size_t torn : {size_t{0}, size_t{7}}) {
      uint64_t point = 1;
      while (FarCrashAt(point, torn, reopen_window) && !HasFailure()) ++point;
      EXPECT_GT(point, 50u) << "the workload should pass many points";
    }
  }
}

// --- the checkpoint at a clean stop (far/checkpoint.h) ----------------------------

uint64_t ReplayedRecords(Queue& q) {
  return dynamic_cast<LocalQueue&>(q).store_stats().recovery.records;
}

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// What a client can see of a queue: every job by id, and the counts.
struct Seen {
  std::map<std::string, std::string> jobs;  // id -> state, run_at, attempts, body
  std::string counts;
  bool operator==(const Seen&) const = default;
};

Seen Look(Queue& q, const std::vector<std::string>& ids) {
  Seen seen;
  for (const std::string& id : ids) {
    auto j = q.Get(id);
    seen.jobs[id] = j.ok() ? std::string(StateName(j->state)) + " " + std::to_string(j->run_at_ms) +
                                 " " + std::to_string(j->attempts) + " " + j->body + " " +
                                 j->last_error
                           : j.status().ToString();
  }
  auto st = q.Stats();
  seen.counts = "jobs " + std::to_string(st->jobs) + " delayed " + std::to_string(st->delayed) +
                " ready " + std::to_string(st->ready) + " reserved " +
                std::to_string(st->reserved) + " buried " + std::to_string(st->buried);
  auto topics = q.Topics();
  for (const TopicInfo& t : *topics) {
    seen.counts += " | " + t.name + " " + std::to_string(t.delayed) + "/" +
                   std::to_string(t.ready) + "/" + std::to_string(t.reserved) + "/" +
                   std::to_string(t.buried) + (t.paused ? " paused" : "");
  }
  return seen;
}

// A queue with far jobs (generated and client ids, some deleted, one sent far
// by a release) and near ones in every state, a paused topic and an add
// remembered by its idempotency key. Returns every id it made.
std::vector<std::string> Fill(Queue& q) {
  std::vector<std::string> ids;
  for (int i = 0; i < 300; ++i) {
    auto added = q.Add(Spec(i % 3 == 0 ? "other" : "t", i % 2 ? "" : "c" + std::to_string(i),
                            Body(i), kDay + i * kMinute));
    EXPECT_TRUE(added.ok());
    ids.push_back(added->id);
  }
  for (int i = 0; i < 300; i += 7) EXPECT_TRUE(q.Delete(ids[i]).ok());
  for (int i = 0; i < 20; ++i) {
    auto added = q.Add(Spec("near", "n" + std::to_string(i), Body(i), i < 10 ? 0 : kMinute));
    EXPECT_TRUE(added.ok());
    ids.push_back(added->id);
  }
  Delivery a = ReserveOne(q, "near");
  Delivery b = ReserveOne(q, "near");
  Delivery c = ReserveOne(q, "near");
  EXPECT_TRUE(q.Bury(b.id, b.receipt, "why not").ok());
  EXPECT_TRUE(q.Release(c.id, c.receipt, 2 * kDay, "far now").ok());
  (void)a;  // stays reserved
  JobSpec keyed = Spec("near", "", "keyed", kDay);
  keyed.idempotency_key = "k1";
  auto added = q.Add(keyed);
  EXPECT_TRUE(added.ok());
  ids.push_back(added->id);
  EXPECT_TRUE(q.Pause("other", 3 * kDay).ok());
  return ids;
}

TEST(FarCheckpoint, ACleanStopSparesTheNextStartTheFarJobsReplay) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  QueueOptions o = Windowed(tmp.data(), clock, kHour);
  std::vector<std::string> ids;
  Seen before;
  uint64_t full_replay = 0;
  uint64_t far_jobs = 0;
  {
    auto q = MustOpen(o);
    ids = Fill(*q);
    // 257 far adds left, the keyed one and the job released far (once settled).
    EXPECT_TRUE(Eventually([&] { return Figure(*q, "far_jobs") == 259u; }));
    far_jobs = Figure(*q, "far_jobs");
    before = Look(*q, ids);
  }
  const std::string checkpoint = tmp.data() + "/far/checkpoint.dq";
  ASSERT_TRUE(Exists(checkpoint));
  {
    auto q = MustOpen(o);
    EXPECT_TRUE(Exists(checkpoint)) << "kept: a crash resumes from it again";
    // Replayed: what was in memory, written again at the stop (not the 300
    // far adds and their deletes).
    EXPECT_LT(ReplayedRecords(*q), 40u);
    EXPECT_EQ(Figure(*q, "far_jobs"), far_jobs);
    EXPECT_EQ(Look(*q, ids), before);
    // The repeat of the keyed add is answered as the first was.
    JobSpec keyed = Spec("near", "", "keyed", kDay);
    keyed.idempotency_key = "k1";
    EXPECT_EQ(q->Add(keyed)->id, ids.back());
    EXPECT_EQ(Look(*q, ids), before);
  }
  // Without a window the checkpoint is not used (and removed): the same answers.
  {
    auto q = MustOpen(Windowed(tmp.data(), clock, -1));
    full_replay = ReplayedRecords(*q);
    EXPECT_GT(full_replay, 300u);
    EXPECT_EQ(Look(*q, ids), before);
  }
  EXPECT_FALSE(Exists(checkpoint));
  auto q = MustOpen(o);
  EXPECT_EQ(ReplayedRecords(*q), full_replay);
  EXPECT_EQ(Look(*q, ids), before);
  EXPECT_TRUE(q->Resume("other").ok());
  clock->Advance(3 * kDay);
  auto got = ReserveAll(*q, "t", 300);
  auto other = ReserveAll(*q, "other", 300);
  EXPECT_EQ(got.size() + other.size(), 257u);  // the far adds left
  for (int i = 0; i < 300; ++i) {
    if (i % 7 == 0) continue;
    const auto& from = i % 3 == 0 ? other : got;
    EXPECT_EQ(from.count(ids[i]), 1u) << ids[i];
  }
  EXPECT_EQ(Figure(*q, "far_lost"), 0u);
  EXPECT_EQ(Figure(*q, "far_index_errors"), 0u);
}

void FlipByte(const std::string& path, std::streamoff at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at, at < 0 ? std::ios::end : std::ios::beg);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(at, at < 0 ? std::ios::end : std::ios::beg);
  f.write(&c, 1);
}

std::vector<std::string> Files(const std::string& dir, std::string_view prefix) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (std::string_view(e->d_name).starts_with(prefix)) out.push_back(dir + "/" + e->d_name);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Whatever does not check out is not trusted: the start replays the whole
// log instead, and every answer is the same.
TEST(FarCheckpoint, ADamagedStaleOrForeignCheckpointIsNotTrusted) {
  const std::vector<std::string> damages = {
      "meta byte", "slot byte",   "cut short", "missing run",        "run header",
      "run block", "foreign run", "log grew",  "foreign checkpoint", "run cut short",
  };
  for (const std::string& damage : damages) {
    SCOPED_TRACE(damage);
    TempDir tmp;
    auto clock = std::make_shared<ManualClock>();
    QueueOptions o = Windowed(tmp.data(), clock, kHour);
    o.segment_bytes = 16 << 10;
    std::vector<std::string> ids;
    Seen before;
    {
      auto q = MustOpen(o);
      ids = Fill(*q);
      before = Look(*q, ids);
    }
    const std::string far = tmp.data() + "/far";
    const std::string checkpoint = far + "/checkpoint.dq";
    ASSERT_TRUE(Exists(checkpoint));
    std::vector<std::string> runs = Files(far, "run-");
    ASSERT_GE(runs.size(), 2u);
    if (damage == "meta byte") FlipByte(checkpoint, 40);
    if (damage == "slot byte") FlipByte(checkpoint, -20);
    if (damage == "cut short") {
      ASSERT_EQ(truncate(checkpoint.c_str(), FileSize(checkpoint) - 1), 0);
    }
    if (damage == "run cut short") {
      ASSERT_EQ(truncate(runs[0].c_str(), FileSize(runs[0]) - 1), 0);
    }
    if (damage == "missing run") {
      ASSERT_EQ(unlink(runs[1].c_str()), 0);
    }
    if (damage == "run header") FlipByte(runs[0], 33);
    if (damage == "run block") FlipByte(runs[0], 40 + 5);
    if (damage == "foreign run" || damage == "foreign checkpoint") {
      // The same files from another data directory, where other jobs were added.
      TempDir other;
      {
        auto q = MustOpen(Windowed(other.data(), clock, kHour));
        for (int i = 0; i < 300; ++i) ASSERT_TRUE(q->Add(Spec("t", "", Body(i), kDay)).ok());
      }
      std::vector<std::string> theirs = Files(other.data() + "/far", "run-");
      ASSERT_FALSE(theirs.empty());
      if (damage == "foreign run") {
        ASSERT_EQ(rename(theirs[0].c_str(), runs[0].c_str()), 0);
      } else {
        ASSERT_EQ(rename((other.data() + "/far/checkpoint.dq").c_str(), checkpoint.c_str()), 0);
      }
    }
    if (damage == "log grew") {
      // A start without the window compacts and writes: the files the
      // checkpoint names are not the log's any more (and it removes the
      // checkpoint, which is put back here as a stale copy).
      std::string saved = tmp.data() + "/saved-checkpoint";
      ASSERT_EQ(link(checkpoint.c_str(), saved.c_str()), 0);
      {
        auto q = MustOpen(Windowed(tmp.data(), clock, -1));
        if (damage == "log grew") {
          ASSERT_TRUE(q->Add(Spec("near", "late", "late")).ok());
          ids.push_back("late");
        }
        before = Look(*q, ids);
      }
      ASSERT_EQ(rename(saved.c_str(), checkpoint.c_str()), 0);
    }
    auto q = MustOpen(o);
    EXPECT_FALSE(Exists(checkpoint));
    EXPECT_GT(ReplayedRecords(*q), 300u) << "the whole log replayed";
    EXPECT_EQ(Look(*q, ids), before);
    clock->Advance(3 * kDay);
    EXPECT_TRUE(q->Resume("other").ok());
    size_t due = ReserveAll(*q, "t", 400).size() + ReserveAll(*q, "other", 400).size();
    EXPECT_EQ(due, 257u);
    EXPECT_EQ(Figure(*q, "far_lost"), 0u);
  }
}

// Fill on a queue opened with `o`, then a clean stop (a checkpoint).
std::vector<std::string> FillAndStop(const QueueOptions& o) {
  auto q = MustOpen(o);
  return Fill(*q);
}

// Small segments, and a dedup window short enough that compaction goes past
// the remembered add Fill makes once a minute has passed.
QueueOptions Compacting(const std::string& dir, std::shared_ptr<Clock> clock) {
  QueueOptions o = Windowed(dir, std::move(clock), kMinute);
  o.segment_bytes = 16 << 10;
  o.dedup_window_ms = kMinute;
  return o;
}

// n jobs added, reserved and finished: dead records for compaction.
void Churn(Queue& q, int n) {
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(q.Add(Spec("churn", "", std::string(100, 'x'))).ok());
    Delivery d = ReserveOne(q, "churn");
    ASSERT_TRUE(q.Finish(d.id, d.receipt).ok());
  }
}

// After a start from a checkpoint, changes go to the log as ever; a crash
// then (no clean stop, no checkpoint) replays the whole log, changes
// included, and compaction of the segments the checkpoint skipped keeps
// every far record they hold.
TEST(FarCheckpoint, AfterAResumeCompactionAndACrashLoseNothing) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  QueueOptions o = Compacting(tmp.data(), clock);
  std::vector<std::string> ids = FillAndStop(o);
  auto fs = std::make_shared<FaultyFileSystem>();
  Seen before;
  {
    auto q = MustOpen(o, OpenOptions{.file_system = fs});
    ASSERT_LT(ReplayedRecords(*q), 40u);
    clock->Advance(kMinute);
    // Far jobs deleted and added after the resume, and enough churn that
    // compaction copies the far records out of the oldest segments.
    for (int i = 1; i < 300; i += 5) (void)q->Delete(ids[i]);
    for (int i = 0; i < 50; ++i) {
      auto added = q->Add(Spec("t", i % 2 ? "" : "late" + std::to_string(i), Body(i), kDay));
      ASSERT_TRUE(added.ok());
      ids.push_back(added->id);
    }
    Churn(*q, 3000);
    if (HasFatalFailure()) return;
    auto& local = dynamic_cast<LocalQueue&>(*q);
    EXPECT_TRUE(Eventually([&] { return local.store_stats().log.removed_segments > 10; }))
        << "live " << local.store_stats().live_bytes << " disk " << DiskBytes(*q) << " segments "
        << local.store_stats().log.segments;
    EXPECT_TRUE(Eventually([&] { return DiskBytes(*q) < 8 * o.segment_bytes + 60'000; }))
        << DiskBytes(*q);
    before = Look(*q, ids);
    EXPECT_EQ(Figure(*q, "far_read_errors"), 0u);
    fs->crashed = true;  // the process dies: nothing more reaches the files
  }
  EXPECT_FALSE(Exists(tmp.data() + "/far/checkpoint.dq"));
  auto q = MustOpen(o);
  EXPECT_EQ(Look(*q, ids), before);
  EXPECT_EQ(Figure(*q, "far_lost"), 0u);
}

TEST(FarCheckpoint, AStartWithoutAWindowRemovesTheRunsTheCheckpointKept) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  QueueOptions o = Windowed(tmp.data(), clock, kHour);
  {
    auto q = MustOpen(o);
    Fill(*q);
  }
  const std::string far = tmp.data() + "/far";
  ASSERT_TRUE(Exists(far + "/checkpoint.dq"));
  size_t runs = RunFiles(far);
  ASSERT_GT(runs, 0u);
  for (int i = 0; i < 2; ++i) {
    auto q = MustOpen(Windowed(tmp.data(), clock, -1));
  }
  EXPECT_FALSE(Exists(far + "/checkpoint.dq"));
  EXPECT_EQ(RunFiles(far), 0u) << "run files left behind by the checkpoint, of " << runs;
}

// Four days on, with "other" resumed: every job not buried is handed out
// from `topics`, and no far job was lost on the way.
void ExpectEveryJobHandedOut(Queue& q, ManualClock& clock,
                             std::initializer_list<std::string> topics) {
  clock.Advance(4 * kDay);
  EXPECT_TRUE(q.Resume("other").ok());
  const uint64_t reservable = q.Stats()->jobs - q.Stats()->buried - q.Stats()->reserved;
  size_t n = 0;
  for (const std::string& t : topics) n += ReserveAll(q, t, 2000).size();
  EXPECT_EQ(n, reservable);
  EXPECT_EQ(Figure(q, "far_lost"), 0u);
  EXPECT_EQ(Figure(q, "far_index_errors"), 0u);
}

// Stop -> resume -> (some far jobs come near, runs partly used, new far
// jobs and runs under the adopted epoch, deletes) -> stop -> resume again.
TEST(FarCheckpoint, ResumesInARowEachFromTheLastStop) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  QueueOptions o = Windowed(tmp.data(), clock, kHour);
  std::vector<std::string> ids = FillAndStop(o);
  Seen before;
  {
    auto q = MustOpen(o);
    ASSERT_LT(ReplayedRecords(*q), 40u);
    clock->Advance(kDay - kHour + 10 * kMinute);
    EXPECT_TRUE(Eventually([&] { return Figure(*q, "far_loads") > 0; }));
    for (int i = 0; i < 100; ++i) {
      auto added = q->Add(Spec(i % 2 ? "t" : "late", i % 3 ? "" : "x" + std::to_string(i),
                               Body(1000 + i), 2 * kDay + i * kMinute));
      ASSERT_TRUE(added.ok());
      ids.push_back(added->id);
    }
    for (size_t i = 300; i < ids.size(); i += 11) (void)q->Delete(ids[i]);
    before = Look(*q, ids);
  }
  ASSERT_TRUE(Exists(tmp.data() + "/far/checkpoint.dq"));
  {
    auto q = MustOpen(o);
    EXPECT_LT(ReplayedRecords(*q), 80u);
    EXPECT_EQ(Look(*q, ids), before);
  }
  {
    auto q = MustOpen(o);  // third resume
    EXPECT_LT(ReplayedRecords(*q), 80u);
    EXPECT_EQ(Look(*q, ids), before);
  }
  {
    auto q = MustOpen(Windowed(tmp.data(), clock, -1));
    EXPECT_EQ(Look(*q, ids), before);
  }
  auto q = MustOpen(o);
  ExpectEveryJobHandedOut(*q, *clock, {"t", "other", "late", "near"});
}

TEST(FarCheckpoint, CompactionAfterAResumeThenACleanStopResumesAgain) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  QueueOptions o = Compacting(tmp.data(), clock);
  std::vector<std::string> ids = FillAndStop(o);
  Seen before;
  {
    auto q = MustOpen(o);
    ASSERT_LT(ReplayedRecords(*q), 40u);
    clock->Advance(kMinute);
    for (int i = 1; i < 300; i += 5) (void)q->Delete(ids[i]);
    Churn(*q, 3000);
    if (HasFatalFailure()) return;
    auto& local = dynamic_cast<LocalQueue&>(*q);
    EXPECT_TRUE(Eventually([&] { return local.store_stats().log.removed_segments > 10; }));
    before = Look(*q, ids);
  }
  {
    auto q = MustOpen(o);
    EXPECT_LT(ReplayedRecords(*q), 80u) << "checkpoint used";
    EXPECT_EQ(Look(*q, ids), before);
    // more churn: compaction of the segments the resume skipped
    Churn(*q, 3000);
    if (HasFatalFailure()) return;
    EXPECT_EQ(Look(*q, ids), before);
    EXPECT_EQ(Figure(*q, "far_read_errors"), 0u);
  }
  {
    auto q = MustOpen(o);
    EXPECT_LT(ReplayedRecords(*q), 80u) << "checkpoint used";
    EXPECT_EQ(Look(*q, ids), before);
  }
  {
    auto q = MustOpen(Windowed(tmp.data(), clock, -1));
    EXPECT_EQ(Look(*q, ids), before);
  }
}

// The jobs a stop wrote again are replayed without looking for a far job
// they would replace: even those brought near, whose generated ids name far
// slots taken again since, cost no read of a far record.
TEST(FarCheckpoint, AResumeReadsNoFarRecord) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  QueueOptions o = Windowed(tmp.data(), clock, kHour);
  {
    auto q = MustOpen(o);
    for (int i = 0; i < 200; ++i) {
      ASSERT_TRUE(q->Add(Spec("t", "", Body(i), 2 * kHour + i * kMinute)).ok());
    }
    clock->Advance(kHour + 100 * kMinute);  // about 100 come near
    EXPECT_TRUE(Eventually([&] { return Figure(*q, "far_jobs") <= 100u; }));
    for (int i = 0; i < 150; ++i) ASSERT_TRUE(q->Add(Spec("t", "", Body(i), 3 * kDay)).ok());
  }
  ASSERT_TRUE(Exists(tmp.data() + "/far/checkpoint.dq"));
  auto q = MustOpen(o);
  EXPECT_GT(ReplayedRecords(*q), 90u);
  EXPECT_EQ(Figure(*q, "far_reads"), 0u);
  EXPECT_EQ(q->Stats()->jobs, 350u);
}

// What a crash-at-every-point run was told: jobs added (id -> body),
// deletes and finishes acknowledged, and the ids one was tried on (a reply
// the crash cut off may have been made).
struct Ledger {
  std::map<std::string, std::string> acked;
  std::set<std::string> gone, tried;
  size_t unanswered_adds = 0;  // may have been made
  size_t others = 0;           // jobs there before, not named here

  void Add(Queue& q, const std::string& id, int body, int64_t delay_ms) {
    if (q.Add(Spec("t", id, Body(body), delay_ms)).ok()) {
      acked[id] = Body(body);
    } else {
      ++unanswered_adds;
    }
  }
  void Delete(Queue& q, const std::string& id) {
    tried.insert(id);
    if (q.Delete(id).ok()) Gone(id);
  }
  void FinishSome(Queue& q, uint32_t n) {
    auto got = q.Reserve(ReserveRequest{.topics = {"t"}, .count = n});
    if (!got.ok()) return;
    for (const Delivery& d : *got) {
      tried.insert(d.id);
      if (q.Finish(d.id, d.receipt).ok()) Gone(d.id);
    }
  }
  void Gone(const std::string& id) {
    gone.insert(id);
    acked.erase(id);
  }
  // The store reopened with `o` (no faults) has every job acknowledged and
  // none of those gone. False if it did not open.
  bool Check(const QueueOptions& o, uint64_t crash_at) const {
    auto q = OpenQueue(o);
    EXPECT_TRUE(q.ok()) << "crash at " << crash_at << ": " << q.status().ToString();
    if (!q.ok()) return false;
    for (const auto& [id, body] : acked) {
      if (tried.count(id)) continue;
      auto j = (*q)->Get(id);
      EXPECT_TRUE(j.ok() && j->body == body)
          << "crash at " << crash_at << " lost " << id << " " << j.status().ToString();
    }
    for (const std::string& id : gone) {
      EXPECT_FALSE((*q)->Get(id).ok()) << "crash at " << crash_at << " resurrected " << id;
    }
    // No job twice: at most those acknowledged and those whose add went
    // unanswered.
    EXPECT_LE((*q)->Stats()->jobs, acked.size() + unanswered_adds + others)
        << "crash at " << crash_at;
    return true;
  }
};

// Crashes at every write/sync point of a start from a checkpoint and the
// work after it (deletes, far adds, loads, finishes, a clean stop).
bool ResumeCrashAt(const std::string& pristine, uint64_t crash_at, int64_t reopen_window) {
  TempDir tmp;
  std::filesystem::copy(
      pristine, tmp.data(),
      std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
  auto fs = std::make_shared<FaultyFileSystem>();
  fs->crash_at = crash_at;
  auto clock = std::make_shared<ManualClock>();
  QueueOptions o = Windowed(tmp.data(), clock, kHour, "always");
  o.segment_bytes = 4096;
  Ledger l;
  for (int i = 0; i < 120; ++i) l.acked["f" + std::to_string(i)] = Body(i);
  l.others = 5;  // the pristine queue's near jobs
  {
    auto q = OpenServingQueue(o, OpenOptions{.file_system = fs});
    if (q.ok()) {
      for (int i = 0; i < 120; i += 4) l.Delete(**q, "f" + std::to_string(i));
      for (int i = 0; i < 40; ++i) l.Add(**q, "g" + std::to_string(i), 500 + i, 2 * kDay);
      clock->Advance(kDay - kHour + 30 * kMinute);  // some far ones come near, some due
      l.FinishSome(**q, 5);
    }
  }
  return l.Check(Windowed(tmp.data(), clock, reopen_window, "always"), crash_at) && fs->crashed;
}

TEST(FarCheckpoint, CrashAtEveryPointOfAResumedStartLosesNothing) {
  TempDir pristine;
  auto clock = std::make_shared<ManualClock>();
  {
    QueueOptions o = Windowed(pristine.data(), clock, kHour, "always");
    o.segment_bytes = 4096;
    auto q = MustOpen(o);
    for (int i = 0; i < 120; ++i) {
      ASSERT_TRUE(q->Add(Spec("t", "f" + std::to_string(i), Body(i), kDay + i * kMinute)).ok());
    }
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(q->Add(Spec("n", "n" + std::to_string(i), "x")).ok());
  }
  ASSERT_TRUE(Exists(pristine.data() + "/far/checkpoint.dq"));
  for (int64_t w : {kHour, int64_t{-1}}) {
    uint64_t point = 1;
    while (ResumeCrashAt(pristine.data(), point, w) && !HasFailure()) ++point;
  }
}

// While serving, a checkpoint is written once a crash's restart would
// replay enough of the log. A crash after it (far jobs deleted, added,
// released far, brought near from runs used up since, reserved, finished,
// buried) resumes from it, replays only what came after, and answers the
// same; it stays, so the next crash resumes from it again.
TEST(FarCheckpoint, WhileServingACrashResumesFromTheLastOne) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  QueueOptions o = Windowed(tmp.data(), clock, kHour);
  o.segment_bytes = 16 << 10;
  o.far_checkpoint_bytes = 64 << 10;
  auto fs = std::make_shared<FaultyFileSystem>();
  std::vector<std::string> ids;
  Seen before;
  uint64_t jobs = 0;
  {
    auto q = MustOpen(o, OpenOptions{.file_system = fs});
    ids = Fill(*q);
    for (int i = 0; i < 600; ++i) {
      auto added = q->Add(Spec(i % 2 ? "t" : "other", i % 3 ? "" : "w" + std::to_string(i), Body(i),
                               kDay + (i % 50) * kMinute));
      ASSERT_TRUE(added.ok());
      ids.push_back(added->id);
    }
    EXPECT_TRUE(Eventually([&] { return Figure(*q, "far_checkpoints") >= 1; }));
    // Far filler until a crash would replay the threshold, then the
    // checkpoint that brings it down: the changes below all come after it.
    uint64_t written = Figure(*q, "far_checkpoints");
    for (int i = 0; i < 1000 && Figure(*q, "far_crash_replay_bytes") < o.far_checkpoint_bytes;
         ++i) {
      ASSERT_TRUE(q->Add(Spec("fill", "", std::string(1000, 'f'), 5 * kDay)).ok());
    }
    EXPECT_TRUE(Eventually([&] { return Figure(*q, "far_checkpoints") > written; }));
    written = Figure(*q, "far_checkpoints");
    const std::string checkpoint = tmp.data() + "/far/checkpoint.dq";
    EXPECT_TRUE(Exists(checkpoint));
    EXPECT_EQ(Figure(*q, "far_checkpoint_failures"), 0u);
    EXPECT_LT(Figure(*q, "far_crash_replay_bytes"), DiskBytes(*q) / 4);
    // Changes after it, of every kind.
    for (size_t i = 1; i < ids.size(); i += 9) (void)q->Delete(ids[i]);
    for (int i = 0; i < 30; ++i) {
      auto added = q->Add(
          Spec("t", i % 2 ? "" : "z" + std::to_string(i), Body(700 + i), 2 * kDay + i * kMinute));
      ASSERT_TRUE(added.ok());
      ids.push_back(added->id);
    }
    clock->Advance(kDay + 20 * kMinute);  // the first far ones come near, some due
    EXPECT_TRUE(Eventually([&] { return Figure(*q, "far_loads") > 100; }));
    auto got = q->Reserve(ReserveRequest{.topics = {"t"}, .count = 6});
    ASSERT_TRUE(got.ok());
    ASSERT_EQ(got->size(), 6u);
    const auto& d = *got;
    EXPECT_TRUE(q->Finish(d[0].id, d[0].receipt).ok());
    EXPECT_TRUE(q->Finish(d[1].id, d[1].receipt).ok());
    EXPECT_TRUE(q->Release(d[2].id, d[2].receipt, 3 * kDay, "far again").ok());
    EXPECT_TRUE(q->Bury(d[3].id, d[3].receipt, "buried").ok());
    EXPECT_TRUE(q->Release(d[4].id, d[4].receipt, 0, "").ok());
    // d[5] stays reserved.
    EXPECT_TRUE(Eventually([&] { return Figure(*q, "far_stores") >= 1; }));
    before = Look(*q, ids);
    jobs = q->Stats()->jobs;
    EXPECT_EQ(Figure(*q, "far_checkpoints"), written) << "the changes came after the last one";
    fs->crashed = true;  // the process dies: nothing more reaches the files
  }
  uint64_t resumed = 0;
  {
    auto q = MustOpen(o);
    resumed = ReplayedRecords(*q);
    EXPECT_EQ(Look(*q, ids), before);
    EXPECT_EQ(q->Stats()->jobs, jobs);
    EXPECT_EQ(Figure(*q, "far_read_errors"), 0u);
  }
  {
    auto q = MustOpen(Windowed(tmp.data(), clock, -1));
    EXPECT_LT(resumed * 2, ReplayedRecords(*q)) << "the resume replayed " << resumed;
    EXPECT_EQ(Look(*q, ids), before);
  }
  auto q = MustOpen(o);
  ExpectEveryJobHandedOut(*q, *clock, {"t", "other", "near", "fill"});
}

// Compaction may delete the oldest segments that held no far record when
// the checkpoint was written (here, those of jobs the stop wrote again):
// the checkpoint stands, and a crash after it still resumes from it. A
// temporary checkpoint a crash left is removed by the start that resumes.
TEST(FarCheckpoint, CompactionOfSegmentsItDoesNotReadKeepsIt) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  QueueOptions o = Windowed(tmp.data(), clock, kHour);
  o.segment_bytes = 16 << 10;
  std::vector<std::string> ids;
  for (int i = 0; i < 150; ++i) ids.push_back("near" + std::to_string(i));
  for (int i = 0; i < 300; ++i) ids.push_back("far" + std::to_string(i));
  {
    auto q = MustOpen(o);
    for (int i = 0; i < 150; ++i)
      ASSERT_TRUE(q->Add(Spec("t", ids[i], std::string(500, 'n'))).ok());
    for (int i = 150; i < 450; ++i) {
      ASSERT_TRUE(q->Add(Spec("t", ids[i], Body(i), kDay + i * kMinute)).ok());
    }
  }
  const std::string checkpoint = tmp.data() + "/far/checkpoint.dq";
  ASSERT_TRUE(Exists(checkpoint));
  { std::ofstream(tmp.data() + "/far/checkpoint.dq.tmp") << "cut short by a crash"; }
  auto fs = std::make_shared<FaultyFileSystem>();
  Seen before;
  {
    auto q = MustOpen(o, OpenOptions{.file_system = fs});
    EXPECT_FALSE(Exists(tmp.data() + "/far/checkpoint.dq.tmp"));
    EXPECT_LT(ReplayedRecords(*q), 200u);
    auto& local = dynamic_cast<LocalQueue&>(*q);
    // The near jobs' first records are dead since the stop wrote them again.
    EXPECT_TRUE(Eventually([&] { return local.store_stats().log.removed_segments >= 3; }))
        << local.store_stats().log.removed_segments;
    EXPECT_TRUE(Exists(checkpoint)) << "compaction deleted only segments it does not read";
    before = Look(*q, ids);
    fs->crashed = true;
  }
  auto q = MustOpen(o);
  EXPECT_LT(ReplayedRecords(*q), 200u) << "resumed from it";
  EXPECT_EQ(Look(*q, ids), before);
  EXPECT_EQ(q->Stats()->jobs, 450u);
}

// A checkpoint written while serving that does not check out at the next
// start (a slot flipped): the start replays the whole log, and the runs it
// seals then take names of their own, not those of the runs the crashed
// process sealed after the checkpoint; so checkpoints go on being written.
TEST(FarCheckpoint, AfterOneThatDoesNotCheckOutTheNextAreWritten) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  QueueOptions o = Windowed(tmp.data(), clock, kHour);
  o.segment_bytes = 16 << 10;
  o.far_checkpoint_bytes = 32 << 10;
  auto fs = std::make_shared<FaultyFileSystem>();
  const std::string checkpoint = tmp.data() + "/far/checkpoint.dq";
  {
    auto q = MustOpen(o, OpenOptions{.file_system = fs});
    for (int i = 0; i < 400; ++i) {
      ASSERT_TRUE(q->Add(Spec("t", "", Body(i), kDay + i * kMinute)).ok());
    }
    EXPECT_TRUE(Eventually([&] { return Figure(*q, "far_checkpoints") >= 1; }));
    // Runs sealed after it (16 entries in memory: one every 16 adds).
    for (int i = 0; i < 64; ++i) ASSERT_TRUE(q->Add(Spec("t", "", Body(i), 2 * kDay)).ok());
    fs->crashed = true;
  }
  ASSERT_TRUE(Exists(checkpoint));
  FlipByte(checkpoint, -20);
  auto q = MustOpen(o);
  EXPECT_FALSE(Exists(checkpoint));
  EXPECT_EQ(q->Stats()->jobs, 464u);
  for (int i = 0; i < 400; ++i) ASSERT_TRUE(q->Add(Spec("t", "", Body(i), 3 * kDay)).ok());
  EXPECT_TRUE(Eventually([&] { return Figure(*q, "far_checkpoints") >= 1; }));
  EXPECT_EQ(Figure(*q, "far_checkpoint_failures"), 0u);
  EXPECT_EQ(Figure(*q, "far_index_errors"), 0u);
}

// Crashes at every write and sync of a queue that writes checkpoints while
// it serves: wherever the crash falls (a checkpoint's rewrite, its file,
// its rename, the runs it holds), the next start loses nothing acknowledged
// and brings back nothing deleted.
bool ServingCrashAt(uint64_t crash_at, uint64_t* checkpoints) {
  TempDir tmp;
  auto fs = std::make_shared<FaultyFileSystem>();
  fs->crash_at = crash_at;
  auto clock = std::make_shared<ManualClock>();
  QueueOptions o = Windowed(tmp.data(), clock, kHour, "always");
  o.segment_bytes = 4096;
  o.far_checkpoint_bytes = 2048;
  Ledger l;
  {
    auto q = OpenServingQueue(o, OpenOptions{.file_system = fs});
    if (q.ok()) {
      for (int i = 0; i < 60; ++i) l.Add(**q, "f" + std::to_string(i), i, kDay + i * kMinute);
      for (int i = 0; i < 60; i += 4) l.Delete(**q, "f" + std::to_string(i));
      clock->Advance(kDay - kHour + 20 * kMinute);  // some come near, some due
      l.FinishSome(**q, 4);
      for (int i = 0; i < 20; ++i) l.Add(**q, "g" + std::to_string(i), 500 + i, 2 * kDay);
      *checkpoints = Figure(**q, "far_checkpoints");
    }
  }
  return l.Check(Windowed(tmp.data(), clock, kHour, "always"), crash_at) && fs->crashed;
}

TEST(FarCheckpoint, CrashAtEveryPointWhileServingLosesNothing) {
  uint64_t point = 1;
  uint64_t checkpoints = 0;
  while (ServingCrashAt(point, &checkpoints) && !HasFailure()) ++point;
  EXPECT_GT(point, 100u);
  // The last run, which no crash cut short, wrote checkpoints as it served.
  EXPECT_GE(checkpoints, 2u);
}

}  // namespace
}  // namespace delayq::store
