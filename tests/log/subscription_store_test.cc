// The embedded store's subscriptions: their record (kSubscription), and what
// the log does with it — a restart brings back the instances and their
// removals, a lapsed one stays forgotten, compaction copies them forward
// before their segment goes, a torn tail loses only the torn put, a full
// disk refuses a new instance but takes renewals, a version-2 log is read
// and continued, and under fsync always a put is answered only once it is
// synced. Real files in a temporary directory.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "conformance/queue_conformance.h"
#include "conformance/subscription_conformance.h"
#include "delayq/clock.h"
#include "gtest/gtest.h"
#include "local/local_queue.h"
#include "log/faulty_file_system.h"
#include "log/log_format.h"
#include "log/store_testing.h"
#include "queue/open.h"
#include "server/held_sync_file_system.h"
#include "testing/poll.h"

namespace delayq::store {
namespace {

using conformance::Instance;
using conformance::Keys;
using conformance::MustList;
using conformance::MustPut;
using conformance::SameSubscription;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

QueueOptions Embedded(const std::string& dir, FsyncPolicy fsync = FsyncPolicy::kAlways,
                      std::shared_ptr<Clock> clock = nullptr) {
  QueueOptions o;
  o.store = StoreKind::kEmbedded;
  o.data_dir = dir;
  o.fsync = fsync;
  o.clock = std::move(clock);
  return o;
}

LocalQueue& Local(ServingQueue& q) { return dynamic_cast<LocalQueue&>(q); }

constexpr const char* kSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

Subscription Full(std::string name, std::string url) {
  Subscription s = Instance(std::move(name), std::move(url));
  s.topics = {"orders", "refunds.eu"};
  s.concurrency = 7;
  s.timeout_ms = 1'234;
  s.ttl_ms = 3'600'000;
  s.secrets = {kSecret};
  s.retry = {.min_backoff_ms = 10, .max_backoff_ms = 20'000, .max_doublings = 3};
  s.rate_per_s = 0.25;
  return s;
}

// --- the record ------------------------------------------------------------------

TEST(SubscriptionRecord, APutAndARemovalReadBackAsWritten) {
  Subscription s = Full("billing", "https://h.example:8443/jobs?x=1");
  s.created_ms = 1'700'000'000'000;
  s.renewed_ms = 1'700'000'060'000;
  s.expires_ms = s.renewed_ms + s.ttl_ms;
  std::string bytes;
  EncodeSubscription(s, 9, &bytes);
  EXPECT_LE(bytes.size(), SubscriptionBound(s));
  size_t put_size = bytes.size();
  // What compaction weighs it as: near its size.
  EXPECT_NEAR(static_cast<double>(SubscriptionBytes(s)), static_cast<double>(put_size), 16);
  EncodeUnsubscribe("billing", "", 9, &bytes);
  EXPECT_LE(bytes.size() - put_size, UnsubscribeBound(7, 0));

  Record r;
  size_t size = 0;
  std::string error;
  ASSERT_EQ(ReadRecord(bytes, 9, &r, &size, &error), ReadOutcome::kRecord) << error;
  EXPECT_EQ(size, put_size);
  EXPECT_EQ(r.type, RecordType::kSubscription);
  EXPECT_FALSE(r.unsubscribe);
  EXPECT_EQ(r.segment, 9u);
  ASSERT_NE(r.subscription, nullptr);
  EXPECT_TRUE(SameSubscription(*r.subscription, s));

  std::string_view rest = std::string_view(bytes).substr(size);
  ASSERT_EQ(ReadRecord(rest, 9, &r, &size, &error), ReadOutcome::kRecord) << error;
  EXPECT_EQ(r.type, RecordType::kSubscription);
  EXPECT_TRUE(r.unsubscribe);
  EXPECT_EQ(r.subscription->name, "billing");
  EXPECT_EQ(r.subscription->url, "");
  // Another segment's seed: not this segment's record.
  EXPECT_EQ(ReadRecord(bytes, 10, &r, &size, &error), ReadOutcome::kCorrupt);
}

TEST(SubscriptionRecord, EveryCutIsIncompleteAndEveryFlippedBitIsCorrupt) {
  std::string bytes;
  EncodeSubscription(Full("a", "http://h:1/"), 1, &bytes);
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    Record r;
    size_t size = 0;
    std::string error;
    EXPECT_EQ(ReadRecord(std::string_view(bytes).substr(0, cut), 1, &r, &size, &error),
              ReadOutcome::kIncomplete)
        << cut;
  }
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = bytes;
      bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
      Record r;
      size_t size = 0;
      std::string error;
      EXPECT_NE(ReadRecord(bad, 1, &r, &size, &error), ReadOutcome::kRecord) << i << "/" << bit;
    }
  }
}

// --- restart -------------------------------------------------------------------------

TEST(EmbeddedSubscriptions, ARestartBringsBackTheInstancesAsStoredAndKeepsTheirRemovals) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  QueueOptions o = Embedded(tmp.data(), FsyncPolicy::kAlways, clock);
  std::vector<Subscription> before;
  {
    auto q = MustOpen(o);
    MustPut(*q, Full("billing", "http://a:1/"));
    MustPut(*q, Instance("billing", "http://b:1/"));
    MustPut(*q, Instance("mail", "http://a:1/"));
    MustPut(*q, Instance("mail", "http://b:1/"));
    MustPut(*q, Instance("gone", "http://a:1/"));
    MustPut(*q, Instance("gone", "http://b:1/"));
    clock->Advance(500);
    MustPut(*q, Full("billing", "http://b:1/"));  // renewed and changed
    ASSERT_EQ(*conformance::Unsubscribe(*q, "mail", "http://a:1/"), 1u);
    ASSERT_EQ(*conformance::Unsubscribe(*q, "gone"), 2u);
    before = MustList(*q);
  }
  ASSERT_EQ(Keys(before), (std::vector<std::string>{"billing http://a:1/", "billing http://b:1/",
                                                    "mail http://b:1/"}));
  for (int restart = 0; restart < 2; ++restart) {
    auto q = MustOpen(o);
    std::vector<Subscription> after = MustList(*q);
    ASSERT_EQ(after.size(), before.size());
    for (size_t i = 0; i < after.size(); ++i) EXPECT_TRUE(SameSubscription(after[i], before[i]));
  }
  // A renewal after the restart still keeps created_ms.
  auto q = MustOpen(o);
  clock->Advance(1'000);
  Subscription renewed = MustPut(*q, Instance("mail", "http://b:1/"));
  EXPECT_EQ(renewed.created_ms, before[2].created_ms);
  EXPECT_EQ(renewed.renewed_ms, clock->NowMs());
}

TEST(EmbeddedSubscriptions, AnInstanceThatLapsedBeforeOrWhileClosedIsNotBroughtBack) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  QueueOptions o = Embedded(tmp.data(), FsyncPolicy::kNever, clock);
  Subscription brief = Instance("app", "http://a:1/");
  brief.ttl_ms = 1'000;
  Subscription longer = Instance("app", "http://b:1/");
  longer.ttl_ms = 5'000;
  {
    auto q = MustOpen(o);
    MustPut(*q, brief);
    MustPut(*q, longer);
    clock->Advance(1'000);  // `brief` lapses; nobody lists it, so no record says so
  }
  {
    auto q = MustOpen(o);
    EXPECT_EQ(Keys(MustList(*q)), std::vector<std::string>{"app http://b:1/"});
  }
  clock->Advance(4'000);  // `longer` lapses while closed
  auto q = MustOpen(o);
  EXPECT_TRUE(MustList(*q).empty());
}

// --- compaction ---------------------------------------------------------------------

// Jobs added and finished roll the log over many small segments; the first,
// which holds the subscriptions' records, is deleted by compaction only once
// they were copied forward, and a restart still finds them.
TEST(EmbeddedSubscriptions, CompactionCopiesThemForwardBeforeTheirSegmentGoes) {
  TempDir tmp;
  QueueOptions o = Embedded(tmp.data(), FsyncPolicy::kNever);
  o.segment_bytes = 4096;
  const std::string first = tmp.data() + "/log-0000000000000001.dq";
  std::vector<Subscription> subs;
  {
    auto q = MustOpen(o);
    for (int i = 0; i < 5; ++i) MustPut(*q, Full("app", "http://h:" + std::to_string(i + 1) + "/"));
    ASSERT_EQ(*conformance::Unsubscribe(*q, "app", "http://h:5/"), 1u);
    subs = MustList(*q);
    ASSERT_EQ(subs.size(), 4u);
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
    EXPECT_GT(Local(*q).store_stats().log.removed_segments, 0u);
    std::vector<Subscription> now = MustList(*q);
    ASSERT_EQ(now.size(), subs.size());
  }
  auto q = MustOpen(o);
  std::vector<Subscription> after = MustList(*q);
  ASSERT_EQ(after.size(), subs.size());
  for (size_t i = 0; i < after.size(); ++i) EXPECT_TRUE(SameSubscription(after[i], subs[i]));
}

// Subscriptions alone, many segments of them: they are live data like jobs,
// so compaction copies them only when the dead bytes outweigh them, and
// settles; it never copies them round from segment to segment for ever.
// Driven by the test's own loop, so that every compaction step is counted.
TEST(EmbeddedSubscriptions, CompactionOfSubscriptionsAloneSettlesInBoundedDisk) {
  TempDir tmp;
  QueueOptions o = Embedded(tmp.data(), FsyncPolicy::kNever);
  o.segment_bytes = 4096;
  auto q = MustOpen(o, OpenOptions{.caller_loop = true, .file_system = nullptr});
  QueueDriver* driver = q->driver();
  ASSERT_NE(driver, nullptr);
  driver->RunDue();
  uint64_t put_bytes = 0;
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 100; ++i) {
      Subscription s = Full("app", "http://h:1/" + std::to_string(i));
      put_bytes += SubscriptionBound(s);
      MustPut(*q, s);
      driver->Flush();
      driver->RunDue();
    }
  }
  // Run the loop until compaction has nothing left to do: 200 turns in a
  // row that copy nothing (a turn waiting for an fdatasync copies nothing
  // either, so this can stop early, never late).
  int quiet = 0;
  uint64_t last = Local(*q).store_stats().log.rewritten_bytes;
  ASSERT_TRUE(PollUntil(
      [&] {
        driver->RunDue();
        driver->Flush();
        uint64_t now = Local(*q).store_stats().log.rewritten_bytes;
        quiet = now == last ? quiet + 1 : 0;
        last = now;
        return quiet >= 200;
      },
      std::chrono::seconds(20), std::chrono::milliseconds(0)))
      << "compaction kept copying: " << last << " bytes";
  LocalQueue::StoreStats st = Local(*q).store_stats();
  EXPECT_LE(st.log.rewritten_bytes, put_bytes) << "copied more than was ever put";
  EXPECT_GT(st.log.removed_segments, 0u);
  EXPECT_LE(st.log.disk_bytes, 2 * st.live_bytes + 4 * o.segment_bytes);
  EXPECT_EQ(MustList(*q).size(), 100u);
  q.reset();
  q = MustOpen(o);
  EXPECT_EQ(MustList(*q).size(), 100u);
}

// --- faults ---------------------------------------------------------------------------

TEST(EmbeddedSubscriptions, ATornTailLosesOnlyTheTornPut) {
  TempDir tmp;
  {
    auto q = MustOpen(Embedded(tmp.data()));
    MustPut(*q, Instance("app", "http://a:1/"));
    MustPut(*q, Instance("app", "http://b:1/"));
  }
  std::vector<std::string> segs = Segments(tmp.data());
  std::string last;
  for (const std::string& s : segs) {
    if (FileSize(s) > kSegmentHeaderBytes) last = s;
  }
  ASSERT_FALSE(last.empty());
  ASSERT_EQ(truncate(last.c_str(), static_cast<off_t>(FileSize(last) - 3)), 0);
  for (const std::string& s : segs) {
    if (s > last) std::remove(s.c_str());
  }
  auto q = MustOpen(Embedded(tmp.data()));
  EXPECT_GT(Local(*q).store_stats().recovery.torn_bytes, 0u);
  EXPECT_EQ(Keys(MustList(*q)), std::vector<std::string>{"app http://a:1/"});
  // Writing goes on after the cut.
  MustPut(*q, Instance("app", "http://c:1/"));
  q.reset();
  q = MustOpen(Embedded(tmp.data()));
  EXPECT_EQ(Keys(MustList(*q)), (std::vector<std::string>{"app http://a:1/", "app http://c:1/"}));
}

TEST(EmbeddedSubscriptions, AFullDiskRefusesANewInstanceButTakesRenewalsAndRemovals) {
  TempDir tmp;
  auto fs = std::make_shared<FaultyFileSystem>();
  QueueOptions o = Embedded(tmp.data(), FsyncPolicy::kEverySec);
  auto q = MustOpen(o, OpenOptions{.file_system = fs});
  MustPut(*q, Instance("app", "http://a:1/"));
  MustPut(*q, Instance("app", "http://b:1/"));
  fs->full = true;
  // New instances fill the prepared room until they are refused.
  Result<Subscription> refused = Internal("no put was refused");
  int filled = 0;
  for (; filled < 100'000; ++filled) {
    refused = conformance::Put(*q, Instance("fill", "http://h:1/" + std::to_string(filled)));
    if (!refused.ok()) break;
  }
  EXPECT_EQ(refused.status().code(), Code::kUnavailable) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("disk full"), std::string::npos)
      << refused.status().ToString();
  EXPECT_EQ(MustList(*q, "fill").size(), static_cast<size_t>(filled));
  // The room kept back takes what keeps existing instances going.
  Subscription renewed = MustPut(*q, Full("app", "http://a:1/"));
  auto removed = conformance::Unsubscribe(*q, "app", "http://b:1/");
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(*removed, 1u);
  EXPECT_EQ(Local(*q).store_stats().log.write_failures, 0u)
      << "a write failed: a change was made without room";
  fs->full = false;
  ASSERT_TRUE(PollUntil([&] { return conformance::Put(*q, Instance("app", "http://new:1/")).ok(); },
                        std::chrono::seconds(10), std::chrono::milliseconds(2)));
  q.reset();
  q = MustOpen(Embedded(tmp.data()));
  std::vector<Subscription> after = MustList(*q, "app");
  ASSERT_EQ(Keys(after), (std::vector<std::string>{"app http://a:1/", "app http://new:1/"}));
  EXPECT_TRUE(SameSubscription(after[0], renewed));
  EXPECT_EQ(MustList(*q, "fill").size(), static_cast<size_t>(filled));
}

// --- the reply gate -------------------------------------------------------------------

// Called directly (no caller_loop), a put under fsync always returns only
// once the fdatasync that covers it has.
TEST(EmbeddedSubscriptions, UnderFsyncAlwaysAPutIsAnsweredOnlyOnceItIsSynced) {
  TempDir tmp;
  auto fs = std::make_shared<server::testing::HeldSyncFileSystem>();
  auto q = MustOpen(Embedded(tmp.data()), OpenOptions{.file_system = fs});
  fs->Hold();
  std::promise<Result<Subscription>> answer;
  auto answered = answer.get_future();
  std::thread caller([&] {
    q->PutSubscriptionAsync(Instance("app", "http://a:1/"),
                            [&](Result<Subscription> r) { answer.set_value(std::move(r)); });
  });
  ASSERT_TRUE(fs->WaitHeld(std::chrono::seconds(10))) << "no fdatasync began";
  EXPECT_EQ(answered.wait_for(conformance::kQuiet), std::future_status::timeout)
      << "answered before its fdatasync returned";
  fs->Release();
  ASSERT_EQ(answered.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  caller.join();
  EXPECT_TRUE(answered.get().ok());
}

// Driven by a caller's loop (as delayq serve runs it), a put and a delete
// are answered at once, and the loop holds the replies: Released() reaches
// the Mark() read after each only once its fdatasync has returned.
TEST(EmbeddedSubscriptions, UnderFsyncAlwaysTheLoopMayReleaseAPutOrDeleteOnlyOnceSynced) {
  TempDir tmp;
  auto fs = std::make_shared<server::testing::HeldSyncFileSystem>();
  auto q = MustOpen(Embedded(tmp.data()), OpenOptions{.caller_loop = true, .file_system = fs});
  QueueDriver* driver = q->driver();
  ASSERT_NE(driver, nullptr);
  driver->RunDue();
  for (int step = 0; step < 2; ++step) {
    fs->Hold();
    bool answered = false;
    if (step == 0) {
      q->PutSubscriptionAsync(Instance("app", "http://a:1/"), [&](Result<Subscription> r) {
        EXPECT_TRUE(r.ok()) << r.status().ToString();
        answered = true;
      });
    } else {
      q->DeleteSubscriptionAsync("app", "", [&](Result<uint64_t> r) {
        EXPECT_EQ(r.ok() ? *r : 0, 1u);
        answered = true;
      });
    }
    EXPECT_TRUE(answered);
    uint64_t mark = driver->Mark();
    driver->Flush();  // the turn ends: written, and the sync asked for
    ASSERT_TRUE(fs->WaitHeld(std::chrono::seconds(10))) << "no fdatasync began";
    EXPECT_LT(driver->Released(), mark) << "step " << step;
    fs->Release();
    EXPECT_TRUE(PollUntil([&] { return driver->Released() >= mark; }, std::chrono::seconds(10),
                          std::chrono::milliseconds(1)))
        << "step " << step;
  }
}

// --- versions -------------------------------------------------------------------------

// A data directory of a delayq before subscriptions (format version 2) is
// read, and its subscriptions go to a segment of the current version.
TEST(EmbeddedSubscriptions, AVersion2LogIsReadAndASubscriptionGoesToANewSegment) {
  TempDir tmp;
  {
    auto q = MustOpen(Embedded(tmp.data()));
    JobSpec spec;
    spec.topic = "v";
    spec.id = "old";
    spec.body = "from version 2";
    ASSERT_TRUE(q->Add(spec).ok());
  }
  std::vector<std::string> segs = Segments(tmp.data());
  ASSERT_EQ(segs.size(), 1u);
  {
    std::fstream f(segs[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8);
    f.put(2);  // version 2: its records are the same bytes
  }
  const std::string old = ReadAll(segs[0]);
  {
    auto q = MustOpen(Embedded(tmp.data()));
    EXPECT_EQ(q->Get("old")->body, "from version 2");
    MustPut(*q, Instance("app", "http://a:1/"));
  }
  // Never appended to (compaction may have copied its job forward and
  // deleted it since).
  if (access(segs[0].c_str(), F_OK) == 0) {
    EXPECT_EQ(ReadAll(segs[0]), old) << "a version-2 segment was written to";
  }
  for (const std::string& path : Segments(tmp.data())) {
    if (path == segs[0]) continue;
    SegmentHeader h;
    ASSERT_TRUE(DecodeSegmentHeader(ReadAll(path), &h).ok()) << path;
    EXPECT_EQ(h.version, kFormatVersion) << path;
  }
  auto q = MustOpen(Embedded(tmp.data()));
  EXPECT_EQ(q->Get("old")->body, "from version 2");
  EXPECT_EQ(Keys(MustList(*q)), std::vector<std::string>{"app http://a:1/"});
}

}  // namespace
}  // namespace delayq::store
