// Runs the subscription conformance suite on the Redis store (RedisQueue, 4
// buckets), against a standalone redis-server and a 3-master cluster, each
// queue on a fresh prefix.
//
// The Redis store takes a subscription's times from Redis's clock (TIME), so
// that every server sharing the store agrees when an instance lapses
// (docs/redis-store.md, "Push delivery"); a ManualClock cannot move it. The
// suite's tests that check times to the millisecond on the harness's clock
// are therefore left out (redis_subscription_clock_tests in
// tests/CMakeLists.txt lists them), and tests/redis/redis_push_test.cc checks
// the same rules on Redis's clock, polling with deadlines. AdvanceMs fails a test that
// calls it, so a new clock test cannot pass here by accident.
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>

#include "conformance/subscription_conformance.h"
#include "delayq/clock.h"
#include "queue/open.h"
#include "redis/redis_harness.h"

namespace delayq::conformance {
namespace {

using delayq::redis_harness::RedisCluster;
using delayq::redis_harness::RedisServer;

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

using UrlFn = const std::string& (*)();

class RedisSubscriptionHarness final : public SubscriptionHarness {
 public:
  explicit RedisSubscriptionHarness(UrlFn url) : url_(url) {}
  std::unique_ptr<ServingQueue> Open() override {
    static std::atomic<int> next{0};
    QueueOptions o;
    o.store = StoreKind::kRedis;
    o.redis_url = url_();
    o.redis_prefix = "subs" + std::to_string(getpid()) + "." + std::to_string(next.fetch_add(1));
    o.redis_buckets = 4;
    o.clock = clock_;
    auto q = OpenServingQueue(o);
    if (!q.ok()) {
      ADD_FAILURE() << "OpenServingQueue(redis): " << q.status().ToString();
      return nullptr;
    }
    return std::move(q).value();
  }
  void AdvanceMs(int64_t /*ms*/) override {
    ADD_FAILURE() << "the Redis store's subscription times are Redis's TIME: a test that moves "
                     "the clock belongs in the filtered list of tests/CMakeLists.txt";
  }
  int64_t NowMs() override { return clock_->NowMs(); }

 private:
  UrlFn url_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
};

INSTANTIATE_TEST_SUITE_P(
    Redis, SubscriptionConformance,
    testing::Values(
        SubscriptionImpl{
            .name = "Standalone",
            .make = [] { return std::make_unique<RedisSubscriptionHarness>(StandaloneUrl); }},
        SubscriptionImpl{
            .name = "Cluster",
            .make = [] { return std::make_unique<RedisSubscriptionHarness>(ClusterUrl); }}),
    SubscriptionImplName);

}  // namespace
}  // namespace delayq::conformance
