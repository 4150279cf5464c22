// Helpers of the embedded store's tests: a temporary directory, options,
// opening a queue, a job spec, one reserve, polling, the log's disk bytes.
#ifndef DELAYQ_TESTS_LOG_STORE_TESTING_H_
#define DELAYQ_TESTS_LOG_STORE_TESTING_H_

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/queue.h"
#include "gtest/gtest.h"
#include "local/local_queue.h"
#include "queue/open.h"
#include "testing/poll.h"

namespace delayq::store {

// A directory of its own under $TMPDIR, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    const char* base = getenv("TMPDIR");
    std::string tmpl = std::string(base ? base : "/tmp") + "/delayq-store-test.XXXXXX";
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  const std::string& path() const { return path_; }
  std::string data() const { return path_ + "/data"; }

 private:
  std::string path_;
};

inline std::vector<std::string> Segments(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n.rfind("log-", 0) == 0) out.push_back(dir + "/" + n);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

inline uint64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

inline QueueOptions Embedded(const std::string& dir, std::string_view fsync = "always") {
  QueueOptions o;
  o.store = StoreKind::kEmbedded;
  o.data_dir = dir;
  o.fsync = ParseFsyncPolicy(fsync).value();
  return o;
}

inline std::unique_ptr<ServingQueue> MustOpen(const QueueOptions& o, const OpenOptions& open = {}) {
  auto q = OpenServingQueue(o, open);
  EXPECT_TRUE(q.ok()) << q.status().ToString();
  return q.ok() ? std::move(q).value() : nullptr;
}

inline JobSpec Spec(std::string topic, std::string id, std::string body, int64_t delay_ms = 0) {
  JobSpec s;
  s.topic = std::move(topic);
  s.id = std::move(id);
  s.body = std::move(body);
  s.delay_ms = delay_ms;
  return s;
}

inline Delivery ReserveOne(Queue& q, const std::string& topic) {
  ReserveRequest r;
  r.topics = {topic};
  auto got = q.Reserve(r);
  EXPECT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got.ok() ? got->size() : 0, 1u);
  return got.ok() && !got->empty() ? (*got)[0] : Delivery{};
}

// Polls `pred` for up to 10 s.
template <typename P>
bool Eventually(P pred) {
  return PollUntil(pred, std::chrono::seconds(10), std::chrono::milliseconds(2));
}

inline uint64_t DiskBytes(Queue& q) {
  return dynamic_cast<LocalQueue&>(q).store_stats().log.disk_bytes;
}

// After a crash at point `crash_at` and a reopen: every acknowledged job
// (acked: id -> body) is there with its body; one whose removal was
// acknowledged (gone) is not; one whose removal or replacement was tried
// may be either, and if there has its body, or its body + `unacked_suffix`
// (a change not acknowledged may have been made all the same).
inline void ExpectAcknowledgedKept(Queue& q, uint64_t crash_at,
                                   const std::map<std::string, std::string>& acked,
                                   const std::set<std::string>& gone,
                                   const std::set<std::string>& tried,
                                   std::string_view unacked_suffix = "") {
  for (const auto& [id, body] : acked) {
    auto got = q.Get(id);
    if (gone.count(id) != 0) {
      EXPECT_EQ(got.status().code(), Code::kNotFound) << "crash at " << crash_at << ": " << id;
    } else if (tried.count(id) != 0) {
      if (got.ok() && !unacked_suffix.empty()) {
        EXPECT_TRUE(got->body == body || got->body == body + std::string(unacked_suffix))
            << "crash at " << crash_at << ": " << id << " is " << got->body << ", acked " << body;
      } else if (got.ok()) {
        EXPECT_EQ(got->body, body) << "crash at " << crash_at;
      }
    } else {
      EXPECT_TRUE(got.ok()) << "crash at " << crash_at << ": acknowledged " << id << " lost";
      if (got.ok()) {
        EXPECT_EQ(got->body, body) << "crash at " << crash_at;
      }
    }
  }
}

}  // namespace delayq::store

#endif  // DELAYQ_TESTS_LOG_STORE_TESTING_H_
