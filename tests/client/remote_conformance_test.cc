// Runs the Queue conformance suite on the network client (store "remote",
// RemoteQueue) against a real `delayq serve` on each store: memory,
// embedded (a fresh data directory) and redis (one redis-server for the
// process, a fresh key prefix per test). Every test starts its own server,
// so every queue starts empty. Time is the server's system clock: the
// tests that need a ManualClock skip themselves, as for the in-process
// queue's SystemClock variants. ctest runs each store as a process of its
// own (tests/CMakeLists.txt).
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "client/delayq_server.h"
#include "conformance/queue_conformance.h"
#include "delayq/clock.h"
#include "delayq/queue.h"
#include "redis/redis_harness.h"

namespace delayq::conformance {
namespace {

using testing_client::DelayqServer;

const std::string& RedisUrl() {
  static std::unique_ptr<redis_harness::RedisServer> server = [] {
    auto s = redis_harness::RedisServer::Start();
    if (!s.ok()) ADD_FAILURE() << "redis-server: " << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }();
  static const std::string url = server ? server->url() : "redis://127.0.0.1:1";
  return url;
}

std::vector<std::string> MemoryArgs() { return {"--store", "memory"}; }
// The test certificates (tests/testing/test_certs.h, made once per process).
std::string CertsDir() {
  static const std::string dir = [] {
    auto d = redis_harness::TlsCertsDir();
    if (!d.ok()) ADD_FAILURE() << "certificates: " << d.status().ToString();
    return d.ok() ? *d : std::string("/nonexistent");
  }();
  return dir;
}
// Both listeners TLS only, client certificates required: the client's TLS
// (QueueOptions::tls*) carries every call.
std::vector<std::string> MutualTlsArgs() {
  return {"--store",
          "memory",
          "--tls-cert-file",
          CertsDir() + "/server.pem",
          "--tls-key-file",
          CertsDir() + "/server.key",
          "--tls-ca-cert-file",
          CertsDir() + "/ca.pem"};
}
std::vector<std::string> EmbeddedArgs() { return {"--store", "embedded", "--fsync", "never"}; }
std::vector<std::string> RedisArgs() {
  static std::atomic<int> next{0};
  return {"--store",
          "redis",
          "--redis",
          RedisUrl(),
          "--redis-prefix",
          "remote" + std::to_string(getpid()) + "." + std::to_string(next.fetch_add(1)),
          "--redis-buckets",
          "4"};
}

using ArgsFn = std::vector<std::string> (*)();

class RemoteHarness final : public QueueHarness {
 public:
  explicit RemoteHarness(ArgsFn args, bool tls = false) : args_(args), tls_(tls) {}

  std::unique_ptr<Queue> Open() override {
    if (!server_) {
      auto s = DelayqServer::Start(args_());
      if (!s.ok()) {
        ADD_FAILURE() << s.status().ToString();
        return nullptr;
      }
      server_ = std::move(s).value();
    }
    QueueOptions o;
    o.store = StoreKind::kRemote;
    o.servers = server_->address();
    if (tls_) {
      o.tls = true;
      o.tls_ca_file = CertsDir() + "/ca.pem";
      o.tls_cert_file = CertsDir() + "/client.pem";
      o.tls_key_file = CertsDir() + "/client.key";
    }
    auto q = OpenQueue(o);
    if (!q.ok()) {
      ADD_FAILURE() << "OpenQueue(remote): " << q.status().ToString();
      return nullptr;
    }
    return std::move(q).value();
  }
  void AdvanceMs(int64_t ms) override { WaitForSystemClockMs(ms); }
  int64_t NowMs() override { return SystemClock()->NowMs(); }
  bool exact_time() const override { return false; }

 private:
  ArgsFn args_;
  bool tls_;
  std::unique_ptr<DelayqServer> server_;  // outlives the queue (fixture order)
};

// Contract violations of RemoteQueue found by the suite: none known.
const std::set<std::string> kRemoteKnownBugs = {};

INSTANTIATE_TEST_SUITE_P(
    Remote, QueueConformance,
    ::testing::Values(QueueImpl{.name = "Memory",
                                .make = [] { return std::make_unique<RemoteHarness>(MemoryArgs); },
                                .known_bugs = kRemoteKnownBugs},
                      QueueImpl{
                          .name = "Embedded",
                          .make = [] { return std::make_unique<RemoteHarness>(EmbeddedArgs); },
                          .known_bugs = kRemoteKnownBugs},
                      QueueImpl{.name = "Redis",
                                .make = [] { return std::make_unique<RemoteHarness>(RedisArgs); },
                                .known_bugs = kRemoteKnownBugs},
                      QueueImpl{.name = "MemoryOverMutualTls",
                                .make =
                                    [] {
                                      return std::make_unique<RemoteHarness>(MutualTlsArgs,
                                                                             /*tls=*/true);
                                    },
                                .known_bugs = kRemoteKnownBugs}),
    QueueImplName);

}  // namespace
}  // namespace delayq::conformance
