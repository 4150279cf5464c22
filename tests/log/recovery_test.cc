// Recovery of the embedded store's log past a bad record: damage amid
// records (a whole record after the bad one) refuses to start, naming the
// file, the offset and what to run, or with repair_log drops the damaged
// bytes and keeps every record that verifies; a torn end (nothing whole
// after it) is cut as before. Real files in a temporary directory, the real
// queue over them.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "delayq/queue.h"
#include "gtest/gtest.h"
#include "local/local_queue.h"
#include "log/log_format.h"
#include "queue/open.h"

namespace delayq::store {
namespace {

class TempDir {
 public:
  TempDir() {
    const char* base = getenv("TMPDIR");
    std::string tmpl = std::string(base ? base : "/tmp") + "/delayq-recovery-test.XXXXXX";
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  std::string data() const { return path_ + "/data"; }

 private:
  std::string path_;
};

QueueOptions Embedded(const std::string& dir, bool repair = false) {
  QueueOptions o;
  o.store = StoreKind::kEmbedded;
  o.data_dir = dir;
  o.fsync = FsyncPolicy::kAlways;
  o.repair_log = repair;
  return o;
}

// The newest segment file (the only one here: compaction may have numbered
// it 2, after an idle first).
std::string NewestSegment(const std::string& dir) {
  std::string newest;
  DIR* d = opendir(dir.c_str());
  while (dirent* e = d ? readdir(d) : nullptr) {
    std::string n = e->d_name;
    if (n.rfind("log-", 0) == 0 && dir + "/" + n > newest) newest = dir + "/" + n;
  }
  if (d) closedir(d);
  return newest;
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void WriteAt(const std::string& path, uint64_t offset, const std::string& bytes) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

uint32_t U32At(const std::string& b, uint64_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(b[at + i]);
  return v;
}

// The offset of every record of a segment file, by their lengths.
std::vector<uint64_t> RecordOffsets(const std::string& path) {
  std::string b = ReadAll(path);
  std::vector<uint64_t> out;
  for (uint64_t at = kSegmentHeaderBytes; at + kRecordHeaderBytes <= b.size();) {
    uint32_t len = U32At(b, at + 4);
    if (len == 0) break;
    out.push_back(at);
    at += 8 + len;
  }
  return out;
}

std::set<std::string> JobIds(Queue& q, const std::vector<std::string>& candidates) {
  std::set<std::string> out;
  for (const std::string& id : candidates) {
    if (q.Get(id).ok()) out.insert(id);
  }
  return out;
}

RecoveryReport Recovery(Queue& q) {
  auto* local = dynamic_cast<LocalQueue*>(&q);
  EXPECT_NE(local, nullptr);
  return local ? local->store_stats().recovery : RecoveryReport{};
}

std::string Id(int i) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "j%02d", i);
  return buf;
}

// The run: 50 acknowledged adds, then 10 finishes, fsync always,
// closed. Returns every id and the finished ones.
std::vector<std::string> AddFiftyFinishTen(const std::string& dir,
                                           std::set<std::string>* finished) {
  std::vector<std::string> ids;
  auto q = OpenQueue(Embedded(dir));
  EXPECT_TRUE(q.ok()) << q.status().ToString();
  for (int i = 0; i < 50; ++i) {
    ids.push_back(Id(i));
    JobSpec s;
    s.topic = "t";
    s.id = ids.back();
    s.body = "body of " + ids.back();
    EXPECT_TRUE((*q)->Add(s).ok());
  }
  for (int i = 0; i < 10; ++i) {
    ReserveRequest r;
    r.topics = {"t"};
    auto got = (*q)->Reserve(r);
    EXPECT_TRUE(got.ok() && got->size() == 1);
    if (!got.ok() || got->empty()) continue;
    EXPECT_TRUE((*q)->Finish((*got)[0].id, (*got)[0].receipt).ok());
    finished->insert((*got)[0].id);
  }
  return ids;
}

std::string Truncate(uint64_t offset, const std::string& file) {
  return "truncate -s " + std::to_string(offset) + " '" + file + "'";
}

// --- damage amid records ----------------------------------------------------

// Issue 23 item 10: a flipped bit in one record's length made recovery cut
// every record after it as a torn end: 5 jobs of 40, the finished ones back.
TEST(Recovery, AFlippedLengthBitIsDamageNotATornEnd) {
  for (int bit : {0, 9, 28, 31}) {
    SCOPED_TRACE("bit " + std::to_string(bit));
    TempDir tmp;
    std::set<std::string> finished;
    std::vector<std::string> ids = AddFiftyFinishTen(tmp.data(), &finished);
    const std::string seg = NewestSegment(tmp.data());
    std::vector<uint64_t> at = RecordOffsets(seg);
    ASSERT_GE(at.size(), 70u);  // 50 puts, 10 reserves, 10 removes
    std::string before = ReadAll(seg);
    std::string len = before.substr(at[5] + 4, 4);
    len[bit / 8] = static_cast<char>(len[bit / 8] ^ (1 << (bit % 8)));
    WriteAt(seg, at[5] + 4, len);
    before = ReadAll(seg);

    auto q = OpenQueue(Embedded(tmp.data()));
    ASSERT_FALSE(q.ok()) << "recovered " << (*q)->Stats()->jobs << " jobs of 40";
    const std::string& m = q.status().message();
    EXPECT_EQ(q.status().code(), Code::kInternal);
    EXPECT_NE(m.find(seg + " is damaged at byte " + std::to_string(at[5])), std::string::npos) << m;
    EXPECT_NE(m.find("a whole record follows at byte " + std::to_string(at[6])), std::string::npos)
        << m;
    EXPECT_NE(m.find("--repair"), std::string::npos) << m;
    EXPECT_NE(m.find(Truncate(at[5], seg)), std::string::npos) << m;
    EXPECT_EQ(ReadAll(seg), before) << "a refused start must leave the log as it was";

    // Repaired: the damaged record (j05's add) is dropped and every record
    // after it kept, the finishes included: the 40 unfinished jobs, none of
    // the finished ones back.
    auto r = OpenQueue(Embedded(tmp.data(), /*repair=*/true));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(finished.count("j05"));
    std::set<std::string> want;
    for (const std::string& id : ids) {
      if (!finished.count(id)) want.insert(id);
    }
    EXPECT_EQ(JobIds(**r, ids), want);
    EXPECT_EQ((*r)->Stats()->jobs, 40u);
    RecoveryReport rep = Recovery(**r);
    EXPECT_EQ(rep.repaired_spans, 1u);
    EXPECT_EQ(rep.repaired_bytes, at[6] - at[5]);
    EXPECT_EQ(rep.records, at.size() - 1);
    EXPECT_EQ(rep.torn_bytes, 0u);
    r->reset();
    // The repair is on disk: the next start needs none.
    auto again = OpenQueue(Embedded(tmp.data()));
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(JobIds(**again, ids), want);
    EXPECT_EQ(Recovery(**again).repaired_spans, 0u);
  }
}

// What a power loss can leave: one 4 KiB page inside a large record never
// written (zeros), the records after it whole. Refused with the commands
// that start it again; repaired, the large record is lost and the rest kept.
TEST(Recovery, AZeroedPageInsideALargeRecordNamesTheRepairAndRepairKeepsTheRest) {
  TempDir tmp;
  std::vector<std::string> ids = {"before", "big", "after1", "after2", "after3"};
  {
    auto q = OpenQueue(Embedded(tmp.data()));
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    for (const std::string& id : ids) {
      JobSpec s;
      s.topic = "t";
      s.id = id;
      s.body = std::string(id == "big" ? 64 << 10 : 100, 'x');
      ASSERT_TRUE((*q)->Add(s).ok());
    }
  }
  const std::string seg = NewestSegment(tmp.data());
  std::vector<uint64_t> at = RecordOffsets(seg);
  ASSERT_EQ(at.size(), 5u);
  uint64_t page = (at[1] / 4096 + 2) * 4096;  // a page well inside big's body
  ASSERT_LT(page + 4096, at[2]);
  WriteAt(seg, page, std::string(4096, '\0'));
  const std::string before = ReadAll(seg);

  auto q = OpenQueue(Embedded(tmp.data()));
  ASSERT_FALSE(q.ok());
  const std::string& m = q.status().message();
  EXPECT_NE(m.find(seg + " is damaged at byte " + std::to_string(at[1]) +
                   ": record checksum does not match"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("--repair"), std::string::npos) << m;
  EXPECT_NE(m.find(Truncate(at[1], seg)), std::string::npos) << m;
  EXPECT_EQ(ReadAll(seg), before);

  testing::internal::CaptureStderr();
  auto r = OpenQueue(Embedded(tmp.data(), /*repair=*/true));
  std::string log = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(JobIds(**r, ids), (std::set<std::string>{"before", "after1", "after2", "after3"}));
  EXPECT_EQ(Recovery(**r).repaired_bytes, at[2] - at[1]);
  EXPECT_NE(log.find(seg + ": repair dropped " + std::to_string(at[2] - at[1]) + " bytes at byte " +
                     std::to_string(at[1])),
            std::string::npos)
      << log;
  r->reset();
  EXPECT_EQ(ReadAll(seg).size(), before.size() - (at[2] - at[1]));
  auto again = OpenQueue(Embedded(tmp.data()));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)->Stats()->jobs, 4u);
}

// Damage in an older segment: refused as before, now with the commands;
// repaired, that segment loses the damaged record and the later ones are
// replayed as they are.
TEST(Recovery, RepairDropsDamageInAnOlderSegmentAndKeepsTheLaterSegments) {
  TempDir tmp;
  QueueOptions o = Embedded(tmp.data());
  o.fsync = FsyncPolicy::kNever;
  o.segment_bytes = 4096;
  std::vector<std::string> ids;
  {
    auto q = OpenQueue(o);
    ASSERT_TRUE(q.ok());
    for (int i = 0; i < 100; ++i) {
      ids.push_back(Id(i));
      JobSpec s;
      s.topic = "t";
      s.id = ids.back();
      s.body = std::string(100, 'x');
      ASSERT_TRUE((*q)->Add(s).ok());
    }
  }
  const std::string older = tmp.data() + "/log-0000000000000001.dq";
  std::vector<uint64_t> at = RecordOffsets(older);
  ASSERT_GE(at.size(), 5u);
  WriteAt(older, at[2] + 30, "!");  // inside j02's body

  auto q = OpenQueue(o);
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find(older + " is damaged at byte " + std::to_string(at[2])),
            std::string::npos)
      << q.status().ToString();
  EXPECT_NE(q.status().message().find(Truncate(at[2], older)), std::string::npos);

  o.repair_log = true;
  auto r = OpenQueue(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::set<std::string> want(ids.begin(), ids.end());
  want.erase("j02");
  EXPECT_EQ(JobIds(**r, ids), want);
  EXPECT_EQ(Recovery(**r).repaired_bytes, at[3] - at[2]);
}

// --- torn ends: still cut ----------------------------------------------------

// A record cut short at the end, zeros after it (space prepared ahead):
// cut with a warning, everything before it kept.
TEST(Recovery, ATornLastRecordFollowedByZerosIsStillCut) {
  TempDir tmp;
  std::set<std::string> finished;
  std::vector<std::string> ids = AddFiftyFinishTen(tmp.data(), &finished);
  const std::string seg = NewestSegment(tmp.data());
  std::vector<uint64_t> at = RecordOffsets(seg);
  uint64_t size = ReadAll(seg).size();
  // The last finish torn: its record cut short, then 1 MiB of zeros.
  ASSERT_LT(at.back() + 12, size);
  ASSERT_EQ(truncate(seg.c_str(), static_cast<off_t>(at.back() + 12)), 0);
  ASSERT_EQ(truncate(seg.c_str(), static_cast<off_t>(at.back() + 12 + (1 << 20))), 0);

  auto q = OpenQueue(Embedded(tmp.data()));
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  RecoveryReport rep = Recovery(**q);
  EXPECT_EQ(rep.torn_bytes, 12u);
  EXPECT_EQ(rep.torn_records, 1u);
  EXPECT_EQ(rep.unused_bytes, uint64_t{1} << 20);
  EXPECT_EQ(rep.repaired_spans, 0u);
  EXPECT_EQ(rep.records, at.size() - 1);
  EXPECT_EQ((*q)->Stats()->jobs, 41u);  // the finish whose record was torn is undone
  q->reset();
  EXPECT_EQ(ReadAll(seg).size(), at.back());
}

// After a kill -9, a reused file's rest holds its earlier segment's records:
// whole, but seeded with another number. They never count as records after
// a bad one: the rest is cut as a torn end, quickly, however long it is.
TEST(Recovery, AReusedFilesOldRecordsAfterTheEndAreCutNotTakenForDamage) {
  TempDir tmp;
  {
    auto q = OpenQueue(Embedded(tmp.data()));
    ASSERT_TRUE(q.ok());
    JobSpec s;
    s.topic = "t";
    s.id = "live";
    s.body = "b";
    ASSERT_TRUE((*q)->Add(s).ok());
  }
  const std::string seg = NewestSegment(tmp.data());
  uint64_t end = ReadAll(seg).size();
  // 32 MiB of another segment's records (varied sizes), starting with one
  // cut short: the rest of a file this segment was written over.
  std::string old;
  engine::JobImage job;
  job.topic = "t";
  job.state = JobState::kReady;
  std::string id;
  std::string body;
  for (uint64_t i = 1; old.size() < (32u << 20); ++i) {
    id = "old-" + std::to_string(i);
    body.assign(i % 7 == 0 ? 60000 : 40 + i % 300, static_cast<char>('a' + i % 26));
    job.id = id;
    job.body = body;
    job.seq = i << 20;
    job.run_at_ms = static_cast<int64_t>(i);
    EncodePut(job, /*segment=*/7, &old);
    EncodeRemove(job, 7, &old);
  }
  WriteAt(seg, end, old.substr(5));
  auto started = std::chrono::steady_clock::now();
  auto q = OpenQueue(Embedded(tmp.data()));
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ((*q)->Stats()->jobs, 1u);
  EXPECT_EQ(Recovery(**q).torn_bytes, old.size() - 5);
  EXPECT_LT(seconds, 3.0) << "recovery must not read the rest quadratically";
}

}  // namespace
}  // namespace delayq::store
