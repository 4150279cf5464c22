// The embedded store: its record format, recovery (whole, torn, damaged),
// failures injected at every write and sync point, a full disk, a failed
// fdatasync, compaction in bounded disk, and the data directory's errors.
// Real files in a temporary directory; the queue is the public Queue.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "delayq/queue.h"
#include "gtest/gtest.h"
#include "local/local_queue.h"
#include "log/faulty_file_system.h"
#include "log/log_format.h"
#include "log/store_testing.h"
#include "queue/open.h"
#include "testing/poll.h"

namespace delayq::store {
namespace {

// --- the record format -----------------------------------------------------------

TEST(LogFormat, EveryRecordTypeReadsBackAsWritten) {
  engine::JobImage job;
  job.id = "order-42";
  job.seq = 123456789;
  job.topic = "close.order";
  job.state = JobState::kReserved;
  job.run_at_ms = 1'800'000'000'000;
  job.reserved_until_ms = 1'800'000'060'000;
  job.ttr_ms = 60000;
  job.priority = 7;
  job.max_attempts = 3;
  job.attempts = 2;
  job.give_backs = 3;
  job.last_error = "timeout";
  const std::string body("\0binary\xff", 8);
  job.body = body;
  std::string bytes;
  EncodePut(job, 7, &bytes);
  EncodeUpdate(job, 7, &bytes);
  EncodeRemove(job, 7, &bytes);
  EncodePause("t", -1, 7, &bytes);

  std::string_view rest = bytes;
  Record r;
  size_t size = 0;
  std::string error;
  ASSERT_EQ(ReadRecord(rest, 7, &r, &size, &error), ReadOutcome::kRecord) << error;
  EXPECT_EQ(r.type, RecordType::kPut);
  EXPECT_EQ(r.job.id, job.id);
  EXPECT_EQ(r.job.seq, job.seq);
  EXPECT_EQ(r.job.topic, job.topic);
  EXPECT_EQ(r.job.state, job.state);
  EXPECT_EQ(r.job.run_at_ms, job.run_at_ms);
  EXPECT_EQ(r.job.reserved_until_ms, job.reserved_until_ms);
  EXPECT_EQ(r.job.ttr_ms, job.ttr_ms);
  EXPECT_EQ(r.job.priority, job.priority);
  EXPECT_EQ(r.job.max_attempts, job.max_attempts);
  EXPECT_EQ(r.job.attempts, job.attempts);
  EXPECT_EQ(r.job.give_backs, job.give_backs);
  EXPECT_EQ(r.job.last_error, job.last_error);
  EXPECT_EQ(r.job.body, job.body);
  rest.remove_prefix(size);
  ASSERT_EQ(ReadRecord(rest, 7, &r, &size, &error), ReadOutcome::kRecord) << error;
  EXPECT_EQ(r.type, RecordType::kUpdate);
  EXPECT_EQ(r.job.attempts, 2u);
  EXPECT_EQ(r.job.give_backs, 3u);
  EXPECT_EQ(r.job.reserved_until_ms, job.reserved_until_ms);
  EXPECT_EQ(r.job.last_error, "timeout");
  rest.remove_prefix(size);
  ASSERT_EQ(ReadRecord(rest, 7, &r, &size, &error), ReadOutcome::kRecord) << error;
  EXPECT_EQ(r.type, RecordType::kRemove);
  EXPECT_EQ(r.job.id, job.id);
  EXPECT_EQ(r.job.seq, job.seq);
  rest.remove_prefix(size);
  ASSERT_EQ(ReadRecord(rest, 7, &r, &size, &error), ReadOutcome::kRecord) << error;
  EXPECT_EQ(r.type, RecordType::kPause);
  EXPECT_EQ(r.topic, "t");
  EXPECT_EQ(r.paused_until_ms, -1);
  rest.remove_prefix(size);
  EXPECT_TRUE(rest.empty());
}

// A reservation made with a reserve's own TTR keeps it across a restart:
// PUT (compaction) and UPDATE carry it (flag 16); without one, neither does.
TEST(LogFormat, AReservationsOwnTtrReadsBackOnPutAndUpdate) {
  engine::JobImage job;
  job.id = "pushed";
  job.seq = 123456789;
  job.topic = "t";
  job.state = JobState::kReserved;
  job.run_at_ms = 1'800'000'000'000;
  job.reserved_until_ms = 1'800'000'061'000;
  job.ttr_ms = 600'000;
  job.reservation_ttr_ms = 61'000;
  std::string bytes;
  EncodePut(job, 7, &bytes);
  EncodeUpdate(job, 7, &bytes);
  job.reservation_ttr_ms = 0;
  EncodeUpdate(job, 7, &bytes);
  std::string_view rest = bytes;
  Record r;
  size_t size = 0;
  std::string error;
  for (uint32_t want : {61'000u, 61'000u, 0u}) {
    ASSERT_EQ(ReadRecord(rest, 7, &r, &size, &error), ReadOutcome::kRecord) << error;
    EXPECT_EQ(r.job.reservation_ttr_ms, want);
    EXPECT_EQ(r.job.reserved_until_ms, job.reserved_until_ms);
    EXPECT_EQ(r.job.id, "pushed");
    rest.remove_prefix(size);
  }
  EXPECT_EQ(r.job.attempts, 0u);
  EXPECT_TRUE(rest.empty());
}

TEST(LogFormat, AGeneratedIdTravelsAsItsHandleAndComesBackAsText) {
  engine::JobImage job;
  job.seq = 0x1a2b3c4d5e6f7788;
  job.handle = 0x1234;
  job.generated_id = true;
  job.topic = "t";
  job.body = "b";
  std::string bytes;
  EncodePut(job, 7, &bytes);
  EncodeRemove(job, 7, &bytes);
  char text[engine::kGeneratedIdBytes];
  std::string_view want = engine::FormatGeneratedId(job.seq, job.handle, text);
  std::string_view rest = bytes;
  Record r;
  size_t size = 0;
  std::string error;
  ASSERT_EQ(ReadRecord(rest, 7, &r, &size, &error), ReadOutcome::kRecord) << error;
  EXPECT_EQ(r.job.id, want);
  EXPECT_TRUE(r.job.generated_id);
  EXPECT_EQ(r.job.give_backs, 0u);  // none given back: not even a byte for it
  EXPECT_LT(size, 40u);             // 24 hex digits would not fit with the rest
  rest.remove_prefix(size);
  ASSERT_EQ(ReadRecord(rest, 7, &r, &size, &error), ReadOutcome::kRecord) << error;
  EXPECT_EQ(r.type, RecordType::kRemove);
  EXPECT_EQ(r.job.id, want);
}

TEST(LogFormat, EveryCutIsIncompleteAndEveryFlippedBitIsCorrupt) {
  engine::JobImage job;
  job.id = "a";
  job.seq = 1;
  job.topic = "t";
  job.body = "hello";
  std::string bytes;
  EncodePut(job, 7, &bytes);
  Record r;
  size_t size = 0;
  std::string error;
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    ReadOutcome got = ReadRecord(std::string_view(bytes).substr(0, cut), 7, &r, &size, &error);
    EXPECT_EQ(got, ReadOutcome::kIncomplete) << "cut at " << cut;
  }
  // Read as a record of another segment, it does not check out either.
  EXPECT_EQ(ReadRecord(bytes, 8, &r, &size, &error), ReadOutcome::kCorrupt);
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = bytes;
      bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
      ReadOutcome got = ReadRecord(bad, 7, &r, &size, &error);
      // A flipped length may look like a longer record still arriving.
      EXPECT_NE(got, ReadOutcome::kRecord) << "byte " << i << " bit " << bit;
    }
  }
}

TEST(LogFormat, SegmentHeaderChecksMagicAndVersion) {
  std::string h;
  EncodeSegmentHeader(SegmentHeader{5, 99}, &h);
  SegmentHeader got;
  ASSERT_TRUE(DecodeSegmentHeader(h, &got).ok());
  EXPECT_EQ(got.number, 5u);
  EXPECT_EQ(got.last_seq, 99u);
  std::string bad = h;
  bad[0] = 'X';
  EXPECT_NE(DecodeSegmentHeader(bad, &got).message().find("magic"), std::string::npos);
  EXPECT_EQ(got.version, kFormatVersion);
  bad = h;
  bad[8] = 5;  // a later delayq's
  EXPECT_NE(DecodeSegmentHeader(bad, &got).message().find("version 5"), std::string::npos);
  bad[8] = 0;
  EXPECT_NE(DecodeSegmentHeader(bad, &got).message().find("version 0"), std::string::npos);
  bad[8] = 1;  // the version before kDedup records: still read
  ASSERT_TRUE(DecodeSegmentHeader(bad, &got).ok());
  EXPECT_EQ(got.version, 1u);
  bad[8] = 2;  // the version before kSubscription records: still read
  ASSERT_TRUE(DecodeSegmentHeader(bad, &got).ok());
  EXPECT_EQ(got.version, 2u);
  bad[8] = 3;  // the version before kSchedule records: still read
  ASSERT_TRUE(DecodeSegmentHeader(bad, &got).ok());
  EXPECT_EQ(got.version, 3u);
}

TEST(LogFormat, ADedupRecordReadsBackAsWritten) {
  for (bool generated : {false, true}) {
    engine::DedupImage add;
    add.add_id = generated ? "" : "pay-invoice-42";
    add.id = generated ? "0123456789abcdef01234567" : "pay-invoice-42";
    add.key = "k-0123456789abcdef";
    add.state = JobState::kDelayed;
    add.run_at_ms = 1'800'000'000'000;
    add.expires_ms = 1'700'000'300'000;
    std::string bytes;
    EncodeDedup(add, 3, &bytes);
    Record r;
    size_t size = 0;
    std::string error;
    ASSERT_EQ(ReadRecord(bytes, 3, &r, &size, &error), ReadOutcome::kRecord) << error;
    EXPECT_EQ(size, bytes.size());
    EXPECT_EQ(r.type, RecordType::kDedup);
    EXPECT_EQ(r.dedup.add_id, add.add_id);
    EXPECT_EQ(r.dedup.id, add.id);
    EXPECT_EQ(r.dedup.key, add.key);
    EXPECT_EQ(r.dedup.state, add.state);
    EXPECT_EQ(r.dedup.run_at_ms, add.run_at_ms);
    EXPECT_EQ(r.dedup.expires_ms, add.expires_ms);
  }
}

// --- reopening -------------------------------------------------------------------

TEST(EmbeddedStore, EveryJobStateAndPauseComesBackAfterReopen) {
  TempDir tmp;
  std::string receipt;
  std::string generated;
  {
    auto q = MustOpen(Embedded(tmp.data()));
    ASSERT_TRUE(q);
    ASSERT_TRUE(q->Add(Spec("t", "delayed", "d", 3'600'000)).ok());
    ASSERT_TRUE(q->Add(Spec("t", "ready", std::string("r\0\xff", 3))).ok());
    auto gen = q->Add(Spec("g", "", "generated body"));
    ASSERT_TRUE(gen.ok());
    generated = gen->id;
    ASSERT_TRUE(q->Add(Spec("r", "reserved", "x")).ok());
    receipt = ReserveOne(*q, "r").receipt;
    ASSERT_TRUE(q->Add(Spec("b", "buried", "y")).ok());
    Delivery b = ReserveOne(*q, "b");
    ASSERT_TRUE(q->Bury("buried", b.receipt, "bad input").ok());
    ASSERT_TRUE(q->Add(Spec("f", "finished", "z")).ok());
    ASSERT_TRUE(q->Finish("finished", ReserveOne(*q, "f").receipt).ok());
    ASSERT_TRUE(q->Add(Spec("f", "deleted", "z")).ok());
    ASSERT_TRUE(q->Delete("deleted").ok());
    JobSpec big = Spec("big", "big", std::string(200 * 1024, 'B'));
    ASSERT_TRUE(q->Add(big).ok());
    JobSpec replaced = Spec("t", "replaced", "old");
    ASSERT_TRUE(q->Add(replaced).ok());
    replaced.body = "new";
    replaced.replace = true;
    ASSERT_TRUE(q->Add(replaced).ok());
    ASSERT_TRUE(q->Pause("paused", 0).ok());
    ASSERT_TRUE(q->Pause("resumed", 0).ok());
    ASSERT_TRUE(q->Resume("resumed").ok());
  }
  auto q = MustOpen(Embedded(tmp.data()));
  ASSERT_TRUE(q);
  auto stats = q->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->jobs, 7u);
  EXPECT_EQ(q->Get("delayed")->state, JobState::kDelayed);
  EXPECT_EQ(q->Get("ready")->body, std::string("r\0\xff", 3));
  EXPECT_EQ(q->Get(generated)->body, "generated body");
  EXPECT_EQ(q->Get("reserved")->state, JobState::kReserved);
  EXPECT_EQ(q->Get("reserved")->receipt, receipt);
  EXPECT_EQ(q->Get("reserved")->attempts, 1u);
  EXPECT_EQ(q->Get("buried")->state, JobState::kBuried);
  EXPECT_EQ(q->Get("buried")->last_error, "bad input");
  EXPECT_EQ(q->Get("big")->body.size(), 200u * 1024);
  EXPECT_EQ(q->Get("replaced")->body, "new");
  EXPECT_EQ(q->Get("finished").status().code(), Code::kNotFound);
  EXPECT_EQ(q->Get("deleted").status().code(), Code::kNotFound);
  EXPECT_TRUE(q->Topic("paused")->paused);
  EXPECT_FALSE(q->Topic("resumed")->paused);
  // The reservation kept its receipt: the worker that held it can finish.
  EXPECT_TRUE(q->Finish("reserved", receipt).ok());
  // New generated ids do not collide with restored ones.
  auto again = q->Add(Spec("g", "", "second"));
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->id, generated);
  EXPECT_GT(again->id, generated);
}

// A receipt names one delivery, across restarts too: the deliveries given
// back by unreserve are logged, so the delivery after a restart does not get
// a receipt handed out before it (nor does a restored reservation lose its
// receipt).
TEST(EmbeddedStore, AReceiptIssuedBeforeARestartIsNotIssuedAgainAfterIt) {
  TempDir tmp;
  std::vector<std::string> before;
  {
    auto q = MustOpen(Embedded(tmp.data()));
    ASSERT_TRUE(q);
    ASSERT_TRUE(q->Add(Spec("u", "given", "x")).ok());
    ASSERT_TRUE(q->Add(Spec("u.held", "held", "y")).ok());
    for (int i = 0; i < 2; ++i) {
      before.push_back(ReserveOne(*q, "u").receipt);
      ASSERT_TRUE(q->Unreserve("given", before.back()).ok());
    }
    before.push_back(ReserveOne(*q, "u.held").receipt);
    ASSERT_TRUE(q->Unreserve("held", before.back()).ok());
    before.push_back(ReserveOne(*q, "u.held").receipt);  // held across the restart
  }
  auto q = MustOpen(Embedded(tmp.data()));
  ASSERT_TRUE(q);
  EXPECT_EQ(q->Get("held")->receipt, before.back()) << "a restored reservation lost its receipt";
  Delivery after = ReserveOne(*q, "u");
  EXPECT_EQ(after.attempts, 1u);
  EXPECT_EQ(std::count(before.begin(), before.end(), after.receipt), 0)
      << "receipt " << after.receipt << " was handed out before the restart";
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(q->Finish("given", before[i]).code(), Code::kStaleReceipt) << i;
  }
  EXPECT_EQ(q->Finish("held", before[2]).code(), Code::kStaleReceipt);
  EXPECT_TRUE(q->Finish("held", before.back()).ok());
  EXPECT_TRUE(q->Finish("given", after.receipt).ok());
}

// A log written by a delayq of format version 1 is read, and written on in
// a new segment of the current version (an older delayq refuses that one by
// name instead of finding records it cannot read in a segment it can).
TEST(EmbeddedStore, AVersion1LogIsReadAndContinuedInANewSegment) {
  TempDir tmp;
  {
    auto q = MustOpen(Embedded(tmp.data()));
    ASSERT_TRUE(q);
    ASSERT_TRUE(q->Add(Spec("v", "old", "x")).ok());
  }
  std::vector<std::string> segs = Segments(tmp.data());
  ASSERT_EQ(segs.size(), 1u);
  {
    std::fstream f(segs[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8);
    f.put(1);  // version 1: records without give-backs are the same bytes
  }
  {
    auto q = MustOpen(Embedded(tmp.data()));
    ASSERT_TRUE(q);
    EXPECT_EQ(q->Get("old")->body, "x");
    Delivery d = ReserveOne(*q, "v");
    ASSERT_TRUE(q->Unreserve("old", d.receipt).ok());
  }
  segs = Segments(tmp.data());
  ASSERT_EQ(segs.size(), 2u);
  std::ifstream f(segs[1], std::ios::binary);
  std::string header(kSegmentHeaderBytes, '\0');
  f.read(header.data(), header.size());
  SegmentHeader h;
  ASSERT_TRUE(DecodeSegmentHeader(header, &h).ok());
  EXPECT_EQ(h.version, kFormatVersion);
  auto q = MustOpen(Embedded(tmp.data()));
  ASSERT_TRUE(q);
  EXPECT_EQ(q->Get("old")->state, JobState::kReady);
}

TEST(EmbeddedStore, JobsThatFellDueWhileClosedAreReadyAtOnce) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  QueueOptions o = Embedded(tmp.data());
  o.clock = clock;
  {
    auto q = MustOpen(o);
    ASSERT_TRUE(q->Add(Spec("t", "soon", "s", 60'000)).ok());
    ASSERT_TRUE(q->Add(Spec("t", "later", "l", 600'000)).ok());
    ASSERT_TRUE(q->Add(Spec("r", "held", "h")).ok());
    ReserveOne(*q, "r");  // TTR 60 s
  }
  clock->Advance(120'000);  // "down" for two minutes
  auto q = MustOpen(o);
  EXPECT_EQ(q->Get("soon")->state, JobState::kReady);
  EXPECT_EQ(q->Get("later")->state, JobState::kDelayed);
  // Its TTR ran out while closed: back to ready, with the attempt counted.
  auto held = q->Get("held");
  EXPECT_EQ(held->state, JobState::kReady);
  EXPECT_EQ(held->attempts, 1u);
  EXPECT_EQ(ReserveOne(*q, "t").id, "soon");
}

TEST(EmbeddedStore, TornTailIsCutAndReported) {
  TempDir tmp;
  {
    auto q = MustOpen(Embedded(tmp.data()));
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(q->Add(Spec("t", "j" + std::to_string(i), "b")).ok());
  }
  std::vector<std::string> segs = Segments(tmp.data());
  ASSERT_FALSE(segs.empty());
  // The newest segment with content ends in half a record.
  std::string last = segs.back();
  for (auto it = segs.rbegin(); it != segs.rend(); ++it) {
    if (FileSize(*it) > kSegmentHeaderBytes) {
      last = *it;
      break;
    }
  }
  uint64_t size = FileSize(last);
  ASSERT_EQ(truncate(last.c_str(), static_cast<off_t>(size - 3)), 0);
  // Remove the empty newer segments so `last` is the newest.
  for (const std::string& s : segs) {
    if (s > last) std::remove(s.c_str());
  }
  auto q = OpenQueue(Embedded(tmp.data()));
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  auto* local = dynamic_cast<LocalQueue*>(q->get());
  ASSERT_NE(local, nullptr);
  EXPECT_GT(local->store_stats().recovery.torn_bytes, 0u);
  EXPECT_EQ((*q)->Stats()->jobs, 9u);  // the torn add is gone, the rest are whole
  EXPECT_EQ((*q)->Get("j9").status().code(), Code::kNotFound);
  EXPECT_TRUE((*q)->Get("j8").ok());
}

TEST(EmbeddedStore, DamageInAnOlderSegmentRefusesToStartNamingFileAndOffset) {
  TempDir tmp;
  QueueOptions o = Embedded(tmp.data(), "never");
  o.segment_bytes = 4096;
  {
    auto q = MustOpen(o);
    for (int i = 0; i < 200; ++i) {
      ASSERT_TRUE(q->Add(Spec("t", "j" + std::to_string(i), std::string(100, 'x'))).ok());
    }
  }
  std::vector<std::string> segs = Segments(tmp.data());
  ASSERT_GE(segs.size(), 3u);
  {
    std::fstream f(segs[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x55');
  }
  auto q = OpenQueue(o);
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().code(), Code::kInternal);
  EXPECT_NE(q.status().message().find(segs[0]), std::string::npos) << q.status().ToString();
  EXPECT_NE(q.status().message().find("damaged at byte"), std::string::npos);
}

TEST(EmbeddedStore, ADamagedRecordLengthIsReportedAsDamageAtItsOffset) {
  TempDir tmp;
  QueueOptions o = Embedded(tmp.data(), "never");
  o.segment_bytes = 4096;
  {
    auto q = MustOpen(o);
    for (int i = 0; i < 100; ++i) {
      ASSERT_TRUE(q->Add(Spec("t", "j" + std::to_string(i), std::string(100, 'x'))).ok());
    }
  }
  std::vector<std::string> segs = Segments(tmp.data());
  ASSERT_GE(segs.size(), 3u);
  {
    // The first record's length says a gigabyte: within the limit, far past the file.
    std::fstream f(segs[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(kSegmentHeaderBytes + 4);
    const char len[4] = {0, 0, 0, 0x40};
    f.write(len, 4);
  }
  auto q = OpenQueue(o);
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().code(), Code::kInternal);
  EXPECT_NE(q.status().message().find("damaged at byte 32"), std::string::npos)
      << q.status().ToString();
}

TEST(EmbeddedStore, AReusedFileRenamedIntoPlaceBeforeItsHeaderIsCutAtRecovery) {
  TempDir tmp;
  QueueOptions o = Embedded(tmp.data(), "never");
  o.segment_bytes = 4096;
  {
    auto q = MustOpen(o);
    for (int i = 0; i < 100; ++i) {
      ASSERT_TRUE(q->Add(Spec("t", "j" + std::to_string(i), std::string(100, 'x'))).ok());
    }
  }
  std::vector<std::string> segs = Segments(tmp.data());
  ASSERT_GE(segs.size(), 2u);
  // What a crash leaves between renaming a spare into place and writing
  // its header: the next segment's name on an old segment's bytes. (The
  // newest's number plus one: compaction may have removed the first ones.)
  const std::string newest = segs.back().substr(segs.back().rfind('/') + 1);
  char next[64];
  std::snprintf(next, sizeof next, "/log-%016llx.dq",
                std::stoull(newest.substr(4, 16), nullptr, 16) + 1);
  ASSERT_EQ(std::system(("cp '" + segs.front() + "' '" + tmp.data() + next + "'").c_str()), 0);
  auto q = OpenQueue(o);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ((*q)->Stats()->jobs, 100u);
}

TEST(EmbeddedStore, SegmentFilesAreReusedAndOldRecordsInThemDoNotComeBack) {
  TempDir tmp;
  QueueOptions o = Embedded(tmp.data(), "never");
  o.segment_bytes = 4096;
  {
    auto q = MustOpen(o);
    for (int i = 0; i < 3000; ++i) {
      auto added = q->Add(Spec("t", "", std::string(100, 'a' + i % 26)));
      ASSERT_TRUE(added.ok());
      Delivery d = ReserveOne(*q, "t");
      ASSERT_TRUE(q->Finish(d.id, d.receipt).ok());
    }
    ASSERT_TRUE(q->Add(Spec("t", "last", "kept")).ok());
    store::LogStats st = dynamic_cast<LocalQueue&>(*q).store_stats().log;
    EXPECT_GT(st.removed_segments, 10u);
    EXPECT_GT(st.reused_files, 10u);
  }
  // Files were written over many times; a reopen sees only "last".
  auto q = MustOpen(o);
  EXPECT_EQ(q->Stats()->jobs, 1u);
  EXPECT_EQ(q->Get("last")->body, "kept");
}

// A segment that grew past its size for an outsized record is cut back to
// the segment size when its file is reused, so the space on disk stays near
// the live set (the bounded-disk test in embedded_server_test counts it).
TEST(EmbeddedStore, AReusedFileIsNeverBiggerThanASegment) {
  TempDir tmp;
  QueueOptions o = Embedded(tmp.data(), "never");
  o.segment_bytes = 4096;
  auto q = MustOpen(o);
  ASSERT_TRUE(q->Add(Spec("t", "big", std::string(64 * 1024, 'b'))).ok());
  std::string big_segment;
  ASSERT_TRUE(Eventually([&] {
    for (const std::string& s : Segments(tmp.data())) {
      if (FileSize(s) > 64 * 1024) big_segment = s;
    }
    return !big_segment.empty();
  }));
  Delivery big = ReserveOne(*q, "t");
  ASSERT_TRUE(q->Finish(big.id, big.receipt).ok());
  auto& local = dynamic_cast<LocalQueue&>(*q);
  uint64_t reused_before = local.store_stats().log.reused_files;
  int checked = 0;
  for (int i = 0; i < 2000; ++i) {
    ASSERT_TRUE(q->Add(Spec("t", "", std::string(100, 'a' + i % 26))).ok());
    Delivery d = ReserveOne(*q, "t");
    ASSERT_TRUE(q->Finish(d.id, d.receipt).ok());
    std::string newest = Segments(tmp.data()).back();
    if (newest <= big_segment) continue;  // the big record's own segment
    // Past the size by the last batch, and by the room made for the change
    // that passes it (Log::Room: a put and an update with the longest id,
    // and the reserve behind them, a quarter of a segment) until the
    // segment is closed and cut.
    EXPECT_LE(FileSize(newest), 4096u + 512u + store::PutBound(kMaxIdBytes, 1, 0, 100) +
                                    store::UpdateBound(kMaxIdBytes, 0) + 4096u / 4)
        << newest << " after " << i << " cycles";
    ++checked;
  }
  EXPECT_GT(checked, 1000);
  store::LogStats st = local.store_stats().log;
  EXPECT_GT(st.reused_files, reused_before);
  EXPECT_NE(access(big_segment.c_str(), F_OK), 0) << big_segment << " is still there";
}

// Zeros are written ahead of the appends (store::Log, "Preparing space"):
// after a crash they follow the last record and are cut without a word of
// damage; after a clean close there is nothing to cut.
TEST(EmbeddedStore, SpacePreparedAheadIsCutQuietlyAfterACrashAndAbsentAfterAClose) {
  TempDir tmp;
  auto fs = std::make_shared<FaultyFileSystem>();
  QueueOptions o = Embedded(tmp.data(), "always");
  OpenOptions open{.file_system = fs};
  {
    auto q = MustOpen(o, open);
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(q->Add(Spec("t", "j" + std::to_string(i), "b")).ok());
    auto& local = dynamic_cast<LocalQueue&>(*q);
    std::string head = Segments(tmp.data()).back();
    ASSERT_TRUE(Eventually([&] { return local.store_stats().log.prepared_bytes > 0; }));
    EXPECT_GT(FileSize(head), local.store_stats().log.disk_bytes);
    fs->crashed = true;  // the process dies: a clean close's cut never happens
  }
  {
    auto q = OpenQueue(Embedded(tmp.data()));
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    auto& local = dynamic_cast<LocalQueue&>(**q);
    EXPECT_GT(local.store_stats().recovery.unused_bytes, 0u);
    EXPECT_EQ(local.store_stats().recovery.torn_bytes, 0u);
    EXPECT_EQ((*q)->Stats()->jobs, 100u);
    ASSERT_TRUE((*q)->Add(Spec("t", "after", "b")).ok());
  }
  auto q = OpenQueue(Embedded(tmp.data()));
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  auto& local = dynamic_cast<LocalQueue&>(**q);
  EXPECT_EQ(local.store_stats().recovery.unused_bytes, 0u);
  EXPECT_EQ(local.store_stats().recovery.torn_bytes, 0u);
  EXPECT_EQ((*q)->Stats()->jobs, 101u);
}

// --- failures injected through the file interface --------------------------------

// Runs a fixed workload on a queue whose file system crashes at point
// `crash_at`, noting what was acknowledged; then reopens on the real file
// system and checks that every acknowledged add (not acknowledged finished)
// is there with its body, and no acknowledged finish or delete came back.
// Returns false once crash_at is past the workload's last point.
bool CrashAt(uint64_t crash_at, size_t torn) {
  TempDir tmp;
  auto fs = std::make_shared<FaultyFileSystem>();
  fs->crash_at = crash_at;
  fs->torn_bytes = torn;
  QueueOptions o = Embedded(tmp.data(), "always");
  o.segment_bytes = 4096;  // segments roll during the workload
  OpenOptions open{.file_system = fs};
  std::map<std::string, std::string> acked;  // id -> body
  std::set<std::string> gone;                // removals acknowledged
  std::set<std::string> tried;               // removals attempted: either way
  {
    auto q = OpenServingQueue(o, open);
    if (!q.ok()) return true;  // crashed while opening: nothing was acknowledged
    for (int i = 0; i < 40; ++i) {
      std::string id = "j" + std::to_string(i);
      std::string body = std::string(60, static_cast<char>('a' + i % 26)) + id;
      if ((*q)->Add(Spec("t", id, body)).ok()) acked[id] = body;
      if (i % 3 == 2) {
        std::string victim = "j" + std::to_string(i - 1);
        tried.insert(victim);
        if ((*q)->Delete(victim).ok()) gone.insert(victim);
      }
      if (i % 5 == 4) {
        ReserveRequest r;
        r.topics = {"t"};
        auto got = (*q)->Reserve(r);
        if (got.ok() && !got->empty()) {
          const Delivery& d = (*got)[0];
          if (i % 10 == 9) {
            tried.insert(d.id);
            if ((*q)->Finish(d.id, d.receipt).ok()) gone.insert(d.id);
          } else {
            (void)(*q)->Release(d.id, d.receipt, 0, "again");
          }
        }
      }
    }
  }
  bool reached = fs->crashed;
  auto q = OpenQueue(Embedded(tmp.data(), "always"));
  EXPECT_TRUE(q.ok()) << "crash at " << crash_at << ": " << q.status().ToString();
  if (!q.ok()) return false;
  ExpectAcknowledgedKept(**q, crash_at, acked, gone, tried);
  return reached;
}

TEST(EmbeddedStoreFaults, CrashAtEveryWriteAndSyncPointLosesNothingAcknowledged) {
  for (size_t torn : {size_t{0}, size_t{7}}) {
    uint64_t point = 1;
    while (CrashAt(point, torn) && !HasFailure()) ++point;
    EXPECT_GT(point, 50u) << "the workload should pass many points";
  }
}

TEST(EmbeddedStoreFaults, FullDiskRefusesAddsAtOnceKeepsServingAndResumesWhenSpaceReturns) {
  for (const char* fsync : {"everysec", "always"}) {
    SCOPED_TRACE(fsync);
    TempDir tmp;
    auto fs = std::make_shared<FaultyFileSystem>();
    QueueOptions o = Embedded(tmp.data(), fsync);
    OpenOptions open{.file_system = fs};
    auto q = MustOpen(o, open);
    auto& local = dynamic_cast<LocalQueue&>(*q);
    ASSERT_TRUE(q->Add(Spec("t", "before", "kept")).ok());
    ASSERT_TRUE(q->Add(Spec("t", "work", "w")).ok());
    fs->torn_bytes = 5;
    fs->full = true;
    // Adds go on into the space prepared ahead, then are refused before
    // anything changes: never a write that fails after the change was made.
    const std::string body(10'000, 'x');
    int acked = 0;
    Result<AddResult> refused = Internal("no add was refused");
    for (int i = 0; i < 1000; ++i) {
      refused = q->Add(Spec("t", "fill" + std::to_string(i), body));
      if (!refused.ok()) break;
      ++acked;
    }
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), Code::kUnavailable);
    EXPECT_NE(refused.status().message().find("disk full"), std::string::npos)
        << refused.status().ToString();
    EXPECT_NE(refused.status().message().find(tmp.data()), std::string::npos)
        << refused.status().ToString();
    EXPECT_EQ(q->Get("fill" + std::to_string(acked)).status().code(), Code::kNotFound);
    // Reads, and the work that lets workers drain the queue, go on.
    EXPECT_EQ(q->Get("before")->body, "kept");
    Delivery d = ReserveOne(*q, "t");
    EXPECT_EQ(d.id, "before");
    EXPECT_TRUE(q->Finish(d.id, d.receipt).ok());
    EXPECT_TRUE(q->Delete("work").ok());
    LocalQueue::StoreStats st = local.store_stats();
    EXPECT_TRUE(st.log.short_of_space);
    EXPECT_EQ(st.log.write_failures, 0u) << "a write failed: a change was made without room";
    EXPECT_GE(st.refused_changes, 1u);
    EXPECT_NE(st.health.message().find("disk full"), std::string::npos) << st.health.ToString();
    fs->full = false;
    ASSERT_TRUE(Eventually([&] { return q->Add(Spec("t", "after", body)).ok(); }));
    EXPECT_FALSE(local.store_stats().log.short_of_space);
    EXPECT_TRUE(local.store_stats().health.ok());
    q.reset();
    auto reopened = MustOpen(Embedded(tmp.data()));
    EXPECT_EQ(reopened->Get("before").status().code(), Code::kNotFound);  // finished
    EXPECT_EQ(reopened->Get("work").status().code(), Code::kNotFound);    // deleted
    EXPECT_EQ(reopened->Get("after")->body, body);
    for (int i = 0; i < acked; ++i) {
      ASSERT_TRUE(reopened->Get("fill" + std::to_string(i)).ok()) << i;
    }
    EXPECT_EQ(reopened->Get("fill" + std::to_string(acked)).status().code(), Code::kNotFound);
  }
}

TEST(EmbeddedStoreFaults, FullDiskStillTakesFinishesAfterAddsAreRefused) {
  TempDir tmp;
  auto fs = std::make_shared<FaultyFileSystem>();
  QueueOptions o = Embedded(tmp.data(), "everysec");
  OpenOptions open{.file_system = fs};
  auto q = MustOpen(o, open);
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(q->Add(Spec("w", "w" + std::to_string(i), "b")).ok());
  fs->full = true;
  const std::string body(20'000, 'x');
  for (int i = 0; i < 1000 && q->Add(Spec("t", "f" + std::to_string(i), body)).ok(); ++i) {
  }
  int small = 0;
  while (small < 10'000 && q->Add(Spec("t", "s" + std::to_string(small), "s")).ok()) ++small;
  ASSERT_LT(small, 10'000) << "small adds were never refused";
  ASSERT_EQ(q->Add(Spec("t", "small", "s")).status().code(), Code::kUnavailable);
  // The room kept back for them takes every worker's reserve and finish.
  for (int i = 0; i < 50; ++i) {
    Delivery d = ReserveOne(*q, "w");
    ASSERT_FALSE(d.id.empty());
    ASSERT_TRUE(q->Finish(d.id, d.receipt).ok()) << i;
  }
  fs->full = false;
  q.reset();
  auto reopened = MustOpen(Embedded(tmp.data()));
  EXPECT_EQ(reopened->Topic("w")->ready, 0u);
}

TEST(EmbeddedStoreFaults, FailingWritesRefuseChangesKeepJobsAndResumeWhenWritesWork) {
  TempDir tmp;
  auto fs = std::make_shared<FaultyFileSystem>();
  QueueOptions o = Embedded(tmp.data(), "everysec");
  OpenOptions open{.file_system = fs};
  auto q = MustOpen(o, open);
  ASSERT_TRUE(q->Add(Spec("t", "before", "kept")).ok());
  fs->torn_bytes = 5;  // the first failing write gets a few bytes out
  fs->fail_writes = true;
  auto during = q->Add(Spec("t", "during", "d"));
  ASSERT_FALSE(during.ok());
  EXPECT_EQ(during.status().code(), Code::kUnavailable);
  EXPECT_NE(during.status().message().find("Input/output error"), std::string::npos)
      << during.status().ToString();
  // Refused outright now, and reads still work.
  auto refused = q->Add(Spec("t", "refused", "r"));
  EXPECT_EQ(refused.status().code(), Code::kUnavailable);
  EXPECT_EQ(q->Get("refused").status().code(), Code::kNotFound);
  EXPECT_EQ(q->Get("before")->body, "kept");
  fs->fail_writes = false;
  ASSERT_TRUE(Eventually([&] { return q->Add(Spec("t", "after", "a")).ok(); }));
  q.reset();
  auto reopened = MustOpen(Embedded(tmp.data()));
  EXPECT_EQ(reopened->Get("before")->body, "kept");
  EXPECT_EQ(reopened->Get("after")->body, "a");
  // Its reply was an error, but it was kept in memory and written on retry
  // (a device error, unlike a full disk, is met only after the change).
  EXPECT_EQ(reopened->Get("during")->body, "d");
  EXPECT_EQ(reopened->Get("refused").status().code(), Code::kNotFound);
}

TEST(EmbeddedStoreFaults, FailedFdatasyncStopsChangesForGoodAndKeepsWhatWasAcknowledged) {
  TempDir tmp;
  auto fs = std::make_shared<FaultyFileSystem>();
  QueueOptions o = Embedded(tmp.data(), "always");
  OpenOptions open{.file_system = fs};
  auto q = MustOpen(o, open);
  ASSERT_TRUE(q->Add(Spec("t", "acked", "a")).ok());
  fs->fail_sync = true;
  auto failed = q->Add(Spec("t", "unknown", "u"));
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("storage failed"), std::string::npos)
      << failed.status().ToString();
  fs->fail_sync = false;  // even so: after a failed fdatasync nothing is trusted
  EXPECT_EQ(q->Add(Spec("t", "later", "l")).status().code(), Code::kUnavailable);
  EXPECT_TRUE(q->Get("acked").ok());
  // The failed store sleeps: its threads do not spin on the sync it cannot do.
  auto cpu_ms = [] {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1000 + ts.tv_nsec / 1'000'000;
  };
  int64_t cpu0 = cpu_ms();
  auto wall0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - wall0 < std::chrono::milliseconds(300)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // measuring idle CPU
  }
  EXPECT_LT(cpu_ms() - cpu0, 150) << "a thread spins after the failed fdatasync";
  q.reset();
  auto reopened = MustOpen(Embedded(tmp.data()));
  EXPECT_EQ(reopened->Get("acked")->body, "a");
  EXPECT_EQ(reopened->Get("later").status().code(), Code::kNotFound);
  EXPECT_TRUE(reopened->Add(Spec("t", "later", "l")).ok());  // a restart recovers
}

// --- the fdatasync on an idle caller's loop ------------------------------------------
// With caller_loop the caller writes (Flush at a turn's end) and holds each
// reply until Released() reaches the Mark() read after its call.

uint64_t Syncs(Queue& q) { return dynamic_cast<LocalQueue&>(q).store_stats().log.syncs; }

struct IdleLoop {
  explicit IdleLoop(const std::string& dir, std::string_view fsync = "always") {
    fs = std::make_shared<FaultyFileSystem>();
    QueueOptions o = Embedded(dir, fsync);
    OpenOptions open{.caller_loop = true, .file_system = fs};
    q = MustOpen(o, open);
    d = q->driver();
    fs->last_sync_thread = std::thread::id();  // opening synced on this thread
  }
  // Adds a job; returns the mark its reply waits for.
  uint64_t Add(const std::string& id) {
    EXPECT_TRUE(q->Add(Spec("t", id, "body of " + id)).ok());
    return d->Mark();
  }
  bool SyncedHere() const { return fs->last_sync_thread.load() == std::this_thread::get_id(); }

  std::shared_ptr<FaultyFileSystem> fs;
  std::unique_ptr<ServingQueue> q;
  QueueDriver* d = nullptr;
};

TEST(EmbeddedStoreIdleSync, AnIdleLoopRunsTheFdatasyncItselfABusyOneLeavesItToTheSyncThread) {
  TempDir tmp;
  IdleLoop l(tmp.data());
  ASSERT_NE(l.d, nullptr);
  uint64_t mark = l.Add("idle");
  EXPECT_LT(l.d->Released(), mark);  // not even written yet
  uint64_t syncs = Syncs(*l.q);
  l.d->FlushIdle();
  EXPECT_GE(l.d->Released(), mark) << "the reply may go out as FlushIdle returns";
  EXPECT_TRUE(l.SyncedHere());
  EXPECT_EQ(Syncs(*l.q), syncs + 1);

  mark = l.Add("busy");
  l.d->Flush();
  ASSERT_TRUE(Eventually([&] { return l.d->Released() >= mark; }));
  EXPECT_FALSE(l.SyncedHere());
  l.q.reset();
  auto reopened = MustOpen(Embedded(tmp.data()));
  EXPECT_EQ(reopened->Get("idle")->body, "body of idle");
  EXPECT_EQ(reopened->Get("busy")->body, "body of busy");
}

TEST(EmbeddedStoreIdleSync, AfterASlowFdatasyncTheSyncThreadTakesOverUntilTheDiskIsQuickAgain) {
  TempDir tmp;
  IdleLoop l(tmp.data());
  l.fs->sync_delay_us = 5000;  // over the 2 ms a loop may spend on one
  uint64_t mark = l.Add("first");
  l.d->FlushIdle();  // nothing to go by yet: here, and slow
  EXPECT_GE(l.d->Released(), mark);
  EXPECT_TRUE(l.SyncedHere());
  for (const char* id : {"second", "third"}) {
    mark = l.Add(id);
    l.d->FlushIdle();  // the last one was slow: the sync thread's
    ASSERT_TRUE(Eventually([&] { return l.d->Released() >= mark; }));
    EXPECT_FALSE(l.SyncedHere()) << id;
  }
  l.fs->sync_delay_us = 0;
  // Once a sync is quick again (the sync thread's next one), the loop syncs
  // here again. Quick is measured in wall time, which a loaded machine (other
  // tests' fdatasyncs on the same disk) can stretch: try until a deadline.
  bool here = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (int n = 0; !here && std::chrono::steady_clock::now() < deadline; ++n) {
    mark = l.Add("quick-" + std::to_string(n));
    l.d->FlushIdle();
    here = l.d->Released() >= mark && l.SyncedHere();
    ASSERT_TRUE(Eventually([&] { return l.d->Released() >= mark; }));
  }
  EXPECT_TRUE(here) << "the loop never synced itself again once the disk was quick";
}

TEST(EmbeddedStoreIdleSync, AFailedFdatasyncOnTheLoopStopsChangesAndReleasesNothing) {
  TempDir tmp;
  IdleLoop l(tmp.data());
  l.fs->fail_sync = true;
  uint64_t mark = l.Add("unknown");
  l.d->FlushIdle();  // the first: here
  EXPECT_TRUE(l.SyncedHere());
  EXPECT_TRUE(l.d->Failed());
  EXPECT_LT(l.d->Released(), mark) << "a change whose fdatasync failed was released";
  auto refused = l.q->Add(Spec("t", "later", "l"));
  EXPECT_EQ(refused.status().code(), Code::kUnavailable);
  EXPECT_NE(refused.status().message().find("storage failed"), std::string::npos)
      << refused.status().ToString();
}

TEST(EmbeddedStoreIdleSync, EverysecWritesWithoutAnFdatasyncOnTheLoop) {
  TempDir tmp;
  IdleLoop l(tmp.data(), "everysec");
  uint64_t mark = l.Add("job");
  l.d->FlushIdle();
  EXPECT_GE(l.d->Released(), mark);  // everysec releases once written
  EXPECT_FALSE(l.SyncedHere());
}

// --- compaction --------------------------------------------------------------------

TEST(EmbeddedStoreCompaction, AddAndFinishForeverRunsInBoundedDisk) {
  TempDir tmp;
  QueueOptions o = Embedded(tmp.data(), "never");
  o.segment_bytes = 16 << 10;
  auto q = MustOpen(o);
  // One job added first and kept: it pins the oldest segment until
  // compaction copies it forward.
  ASSERT_TRUE(q->Add(Spec("keep", "pinned", "still here", 3'600'000)).ok());
  uint64_t peak = 0;
  for (int i = 0; i < 20000; ++i) {
    auto added = q->Add(Spec("t", "", std::string(100, 'x')));
    ASSERT_TRUE(added.ok());
    Delivery d = ReserveOne(*q, "t");
    ASSERT_EQ(d.id, added->id);
    ASSERT_TRUE(q->Finish(d.id, d.receipt).ok());
    if (i % 1000 == 999) peak = std::max(peak, DiskBytes(*q));
  }
  // ~3 MB went through the log; what stays is a few segments.
  EXPECT_GT(dynamic_cast<LocalQueue&>(*q).store_stats().log.appended_bytes, 2'000'000u);
  EXPECT_TRUE(Eventually([&] { return DiskBytes(*q) < 4 * o.segment_bytes; })) << DiskBytes(*q);
  EXPECT_LT(peak, 8 * o.segment_bytes);
  EXPECT_GT(dynamic_cast<LocalQueue&>(*q).store_stats().log.removed_segments, 10u);
  // Once idle, the segment being written goes too when nothing in it is
  // live (the pinned job was copied forward long ago): what stays is about
  // the live set.
  ASSERT_TRUE(q->Delete("pinned").ok());
  EXPECT_TRUE(Eventually([&] { return DiskBytes(*q) < 1024; })) << DiskBytes(*q);
  ASSERT_TRUE(q->Add(Spec("keep", "pinned", "still here", 3'600'000)).ok());
  q.reset();
  auto reopened = MustOpen(o);
  EXPECT_EQ(reopened->Get("pinned")->body, "still here");
  EXPECT_EQ(reopened->Stats()->jobs, 1u);
}

TEST(EmbeddedStoreCompaction, ReleaseWithDelayForeverRunsInBoundedDisk) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  QueueOptions o = Embedded(tmp.data(), "never");
  o.segment_bytes = 16 << 10;
  o.clock = clock;
  auto q = MustOpen(o);
  for (int j = 0; j < 10; ++j) {
    ASSERT_TRUE(q->Add(Spec("t", "retry" + std::to_string(j), std::string(200, 'r'))).ok());
  }
  for (int i = 0; i < 5000; ++i) {
    Delivery d = ReserveOne(*q, "t");
    ASSERT_TRUE(q->Release(d.id, d.receipt, 1000, "try later").ok());
    clock->Advance(100);
  }
  EXPECT_TRUE(Eventually([&] { return DiskBytes(*q) < 4 * o.segment_bytes; })) << DiskBytes(*q);
  q.reset();
  auto reopened = MustOpen(o);
  EXPECT_EQ(reopened->Stats()->jobs, 10u);
  EXPECT_EQ(reopened->Get("retry3")->body, std::string(200, 'r'));
  EXPECT_EQ(reopened->Get("retry3")->last_error, "try later");
}

// --- idempotent adds across restarts ----------------------------------------------

JobSpec Keyed(std::string topic, std::string id, std::string key) {
  JobSpec s = Spec(std::move(topic), std::move(id), "body");
  s.idempotency_key = std::move(key);
  return s;
}

// A retry that reaches a restarted server (the first attempt ran, its reply
// was lost, a worker finished the job) is still recognised.
TEST(EmbeddedStore, ARememberedAddComesBackAfterReopenUntilItsWindowEnds) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  QueueOptions o = Embedded(tmp.data());
  o.clock = clock;
  std::string generated;
  {
    auto q = MustOpen(o);
    ASSERT_TRUE(q->Add(Keyed("t", "pay-invoice-42", "k1")).ok());
    Delivery d = ReserveOne(*q, "t");
    ASSERT_TRUE(q->Finish(d.id, d.receipt).ok());
    auto gen = q->Add(Keyed("g", "", "k2"));
    ASSERT_TRUE(gen.ok());
    generated = gen->id;
  }
  clock->Advance(kDefaultDedupWindowMs - 1);
  {
    auto q = MustOpen(o);
    auto retry = q->Add(Keyed("t", "pay-invoice-42", "k1"));
    ASSERT_TRUE(retry.ok()) << retry.status().ToString();
    EXPECT_EQ(q->Get("pay-invoice-42").status().code(), Code::kNotFound) << "added twice";
    auto gen = q->Add(Keyed("g", "", "k2"));
    ASSERT_TRUE(gen.ok());
    EXPECT_EQ(gen->id, generated);
    EXPECT_EQ(q->Stats()->jobs, 1u);
  }
  clock->Advance(1);
  {
    auto q = MustOpen(o);
    ASSERT_TRUE(q->Add(Keyed("t", "pay-invoice-42", "k1")).ok());
    EXPECT_EQ(q->Get("pay-invoice-42")->state, JobState::kReady) << "remembered past the window";
  }
}

// Compaction keeps a segment whose remembered adds are still in their
// window (a restart must find them), and deletes it once they have ended.
TEST(EmbeddedStoreCompaction, ASegmentWithRememberedAddsIsKeptUntilTheirWindowEnds) {
  TempDir tmp;
  auto clock = std::make_shared<ManualClock>();
  QueueOptions o = Embedded(tmp.data(), "never");
  o.segment_bytes = 16 << 10;
  o.clock = clock;
  auto q = MustOpen(o);
  for (int i = 0; i < 500; ++i) {
    std::string id = "job" + std::to_string(i);
    ASSERT_TRUE(q->Add(Keyed("t", id, "k" + std::to_string(i))).ok());
    Delivery d = ReserveOne(*q, "t");
    ASSERT_TRUE(q->Finish(d.id, d.receipt).ok());
  }
  // (A first segment closed idle before any add holds no DEDUP and may go.)
  ASSERT_GT(Segments(tmp.data()).size(), 3u);
  q.reset();
  q = MustOpen(o);
  ASSERT_TRUE(q->Add(Keyed("t", "job0", "k0")).ok());
  EXPECT_EQ(q->Get("job0").status().code(), Code::kNotFound) << "forgotten by compaction";
  clock->Advance(kDefaultDedupWindowMs);
  ASSERT_TRUE(q->Add(Spec("t", "", "after the window")).ok());
  EXPECT_TRUE(Eventually([&] { return Segments(tmp.data()).size() <= 2; }))
      << Segments(tmp.data()).size() << " segments";
}

// A data directory of an earlier delayq (format version 1) is read, and
// written on in a segment of the current version.
TEST(EmbeddedStore, AVersion1LogIsReadAndAKeyedAddGoesToANewSegment) {
  TempDir tmp;
  ASSERT_EQ(mkdir(tmp.data().c_str(), 0755), 0);
  std::string bytes;
  EncodeSegmentHeader(SegmentHeader{1, 0}, &bytes);
  bytes[8] = 1;
  engine::JobImage job;
  job.id = "old-job";
  job.seq = uint64_t{1'600'000'000'000} << 20;
  job.topic = "t";
  job.state = JobState::kReady;
  job.run_at_ms = 1'600'000'000'000;
  job.ttr_ms = 60000;
  job.priority = 1024;
  job.body = "from version 1";
  EncodePut(job, 1, &bytes);
  const std::string first = tmp.data() + "/log-0000000000000001.dq";
  std::ofstream(first, std::ios::binary) << bytes;
  {
    auto q = MustOpen(Embedded(tmp.data()));
    ASSERT_TRUE(q);
    EXPECT_EQ(q->Get("old-job")->body, "from version 1");
    ASSERT_TRUE(q->Add(Keyed("t", "new-job", "k")).ok());
  }
  // The version-1 file is never appended to (compaction may have copied
  // its job forward and deleted it since); every other segment is of the
  // current version.
  if (access(first.c_str(), F_OK) == 0) {
    EXPECT_EQ(FileSize(first), bytes.size()) << "appended to a version-1 segment";
  }
  auto segments = Segments(tmp.data());
  ASSERT_FALSE(segments.empty());
  for (const std::string& path : segments) {
    if (path == first) continue;
    std::ifstream in(path, std::ios::binary);
    std::string header(kSegmentHeaderBytes, '\0');
    in.read(header.data(), header.size());
    SegmentHeader h;
    ASSERT_TRUE(DecodeSegmentHeader(header, &h).ok()) << path;
    EXPECT_EQ(h.version, kFormatVersion) << path;
  }
  auto q = MustOpen(Embedded(tmp.data()));
  EXPECT_EQ(q->Stats()->jobs, 2u);
  EXPECT_TRUE(q->Add(Keyed("t", "new-job", "k")).ok());
}

// --- the data directory ----------------------------------------------------------

TEST(EmbeddedStore, MissingDirectoryIsCreatedAndASecondQueueOnItIsRefused) {
  TempDir tmp;
  std::string dir = tmp.path() + "/a/b/data";
  auto first = MustOpen(Embedded(dir));
  ASSERT_TRUE(first);
  auto second = OpenQueue(Embedded(dir));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Code::kUnavailable);
  EXPECT_NE(second.status().message().find("another delayq"), std::string::npos)
      << second.status().ToString();
  // Nothing in the directory can be deleted to get past the lock.
  for (const char* name : {"LOCK", "spare.dq"}) (void)unlink((dir + "/" + name).c_str());
  auto third = OpenQueue(Embedded(dir));
  EXPECT_EQ(third.status().code(), Code::kUnavailable) << third.status().ToString();
}

TEST(EmbeddedStore, DirectoryThatCannotBeMadeIsAClearError) {
  TempDir tmp;
  std::string file = tmp.path() + "/plain-file";
  std::ofstream(file) << "x";
  auto q = OpenQueue(Embedded(file + "/data"));
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().code(), Code::kUnavailable);
  EXPECT_NE(q.status().message().find(file), std::string::npos) << q.status().ToString();
  EXPECT_NE(q.status().message().find("Not a directory"), std::string::npos)
      << q.status().ToString();
}

TEST(EmbeddedStore, BadOptionsAreRejectedByName) {
  // An fsync policy is an enum: a name that is none of them does not parse.
  EXPECT_FALSE(ParseFsyncPolicy("sometimes").has_value());
  TempDir tmp;
  QueueOptions o = Embedded(tmp.data());
  o.segment_bytes = 100;
  auto q = OpenQueue(o);
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("segment_bytes"), std::string::npos);
}

}  // namespace
}  // namespace delayq::store
