// The subscription conformance tests (see subscription_conformance.h for how
// a store plugs in). Every test talks to the store through ServingQueue's
// subscription calls only and moves time only through the harness.
#include "conformance/subscription_conformance.h"

#include <string>
#include <utility>
#include <vector>

#include "conformance/queue_conformance.h"

namespace delayq::conformance {

std::string SubscriptionImplName(const testing::TestParamInfo<SubscriptionImpl>& info) {
  return info.param.name;
}

void PrintTo(const SubscriptionImpl& impl, std::ostream* os) { *os << impl.name; }

void SubscriptionConformance::SetUp() {
  harness_ = GetParam().make();
  ASSERT_NE(harness_, nullptr);
  queue_ = harness_->Open();
  ASSERT_NE(queue_, nullptr) << "the harness could not open a queue";
}

void SubscriptionConformance::TearDown() {
  queue_.reset();
  harness_.reset();
}

Subscription MustPut(ServingQueue& q, const Subscription& s) {
  auto r = Put(q, s);
  EXPECT_TRUE(IsOk(r.status())) << "put " << s.name << " " << s.url;
  return r.ok() ? *r : Subscription{};
}

std::vector<Subscription> MustList(ServingQueue& q, std::string_view name) {
  auto r = List(q, name);
  EXPECT_TRUE(IsOk(r.status())) << "list '" << name << "'";
  return r.ok() ? *r : std::vector<Subscription>{};
}

std::vector<std::string> Keys(const std::vector<Subscription>& list) {
  std::vector<std::string> keys;
  for (const Subscription& s : list) keys.push_back(s.name + " " + s.url);
  return keys;
}

testing::AssertionResult SameSubscription(const Subscription& a, const Subscription& b) {
#define DELAYQ_SAME(field)                                                                      \
  if (!(a.field == b.field)) {                                                                  \
    return testing::AssertionFailure() << #field " differs (" << a.name << " " << a.url << ")"; \
  }
  DELAYQ_SAME(name)
  DELAYQ_SAME(url)
  DELAYQ_SAME(topics)
  DELAYQ_SAME(concurrency)
  DELAYQ_SAME(timeout_ms)
  DELAYQ_SAME(ttl_ms)
  DELAYQ_SAME(secrets)
  DELAYQ_SAME(retry.min_backoff_ms)
  DELAYQ_SAME(retry.max_backoff_ms)
  DELAYQ_SAME(retry.max_doublings)
  DELAYQ_SAME(rate_per_s)
  DELAYQ_SAME(created_ms)
  DELAYQ_SAME(renewed_ms)
  DELAYQ_SAME(expires_ms)
#undef DELAYQ_SAME
  return testing::AssertionSuccess();
}

namespace {

// 32 bytes of key, base64: a valid Standard Webhooks secret.
constexpr const char* kSecretA = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
constexpr const char* kSecretB = "whsec_QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0";

// Every caller-given field set away from its default.
Subscription Full(std::string name, std::string url) {
  Subscription s = Instance(std::move(name), std::move(url));
  s.topics = {"orders", "refunds.eu"};
  s.concurrency = 50;
  s.timeout_ms = 2'500;
  s.ttl_ms = 60'000;
  s.secrets = {kSecretA, kSecretB};
  s.retry.min_backoff_ms = 250;
  s.retry.max_backoff_ms = 90'000;
  s.retry.max_doublings = 5;
  s.rate_per_s = 12.5;
  return s;
}

TEST_P(SubscriptionConformance, PutAnswersTheRecordAsStoredWithTimesFromTheStoreClock) {
  ServingQueue& q = queue();
  int64_t now = harness().NowMs();
  Subscription given = Full("billing", "http://127.0.0.1:8080/jobs");
  given.created_ms = 1;  // kept by the store, not given: ignored
  given.renewed_ms = 2;
  given.expires_ms = 3;
  Subscription stored = MustPut(q, given);
  Subscription want = given;
  want.created_ms = now;
  want.renewed_ms = now;
  want.expires_ms = now + 60'000;
  EXPECT_TRUE(SameSubscription(stored, want));
  auto listed = MustList(q, "billing");
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_TRUE(SameSubscription(listed[0], want));
}

TEST_P(SubscriptionConformance, WithoutTtlAnInstanceNeverExpires) {
  ServingQueue& q = queue();
  Subscription stored = MustPut(q, Instance("app", "https://example.com/hook"));
  EXPECT_EQ(stored.expires_ms, 0);
  EXPECT_EQ(stored.concurrency, kDefaultPushConcurrency);
  EXPECT_EQ(stored.timeout_ms, kDefaultPushTimeoutMs);
  harness().AdvanceMs(kMaxSubscriptionTtlMs * 2);
  EXPECT_EQ(Keys(MustList(q)), std::vector<std::string>{"app https://example.com/hook"});
}

TEST_P(SubscriptionConformance, PutAgainRenewsKeepingCreatedAndMovingExpires) {
  ServingQueue& q = queue();
  Subscription s = Instance("app", "http://10.0.0.1:9000/run");
  s.ttl_ms = 10'000;
  int64_t first = harness().NowMs();
  MustPut(q, s);
  harness().AdvanceMs(7'000);
  Subscription renewed = MustPut(q, s);
  EXPECT_EQ(renewed.created_ms, first);
  EXPECT_EQ(renewed.renewed_ms, first + 7'000);
  EXPECT_EQ(renewed.expires_ms, first + 17'000);
  // Past the first expiry, within the renewed one: still live.
  harness().AdvanceMs(9'999);
  auto listed = MustList(q, "app");
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_TRUE(SameSubscription(listed[0], renewed));
}

TEST_P(SubscriptionConformance, PutAgainUpdatesEveryField) {
  ServingQueue& q = queue();
  int64_t first = harness().NowMs();
  MustPut(q, Instance("app", "http://h:1/x"));
  harness().AdvanceMs(5);
  Subscription changed = Full("app", "http://h:1/x");
  Subscription stored = MustPut(q, changed);
  Subscription want = changed;
  want.created_ms = first;
  want.renewed_ms = first + 5;
  want.expires_ms = first + 5 + changed.ttl_ms;
  EXPECT_TRUE(SameSubscription(stored, want));
  // And back: a put replaces the options, it does not merge them.
  Subscription plain = Instance("app", "http://h:1/x");
  stored = MustPut(q, plain);
  EXPECT_EQ(stored.topics, plain.topics);
  EXPECT_TRUE(stored.secrets.empty());
  EXPECT_EQ(stored.ttl_ms, 0);
  EXPECT_EQ(stored.expires_ms, 0);
  EXPECT_EQ(stored.created_ms, first);
  auto listed = MustList(q);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_TRUE(SameSubscription(listed[0], stored));
}

TEST_P(SubscriptionConformance, ListsByNameAndAllOrderedByNameThenUrl) {
  ServingQueue& q = queue();
  // Put out of order.
  MustPut(q, Instance("beta", "http://b:2/"));
  MustPut(q, Instance("alpha", "http://z:1/"));
  MustPut(q, Instance("beta", "http://a:9/"));
  MustPut(q, Instance("alpha", "http://a:1/"));
  MustPut(q, Instance("alpha.eu", "http://a:1/"));
  EXPECT_EQ(Keys(MustList(q)), (std::vector<std::string>{"alpha http://a:1/", "alpha http://z:1/",
                                                         "alpha.eu http://a:1/", "beta http://a:9/",
                                                         "beta http://b:2/"}));
  EXPECT_EQ(Keys(MustList(q, "alpha")),
            (std::vector<std::string>{"alpha http://a:1/", "alpha http://z:1/"}));
  EXPECT_EQ(Keys(MustList(q, "beta")),
            (std::vector<std::string>{"beta http://a:9/", "beta http://b:2/"}));
  EXPECT_TRUE(MustList(q, "gamma").empty());
  EXPECT_TRUE(MustList(q, "alph").empty());
}

TEST_P(SubscriptionConformance, DeleteOneUrlOrAllOfANameAnswersHowManyWent) {
  ServingQueue& q = queue();
  MustPut(q, Instance("app", "http://a:1/"));
  MustPut(q, Instance("app", "http://b:1/"));
  MustPut(q, Instance("app", "http://c:1/"));
  MustPut(q, Instance("app2", "http://a:1/"));
  auto one = Unsubscribe(q, "app", "http://b:1/");
  ASSERT_TRUE(IsOk(one.status()));
  EXPECT_EQ(*one, 1u);
  EXPECT_EQ(Keys(MustList(q, "app")),
            (std::vector<std::string>{"app http://a:1/", "app http://c:1/"}));
  auto again = Unsubscribe(q, "app", "http://b:1/");
  ASSERT_TRUE(IsOk(again.status()));
  EXPECT_EQ(*again, 0u);
  auto all = Unsubscribe(q, "app");
  ASSERT_TRUE(IsOk(all.status()));
  EXPECT_EQ(*all, 2u);
  EXPECT_TRUE(MustList(q, "app").empty());
  // Another name, even one that starts alike, is untouched.
  EXPECT_EQ(Keys(MustList(q)), std::vector<std::string>{"app2 http://a:1/"});
  auto none = Unsubscribe(q, "nobody");
  ASSERT_TRUE(IsOk(none.status()));
  EXPECT_EQ(*none, 0u);
}

TEST_P(SubscriptionConformance, LapsedInstanceIsLeftOutAndForgotten) {
  ServingQueue& q = queue();
  Subscription s = Instance("app", "http://a:1/");
  s.ttl_ms = 1'000;
  MustPut(q, s);
  MustPut(q, Instance("app", "http://b:1/"));  // no ttl: stays
  harness().AdvanceMs(999);
  EXPECT_EQ(Keys(MustList(q, "app")),
            (std::vector<std::string>{"app http://a:1/", "app http://b:1/"}));
  harness().AdvanceMs(1);  // at expires_ms: lapsed
  EXPECT_EQ(Keys(MustList(q, "app")), std::vector<std::string>{"app http://b:1/"});
  EXPECT_EQ(Keys(MustList(q)), std::vector<std::string>{"app http://b:1/"});
  // Forgotten: nothing to delete, and a put starts it anew.
  auto gone = Unsubscribe(q, "app", "http://a:1/");
  ASSERT_TRUE(IsOk(gone.status()));
  EXPECT_EQ(*gone, 0u);
  int64_t now = harness().NowMs();
  Subscription back = MustPut(q, s);
  EXPECT_EQ(back.created_ms, now);
  EXPECT_EQ(back.expires_ms, now + 1'000);
}

TEST_P(SubscriptionConformance, LapsedInstanceIsNotCountedByDeleteOfItsName) {
  ServingQueue& q = queue();
  Subscription s = Instance("app", "http://a:1/");
  s.ttl_ms = 1'000;
  MustPut(q, s);
  MustPut(q, Instance("app", "http://b:1/"));
  harness().AdvanceMs(1'000);
  auto removed = Unsubscribe(q, "app");
  ASSERT_TRUE(IsOk(removed.status()));
  EXPECT_EQ(*removed, 1u);
  EXPECT_TRUE(MustList(q).empty());
}

TEST_P(SubscriptionConformance, InvalidSubscriptionIsRefusedNamingTheFieldAndNothingIsStored) {
  ServingQueue& q = queue();
  struct Case {
    const char* field;
    std::function<void(Subscription&)> spoil;
  };
  const std::vector<Case> cases = {
      {"name", [](Subscription& s) { s.name = ""; }},
      {"name", [](Subscription& s) { s.name = "has space"; }},
      {"url", [](Subscription& s) { s.url = ""; }},
      {"url", [](Subscription& s) { s.url = "ftp://h/x"; }},
      {"url", [](Subscription& s) { s.url = "http://h:99999/"; }},
      {"topics", [](Subscription& s) { s.topics.clear(); }},
      {"topics", [](Subscription& s) { s.topics = {"bad topic"}; }},
      {"concurrency", [](Subscription& s) { s.concurrency = 0; }},
      {"concurrency", [](Subscription& s) { s.concurrency = kMaxSubscriptionConcurrency + 1; }},
      {"timeout_ms", [](Subscription& s) { s.timeout_ms = 0; }},
      {"ttl_ms", [](Subscription& s) { s.ttl_ms = 999; }},
      {"ttl_ms", [](Subscription& s) { s.ttl_ms = -1; }},
      {"secret", [](Subscription& s) { s.secrets = {"plain"}; }},
      {"secrets[1]",
       [](Subscription& s) {
         s.secrets = {kSecretA, "whsec_!!"};
       }},
      {"retry.min_backoff_ms", [](Subscription& s) { s.retry.min_backoff_ms = -1; }},
      {"retry.max_backoff_ms", [](Subscription& s) { s.retry.max_backoff_ms = 10; }},
      {"retry.max_doublings", [](Subscription& s) { s.retry.max_doublings = 63; }},
      {"rate_per_s", [](Subscription& s) { s.rate_per_s = -1; }},
  };
  for (const Case& c : cases) {
    Subscription s = Instance("app", "http://h:1/");
    c.spoil(s);
    EXPECT_TRUE(Rejects(Put(q, s).status(), c.field)) << "spoiled " << c.field;
  }
  EXPECT_TRUE(MustList(q).empty());
}

TEST_P(SubscriptionConformance, BadNameInListOrDeleteIsRefusedNamingIt) {
  ServingQueue& q = queue();
  EXPECT_TRUE(Rejects(List(q, "no spaces").status(), "name"));
  EXPECT_TRUE(Rejects(Unsubscribe(q, "").status(), "name"));
  EXPECT_TRUE(Rejects(Unsubscribe(q, "a/b", "http://h:1/").status(), "name"));
}

TEST_P(SubscriptionConformance, SubscriptionsLeaveJobsAndTopicsAlone) {
  ServingQueue& q = queue();
  MustPut(q, Instance("app", "http://h:1/"));
  auto stats = q.Stats();
  ASSERT_TRUE(IsOk(stats.status()));
  EXPECT_EQ(stats->jobs, 0u);
  auto topics = q.Topics();
  ASSERT_TRUE(IsOk(topics.status()));
  EXPECT_TRUE(topics->empty());
}

}  // namespace
}  // namespace delayq::conformance
