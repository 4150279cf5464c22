// The Redis store's side of push delivery (src/redis_store/redis_push.h):
// subscriptions (put, renew, list, delete, lapse on Redis's clock) and the
// PushLedger in Redis (slots across queues, lease expiry, the rate, the
// figures), against a real redis-server this process starts once (and a
// 3-master cluster for one test), each test on a fresh prefix. Several
// RedisQueue objects on one Redis stand for several servers. Times are
// Redis's TIME: the tests read it with the TIME command, and wait for it to
// pass by polling with deadlines, never by sleeping.
#include "redis_store/redis_push.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "delayq/clock.h"
#include "delayq/subscription.h"
#include "queue/open.h"
#include "redis/redis_harness.h"
#include "redis_store/redis_queue.h"

namespace delayq {
namespace {

using redis_harness::RedisCluster;
using redis_harness::RedisServer;
using redis_harness::WaitFor;
using Steady = std::chrono::steady_clock;

RedisServer* Server() {
  static std::unique_ptr<RedisServer> server = [] {
    auto s = RedisServer::Start();
    if (!s.ok()) ADD_FAILURE() << "redis-server: " << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }();
  return server.get();
}

std::string FreshPrefix() {
  static std::atomic<int> next{0};
  return "push" + std::to_string(getpid()) + "." + std::to_string(next.fetch_add(1));
}

std::unique_ptr<ServingQueue> Open(const std::string& url, const std::string& prefix,
                                   std::shared_ptr<Clock> clock = nullptr, uint32_t buckets = 4) {
  QueueOptions o;
  o.store = StoreKind::kRedis;
  o.redis_url = url;
  o.redis_prefix = prefix;
  o.redis_buckets = buckets;
  o.clock = std::move(clock);
  auto q = OpenServingQueue(o);
  EXPECT_TRUE(q.ok()) << q.status().ToString();
  return q.ok() ? std::move(q).value() : nullptr;
}

// A fixture with two queues ("servers") on one prefix of the shared server.
class RedisPush : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(Server(), nullptr);
    prefix_ = FreshPrefix();
    a_ = Open(Server()->url(), prefix_);
    b_ = Open(Server()->url(), prefix_);
    ASSERT_TRUE(a_ && b_);
  }
  // Redis's clock now, in ms.
  static int64_t RedisNowMs() {
    auto t = Server()->Command({"TIME"});
    EXPECT_TRUE(t.ok() && t->is_array() && t->elements().size() == 2);
    return std::stoll(t->elements()[0].str()) * 1000 + std::stoll(t->elements()[1].str()) / 1000;
  }
  std::string Key(std::string_view suffix) const {
    return "{" + prefix_ + ":0}:" + std::string(suffix);
  }
  bool Exists(std::string_view suffix) const {
    auto r = Server()->Command({"EXISTS", Key(suffix)});
    return r.ok() && r->is_integer() && r->integer() == 1;
  }

  std::string prefix_;
  std::unique_ptr<ServingQueue> a_;
  std::unique_ptr<ServingQueue> b_;
};

// Runs `start(done)` and waits (10 s at most) for done's result.
template <typename T, typename Start>
Result<T> Await(Start start) {
  auto p = std::make_shared<std::promise<Result<T>>>();
  auto f = p->get_future();
  start([p](Result<T> r) { p->set_value(std::move(r)); });
  if (f.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    return Internal("no answer within 10 s");
  }
  return f.get();
}

Subscription Sub(std::string name, std::string url, int64_t ttl_ms = 0) {
  Subscription s;
  s.name = std::move(name);
  s.url = std::move(url);
  s.topics = {"orders.close"};
  s.ttl_ms = ttl_ms;
  return s;
}

Result<Subscription> Put(ServingQueue& q, const Subscription& s) {
  return Await<Subscription>([&](auto done) { q.PutSubscriptionAsync(s, std::move(done)); });
}
Result<std::vector<Subscription>> List(ServingQueue& q, std::string_view name = "") {
  return Await<std::vector<Subscription>>(
      [&](auto done) { q.SubscriptionsAsync(name, std::move(done)); });
}
Result<uint64_t> Delete(ServingQueue& q, std::string_view name, std::string_view url = "") {
  return Await<uint64_t>([&](auto done) { q.DeleteSubscriptionAsync(name, url, std::move(done)); });
}
Result<PushLedger::Grant> Acquire(ServingQueue& q, const Subscription& s, uint32_t want,
                                  int64_t lease_ms = 60'000) {
  return Await<PushLedger::Grant>(
      [&](auto done) { q.push_ledger()->Acquire(s, want, lease_ms, std::move(done)); });
}
Result<std::vector<PushFigures>> Figures(ServingQueue& q, const std::vector<Subscription>& subs) {
  return Await<std::vector<PushFigures>>(
      [&](auto done) { q.push_ledger()->Figures(subs, std::move(done)); });
}
PushLedger::Outcome Outcome(bool used, bool ok, int64_t at_ms = 0, std::string error = "") {
  PushLedger::Outcome o;
  o.used = used;
  o.ok = ok;
  o.at_ms = at_ms;
  o.error = std::move(error);
  return o;
}

std::vector<std::string> Urls(const std::vector<Subscription>& subs) {
  std::vector<std::string> out;
  for (const Subscription& s : subs) out.push_back(s.name + " " + s.url);
  return out;
}

// --- the record ----------------------------------------------------------------------

TEST(RedisPushRecord, EveryFieldSurvivesEncodingAndDecoding) {
  Subscription s = Sub("billing", "https://billing.example:8443/hooks/jobs?x=1", 30'000);
  s.topics = {"orders.close", "orders.refund", std::string(200, 't')};
  s.concurrency = 10'000;
  s.timeout_ms = 1'800'000;
  s.secrets = {"whsec_" + std::string(88, 'A'), "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"};
  s.retry = RetryPolicy{.min_backoff_ms = 250, .max_backoff_ms = 86'400'000, .max_doublings = 62};
  s.rate_per_s = 0.1;
  auto back = rq::DecodeSubscription(rq::EncodeSubscription(s));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->name, s.name);
  EXPECT_EQ(back->url, s.url);
  EXPECT_EQ(back->topics, s.topics);
  EXPECT_EQ(back->concurrency, s.concurrency);
  EXPECT_EQ(back->timeout_ms, s.timeout_ms);
  EXPECT_EQ(back->ttl_ms, s.ttl_ms);
  EXPECT_EQ(back->secrets, s.secrets);
  EXPECT_EQ(back->retry.min_backoff_ms, 250);
  EXPECT_EQ(back->retry.max_backoff_ms, 86'400'000);
  EXPECT_EQ(back->retry.max_doublings, 62u);
  EXPECT_EQ(back->rate_per_s, 0.1);  // the double's bits, not a decimal rendering
  EXPECT_EQ(back->created_ms, 0);    // the script writes the times
  EXPECT_EQ(back->expires_ms, 0);
}

TEST(RedisPushRecord, AnotherVersionOrACutRecordIsRefusedNamingWhy) {
  std::string rec = rq::EncodeSubscription(Sub("a", "http://h/"));
  std::string v2 = rec;
  v2[0] = 2;
  auto other = rq::DecodeSubscription(v2);
  EXPECT_EQ(other.status().code(), Code::kInternal);
  EXPECT_NE(other.status().message().find("version 2"), std::string::npos)
      << other.status().message();
  auto cut = rq::DecodeSubscription(rec.substr(0, rec.size() - 3));
  EXPECT_EQ(cut.status().code(), Code::kInternal);
  EXPECT_NE(cut.status().message().find("cut short"), std::string::npos);
  // Bytes a later build appended are skipped.
  EXPECT_TRUE(rq::DecodeSubscription(rec + "more").ok());
}

// --- subscriptions -------------------------------------------------------------------

TEST_F(RedisPush, APutIsStoredWithRedisTimesAndListedBack) {
  // The queue's own clock is far in the past: the store's times are Redis's.
  auto manual = Open(Server()->url(), prefix_, std::make_shared<ManualClock>(1'000'000));
  ASSERT_NE(manual, nullptr);
  Subscription s = Sub("billing", "http://127.0.0.1:9000/jobs", 60'000);
  s.concurrency = 7;
  s.rate_per_s = 2.5;
  const int64_t before = RedisNowMs();
  auto put = Put(*manual, s);
  const int64_t after = RedisNowMs();
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_GE(put->created_ms, before);
  EXPECT_LE(put->created_ms, after);
  EXPECT_EQ(put->renewed_ms, put->created_ms);
  EXPECT_EQ(put->expires_ms, put->renewed_ms + 60'000);
  EXPECT_EQ(put->concurrency, 7u);
  EXPECT_EQ(put->rate_per_s, 2.5);
  auto listed = List(*a_);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].url, s.url);
  EXPECT_EQ((*listed)[0].created_ms, put->created_ms);
  EXPECT_EQ((*listed)[0].topics, s.topics);
}

TEST_F(RedisPush, APutOfTheSameNameAndUrlRenewsAndUpdatesKeepingCreated) {
  auto first = Put(*a_, Sub("billing", "http://h:1/x", 0));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->expires_ms, 0);  // no ttl: stays until deleted
  const int64_t created = first->created_ms;
  ASSERT_TRUE(WaitFor([&] { return RedisNowMs() > created; }));
  Subscription changed = Sub("billing", "http://h:1/x", 5'000);
  changed.concurrency = 3;
  changed.topics = {"a", "b"};
  auto second = Put(*b_, changed);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->created_ms, created);
  EXPECT_GT(second->renewed_ms, created);
  EXPECT_EQ(second->expires_ms, second->renewed_ms + 5'000);
  auto listed = List(*a_, "billing");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u) << "a renewal is not a second instance";
  EXPECT_EQ((*listed)[0].concurrency, 3u);
  EXPECT_EQ((*listed)[0].topics, (std::vector<std::string>{"a", "b"}));
}

TEST_F(RedisPush, ListingIsByNameThenUrlAndCanBeCutToOneName) {
  for (const auto& [name, url] : std::vector<std::pair<std::string, std::string>>{
           {"b", "http://h/x"}, {"a.b", "http://h/y"}, {"a", "http://h/z"}, {"a", "http://h/y"}}) {
    ASSERT_TRUE(Put(*a_, Sub(name, url)).ok());
  }
  auto all = List(*b_);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(Urls(*all), (std::vector<std::string>{"a http://h/y", "a http://h/z", "a.b http://h/y",
                                                  "b http://h/x"}));
  auto a = List(*b_, "a");  // not "a.b": the name is whole
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(Urls(*a), (std::vector<std::string>{"a http://h/y", "a http://h/z"}));
  auto none = List(*b_, "c");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST_F(RedisPush, DeleteRemovesOneInstanceOrEveryInstanceOfAName) {
  for (const char* url : {"http://h/1", "http://h/2", "http://h/3"}) {
    ASSERT_TRUE(Put(*a_, Sub("app", url)).ok());
  }
  ASSERT_TRUE(Put(*a_, Sub("app2", "http://h/1")).ok());
  EXPECT_EQ(*Delete(*b_, "app", "http://h/2"), 1u);
  EXPECT_EQ(*Delete(*b_, "app", "http://h/2"), 0u) << "already gone";
  EXPECT_EQ(Urls(*List(*a_)),
            (std::vector<std::string>{"app http://h/1", "app http://h/3", "app2 http://h/1"}));
  EXPECT_EQ(*Delete(*a_, "app"), 2u);
  EXPECT_EQ(Urls(*List(*b_)), (std::vector<std::string>{"app2 http://h/1"}));
  EXPECT_EQ(*Delete(*a_, "nobody"), 0u);
}

TEST_F(RedisPush, AnInstanceNotRenewedWithinItsTtlLapsesAndIsForgotten) {
  auto put = Put(*a_, Sub("app", "http://h/short", 1'000));
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  ASSERT_TRUE(Put(*a_, Sub("app", "http://h/long", 0)).ok());
  // Until Redis's clock reaches expires_ms it is listed, on every server.
  auto early = List(*b_, "app");
  ASSERT_TRUE(early.ok());
  if (RedisNowMs() < put->expires_ms - 100) {
    EXPECT_EQ(early->size(), 2u);
  }
  ASSERT_TRUE(WaitFor([&] { return RedisNowMs() >= put->expires_ms; }, 5'000));
  auto late = List(*b_, "app");
  ASSERT_TRUE(late.ok());
  EXPECT_EQ(Urls(*late), (std::vector<std::string>{"app http://h/long"}));
  // Forgotten by the store, not only hidden: the field is gone.
  auto field = Server()->Command({"HEXISTS", Key("subs"), "app http://h/short"});
  ASSERT_TRUE(field.ok());
  EXPECT_EQ(field->integer(), 0);
  // Deleting it now counts nothing; putting it again starts a new instance.
  EXPECT_EQ(*Delete(*a_, "app", "http://h/short"), 0u);
  auto again = Put(*a_, Sub("app", "http://h/short", 1'000));
  ASSERT_TRUE(again.ok());
  EXPECT_GE(again->created_ms, put->expires_ms);
}

TEST_F(RedisPush, ARenewalBeforeTheTtlKeepsTheInstance) {
  auto put = Put(*a_, Sub("app", "http://h/1", 1'000));
  ASSERT_TRUE(put.ok());
  ASSERT_TRUE(WaitFor([&] { return RedisNowMs() >= put->renewed_ms + 500; }, 5'000));
  auto renewed = Put(*b_, Sub("app", "http://h/1", 1'000));
  ASSERT_TRUE(renewed.ok());
  ASSERT_LT(renewed->renewed_ms, put->expires_ms) << "renewed too late to test this";
  ASSERT_TRUE(WaitFor([&] { return RedisNowMs() >= put->expires_ms; }, 5'000));
  // Past the first expiry, before the renewed one.
  auto listed = List(*a_, "app");
  ASSERT_TRUE(listed.ok());
  if (RedisNowMs() < renewed->expires_ms) {
    ASSERT_EQ(listed->size(), 1u);
    EXPECT_EQ((*listed)[0].created_ms, put->created_ms);
  }
}

TEST_F(RedisPush, BadInputIsRefusedNamingTheFieldBeforeAnyScriptRuns) {
  Subscription bad = Sub("app", "ftp://h/x");
  auto put = Put(*a_, bad);
  EXPECT_EQ(put.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(put.status().message().rfind("url:", 0), 0u) << put.status().message();
  bad = Sub("app", "http://h/x");
  bad.concurrency = 0;
  EXPECT_EQ(Put(*a_, bad).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(Delete(*a_, "bad name").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(List(*a_, "bad/name").status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(List(*a_)->empty());
}

// --- the ledger ----------------------------------------------------------------------

TEST_F(RedisPush, TheConcurrencyHoldsAcrossQueuesAndASettledSlotComesBack) {
  Subscription s = Sub("app", "http://h/1");
  s.concurrency = 3;
  ASSERT_TRUE(Put(*a_, s).ok());
  auto on_a = Acquire(*a_, s, 2);
  ASSERT_TRUE(on_a.ok()) << on_a.status().ToString();
  EXPECT_EQ(on_a->leases.size(), 2u);
  EXPECT_EQ(on_a->rate_wait_ms, 0);
  auto on_b = Acquire(*b_, s, 5);
  ASSERT_TRUE(on_b.ok());
  ASSERT_EQ(on_b->leases.size(), 1u) << "3 slots in all, 2 held by the other queue";
  EXPECT_EQ(on_b->rate_wait_ms, 0) << "held back by concurrency, not by the rate";
  EXPECT_EQ(Acquire(*b_, s, 1)->leases.size(), 0u);
  // Lease ids are unique across the queues.
  EXPECT_NE(on_b->leases[0], on_a->leases[0]);
  EXPECT_NE(on_b->leases[0], on_a->leases[1]);
  auto figures = Figures(*b_, {s});
  ASSERT_TRUE(figures.ok());
  EXPECT_EQ((*figures)[0].slots_held, 3u);
  a_->push_ledger()->Settle(s, on_a->leases[0], Outcome(true, true));
  ASSERT_TRUE(WaitFor([&] { return Figures(*b_, {s})->at(0).slots_held == 2; }));
  EXPECT_EQ(Acquire(*b_, s, 5)->leases.size(), 1u);
}

TEST_F(RedisPush, ALeaseNotSettledRunsOutAndItsSlotReturns) {
  Subscription s = Sub("app", "http://h/1");
  s.concurrency = 2;
  ASSERT_TRUE(Put(*a_, s).ok());
  const auto start = Steady::now();
  ASSERT_EQ(Acquire(*a_, s, 2, /*lease_ms=*/300)->leases.size(), 2u);  // a server that dies
  EXPECT_EQ(Acquire(*b_, s, 1)->leases.size(), 0u);
  size_t got = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        got = Acquire(*b_, s, 2)->leases.size();
        return got > 0;
      },
      5'000));
  EXPECT_EQ(got, 2u);
  EXPECT_GE(redis_harness::ElapsedMs(start), 250)
      << "the slots came back before the leases ran out";
}

TEST_F(RedisPush, TheRateSpacesStartsAcrossQueuesWithoutBurst) {
  Subscription s = Sub("app", "http://h/1");
  s.concurrency = 100;
  s.rate_per_s = 10;  // a start per 100 ms
  ASSERT_TRUE(Put(*a_, s).ok());
  auto first = Acquire(*a_, s, 5);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->leases.size(), 1u) << "no burst: one start now";
  EXPECT_GT(first->rate_wait_ms, 0);
  EXPECT_LE(first->rate_wait_ms, 100);
  auto held = Acquire(*b_, s, 5);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(held->leases.size(), 0u) << "the other queue counts the same rate";
  EXPECT_GT(held->rate_wait_ms, 0);
  // Four more starts, alternating queues: at least 100 ms apart each.
  const auto start = Steady::now();
  int starts = 0;
  bool on_a = false;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto g = Acquire(on_a ? *a_ : *b_, s, 5);
        EXPECT_TRUE(g.ok());
        EXPECT_LE(g->leases.size(), 1u);
        if (!g->leases.empty()) {
          ++starts;
          on_a = !on_a;
        }
        return starts == 4;
      },
      5'000));
  EXPECT_GE(redis_harness::ElapsedMs(start), 4 * 100 - 100 - 5);  // the first may come early
  EXPECT_EQ(Figures(*a_, {s})->at(0).slots_held, 5u);
}

TEST_F(RedisPush, AnUnusedSlotGivesItsStartBackToTheRate) {
  Subscription s = Sub("app", "http://h/1");
  s.rate_per_s = 0.5;  // a start per 2 s
  ASSERT_TRUE(Put(*a_, s).ok());
  auto first = Acquire(*a_, s, 1);
  ASSERT_EQ(first->leases.size(), 1u);
  auto none = Acquire(*a_, s, 1);
  EXPECT_EQ(none->leases.size(), 0u);
  EXPECT_GT(none->rate_wait_ms, 1'000);
  a_->push_ledger()->Settle(s, first->leases[0], Outcome(/*used=*/false, false));
  // Well within the 2 s the rate would make it wait (the settle goes through
  // the other queue's dispatcher, hence the poll).
  ASSERT_TRUE(WaitFor([&] { return !Acquire(*b_, s, 1)->leases.empty(); }, 1'000))
      << "the unused start was not given back";
}

TEST_F(RedisPush, AHighRateGrantsAtMostAMillisecondsWorthAtOnce) {
  Subscription s = Sub("app", "http://h/1");
  s.concurrency = 1'000;
  s.rate_per_s = 5'000;  // 200 µs apart: up to 5 in one ms
  ASSERT_TRUE(Put(*a_, s).ok());
  auto g = Acquire(*a_, s, 100);
  ASSERT_TRUE(g.ok());
  EXPECT_GE(g->leases.size(), 1u);
  EXPECT_LE(g->leases.size(), 5u);
  EXPECT_GE(g->rate_wait_ms, 1);
}

TEST_F(RedisPush, FiguresCountOutcomesInTheOrderAsked) {
  Subscription s1 = Sub("app", "http://h/1");
  Subscription s2 = Sub("app", "http://h/2");
  ASSERT_TRUE(Put(*a_, s1).ok());
  ASSERT_TRUE(Put(*a_, s2).ok());
  auto g = Acquire(*a_, s1, 3);
  ASSERT_EQ(g->leases.size(), 3u);
  PushLedger& ledger = *b_->push_ledger();  // any server settles any lease
  ledger.Settle(s1, g->leases[0], Outcome(true, true, 1'700'000'000'123));
  ledger.Settle(s1, g->leases[1], Outcome(true, false, 1'700'000'000'456, "HTTP 500"));
  ledger.Settle(s1, g->leases[2], Outcome(false, false));  // no request: not counted
  Subscription unknown = Sub("nobody", "http://h/9");
  auto f = Figures(*b_, {s2, s1, unknown});  // behind the settles on the same queue
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->size(), 3u);
  EXPECT_EQ((*f)[0].delivered + (*f)[0].failed, 0u);
  const PushFigures& one = (*f)[1];
  EXPECT_EQ(one.slots_held, 0u);
  EXPECT_EQ(one.delivered, 1u);
  EXPECT_EQ(one.failed, 1u);
  EXPECT_EQ(one.last_success_ms, 1'700'000'000'123);
  EXPECT_EQ(one.last_error_ms, 1'700'000'000'456);
  EXPECT_EQ(one.last_error, "HTTP 500");
  EXPECT_EQ((*f)[2].slots_held, 0u);
  // Forget clears them; so does deleting the subscription.
  ledger.Forget(s1);
  EXPECT_EQ(Figures(*b_, {s1})->at(0).delivered, 0u);
  ASSERT_EQ(Acquire(*a_, s2, 1)->leases.size(), 1u);
  ASSERT_TRUE(Exists("push:l:app http://h/2"));
  EXPECT_EQ(*Delete(*a_, "app", "http://h/2"), 1u);
  EXPECT_FALSE(Exists("push:l:app http://h/2"));
  EXPECT_FALSE(Exists("push:f:app http://h/2"));
}

TEST_F(RedisPush, AnInstanceNotSubscribedOrLapsedGetsNoSlots) {
  Subscription never = Sub("app", "http://h/never");
  auto g = Acquire(*a_, never, 3);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(g->leases.empty());
  Subscription brief = Sub("app", "http://h/brief", 1'000);
  auto put = Put(*a_, brief);
  ASSERT_TRUE(put.ok());
  ASSERT_TRUE(WaitFor([&] { return RedisNowMs() >= put->expires_ms; }, 5'000));
  EXPECT_TRUE(Acquire(*b_, brief, 3)->leases.empty());
}

TEST_F(RedisPush, TheLedgerCallsOfARoundShareOneScriptCall) {
  Subscription s = Sub("app", "http://h/1");
  s.concurrency = 10'000;
  ASSERT_TRUE(Put(*a_, s).ok());
  auto* rq = dynamic_cast<RedisQueue*>(a_.get());
  ASSERT_NE(rq, nullptr);
  auto g = Acquire(*a_, s, 400);
  ASSERT_EQ(g->leases.size(), 400u);
  const RedisQueue::DispatchStats before = rq->dispatch_stats();
  for (const std::string& lease : g->leases) {
    a_->push_ledger()->Settle(s, lease, Outcome(true, true, 1));
  }
  auto f = Figures(*a_, {s});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)[0].delivered, 400u);
  EXPECT_EQ((*f)[0].slots_held, 0u);
  const RedisQueue::DispatchStats after = rq->dispatch_stats();
  EXPECT_LE(after.commands - before.commands, 40u) << "401 ledger calls, batched into rounds";
}

// --- a cluster -----------------------------------------------------------------------

TEST(RedisPushCluster, SubscriptionsAndTheLedgerWorkOnAClusterFromAnyQueue) {
  auto cluster = RedisCluster::Start(3);
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  const std::string prefix = FreshPrefix();
  auto a = Open((*cluster)->url(), prefix, nullptr, 16);
  auto b = Open((*cluster)->url(), prefix, nullptr, 16);
  ASSERT_TRUE(a && b);
  Subscription s = Sub("app", "http://h/1", 60'000);
  s.concurrency = 2;
  ASSERT_TRUE(Put(*a, s).ok());
  ASSERT_TRUE(Put(*b, Sub("app", "http://h/2")).ok());
  EXPECT_EQ(Urls(*List(*b, "app")), (std::vector<std::string>{"app http://h/1", "app http://h/2"}));
  auto g = Acquire(*a, s, 5);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->leases.size(), 2u);
  EXPECT_TRUE(Acquire(*b, s, 1)->leases.empty());
  b->push_ledger()->Settle(s, g->leases[0], Outcome(true, true, 5));
  auto f = Figures(*b, {s});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)[0].slots_held, 1u);
  EXPECT_EQ((*f)[0].delivered, 1u);
  EXPECT_EQ(*Delete(*a, "app"), 2u);
  EXPECT_TRUE(List(*b)->empty());
}

}  // namespace
}  // namespace delayq
