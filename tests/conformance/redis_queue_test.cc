// Runs the Queue conformance suite on the Redis store (store "redis",
// RedisQueue, 4 buckets): on a ManualClock against a standalone redis-server,
// where time is exact; the same against a 3-master Redis Cluster; and on the
// system clock against the standalone server, which exercises the real
// timers, the promoter and the wake-up messages in real time. And on a
// ManualClock over TLS (rediss://, RedisServerOptions::tls), standalone and
// a 3-master cluster: the store's every call then goes through the TLS
// transport under hiredis's reader (src/redis/connection.h).
//
// Each process starts the servers it needs once, lazily, from the test's
// (main) thread (tests/redis/redis_harness.h), and every queue the suite
// opens gets a fresh key prefix, so every test starts from an empty store.
// ctest runs each variant as a process of its own (tests/CMakeLists.txt).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "conformance/queue_conformance.h"
#include "delayq/clock.h"
#include "delayq/queue.h"
#include "redis/redis_harness.h"

namespace delayq::conformance {
namespace {

using delayq::redis_harness::RedisCluster;
using delayq::redis_harness::RedisServer;

// The servers of this process, started on first use and stopped at exit.
const std::string& StandaloneUrl() {
  static std::unique_ptr<RedisServer> server = [] {
    auto s = RedisServer::Start();
    if (!s.ok()) ADD_FAILURE() << "redis-server: " << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }();
  static const std::string url = server ? server->url() : "redis://127.0.0.1:1";
  return url;
}

const std::string& ClusterUrl() {
  static std::unique_ptr<RedisCluster> cluster = [] {
    auto c = RedisCluster::Start(3);
    if (!c.ok()) ADD_FAILURE() << "redis cluster: " << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }();
  static const std::string url = cluster ? cluster->url() : "redis://127.0.0.1:1";
  return url;
}

// Buckets per queue. Enough to spread jobs over several buckets in every
// test (cross-bucket order, the merge, a cluster's nodes); fewer than the
// default 16 because the suite's concurrency tests are throughput tests too:
// with a few blocking callers each add and finish is a script call of its
// own (calls share a bucket's script only when they meet in a round), and a
// reserve reads every bucket, so 16 buckets cost ~3.4 script calls of
// ~40 us of Redis CPU per job; with 4, ~1.9. tests/redis/redis_queue_test.cc
// runs with the default.
constexpr uint32_t kBuckets = 4;

// A prefix no other queue of this run has used: an empty store.
std::string FreshPrefix() {
  static std::atomic<int> next{0};
  return "conf" + std::to_string(getpid()) + "." + std::to_string(next.fetch_add(1));
}

std::unique_ptr<Queue> OpenRedis(const std::string& url, std::shared_ptr<Clock> clock) {
  QueueOptions o;
  o.store = StoreKind::kRedis;
  o.redis_url = url;
  o.redis_prefix = FreshPrefix();
  o.redis_buckets = kBuckets;
  o.clock = std::move(clock);
  if (url.starts_with("rediss://")) {
    Result<std::string> certs = redis_harness::TlsCertsDir();
    if (certs.ok()) o.redis_tls_ca_file = *certs + "/ca.pem";
  }
  auto q = OpenQueue(o);
  if (!q.ok()) {
    ADD_FAILURE() << "OpenQueue(redis " << url << "): " << q.status().ToString();
    return nullptr;
  }
  return std::move(q).value();
}

const std::string& TlsUrl() {
  static std::unique_ptr<RedisServer> server = [] {
    redis_harness::RedisServerOptions options;
    options.tls = true;
    auto s = RedisServer::Start(options);
    if (!s.ok()) ADD_FAILURE() << "redis-server (TLS): " << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }();
  static const std::string url = server ? server->url() : "rediss://127.0.0.1:1";
  return url;
}

const std::string& TlsClusterUrl() {
  static std::unique_ptr<RedisCluster> cluster = [] {
    redis_harness::RedisServerOptions options;
    options.tls = true;
    auto c = RedisCluster::Start(3, options);
    if (!c.ok()) ADD_FAILURE() << "redis cluster (TLS): " << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }();
  static const std::string url = cluster ? cluster->url() : "rediss://127.0.0.1:1";
  return url;
}

using UrlFn = const std::string& (*)();

class RedisManualClockHarness final : public QueueHarness {
 public:
  explicit RedisManualClockHarness(UrlFn url) : url_(url) {}
  std::unique_ptr<Queue> Open() override { return OpenRedis(url_(), clock_); }
  void AdvanceMs(int64_t ms) override { clock_->Advance(ms); }
  int64_t NowMs() override { return clock_->NowMs(); }
  bool exact_time() const override { return true; }

 private:
  UrlFn url_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
};

class RedisSystemClockHarness final : public QueueHarness {
 public:
  explicit RedisSystemClockHarness(UrlFn url) : url_(url) {}
  std::unique_ptr<Queue> Open() override { return OpenRedis(url_(), SystemClock()); }
  // The suite's real-time harnesses wait for time to pass (see
  // queue_conformance.h); only AdvanceMs sleeps.
  void AdvanceMs(int64_t ms) override { WaitForSystemClockMs(ms); }
  int64_t NowMs() override { return SystemClock()->NowMs(); }
  bool exact_time() const override { return false; }

 private:
  UrlFn url_;
};

// Contract violations of RedisQueue found by the suite: none known. The
// documented differences from the engine (docs/redis-store.md) are all
// outside what the suite checks.
const std::set<std::string> kRedisKnownBugs = {};

INSTANTIATE_TEST_SUITE_P(
    Redis, QueueConformance,
    ::testing::Values(
        QueueImpl{.name = "ManualClock",
                  .make = [] { return std::make_unique<RedisManualClockHarness>(StandaloneUrl); },
                  .known_bugs = kRedisKnownBugs},
        QueueImpl{.name = "ClusterManualClock",
                  .make = [] { return std::make_unique<RedisManualClockHarness>(ClusterUrl); },
                  .known_bugs = kRedisKnownBugs},
        QueueImpl{.name = "SystemClock",
                  .make = [] { return std::make_unique<RedisSystemClockHarness>(StandaloneUrl); },
                  .known_bugs = kRedisKnownBugs},
        QueueImpl{.name = "TlsManualClock",
                  .make = [] { return std::make_unique<RedisManualClockHarness>(TlsUrl); },
                  .known_bugs = kRedisKnownBugs},
        QueueImpl{.name = "TlsClusterManualClock",
                  .make = [] { return std::make_unique<RedisManualClockHarness>(TlsClusterUrl); },
                  .known_bugs = kRedisKnownBugs}),
    QueueImplName);

}  // namespace
}  // namespace delayq::conformance
