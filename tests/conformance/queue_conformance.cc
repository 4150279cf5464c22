// The conformance tests (see queue_conformance.h for how an implementation
// plugs in). Every test talks to the queue through delayq::Queue only, moves
// time only through the harness, and waits for asynchronous answers with
// futures and a deadline, never by sleeping.
//
// Each test uses its own topic names, so a failure in one part of a test
// cannot leak jobs into another part's reserves.
#include "conformance/queue_conformance.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace delayq::conformance {

std::string QueueImplName(const testing::TestParamInfo<QueueImpl>& info) { return info.param.name; }

void PrintTo(const QueueImpl& impl, std::ostream* os) { *os << impl.name; }

void QueueConformance::SetUp() {
  harness_ = GetParam().make();
  ASSERT_NE(harness_, nullptr);
  queue_ = harness_->Open();
  ASSERT_NE(queue_, nullptr) << "the harness could not open a queue";
}

void QueueConformance::TearDown() {
  queue_.reset();  // answers leftover waiters while the harness still lives
  harness_.reset();
}

bool QueueConformance::KnownBug(std::string_view tag) const {
  return GetParam().known_bugs.count(std::string(tag)) != 0;
}

// --- add and get ---------------------------------------------------------------

TEST_P(QueueConformance, AddThenGetRoundTripsEveryField) {
  Queue& q = queue();
  const std::string body("bin\0ary \xff\x01 body", 15);
  int64_t before = harness().NowMs();
  JobSpec spec = Delayed("rt.topic", "rt-1", kLongMs);
  spec.ttr_ms = 12'345;
  spec.priority = 7;
  spec.max_attempts = 3;
  spec.body = body;
  auto added = q.Add(spec);
  int64_t after = harness().NowMs();
  ASSERT_TRUE(IsOk(added.status()));
  EXPECT_EQ(added->id, "rt-1");
  EXPECT_EQ(StateName(added->state), "delayed");
  EXPECT_GE(added->run_at_ms, before + kLongMs);
  EXPECT_LE(added->run_at_ms, after + kLongMs);

  JobInfo info = MustGet(q, "rt-1");
  EXPECT_EQ(info.id, "rt-1");
  EXPECT_EQ(info.topic, "rt.topic");
  EXPECT_EQ(StateName(info.state), "delayed");
  EXPECT_EQ(info.body, body);
  EXPECT_EQ(info.priority, 7u);
  EXPECT_EQ(info.ttr_ms, 12'345u);
  EXPECT_EQ(info.max_attempts, 3u);
  EXPECT_EQ(info.attempts, 0u);
  EXPECT_GE(info.created_at_ms, before);
  EXPECT_LE(info.created_at_ms, after);
  EXPECT_EQ(info.run_at_ms, added->run_at_ms);
  EXPECT_EQ(info.reserved_until_ms, 0);
  EXPECT_EQ(info.receipt, "");
  EXPECT_EQ(info.last_error, "");

  // Defaults (SPEC §3): due now, TTR 60 s, priority 1024, unlimited attempts.
  before = harness().NowMs();
  auto plain = q.Add(Spec("rt.topic", "rt-2"));
  after = harness().NowMs();
  ASSERT_TRUE(IsOk(plain.status()));
  EXPECT_EQ(StateName(plain->state), "ready");
  EXPECT_GE(plain->run_at_ms, before);
  EXPECT_LE(plain->run_at_ms, after);
  JobInfo defaults = MustGet(q, "rt-2");
  EXPECT_EQ(StateName(defaults.state), "ready");
  EXPECT_EQ(defaults.ttr_ms, kDefaultTtrMs);
  EXPECT_EQ(defaults.priority, kDefaultPriority);
  EXPECT_EQ(defaults.max_attempts, 0u);
  EXPECT_EQ(defaults.body, "");
  EXPECT_EQ(defaults.run_at_ms, plain->run_at_ms);
}

TEST_P(QueueConformance, RunAtIsKeptAndAPastRunAtIsDueNow) {
  Queue& q = queue();
  const int64_t future_at = harness().NowMs() + kLongMs + 1234;
  JobSpec later = Spec("runat", "later");
  later.run_at_ms = future_at;
  AddResult a = MustAdd(q, later);
  EXPECT_EQ(StateName(a.state), "delayed");
  EXPECT_EQ(a.run_at_ms, future_at);
  EXPECT_EQ(MustGet(q, "later").run_at_ms, future_at);

  const int64_t past_at = harness().NowMs() - 5'000;
  JobSpec past = Spec("runat", "past");
  past.run_at_ms = past_at;
  AddResult b = MustAdd(q, past);
  EXPECT_EQ(StateName(b.state), "ready");
  EXPECT_EQ(Ids(ReserveNow(q, {"runat"}, 10)), std::vector<std::string>{"past"});

  JobSpec earliest = Spec("runat", "earliest");
  earliest.run_at_ms = kMinRunAtMs;  // 2001-09-09: earlier is refused as seconds
  EXPECT_EQ(StateName(MustAdd(q, earliest).state), "ready");
}

TEST_P(QueueConformance, AddRejectsBadInputNamingTheFieldAndChangesNothing) {
  Queue& q = queue();
  const QueueStats s0 = MustStats(q);
  struct Case {
    const char* what;
    JobSpec spec;
    const char* field;
    Code code = Code::kInvalidArgument;
  };
  auto with = [](auto change) {
    JobSpec s = Spec("bad.input", "bad-job");
    change(s);
    return s;
  };
  std::vector<Case> cases = {
      {"empty topic", with([](JobSpec& s) { s.topic = ""; }), "topic"},
      {"topic with a space", with([](JobSpec& s) { s.topic = "has space"; }), "topic"},
      {"topic with a slash", with([](JobSpec& s) { s.topic = "a/b"; }), "topic"},
      {"201-byte topic", with([](JobSpec& s) { s.topic = std::string(201, 't'); }), "topic"},
      {"257-byte id", with([](JobSpec& s) { s.id = std::string(257, 'i'); }), "id"},
      {"id with a newline", with([](JobSpec& s) { s.id = "a\nb"; }), "id"},
      {"id with DEL", with([](JobSpec& s) { s.id = "a\x7f"; }), "id"},
      {"id with NUL", with([](JobSpec& s) { s.id = std::string("a\0b", 3); }), "id"},
      {"negative delay", with([](JobSpec& s) { s.delay_ms = -1; }), "delay_ms"},
      {"delay and run_at", with([](JobSpec& s) {
         s.delay_ms = 5;
         s.run_at_ms = 5;
       }),
       "run_at_ms"},
      {"negative run_at", with([](JobSpec& s) { s.run_at_ms = -1; }), "run_at_ms"},
      {"run_at in seconds", with([](JobSpec& s) { s.run_at_ms = 1'795'659'700; }),
       "looks like seconds"},
      {"run_at 0", with([](JobSpec& s) { s.run_at_ms = 0; }), "run_at_ms"},
      {"zero ttr", with([](JobSpec& s) { s.ttr_ms = 0; }), "ttr_ms"},
      {"body over 256 KiB",
       with([](JobSpec& s) { s.body = std::string(kDefaultMaxBodyBytes + 1, 'b'); }), "body",
       Code::kTooLarge},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_TRUE(Rejects(q.Add(c.spec).status(), c.field, c.code));
  }
  EXPECT_EQ(State(q, "bad-job"), "gone");
  QueueStats stats = MustStats(q);
  EXPECT_EQ(stats.jobs, 0u);
  EXPECT_EQ(stats.added - s0.added, 0u);
  auto topics = q.Topics();
  ASSERT_TRUE(IsOk(topics.status()));
  EXPECT_TRUE(topics->empty());

  // A bad replace of a live job leaves it as it was.
  JobSpec keep = Delayed("bad.input", "keep", kLongMs);
  keep.body = "original";
  AddResult kept = MustAdd(q, keep);
  JobSpec bad = Spec("bad.input", "keep");
  bad.replace = true;
  bad.ttr_ms = 0;
  bad.body = "changed";
  EXPECT_TRUE(Rejects(q.Add(bad).status(), "ttr_ms"));
  JobInfo info = MustGet(q, "keep");
  EXPECT_EQ(info.body, "original");
  EXPECT_EQ(StateName(info.state), "delayed");
  EXPECT_EQ(info.run_at_ms, kept.run_at_ms);
}

TEST_P(QueueConformance, AddAcceptsValuesAtTheLimits) {
  Queue& q = queue();
  std::string topic;
  while (topic.size() < kMaxTopicBytes) topic += "Az09._:-";
  topic.resize(kMaxTopicBytes);
  std::string id = "sp ace \xc3\xa9t\xc3\xa9 ~!@#$%^&*()[]{}/\\";
  id.resize(kMaxIdBytes, 'x');
  std::string body;
  for (size_t i = 0; body.size() < kDefaultMaxBodyBytes; ++i) body += static_cast<char>(i * 7);

  JobSpec big = Spec(topic, id);
  big.body = body;
  big.priority = 4'294'967'295u;
  big.max_attempts = 4'294'967'295u;
  big.ttr_ms = 4'294'967'295u;
  EXPECT_EQ(MustAdd(q, big).id, id);
  JobSpec first = Spec(topic, "prio-zero");
  first.priority = 0;
  MustAdd(q, first);

  JobInfo info = MustGet(q, id);
  EXPECT_EQ(info.topic, topic);
  EXPECT_EQ(info.body.size(), body.size());
  EXPECT_TRUE(info.body == body) << "a 256 KiB body did not come back unchanged";
  EXPECT_EQ(info.priority, 4'294'967'295u);
  EXPECT_EQ(info.max_attempts, 4'294'967'295u);

  Deliveries got = ReserveNow(q, {topic}, 2);
  ASSERT_EQ(Ids(got), (std::vector<std::string>{"prio-zero", id}));
  EXPECT_EQ(got[1].topic, topic);
  EXPECT_TRUE(got[1].body == body);
  EXPECT_EQ(got[1].priority, 4'294'967'295u);
  EXPECT_TRUE(IsOk(q.Finish(id, got[1].receipt)));
}

TEST_P(QueueConformance, GeneratedIdsAreUniqueValidAndTimeOrdered) {
  Queue& q = queue();
  std::vector<std::string> ids;
  for (int i = 0; i < 300; ++i) {
    if (i % 100 == 50) harness().AdvanceMs(1);
    JobSpec spec = Spec(i % 2 == 0 ? "gen.a" : "gen.b");
    if (i % 3 == 0) spec.delay_ms = kLongMs;
    AddResult r = MustAdd(q, spec);
    ASSERT_TRUE(IsOk(ValidateId(r.id))) << "generated id '" << r.id << "'";
    ids.push_back(r.id);
  }
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), ids.size()) << "duplicate ids";
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()))
      << "generated ids do not sort in the order they were made";
  EXPECT_EQ(MustGet(q, ids[1]).topic, "gen.b");
  Delivery d = ReserveOne(q, "gen.b");
  EXPECT_EQ(d.id, ids[1]);
  EXPECT_TRUE(IsOk(q.Finish(d.id, d.receipt)));
  EXPECT_EQ(State(q, ids[1]), "gone");
}

TEST_P(QueueConformance, AddingALiveIdFailsWithExistsAndChangesNothing) {
  Queue& q = queue();
  JobSpec orig = Delayed("dup.a", "dup", kLongMs);
  orig.body = "one";
  orig.priority = 7;
  AddResult first = MustAdd(q, orig);

  JobSpec again = Spec("dup.a", "dup");
  again.body = "two";
  again.priority = 1;
  EXPECT_TRUE(HasCode(q.Add(again).status(), Code::kExists));
  again.topic = "dup.b";  // ids are unique across topics
  EXPECT_TRUE(HasCode(q.Add(again).status(), Code::kExists));

  JobInfo info = MustGet(q, "dup");
  EXPECT_EQ(info.topic, "dup.a");
  EXPECT_EQ(info.body, "one");
  EXPECT_EQ(info.priority, 7u);
  EXPECT_EQ(StateName(info.state), "delayed");
  EXPECT_EQ(info.run_at_ms, first.run_at_ms);
  EXPECT_TRUE(ReserveNow(q, {"dup.a", "dup.b"}).empty());
  EXPECT_EQ(MustStats(q).jobs, 1u);

  // Also while reserved: the reservation is untouched.
  MustAdd(q, Spec("dup.a", "dup2"));
  Delivery d = ReserveOne(q, "dup.a");
  EXPECT_TRUE(HasCode(q.Add(Spec("dup.a", "dup2")).status(), Code::kExists));
  EXPECT_EQ(State(q, "dup2"), "reserved");
  EXPECT_TRUE(IsOk(q.Finish("dup2", d.receipt)));
}

TEST_P(QueueConformance, FinishedOrDeletedIdCanBeAddedAgain) {
  Queue& q = queue();
  MustAdd(q, Spec("again", "x"));
  Delivery d = ReserveOne(q, "again");
  ASSERT_TRUE(IsOk(q.Finish("x", d.receipt)));
  JobSpec second = Spec("again", "x");
  second.body = "second";
  MustAdd(q, second);
  EXPECT_EQ(MustGet(q, "x").body, "second");
  EXPECT_EQ(MustGet(q, "x").attempts, 0u);
  ASSERT_TRUE(IsOk(q.Delete("x")));
  MustAdd(q, Spec("again", "x"));
  EXPECT_EQ(State(q, "x"), "ready");
}

TEST_P(QueueConformance, ReplaceUpdatesAndReschedulesAJobInAnyState) {
  Queue& q = queue();
  // delayed -> ready, every updatable field changed
  MustAdd(q, Delayed("repl", "r1", kLongMs));
  JobSpec now = Spec("repl", "r1");
  now.replace = true;
  now.body = "new body";
  now.priority = 3;
  now.ttr_ms = 5'000;
  now.max_attempts = 2;
  auto r = q.Add(now);
  ASSERT_TRUE(IsOk(r.status()));
  EXPECT_EQ(StateName(r->state), "ready");
  JobInfo info = MustGet(q, "r1");
  EXPECT_EQ(StateName(info.state), "ready");
  EXPECT_EQ(info.body, "new body");
  EXPECT_EQ(info.priority, 3u);
  EXPECT_EQ(info.ttr_ms, 5'000u);
  EXPECT_EQ(info.max_attempts, 2u);
  EXPECT_EQ(info.run_at_ms, r->run_at_ms);

  // ready -> delayed
  JobSpec later = Delayed("repl", "r1", kLongMs);
  later.replace = true;
  auto r2 = q.Add(later);
  ASSERT_TRUE(IsOk(r2.status()));
  EXPECT_EQ(StateName(r2->state), "delayed");
  EXPECT_EQ(State(q, "r1"), "delayed");
  EXPECT_EQ(MustGet(q, "r1").run_at_ms, r2->run_at_ms);
  EXPECT_TRUE(ReserveNow(q, {"repl"}).empty());

  // buried -> ready
  MustAdd(q, Spec("repl", "r2"));
  BuryNext(q, "repl");
  JobSpec revive = Spec("repl", "r2");
  revive.replace = true;
  MustAdd(q, revive);
  EXPECT_EQ(State(q, "r2"), "ready");

  // replace of an id that is not live is a plain add
  JobSpec fresh = Spec("repl", "r3");
  fresh.replace = true;
  EXPECT_EQ(StateName(MustAdd(q, fresh).state), "ready");

  EXPECT_EQ(MustStats(q).jobs, 3u);
}

TEST_P(QueueConformance, ReplacingAReservedJobMakesItsReceiptStale) {
  Queue& q = queue();
  MustAdd(q, Spec("repl.res", "j"));
  Delivery old = ReserveOne(q, "repl.res");
  JobSpec again = Spec("repl.res", "j");
  again.replace = true;
  again.body = "v2";
  MustAdd(q, again);
  EXPECT_EQ(State(q, "j"), "ready");
  EXPECT_EQ(MustTopic(q, "repl.res").reserved, 0u);
  EXPECT_TRUE(HasCode(q.Finish("j", old.receipt), Code::kStaleReceipt));
  Delivery now = ReserveOne(q, "repl.res");
  EXPECT_EQ(now.body, "v2");
  EXPECT_NE(now.receipt, old.receipt);
  EXPECT_TRUE(HasCode(q.Finish("j", old.receipt), Code::kStaleReceipt));
  EXPECT_TRUE(IsOk(q.Finish("j", now.receipt)));
}

// --- idempotent adds (JobSpec::idempotency_key) ---------------------------------
//
// A retried add whose first attempt ran (its reply lost) carries the same
// key: it changes nothing and answers as the first did, whatever became of
// the job since (issue 23, item 4: "added: 2" after a worker finished it).

static JobSpec Keyed(std::string topic, std::string id, std::string key) {
  JobSpec spec = Spec(std::move(topic), std::move(id));
  spec.idempotency_key = std::move(key);
  return spec;
}

TEST_P(QueueConformance, ARetriedAddAfterItsJobWasFinishedOrDeletedAddsNothing) {
  Queue& q = queue();
  const uint64_t added_before = MustStats(q).added;
  AddResult first = MustAdd(q, Keyed("idem", "pay-invoice-42", "k-1"));
  Delivery d = ReserveOne(q, "idem");
  ASSERT_TRUE(IsOk(q.Finish("pay-invoice-42", d.receipt)));
  auto retry = q.Add(Keyed("idem", "pay-invoice-42", "k-1"));
  ASSERT_TRUE(IsOk(retry.status()));
  EXPECT_EQ(retry->id, "pay-invoice-42");
  EXPECT_EQ(retry->state, first.state);
  EXPECT_EQ(retry->run_at_ms, first.run_at_ms);
  EXPECT_EQ(State(q, "pay-invoice-42"), "gone") << "the retry added the job again";
  EXPECT_EQ(MustStats(q).added - added_before, 1u);

  MustAdd(q, Keyed("idem", "deleted", "k-2"));
  ASSERT_TRUE(IsOk(q.Delete("deleted")));
  EXPECT_TRUE(IsOk(q.Add(Keyed("idem", "deleted", "k-2")).status()));
  EXPECT_EQ(State(q, "deleted"), "gone");

  // Another key, or none, is another add: the id is free again.
  MustAdd(q, Keyed("idem", "pay-invoice-42", "k-3"));
  EXPECT_EQ(State(q, "pay-invoice-42"), "ready");
  ASSERT_TRUE(IsOk(q.Delete("pay-invoice-42")));
  MustAdd(q, Spec("idem", "pay-invoice-42"));
  EXPECT_EQ(State(q, "pay-invoice-42"), "ready");
}

TEST_P(QueueConformance, ARetriedAddWhileItsJobIsLiveIsAnsweredOkNotExists) {
  Queue& q = queue();
  JobSpec spec = Keyed("idem.live", "j", "k-live");
  spec.delay_ms = kLongMs;
  spec.body = "one";
  AddResult first = MustAdd(q, spec);
  auto again = q.Add(spec);
  ASSERT_TRUE(IsOk(again.status()));
  EXPECT_EQ(again->id, "j");
  EXPECT_EQ(StateName(again->state), "delayed");
  EXPECT_EQ(again->run_at_ms, first.run_at_ms);
  EXPECT_EQ(MustStats(q).jobs, 1u);
  // Another add of the live id is still refused.
  EXPECT_TRUE(HasCode(q.Add(Keyed("idem.live", "j", "k-other")).status(), Code::kExists));
  JobSpec plain = Spec("idem.live", "j");
  EXPECT_TRUE(HasCode(q.Add(plain).status(), Code::kExists));
  EXPECT_EQ(MustGet(q, "j").body, "one");
}

TEST_P(QueueConformance, ARetriedReplaceDoesNotResetTheJobAWorkerHolds) {
  Queue& q = queue();
  MustAdd(q, Spec("idem.repl", "r"));
  JobSpec replace = Keyed("idem.repl", "r", "k-repl");
  replace.replace = true;
  replace.body = "v2";
  AddResult first = MustAdd(q, replace);
  Delivery d = ReserveOne(q, "idem.repl");
  EXPECT_EQ(d.body, "v2");
  auto retry = q.Add(replace);
  ASSERT_TRUE(IsOk(retry.status()));
  EXPECT_EQ(retry->run_at_ms, first.run_at_ms);
  EXPECT_EQ(State(q, "r"), "reserved") << "the retried replace reset a held job";
  EXPECT_EQ(MustGet(q, "r").attempts, 1u);
  EXPECT_TRUE(IsOk(q.Finish("r", d.receipt)));
}

TEST_P(QueueConformance, AKeyedAddWithAGeneratedIdIsNamedByItsKeyAlone) {
  Queue& q = queue();
  AddResult first = MustAdd(q, Keyed("idem.gen", "", "k-gen"));
  auto again = q.Add(Keyed("idem.gen", "", "k-gen"));
  ASSERT_TRUE(IsOk(again.status()));
  EXPECT_EQ(again->id, first.id);
  EXPECT_EQ(MustTopic(q, "idem.gen").ready, 1u);
  AddResult other = MustAdd(q, Keyed("idem.gen", "", "k-gen-2"));
  EXPECT_NE(other.id, first.id);
  EXPECT_EQ(MustTopic(q, "idem.gen").ready, 2u);
}

TEST_P(QueueConformance, AnAddIsRememberedForTheDedupWindowOnly) {
  if (!harness().exact_time()) GTEST_SKIP() << "the window is minutes of real time";
  Queue& q = queue();
  MustAdd(q, Keyed("idem.win", "w", "k-win"));
  ASSERT_TRUE(IsOk(q.Delete("w")));
  harness().AdvanceMs(kDefaultDedupWindowMs - 1);
  EXPECT_TRUE(IsOk(q.Add(Keyed("idem.win", "w", "k-win")).status()));
  EXPECT_EQ(State(q, "w"), "gone");
  harness().AdvanceMs(1);
  MustAdd(q, Keyed("idem.win", "w", "k-win"));
  EXPECT_EQ(State(q, "w"), "ready") << "remembered past the window";
}

TEST_P(QueueConformance, ABadIdempotencyKeyIsRejectedByName) {
  Queue& q = queue();
  for (std::string bad : {std::string("has space"), std::string("a:b"), std::string(65, 'k')}) {
    EXPECT_TRUE(Rejects(q.Add(Keyed("idem.bad", "b", bad)).status(), "idempotency_key")) << bad;
  }
  EXPECT_EQ(State(q, "b"), "gone");
}

// --- timing ----------------------------------------------------------------------

TEST_P(QueueConformance, DelayedJobIsNeverHandedOutEarly) {
  Queue& q = queue();
  AddResult a = MustAdd(q, Delayed("early", "e1", 30));
  if (harness().exact_time()) {
    harness().AdvanceMs(29);
    EXPECT_TRUE(ReserveNow(q, {"early"}).empty()) << "handed out 1 ms before run_at";
    EXPECT_EQ(State(q, "e1"), "delayed");
    ReserveProbe early(q, Request({"early"}, kLongMs), [this] { return harness().NowMs(); });
    EXPECT_FALSE(early.Answered(kQuiet)) << "a waiter got the job before run_at";
    harness().AdvanceMs(1);
    Deliveries got = early.TakeOk();
    EXPECT_EQ(Ids(got), std::vector<std::string>{"e1"});
    EXPECT_GE(early.answered_at_ms(), a.run_at_ms);
    return;
  }
  ReserveProbe probe(q, Request({"early"}, kLongMs), [this] { return harness().NowMs(); });
  Deliveries got = probe.TakeOk();
  ASSERT_EQ(Ids(got), std::vector<std::string>{"e1"});
  EXPECT_GE(probe.answered_at_ms(), a.run_at_ms) << "handed out before run_at";
  EXPECT_EQ(got[0].run_at_ms, a.run_at_ms);
}

TEST_P(QueueConformance, DeliveryRoundTripsEveryField) {
  Queue& q = queue();
  JobSpec spec = Spec("deliv", "d1");
  spec.body = std::string("payload\0\x80", 9);
  spec.ttr_ms = 45'000;
  spec.priority = 9;
  spec.max_attempts = 4;
  AddResult a = MustAdd(q, spec);
  int64_t before = harness().NowMs();
  Delivery d = ReserveOne(q, "deliv");
  int64_t after = harness().NowMs();
  EXPECT_EQ(d.id, "d1");
  EXPECT_EQ(d.topic, "deliv");
  EXPECT_EQ(d.body, spec.body);
  EXPECT_FALSE(d.receipt.empty());
  EXPECT_EQ(d.attempts, 1u);
  EXPECT_EQ(d.ttr_ms, 45'000u);
  EXPECT_EQ(d.priority, 9u);
  EXPECT_EQ(d.run_at_ms, a.run_at_ms);
  EXPECT_EQ(d.max_attempts, 4u);
  // reserved_until_ms is a wall-clock estimate of a monotonic deadline: on
  // real clocks it may be off by the millisecond either clock was rounded to.
  const int64_t slack = harness().exact_time() ? 0 : 2;
  EXPECT_GE(d.reserved_until_ms, before + 45'000 - slack);
  EXPECT_LE(d.reserved_until_ms, after + 45'000 + slack);

  JobInfo info = MustGet(q, "d1");
  EXPECT_EQ(StateName(info.state), "reserved");
  EXPECT_EQ(info.attempts, 1u);
  EXPECT_EQ(info.receipt, d.receipt);
  EXPECT_GE(info.reserved_until_ms, before + 45'000 - slack);
  EXPECT_LE(info.reserved_until_ms, harness().NowMs() + 45'000 + slack);
  EXPECT_EQ(info.body, spec.body);
}

// --- order -------------------------------------------------------------------------

TEST_P(QueueConformance, ReadyJobsComeOutByPriorityThenRunAtThenOrderOfAdding) {
  Queue& q = queue();
  const int64_t base = harness().NowMs() - 10'000;  // all due now
  auto add = [&](const char* id, uint32_t priority, int64_t run_at) {
    JobSpec s = Spec("order", id);
    s.priority = priority;
    s.run_at_ms = run_at;
    MustAdd(q, s);
  };
  add("p5-late", 5, base + 2);
  add("p5-early-1st", 5, base + 1);
  add("p1", 1, base + 9);
  add("p5-early-2nd", 5, base + 1);
  add("pmax", 4'294'967'295u, base);
  add("p0", 0, base + 50);
  EXPECT_EQ(MustGet(q, "p1").run_at_ms, base + 9);
  std::vector<std::string> got;
  for (int i = 0; i < 6; ++i) got.push_back(ReserveOne(q, "order").id);
  EXPECT_EQ(got, (std::vector<std::string>{"p0", "p1", "p5-early-1st", "p5-early-2nd", "p5-late",
                                           "pmax"}));

  // Jobs added one after another with no delay come out in that order.
  for (int i = 0; i < 20; ++i) MustAdd(q, Spec("order.fifo", Name("f", 100 + i)));
  std::vector<std::string> fifo;
  for (int i = 0; i < 20; ++i) fifo.push_back(ReserveOne(q, "order.fifo").id);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(fifo[i], Name("f", 100 + i));
}

TEST_P(QueueConformance, JobsFallingDueComeOutByRunAt) {
  Queue& q = queue();
  const int64_t base = harness().NowMs();
  for (auto [id, offset] : {std::pair{"t30", 30}, {"t10", 10}, {"t20", 20}}) {
    JobSpec s = Spec("order.due", id);
    s.run_at_ms = base + offset;
    MustAdd(q, s);
  }
  harness().AdvanceMs(30);
  EXPECT_EQ(Ids(ReserveNow(q, {"order.due"}, 3)), (std::vector<std::string>{"t10", "t20", "t30"}));
}

TEST_P(QueueConformance, OrderHoldsAcrossTheTopicsOfOneReserve) {
  Queue& q = queue();
  const int64_t base = harness().NowMs() - 10'000;
  auto add = [&](const char* topic, const char* id, uint32_t priority, int64_t run_at) {
    JobSpec s = Spec(topic, id);
    s.priority = priority;
    s.run_at_ms = run_at;
    MustAdd(q, s);
  };
  add("x.a", "a-p10", 10, base);
  add("x.b", "b-p5", 5, base + 1);
  add("x.a", "a-p5", 5, base + 1);  // same priority and run_at as b-p5, added later
  add("x.b", "b-p20", 20, base);
  add("x.a", "a-p5-earlier", 5, base);
  add("x.c", "c-p0", 0, base);  // not asked for
  std::vector<std::string> got;
  for (int i = 0; i < 4; ++i) {
    Deliveries one = ReserveNow(q, {"x.a", "x.b"});
    ASSERT_EQ(one.size(), 1u);
    got.push_back(one[0].id);
  }
  EXPECT_EQ(got, (std::vector<std::string>{"a-p5-earlier", "b-p5", "a-p5", "a-p10"}));
  EXPECT_EQ(Ids(ReserveNow(q, {"x.a", "x.b"}, 10)), std::vector<std::string>{"b-p20"});
  EXPECT_EQ(State(q, "c-p0"), "ready");
  // Naming a topic twice changes nothing.
  EXPECT_EQ(Ids(ReserveNow(q, {"x.c", "x.c"}, 5)), std::vector<std::string>{"c-p0"});
}

TEST_P(QueueConformance, ReserveCountHandsOutABatchOfTheBest) {
  Queue& q = queue();
  for (int i = 0; i < 5; ++i) {
    JobSpec s = Spec("batch", Name("b", i));
    s.priority = 10 - i;  // b4 best
    MustAdd(q, s);
  }
  Deliveries first = ReserveNow(q, {"batch"}, 3);
  EXPECT_EQ(Ids(first), (std::vector<std::string>{"b4", "b3", "b2"}));
  std::set<std::string> receipts;
  for (const Delivery& d : first) {
    EXPECT_EQ(State(q, d.id), "reserved");
    receipts.insert(d.receipt);
  }
  EXPECT_EQ(receipts.size(), 3u) << "jobs of one batch share a receipt";
  EXPECT_EQ(Ids(ReserveNow(q, {"batch"}, 3)), (std::vector<std::string>{"b1", "b0"}));
  EXPECT_TRUE(ReserveNow(q, {"batch"}, kMaxReserveCount).empty());
  EXPECT_EQ(MustTopic(q, "batch").reserved, 5u);
}

TEST_P(QueueConformance, ReserveRejectsBadRequestsNamingTheField) {
  Queue& q = queue();
  MustAdd(q, Spec("rq.ok", "keep"));
  EXPECT_TRUE(Rejects(q.Reserve(Request({}, 0)).status(), "topic"));
  EXPECT_TRUE(Rejects(q.Reserve(Request({"bad topic"}, 0)).status(), "topic"));
  EXPECT_TRUE(Rejects(q.Reserve(Request({"rq.ok", ""}, 0)).status(), "topic"));
  EXPECT_TRUE(Rejects(q.Reserve(Request({"rq.ok"}, 0, 0)).status(), "count"));
  EXPECT_TRUE(Rejects(q.Reserve(Request({"rq.ok"}, 0, kMaxReserveCount + 1)).status(), "count"));
  EXPECT_TRUE(Rejects(q.Reserve(Request({"rq.ok"}, -1)).status(), "wait_ms"));
  EXPECT_EQ(State(q, "keep"), "ready") << "a rejected reserve took a job";
  // Through ReserveAsync too: the error comes through the callback, once.
  ReserveProbe probe(q, Request({"rq.ok"}, kLongMs, 0));
  EXPECT_TRUE(Rejects(probe.Take().status(), "count"));
  EXPECT_EQ(probe.calls(), 1);
}

TEST_P(QueueConformance, ReserveWithMaxBytesStopsBeforeTheJobThatWouldExceedIt) {
  Queue& q = queue();
  for (int i = 0; i < 5; ++i) {
    JobSpec spec = Spec("mb", Name("m", i));
    spec.body = std::string(100, 'x');
    MustAdd(q, spec);
  }
  ReserveRequest req = Request({"mb"}, 0, 5);
  req.max_bytes = 250;  // two 100-byte bodies fit, not three
  auto got = q.Reserve(req);
  ASSERT_TRUE(IsOk(got.status()));
  EXPECT_EQ(Ids(*got), (std::vector<std::string>{"m0", "m1"}));
  // One job always, however large.
  req.max_bytes = 1;
  got = q.Reserve(req);
  ASSERT_TRUE(IsOk(got.status()));
  EXPECT_EQ(Ids(*got), (std::vector<std::string>{"m2"}));
  // What did not fit is ready, in line, and was never attempted.
  EXPECT_EQ(MustGet(q, "m3").attempts, 0u);
  EXPECT_EQ(State(q, "m3"), "ready");
  EXPECT_EQ(Ids(ReserveNow(q, {"mb"}, 5)), (std::vector<std::string>{"m3", "m4"}));
}

// STATS reserves counts the jobs handed out: a batch cut short by its byte
// budget counts only those it hands out (the Redis store took the whole
// count and gave the rest back still counted: `RESERVE COUNT 2 MAXBYTES 15`
// handed out one job and counted two).
TEST_P(QueueConformance, ReservesCountsOnlyTheJobsABatchCutToItsBytesHandsOut) {
  Queue& q = queue();
  for (int i = 0; i < 2; ++i) {
    JobSpec spec = Spec("mbc", Name("c", i));
    spec.body = std::string(10, 'x');
    MustAdd(q, spec);
  }
  QueueStats s0 = MustStats(q);
  ReserveRequest req = Request({"mbc"}, 0, 2);
  req.max_bytes = 15;  // one 10-byte body fits, not two
  auto got = q.Reserve(req);
  ASSERT_TRUE(IsOk(got.status()));
  EXPECT_EQ(Ids(*got), (std::vector<std::string>{"c0"}));
  EXPECT_EQ(MustStats(q).reserves - s0.reserves, 1u);
  EXPECT_EQ(MustGet(q, "c1").attempts, 0u);
  EXPECT_EQ(Ids(ReserveNow(q, {"mbc"}, 2)), (std::vector<std::string>{"c1"}));
  EXPECT_EQ(MustStats(q).reserves - s0.reserves, 2u);
}

TEST_P(QueueConformance, UnreserveGivesADeliveryBackWithoutCountingIt) {
  Queue& q = queue();
  QueueStats s0 = MustStats(q);
  JobSpec once = Spec("unres", "u1");
  once.max_attempts = 1;
  MustAdd(q, once);
  MustAdd(q, Spec("unres", "u2"));
  Delivery d = ReserveOne(q, "unres");
  ASSERT_EQ(d.id, "u1");
  EXPECT_TRUE(Rejects(q.Unreserve("u1", ""), "receipt"));
  ASSERT_TRUE(IsOk(q.Unreserve("u1", d.receipt)));
  JobInfo info = MustGet(q, "u1");
  EXPECT_EQ(StateName(info.state), "ready");
  EXPECT_EQ(info.attempts, 0u);
  EXPECT_EQ(MustTopic(q, "unres").reserved, 0u);
  EXPECT_TRUE(HasCode(q.Unreserve("u1", d.receipt), Code::kStaleReceipt)) << "given back twice";
  EXPECT_TRUE(HasCode(q.Unreserve("nope", d.receipt), Code::kNotFound));
  // Back in its place, first in line, its one attempt still to come: only a
  // failure of that delivery buries it.
  Delivery again = ReserveOne(q, "unres");
  EXPECT_EQ(again.id, "u1");
  EXPECT_EQ(again.attempts, 1u);
  ASSERT_TRUE(IsOk(q.Release("u1", again.receipt, 0, "failed")));
  EXPECT_EQ(State(q, "u1"), "buried");
  QueueStats s1 = MustStats(q);
  EXPECT_EQ(s1.released - s0.released, 1u);
}

// A receipt names one delivery and is never reused: the delivery after an
// UNRESERVE gets a new one, so the worker that gave the job back (or its
// UNRESERVE sent again) cannot finish, release, touch, bury or give back the
// next holder's delivery. Embedded, the reopening variant restarts the store
// between every two calls: the receipts stay unique across restarts too.
TEST_P(QueueConformance, AReceiptGivenBackByUnreserveIsNeverTheNextDeliverysReceipt) {
  Queue& q = queue();
  MustAdd(q, Spec("unres.r", "j"));
  Delivery first = ReserveOne(q, "unres.r");
  ASSERT_TRUE(IsOk(q.Unreserve("j", first.receipt)));
  Delivery second = ReserveOne(q, "unres.r");
  ASSERT_EQ(second.id, "j");
  EXPECT_EQ(second.attempts, 1u);
  EXPECT_NE(second.receipt, first.receipt);
  EXPECT_TRUE(HasCode(q.Finish("j", first.receipt), Code::kStaleReceipt));
  EXPECT_TRUE(HasCode(q.Release("j", first.receipt, 0, ""), Code::kStaleReceipt));
  EXPECT_TRUE(HasCode(q.Touch("j", first.receipt), Code::kStaleReceipt));
  EXPECT_TRUE(HasCode(q.Bury("j", first.receipt, ""), Code::kStaleReceipt));
  EXPECT_TRUE(HasCode(q.Unreserve("j", first.receipt), Code::kStaleReceipt));
  JobInfo info = MustGet(q, "j");
  EXPECT_EQ(StateName(info.state), "reserved");
  EXPECT_EQ(info.receipt, second.receipt);
  EXPECT_TRUE(IsOk(q.Touch("j", second.receipt)));

  // Given back, released and given back again: every delivery its own.
  std::vector<std::string> receipts = {first.receipt, second.receipt};
  ASSERT_TRUE(IsOk(q.Unreserve("j", second.receipt)));
  Delivery third = ReserveOne(q, "unres.r");
  receipts.push_back(third.receipt);
  ASSERT_TRUE(IsOk(q.Release("j", third.receipt, 0, "")));
  Delivery fourth = ReserveOne(q, "unres.r");
  receipts.push_back(fourth.receipt);
  EXPECT_EQ(fourth.attempts, 2u);
  EXPECT_EQ(std::set<std::string>(receipts.begin(), receipts.end()).size(), receipts.size())
      << "a receipt was reused";
  for (size_t i = 0; i + 1 < receipts.size(); ++i) {
    EXPECT_TRUE(HasCode(q.Finish("j", receipts[i]), Code::kStaleReceipt)) << i;
  }
  EXPECT_TRUE(IsOk(q.Finish("j", fourth.receipt)));
}

// --- finish, receipts and TTR ------------------------------------------------------

TEST_P(QueueConformance, FinishRemovesTheJobWithOrWithoutItsReceipt) {
  Queue& q = queue();
  MustAdd(q, Spec("fin", "with"));
  MustAdd(q, Spec("fin", "without"));
  Deliveries got = ReserveNow(q, {"fin"}, 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(IsOk(q.Finish("with", got[0].receipt)));
  EXPECT_TRUE(IsOk(q.Finish("without", "")));
  EXPECT_EQ(State(q, "with"), "gone");
  EXPECT_EQ(State(q, "without"), "gone");
  EXPECT_TRUE(HasCode(q.Finish("with", got[0].receipt), Code::kNotFound));
  EXPECT_TRUE(HasCode(q.Finish("without", ""), Code::kNotFound));
  EXPECT_TRUE(ReserveNow(q, {"fin"}).empty());
  EXPECT_EQ(MustStats(q).jobs, 0u);
}

TEST_P(QueueConformance, ExpiredReservationGoesBackToReadyAndItsReceiptIsStale) {
  Queue& q = queue();
  const int64_t ttr = harness().brief_ms();
  QueueStats s0 = MustStats(q);
  JobSpec spec = Spec("ttr", "t1");
  spec.ttr_ms = static_cast<uint32_t>(ttr);
  MustAdd(q, spec);
  Delivery first = ReserveOne(q, "ttr");
  harness().AdvanceMs(ttr);

  JobInfo info = MustGet(q, "t1");
  EXPECT_EQ(StateName(info.state), "ready");
  EXPECT_EQ(info.attempts, 1u);
  EXPECT_EQ(info.receipt, "");
  EXPECT_TRUE(HasCode(q.Finish("t1", first.receipt), Code::kStaleReceipt));
  EXPECT_TRUE(HasCode(q.Touch("t1", first.receipt), Code::kStaleReceipt));
  EXPECT_TRUE(HasCode(q.Release("t1", first.receipt, 0, ""), Code::kStaleReceipt));
  EXPECT_TRUE(HasCode(q.Bury("t1", first.receipt, ""), Code::kStaleReceipt));
  EXPECT_EQ(State(q, "t1"), "ready");

  Delivery second = ReserveOne(q, "ttr");
  EXPECT_EQ(second.id, "t1");
  EXPECT_EQ(second.attempts, 2u);
  EXPECT_NE(second.receipt, first.receipt);
  EXPECT_TRUE(HasCode(q.Finish("t1", first.receipt), Code::kStaleReceipt));
  EXPECT_TRUE(HasCode(q.Touch("t1", first.receipt), Code::kStaleReceipt));
  EXPECT_TRUE(HasCode(q.Release("t1", first.receipt, 0, ""), Code::kStaleReceipt));
  EXPECT_TRUE(HasCode(q.Bury("t1", first.receipt, ""), Code::kStaleReceipt));
  EXPECT_EQ(State(q, "t1"), "reserved");
  EXPECT_EQ(MustGet(q, "t1").receipt, second.receipt);
  EXPECT_TRUE(IsOk(q.Finish("t1", second.receipt)));
  EXPECT_EQ(MustStats(q).timed_out - s0.timed_out, 1u);
}

// A receipt that is not the 24 hex digits a reserve hands out is a mistake
// in the request (kInvalidArgument), not a delivery that went stale, on
// every store, whatever state the job is in; it changes nothing.
TEST_P(QueueConformance, AMalformedReceiptIsInvalidArgumentNotStale) {
  Queue& q = queue();
  MustAdd(q, Spec("badrcpt", "j"));
  Delivery d = ReserveOne(q, "badrcpt");
  for (const std::string& bad : {std::string("not-a-receipt"), d.receipt + "0", d.receipt.substr(1),
                                 d.receipt.substr(0, 23) + "z", std::string(24, ' ')}) {
    SCOPED_TRACE(bad);
    EXPECT_TRUE(Rejects(q.Finish("j", bad), "receipt", Code::kInvalidArgument));
    EXPECT_TRUE(Rejects(q.Touch("j", bad), "receipt", Code::kInvalidArgument));
    EXPECT_TRUE(Rejects(q.Release("j", bad, 0, ""), "receipt", Code::kInvalidArgument));
    EXPECT_TRUE(Rejects(q.Bury("j", bad, ""), "receipt", Code::kInvalidArgument));
    EXPECT_TRUE(Rejects(q.Unreserve("j", bad), "receipt", Code::kInvalidArgument));
    EXPECT_TRUE(Rejects(q.Finish("no-such-job", bad), "receipt", Code::kInvalidArgument));
  }
  JobInfo info = MustGet(q, "j");
  EXPECT_EQ(StateName(info.state), "reserved");
  EXPECT_EQ(info.receipt, d.receipt);
  EXPECT_EQ(info.attempts, 1u);
  EXPECT_TRUE(IsOk(q.Finish("j", d.receipt)));
}

TEST_P(QueueConformance, EachDeliveryHasItsOwnReceipt) {
  Queue& q = queue();
  MustAdd(q, Spec("rcpt", "j"));
  std::vector<std::string> receipts;
  for (int i = 0; i < 3; ++i) {
    Delivery d = ReserveOne(q, "rcpt");
    receipts.push_back(d.receipt);
    ASSERT_TRUE(IsOk(q.Release("j", d.receipt, 0, "")));
  }
  ASSERT_TRUE(IsOk(q.Delete("j")));
  MustAdd(q, Spec("rcpt", "j"));  // the same id, a new job
  Delivery last = ReserveOne(q, "rcpt");
  receipts.push_back(last.receipt);
  EXPECT_EQ(std::set<std::string>(receipts.begin(), receipts.end()).size(), receipts.size())
      << "a receipt was reused";
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(HasCode(q.Finish("j", receipts[i]), Code::kStaleReceipt));
  }
  EXPECT_TRUE(IsOk(q.Finish("j", last.receipt)));
}

TEST_P(QueueConformance, OperationsNeedingAReservationFailOnOtherStates) {
  Queue& q = queue();
  MustAdd(q, Spec("nr", "ready"));
  MustAdd(q, Delayed("nr", "delayed", kLongMs));
  MustAdd(q, Spec("nr.b", "buried"));
  BuryNext(q, "nr.b");
  for (const char* id : {"ready", "delayed", "buried"}) {
    SCOPED_TRACE(id);
    std::string before = State(q, id);
    EXPECT_TRUE(HasCode(q.Finish(id, ""), Code::kNotReserved));
    EXPECT_TRUE(HasCode(q.Release(id, "", 0, ""), Code::kNotReserved));
    EXPECT_TRUE(HasCode(q.Touch(id, ""), Code::kNotReserved));
    EXPECT_TRUE(HasCode(q.Bury(id, "", ""), Code::kNotReserved));
    // With a receipt, the answer is that the receipt does not match.
    const std::string other(24, 'f');
    EXPECT_TRUE(HasCode(q.Finish(id, other), Code::kStaleReceipt));
    EXPECT_TRUE(HasCode(q.Release(id, other, 0, ""), Code::kStaleReceipt));
    EXPECT_TRUE(HasCode(q.Touch(id, other), Code::kStaleReceipt));
    EXPECT_TRUE(HasCode(q.Bury(id, other, ""), Code::kStaleReceipt));
    EXPECT_EQ(State(q, id), before);
  }
  // A reserved job with a wrong receipt.
  MustAdd(q, Spec("nr.r", "reserved"));
  Delivery r = ReserveOne(q, "nr.r");
  // One digit off, or spelled in upper case, a receipt is not this one.
  std::string off = r.receipt;
  off.back() = off.back() == '0' ? '1' : '0';
  std::vector<std::string> wrong = {off};
  std::string upper = r.receipt;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper != r.receipt) wrong.push_back(upper);
  for (const std::string& w : wrong) {
    SCOPED_TRACE(w);
    EXPECT_TRUE(HasCode(q.Finish("reserved", w), Code::kStaleReceipt));
    EXPECT_TRUE(HasCode(q.Touch("reserved", w), Code::kStaleReceipt));
    EXPECT_TRUE(HasCode(q.Release("reserved", w, 0, ""), Code::kStaleReceipt));
    EXPECT_TRUE(HasCode(q.Bury("reserved", w, ""), Code::kStaleReceipt));
  }
  EXPECT_EQ(State(q, "reserved"), "reserved");
}

// Acting by id alone (no receipt: force) on a job that is not reserved is
// not_reserved with a message naming the job's state, the same on every
// store ("job 'ready' is ready, not reserved"; the Redis store's finish and
// touch said only "is not reserved").
TEST_P(QueueConformance, ForceOnAJobThatIsNotReservedNamesItsState) {
  Queue& q = queue();
  MustAdd(q, Spec("nrs", "ready"));
  MustAdd(q, Delayed("nrs", "delayed", kLongMs));
  MustAdd(q, Spec("nrs.b", "buried"));
  BuryNext(q, "nrs.b");
  for (const std::string id : {"ready", "delayed", "buried"}) {
    SCOPED_TRACE(id);
    const std::string want = "job '" + id + "' is " + id + ", not reserved";
    EXPECT_TRUE(Rejects(q.Finish(id, ""), want, Code::kNotReserved));
    EXPECT_TRUE(Rejects(q.Touch(id, ""), want, Code::kNotReserved));
    EXPECT_TRUE(Rejects(q.Release(id, "", 0, ""), want, Code::kNotReserved));
    EXPECT_TRUE(Rejects(q.Bury(id, "", ""), want, Code::kNotReserved));
    std::vector<Ack> acks(2);
    acks[0].id = acks[1].id = id;
    acks[0].kind = Ack::Kind::kFinish;
    acks[1].kind = Ack::Kind::kRelease;
    for (const Status& s : q.Acknowledge(acks)) {
      EXPECT_TRUE(Rejects(s, want, Code::kNotReserved));
    }
  }
}

TEST_P(QueueConformance, OperationsOnAnUnknownIdFailWithNotFound) {
  Queue& q = queue();
  EXPECT_TRUE(HasCode(q.Finish("ghost", ""), Code::kNotFound));
  EXPECT_TRUE(HasCode(q.Finish("ghost", std::string(24, 'f')), Code::kNotFound));
  EXPECT_TRUE(HasCode(q.Delete("ghost"), Code::kNotFound));
  EXPECT_TRUE(HasCode(q.Release("ghost", "", 0, ""), Code::kNotFound));
  EXPECT_TRUE(HasCode(q.Touch("ghost", ""), Code::kNotFound));
  EXPECT_TRUE(HasCode(q.Bury("ghost", "", ""), Code::kNotFound));
  EXPECT_TRUE(HasCode(q.Kick("ghost"), Code::kNotFound));
  EXPECT_TRUE(HasCode(q.Get("ghost").status(), Code::kNotFound));
  Status bad = q.Get(std::string(300, 'x')).status();  // an id no job can have
  EXPECT_TRUE(bad.code() == Code::kNotFound || bad.code() == Code::kInvalidArgument)
      << bad.ToString();
}

TEST_P(QueueConformance, TouchExtendsTheReservationToAFullTtr) {
  Queue& q = queue();
  JobSpec spec = Spec("touch", "t");
  spec.ttr_ms = 30'000;
  MustAdd(q, spec);
  Delivery d = ReserveOne(q, "touch");
  harness().AdvanceMs(kShortMs);
  int64_t before = harness().NowMs();
  ASSERT_TRUE(IsOk(q.Touch("t", d.receipt)));
  JobInfo info = MustGet(q, "t");
  EXPECT_EQ(StateName(info.state), "reserved");
  EXPECT_GE(info.reserved_until_ms, before + 30'000 - (harness().exact_time() ? 0 : 2));
  EXPECT_GT(info.reserved_until_ms, d.reserved_until_ms);
  EXPECT_EQ(info.receipt, d.receipt) << "touch must not change the receipt";
  EXPECT_TRUE(IsOk(q.Touch("t", "")));
  EXPECT_TRUE(IsOk(q.Finish("t", d.receipt)));

  if (!harness().exact_time()) return;  // the rest counts milliseconds
  spec = Spec("touch", "t2");
  spec.ttr_ms = 30;
  MustAdd(q, spec);
  Delivery e = ReserveOne(q, "touch");
  harness().AdvanceMs(20);
  ASSERT_TRUE(IsOk(q.Touch("t2", e.receipt)));
  harness().AdvanceMs(29);  // 49 ms after the reserve, 29 after the touch
  EXPECT_EQ(State(q, "t2"), "reserved");
  harness().AdvanceMs(1);
  EXPECT_EQ(State(q, "t2"), "ready");
  EXPECT_TRUE(HasCode(q.Touch("t2", e.receipt), Code::kStaleReceipt));
}

TEST_P(QueueConformance, ReservationLastsExactlyItsTtr) {
  if (!harness().exact_time()) GTEST_SKIP() << "counts milliseconds: needs exact time";
  Queue& q = queue();
  JobSpec spec = Spec("ttr.exact", "t");
  spec.ttr_ms = 50;
  MustAdd(q, spec);
  Delivery d = ReserveOne(q, "ttr.exact");
  harness().AdvanceMs(49);
  EXPECT_EQ(State(q, "t"), "reserved");
  EXPECT_TRUE(ReserveNow(q, {"ttr.exact"}).empty());
  harness().AdvanceMs(1);
  EXPECT_EQ(State(q, "t"), "ready");
  EXPECT_TRUE(HasCode(q.Finish("t", d.receipt), Code::kStaleReceipt));
}

// A reserve's own TTR (ReserveRequest::ttr_ms) replaces the job's for that
// delivery: the reservation ends after it, touches extend by it, and the job
// keeps its own TTR for the deliveries after. The network client cannot send
// it and says so.
TEST_P(QueueConformance, AReserveWithItsOwnTtrHoldsEachJobForThatTtr) {
  Queue& q = queue();
  constexpr uint32_t kTtr = 30'000;
  JobSpec spec = Spec("rttr", "j");
  spec.ttr_ms = kLongMs;
  MustAdd(q, spec);
  QueueStats s0 = MustStats(q);
  ReserveRequest req = Request({"rttr"}, 0);
  req.ttr_ms = kTtr;
  const int64_t before = harness().NowMs();
  Result<Deliveries> got = q.Reserve(req);
  const int64_t after = harness().NowMs();
  if (!got.ok() &&
      got.status().message().find("not supported over the network") != std::string::npos) {
    EXPECT_TRUE(Rejects(got.status(), "ttr_ms"));
    EXPECT_EQ(State(q, "j"), "ready");
    GTEST_SKIP() << "this Queue cannot reserve with a TTR of its own (refused, as it must)";
  }
  ASSERT_TRUE(IsOk(got.status()));
  ASSERT_EQ(got->size(), 1u);
  const Delivery d = got->front();
  EXPECT_EQ(d.ttr_ms, kTtr);
  EXPECT_GE(d.reserved_until_ms, before + kTtr);
  EXPECT_LE(d.reserved_until_ms, after + kTtr);
  JobInfo info = MustGet(q, "j");
  EXPECT_EQ(info.ttr_ms, kLongMs) << "the job keeps its own TTR";
  // GET estimates the end from the monotonic deadline: on the system clocks
  // the wall and monotonic readings may be a millisecond or two apart.
  EXPECT_NEAR(info.reserved_until_ms, d.reserved_until_ms, harness().exact_time() ? 0 : 5);

  if (!harness().exact_time()) return;  // the rest counts milliseconds
  harness().AdvanceMs(20);
  ASSERT_TRUE(IsOk(q.Touch("j", d.receipt)));
  EXPECT_EQ(MustGet(q, "j").reserved_until_ms, harness().NowMs() + kTtr)
      << "a touch extends by the reserve's TTR";
  harness().AdvanceMs(kTtr - 1);
  EXPECT_EQ(State(q, "j"), "reserved");
  harness().AdvanceMs(1);
  info = MustGet(q, "j");
  EXPECT_EQ(StateName(info.state), "ready");
  EXPECT_EQ(info.attempts, 1u);
  EXPECT_NE(info.last_error.find("30000"), std::string::npos) << info.last_error;
  EXPECT_EQ(MustStats(q).timed_out - s0.timed_out, 1u);
  EXPECT_TRUE(HasCode(q.Touch("j", d.receipt), Code::kStaleReceipt));

  // The next plain reserve: the job's own TTR again, for touches too.
  Delivery plain = ReserveOne(q, "rttr");
  EXPECT_EQ(plain.ttr_ms, kLongMs);
  EXPECT_EQ(plain.reserved_until_ms, harness().NowMs() + kLongMs);
  harness().AdvanceMs(20);
  ASSERT_TRUE(IsOk(q.Touch("j", plain.receipt)));
  EXPECT_EQ(MustGet(q, "j").reserved_until_ms, harness().NowMs() + kLongMs);
  ASSERT_TRUE(IsOk(q.Finish("j", plain.receipt)));

  // A waiting reserve hands what becomes ready with its TTR too.
  ReserveRequest wait = Request({"rttr.w"}, kLongMs);
  wait.ttr_ms = 50;
  ReserveProbe probe(q, wait);
  ASSERT_TRUE(WaitersReach(q, "rttr.w", 1));
  spec = Spec("rttr.w", "w");
  spec.ttr_ms = kLongMs;
  MustAdd(q, spec);
  Deliveries waited = probe.TakeOk();
  ASSERT_EQ(waited.size(), 1u);
  EXPECT_EQ(waited[0].ttr_ms, 50u);
  harness().AdvanceMs(49);
  EXPECT_EQ(State(q, "w"), "reserved");
  harness().AdvanceMs(1);
  EXPECT_EQ(State(q, "w"), "ready");
}

// --- release ---------------------------------------------------------------------

TEST_P(QueueConformance, ReleaseWithDelayMakesTheJobDelayedAndKeepsTheError) {
  Queue& q = queue();
  const int64_t delay = harness().brief_ms();
  QueueStats s0 = MustStats(q);
  MustAdd(q, Spec("rel", "j"));
  Delivery d = ReserveOne(q, "rel");
  int64_t before = harness().NowMs();
  ASSERT_TRUE(IsOk(q.Release("j", d.receipt, delay, "boom: upstream 503")));
  int64_t after = harness().NowMs();
  JobInfo info = MustGet(q, "j");
  EXPECT_EQ(StateName(info.state), "delayed");
  EXPECT_EQ(info.last_error, "boom: upstream 503");
  EXPECT_EQ(info.attempts, 1u);
  EXPECT_GE(info.run_at_ms, before + delay);
  EXPECT_LE(info.run_at_ms, after + delay);
  EXPECT_EQ(info.receipt, "");
  EXPECT_TRUE(ReserveNow(q, {"rel"}).empty());
  EXPECT_TRUE(HasCode(q.Finish("j", d.receipt), Code::kStaleReceipt));

  harness().AdvanceMs(delay);
  Delivery again = ReserveOne(q, "rel");
  EXPECT_EQ(again.id, "j");
  EXPECT_EQ(again.attempts, 2u);
  EXPECT_EQ(MustGet(q, "j").last_error, "boom: upstream 503");
  EXPECT_EQ(MustStats(q).released - s0.released, 1u);
}

// Acknowledge: several finishes, releases and buries at once, each answered
// on its own, as the single calls would answer it; bad ones change nothing
// and do not stop the rest.
TEST_P(QueueConformance, AcknowledgeAppliesEachAckAndAnswersEachOnItsOwn) {
  Queue& q = queue();
  QueueStats s0 = MustStats(q);
  for (const char* id : {"a1", "a2", "a3", "a4"}) MustAdd(q, Spec("ack", id));
  Deliveries got = ReserveNow(q, {"ack"}, 4);
  ASSERT_EQ(got.size(), 4u);
  std::map<std::string, std::string> receipt;
  for (const Delivery& d : got) receipt[d.id] = d.receipt;
  const std::vector<Ack> acks = {
      {Ack::Kind::kFinish, "a1", receipt["a1"], 0, {}},
      {Ack::Kind::kRelease, "a2", receipt["a2"], 3'600'000, "upstream 503"},
      {Ack::Kind::kBury, "a3", receipt["a3"], 0, "poison"},
      {Ack::Kind::kFinish, "a4", "not-a-receipt", 0, {}},
      {Ack::Kind::kFinish, "missing", receipt["a1"], 0, {}},
      {Ack::Kind::kRelease, "a4", receipt["a4"], -1, {}},
      {Ack::Kind::kFinish, "a1", receipt["a1"], 0, {}},  // the first one took it
  };
  std::vector<Status> answers = q.Acknowledge(acks);
  ASSERT_EQ(answers.size(), acks.size());
  EXPECT_TRUE(IsOk(answers[0]));
  EXPECT_TRUE(IsOk(answers[1]));
  EXPECT_TRUE(IsOk(answers[2]));
  EXPECT_TRUE(HasCode(answers[3], Code::kInvalidArgument)) << answers[3].ToString();
  EXPECT_TRUE(HasCode(answers[4], Code::kNotFound)) << answers[4].ToString();
  EXPECT_TRUE(HasCode(answers[5], Code::kInvalidArgument)) << answers[5].ToString();
  EXPECT_TRUE(HasCode(answers[6], Code::kNotFound)) << answers[6].ToString();

  EXPECT_EQ(State(q, "a1"), "gone");
  JobInfo a2 = MustGet(q, "a2");
  EXPECT_EQ(StateName(a2.state), "delayed");
  EXPECT_EQ(a2.last_error, "upstream 503");
  JobInfo a3 = MustGet(q, "a3");
  EXPECT_EQ(StateName(a3.state), "buried");
  EXPECT_EQ(a3.last_error, "poison");
  JobInfo a4 = MustGet(q, "a4");
  EXPECT_EQ(StateName(a4.state), "reserved");
  EXPECT_EQ(a4.receipt, receipt["a4"]);
  QueueStats s1 = MustStats(q);
  EXPECT_EQ(s1.finished - s0.finished, 1u);
  EXPECT_EQ(s1.released - s0.released, 1u);
  EXPECT_EQ(s1.buried_total - s0.buried_total, 1u);

  EXPECT_TRUE(q.Acknowledge({}).empty());
  answers = q.Acknowledge(std::vector<Ack>{{Ack::Kind::kFinish, "a4", receipt["a4"], 0, {}}});
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_TRUE(IsOk(answers[0]));
  EXPECT_EQ(State(q, "a4"), "gone");
}

TEST_P(QueueConformance, ReleaseWithoutDelayMakesTheJobReadyAtOnce) {
  Queue& q = queue();
  MustAdd(q, Spec("rel0", "j"));
  for (uint32_t attempt = 1; attempt <= 5; ++attempt) {  // max_attempts 0: unlimited
    Delivery d = ReserveOne(q, "rel0");
    EXPECT_EQ(d.attempts, attempt);
    EXPECT_EQ(d.max_attempts, 0u);
    EXPECT_FALSE(ReleaseBuries(d));
    ASSERT_TRUE(IsOk(q.Release("j", attempt % 2 ? d.receipt : "", 0, "")));
    EXPECT_EQ(State(q, "j"), "ready");
  }
}

TEST_P(QueueConformance, ReleaseWithANegativeDelayFailsAndChangesNothing) {
  Queue& q = queue();
  MustAdd(q, Spec("relneg", "j"));
  Delivery d = ReserveOne(q, "relneg");
  EXPECT_TRUE(Rejects(q.Release("j", d.receipt, -1, "x"), "delay_ms"));
  JobInfo info = MustGet(q, "j");
  EXPECT_EQ(StateName(info.state), "reserved");
  EXPECT_EQ(info.receipt, d.receipt);
  EXPECT_EQ(info.last_error, "");
  EXPECT_TRUE(IsOk(q.Finish("j", d.receipt)));
}

TEST_P(QueueConformance, UsingUpMaxAttemptsByReleaseBuriesTheJob) {
  Queue& q = queue();
  QueueStats s0 = MustStats(q);
  JobSpec spec = Spec("maxrel", "j");
  spec.max_attempts = 2;
  MustAdd(q, spec);
  Delivery d1 = ReserveOne(q, "maxrel");
  // The delivery says what its release will do (a worker reports it).
  EXPECT_EQ(d1.max_attempts, 2u);
  EXPECT_FALSE(ReleaseBuries(d1));
  ASSERT_TRUE(IsOk(q.Release("j", d1.receipt, 0, "first failure")));
  EXPECT_EQ(State(q, "j"), "ready");
  Delivery d2 = ReserveOne(q, "maxrel");
  EXPECT_EQ(d2.attempts, 2u);
  EXPECT_EQ(d2.max_attempts, 2u);
  EXPECT_TRUE(ReleaseBuries(d2));
  ASSERT_TRUE(IsOk(q.Release("j", d2.receipt, 0, "second failure")));
  JobInfo info = MustGet(q, "j");
  EXPECT_EQ(StateName(info.state), "buried");
  EXPECT_EQ(info.attempts, 2u);
  EXPECT_FALSE(info.last_error.empty()) << "a job buried by max_attempts says why";
  EXPECT_TRUE(ReserveNow(q, {"maxrel"}).empty());
  EXPECT_EQ(MustStats(q).buried_total - s0.buried_total, 1u);

  JobSpec once = Spec("maxrel", "once");
  once.max_attempts = 1;
  MustAdd(q, once);
  Delivery o = ReserveOne(q, "maxrel");
  EXPECT_TRUE(ReleaseBuries(o));
  ASSERT_TRUE(IsOk(q.Release("once", o.receipt, kLongMs, "only try")));
  EXPECT_EQ(State(q, "once"), "buried");
}

TEST_P(QueueConformance, UsingUpMaxAttemptsByTtrBuriesTheJob) {
  Queue& q = queue();
  JobSpec spec = Spec("maxttr", "j");
  spec.max_attempts = 1;
  spec.ttr_ms = kShortMs;
  MustAdd(q, spec);
  Delivery d = ReserveOne(q, "maxttr");
  harness().AdvanceMs(kShortMs);
  JobInfo info = MustGet(q, "j");
  EXPECT_EQ(StateName(info.state), "buried");
  EXPECT_FALSE(info.last_error.empty());
  EXPECT_TRUE(ReserveNow(q, {"maxttr"}).empty());
  EXPECT_TRUE(HasCode(q.Finish("j", d.receipt), Code::kStaleReceipt));
  EXPECT_TRUE(IsOk(q.Kick("j")));
  EXPECT_EQ(ReserveOne(q, "maxttr").id, "j");
}

// --- bury and kick -------------------------------------------------------------------

TEST_P(QueueConformance, BuriedJobIsNotHandedOutUntilKicked) {
  Queue& q = queue();
  QueueStats s0 = MustStats(q);
  MustAdd(q, Spec("bury", "a"));
  MustAdd(q, Spec("bury", "b"));
  Delivery a = ReserveOne(q, "bury");
  ASSERT_EQ(a.id, "a");
  ASSERT_TRUE(IsOk(q.Bury("a", a.receipt, "poison message")));
  JobInfo info = MustGet(q, "a");
  EXPECT_EQ(StateName(info.state), "buried");
  EXPECT_EQ(info.last_error, "poison message");
  EXPECT_EQ(info.receipt, "");
  EXPECT_TRUE(HasCode(q.Finish("a", a.receipt), Code::kStaleReceipt));
  EXPECT_EQ(Ids(ReserveNow(q, {"bury"}, 10)), std::vector<std::string>{"b"});
  EXPECT_TRUE(ReserveNow(q, {"bury"}).empty());

  ASSERT_TRUE(IsOk(q.Kick("a")));
  EXPECT_EQ(State(q, "a"), "ready");
  Delivery again = ReserveOne(q, "bury");
  EXPECT_EQ(again.id, "a");
  EXPECT_EQ(again.attempts, 2u);
  QueueStats s1 = MustStats(q);
  EXPECT_EQ(s1.buried_total - s0.buried_total, 1u);
  EXPECT_EQ(s1.kicked - s0.kicked, 1u);

  // Bury without a receipt works on the reserved job.
  ASSERT_TRUE(IsOk(q.Bury("a", "", "")));
  EXPECT_EQ(State(q, "a"), "buried");
}

TEST_P(QueueConformance, KickMakesADelayedJobReadyNowAndRejectsReadyOrReservedOnes) {
  Queue& q = queue();
  MustAdd(q, Delayed("kick.d", "later", kLongMs));
  int64_t before = harness().NowMs();
  ASSERT_TRUE(IsOk(q.Kick("later")));
  JobInfo info = MustGet(q, "later");
  EXPECT_EQ(StateName(info.state), "ready");
  EXPECT_LE(info.run_at_ms, harness().NowMs());
  EXPECT_GE(info.run_at_ms, before);
  EXPECT_EQ(ReserveOne(q, "kick.d").id, "later");

  MustAdd(q, Spec("kick.bad", "ready"));
  MustAdd(q, Spec("kick.bad2", "reserved"));
  Delivery d = ReserveOne(q, "kick.bad2");
  EXPECT_TRUE(HasCode(q.Kick("ready"), Code::kInvalidArgument));
  EXPECT_TRUE(HasCode(q.Kick("reserved"), Code::kInvalidArgument));
  EXPECT_EQ(State(q, "ready"), "ready");
  EXPECT_EQ(State(q, "reserved"), "reserved");
  EXPECT_TRUE(IsOk(q.Finish("reserved", d.receipt)));
}

TEST_P(QueueConformance, KickTopicKicksAtMostNBuriedJobsOldestFirst) {
  Queue& q = queue();
  QueueStats s0 = MustStats(q);
  for (const char* id : {"k1", "k2", "k3"}) MustAdd(q, Spec("kt", id));
  MustAdd(q, Spec("kt.other", "other"));
  MustAdd(q, Delayed("kt", "delayed", kLongMs));  // not buried: KickTopic leaves it
  for (int i = 0; i < 3; ++i) BuryNext(q, "kt");
  BuryNext(q, "kt.other");
  EXPECT_EQ(MustTopic(q, "kt").buried, 3u);

  EXPECT_EQ(MustPeek(q, "kt", JobState::kBuried).id, "k1") << "the next to be kicked is the oldest";
  EXPECT_EQ(MustKickTopic(q, "kt", 2), 2u);
  EXPECT_EQ(State(q, "k1"), "ready");
  EXPECT_EQ(State(q, "k2"), "ready");
  EXPECT_EQ(State(q, "k3"), "buried");
  EXPECT_EQ(State(q, "other"), "buried");
  EXPECT_EQ(State(q, "delayed"), "delayed");

  EXPECT_EQ(MustKickTopic(q, "kt", 10), 1u);
  EXPECT_EQ(MustKickTopic(q, "kt", 10), 0u);
  EXPECT_EQ(MustStats(q).kicked - s0.kicked, 3u);
  EXPECT_EQ(Ids(ReserveNow(q, {"kt"}, 10)), (std::vector<std::string>{"k1", "k2", "k3"}));
}

TEST_P(QueueConformance, KickTopicRejectsABadNameAndCountsZeroForAnUnknownOne) {
  EXPECT_TRUE(Rejects(queue().KickTopic("bad topic", 1).status(), "topic"));
  EXPECT_EQ(MustKickTopic(queue(), "no.such.topic", 5), 0u);
}

// --- delete ----------------------------------------------------------------------------

TEST_P(QueueConformance, DeleteRemovesAJobInEveryState) {
  Queue& q = queue();
  QueueStats s0 = MustStats(q);
  MustAdd(q, Delayed("del", "delayed", kLongMs));
  MustAdd(q, Spec("del", "ready"));
  MustAdd(q, Spec("del.r", "reserved"));
  MustAdd(q, Spec("del.b", "buried"));
  Delivery r = ReserveOne(q, "del.r");
  BuryNext(q, "del.b");
  for (const char* id : {"delayed", "ready", "reserved", "buried"}) {
    SCOPED_TRACE(id);
    ASSERT_EQ(State(q, id), id);
    EXPECT_TRUE(IsOk(q.Delete(id)));
    EXPECT_EQ(State(q, id), "gone");
    EXPECT_TRUE(HasCode(q.Delete(id), Code::kNotFound));
  }
  EXPECT_TRUE(HasCode(q.Finish("reserved", r.receipt), Code::kNotFound));
  EXPECT_TRUE(HasCode(q.Kick("buried"), Code::kNotFound));
  EXPECT_TRUE(ReserveNow(q, {"del", "del.r", "del.b"}, 10).empty());
  EXPECT_EQ(MustKickTopic(q, "del.b", 10), 0u);
  QueueStats s1 = MustStats(q);
  EXPECT_EQ(s1.jobs, 0u);
  EXPECT_EQ(s1.deleted - s0.deleted, 4u);
  for (const char* t : {"del", "del.r", "del.b"}) {
    TopicInfo info = MustTopic(q, t);
    EXPECT_EQ(info.delayed + info.ready + info.reserved + info.buried, 0u) << t;
  }
}

// --- peek --------------------------------------------------------------------------------

TEST_P(QueueConformance, PeekShowsTheNextJobOfEachStateWithoutChangingIt) {
  Queue& q = queue();
  JobSpec r1 = Spec("peek", "ready-p10");
  r1.priority = 10;
  JobSpec r2 = Spec("peek", "ready-p5");
  r2.priority = 5;
  r2.body = "peeked body";
  MustAdd(q, r1);
  MustAdd(q, r2);
  MustAdd(q, Delayed("peek", "delayed-far", kLongMs + 5'000));
  MustAdd(q, Delayed("peek", "delayed-near", kLongMs));
  MustAdd(q, Spec("peek", "to-bury"));
  // Bury "to-bury": reserve everything ready, bury it, release the rest.
  Deliveries all = ReserveNow(q, {"peek"}, 3);
  ASSERT_EQ(all.size(), 3u);
  for (const Delivery& d : all) {
    if (d.id == "to-bury") {
      ASSERT_TRUE(IsOk(q.Bury(d.id, d.receipt, "peek me")));
    } else {
      ASSERT_TRUE(IsOk(q.Release(d.id, d.receipt, 0, "")));
    }
  }

  JobInfo ready = MustPeek(q, "peek", JobState::kReady);
  EXPECT_EQ(ready.id, "ready-p5");
  EXPECT_EQ(StateName(ready.state), "ready");
  EXPECT_EQ(ready.body, "peeked body");
  EXPECT_EQ(ready.priority, 5u);
  EXPECT_EQ(ready.topic, "peek");
  JobInfo delayed = MustPeek(q, "peek", JobState::kDelayed);
  EXPECT_EQ(delayed.id, "delayed-near");
  EXPECT_EQ(StateName(delayed.state), "delayed");
  JobInfo buried = MustPeek(q, "peek", JobState::kBuried);
  EXPECT_EQ(buried.id, "to-bury");
  EXPECT_EQ(StateName(buried.state), "buried");
  EXPECT_EQ(buried.last_error, "peek me");

  // Peeking again gives the same; nothing was reserved or moved.
  EXPECT_EQ(MustPeek(q, "peek", JobState::kReady).id, "ready-p5");
  EXPECT_EQ(MustGet(q, "ready-p5").attempts, 1u);
  EXPECT_EQ(State(q, "ready-p5"), "ready");
  EXPECT_EQ(State(q, "delayed-near"), "delayed");
  EXPECT_EQ(State(q, "to-bury"), "buried");
  EXPECT_EQ(ReserveOne(q, "peek").id, "ready-p5");
}

TEST_P(QueueConformance, PeekOfAnEmptyTopicIsNotFoundAndOfReservedIsInvalid) {
  Queue& q = queue();
  for (JobState s : {JobState::kReady, JobState::kDelayed, JobState::kBuried}) {
    EXPECT_TRUE(HasCode(q.Peek("peek.none", s).status(), Code::kNotFound)) << StateName(s);
  }
  MustAdd(q, Spec("peek.res", "r"));
  Delivery d = ReserveOne(q, "peek.res");
  EXPECT_TRUE(Rejects(q.Peek("peek.res", JobState::kReserved).status(), "state"));
  EXPECT_TRUE(HasCode(q.Peek("peek.res", JobState::kReady).status(), Code::kNotFound));
  EXPECT_TRUE(Rejects(q.Peek("bad topic", JobState::kReady).status(), "topic"));
  EXPECT_EQ(State(q, "r"), "reserved");
  EXPECT_TRUE(IsOk(q.Finish("r", d.receipt)));
}

// --- pause and resume ------------------------------------------------------------------

TEST_P(QueueConformance, PausedTopicHandsOutNothingUntilResumedWhileJobsKeepFallingDue) {
  Queue& q = queue();
  const int64_t delay = harness().brief_ms();
  MustAdd(q, Spec("pause", "ready"));
  MustAdd(q, Delayed("pause", "falls-due", delay));
  ASSERT_TRUE(IsOk(q.Pause("pause", 0)));
  TopicInfo info = MustTopic(q, "pause");
  EXPECT_TRUE(info.paused);
  EXPECT_EQ(info.paused_for_ms, -1);
  EXPECT_TRUE(ReserveNow(q, {"pause"}, 10).empty());
  harness().AdvanceMs(delay);
  EXPECT_EQ(State(q, "falls-due"), "ready") << "jobs keep falling due while paused";
  EXPECT_TRUE(ReserveNow(q, {"pause"}, 10).empty());
  EXPECT_EQ(MustPeek(q, "pause", JobState::kReady).id, "ready");

  ASSERT_TRUE(IsOk(q.Resume("pause")));
  info = MustTopic(q, "pause");
  EXPECT_FALSE(info.paused);
  EXPECT_EQ(Ids(ReserveNow(q, {"pause"}, 10)), (std::vector<std::string>{"ready", "falls-due"}));
}

TEST_P(QueueConformance, ResumeAnswersAWaitingReserveAtOnce) {
  Queue& q = queue();
  ASSERT_TRUE(IsOk(q.Pause("pause.w", 0)));
  MustAdd(q, Spec("pause.w", "j"));
  ReserveProbe probe(q, Request({"pause.w"}, kLongMs));
  EXPECT_FALSE(probe.Answered(kQuiet)) << "a paused topic handed out a job";
  EXPECT_EQ(State(q, "j"), "ready");
  ASSERT_TRUE(IsOk(q.Resume("pause.w")));
  EXPECT_EQ(Ids(probe.TakeOk()), std::vector<std::string>{"j"});
  EXPECT_EQ(probe.calls(), 1);
}

TEST_P(QueueConformance, PauseWithADurationEndsByItself) {
  Queue& q = queue();
  const int64_t pause = harness().brief_ms();
  ASSERT_TRUE(IsOk(q.Pause("pause.d", pause)));
  TopicInfo info = MustTopic(q, "pause.d");
  EXPECT_TRUE(info.paused);
  EXPECT_GT(info.paused_for_ms, 0);
  EXPECT_LE(info.paused_for_ms, pause);
  if (harness().exact_time()) {
    EXPECT_EQ(info.paused_for_ms, pause);
  }
  // A paused topic with no jobs is still listed.
  auto topics = q.Topics();
  ASSERT_TRUE(IsOk(topics.status()));
  ASSERT_EQ(topics->size(), 1u);
  EXPECT_EQ((*topics)[0].name, "pause.d");

  MustAdd(q, Spec("pause.d", "j"));
  ReserveProbe probe(q, Request({"pause.d"}, kLongMs));
  EXPECT_TRUE(ReserveNow(q, {"pause.d"}).empty());
  if (harness().exact_time()) {
    harness().AdvanceMs(pause - 1);
    EXPECT_FALSE(probe.Answered(kQuiet)) << "the pause ended early";
    harness().AdvanceMs(1);
  } else {
    harness().AdvanceMs(pause);
  }
  EXPECT_EQ(Ids(probe.TakeOk()), std::vector<std::string>{"j"});
  EXPECT_FALSE(MustTopic(q, "pause.d").paused);
}

TEST_P(QueueConformance, ReserveOverAPausedAndAnOpenTopicGetsOnlyTheOpenOne) {
  Queue& q = queue();
  JobSpec best = Spec("mix.paused", "paused-p0");
  best.priority = 0;
  MustAdd(q, best);
  JobSpec worse = Spec("mix.open", "open-p100");
  worse.priority = 100;
  MustAdd(q, worse);
  ASSERT_TRUE(IsOk(q.Pause("mix.paused", 0)));
  EXPECT_EQ(Ids(ReserveNow(q, {"mix.paused", "mix.open"}, 10)),
            std::vector<std::string>{"open-p100"});
  EXPECT_EQ(State(q, "paused-p0"), "ready");
}

TEST_P(QueueConformance, PauseAndResumeRejectBadInput) {
  Queue& q = queue();
  EXPECT_TRUE(Rejects(q.Pause("bad topic", 0), "topic"));
  EXPECT_TRUE(Rejects(q.Pause("ok.topic", -1), "duration_ms"));
  EXPECT_TRUE(Rejects(q.Resume("bad topic"), "topic"));
  EXPECT_FALSE(MustTopic(q, "ok.topic").paused);
  EXPECT_TRUE(IsOk(q.Resume("never.paused")));
}

// --- topics and stats --------------------------------------------------------------

TEST_P(QueueConformance, FreshQueueHasNoTopicsAndNoJobs) {
  auto topics = queue().Topics();
  ASSERT_TRUE(IsOk(topics.status()));
  EXPECT_TRUE(topics->empty());
  QueueStats s = MustStats(queue());
  EXPECT_EQ(s.jobs, 0u);
  EXPECT_EQ(s.delayed + s.ready + s.reserved + s.buried, 0u);
  EXPECT_EQ(s.topics, 0u);
  EXPECT_EQ(s.waiting, 0u);
}

TEST_P(QueueConformance, TopicsAndStatsCountJobsByState) {
  Queue& q = queue();
  MustAdd(q, Delayed("stats.a", "a-delayed", kLongMs));
  MustAdd(q, Spec("stats.a", "a-buried"));
  BuryNext(q, "stats.a");
  MustAdd(q, Spec("stats.a", "a-ready"));
  MustAdd(q, Spec("stats.b", "b-reserved"));
  Delivery br = ReserveOne(q, "stats.b");
  ReserveProbe waiter(q, Request({"stats.c"}, kLongMs));
  ASSERT_TRUE(WaitersReach(q, "stats.c", 1));
  ASSERT_TRUE(IsOk(q.Pause("stats.d", 0)));

  auto topics = q.Topics();
  ASSERT_TRUE(IsOk(topics.status()));
  ASSERT_EQ(topics->size(), 4u);
  const std::vector<TopicInfo>& t = *topics;
  EXPECT_EQ(t[0].name, "stats.a");
  EXPECT_EQ(t[1].name, "stats.b");
  EXPECT_EQ(t[2].name, "stats.c");
  EXPECT_EQ(t[3].name, "stats.d");
  EXPECT_EQ(t[0].delayed, 1u);
  EXPECT_EQ(t[0].ready, 1u);
  EXPECT_EQ(t[0].reserved, 0u);
  EXPECT_EQ(t[0].buried, 1u);
  EXPECT_FALSE(t[0].paused);
  EXPECT_EQ(t[1].reserved, 1u);
  EXPECT_EQ(t[1].delayed + t[1].ready + t[1].buried, 0u);
  EXPECT_EQ(t[2].waiting, 1u);
  EXPECT_TRUE(t[3].paused);
  EXPECT_EQ(t[3].paused_for_ms, -1);
  TopicInfo a = MustTopic(q, "stats.a");
  EXPECT_EQ(a.delayed, 1u);
  EXPECT_EQ(a.ready, 1u);
  EXPECT_EQ(a.buried, 1u);

  QueueStats s = MustStats(q);
  EXPECT_EQ(s.jobs, 4u);
  EXPECT_EQ(s.delayed, 1u);
  EXPECT_EQ(s.ready, 1u);
  EXPECT_EQ(s.reserved, 1u);
  EXPECT_EQ(s.buried, 1u);
  EXPECT_EQ(s.topics, 4u);
  EXPECT_EQ(s.waiting, 1u);

  // Topics drop out of the list when nothing is left in them.
  ASSERT_TRUE(q.CancelReserve(waiter.ticket()));
  ASSERT_TRUE(IsOk(q.Resume("stats.d")));
  ASSERT_TRUE(IsOk(q.Finish("b-reserved", br.receipt)));
  topics = q.Topics();
  ASSERT_TRUE(IsOk(topics.status()));
  ASSERT_EQ(topics->size(), 1u);
  EXPECT_EQ((*topics)[0].name, "stats.a");
  s = MustStats(q);
  EXPECT_EQ(s.topics, 1u);
  EXPECT_EQ(s.waiting, 0u);
  EXPECT_EQ(s.jobs, 3u);
}

TEST_P(QueueConformance, TopicOfAnUnknownNameReadsAsEmptyAndABadNameIsInvalid) {
  Queue& q = queue();
  TopicInfo info = MustTopic(q, "no.such.topic");
  EXPECT_EQ(info.name, "no.such.topic");
  EXPECT_EQ(info.delayed + info.ready + info.reserved + info.buried + info.waiting, 0u);
  EXPECT_FALSE(info.paused);
  EXPECT_TRUE(Rejects(q.Topic("bad topic").status(), "topic"));
  EXPECT_TRUE(Rejects(q.Topic("").status(), "topic"));
}

TEST_P(QueueConformance, StatsCountersCountEachOperation) {
  Queue& q = queue();
  const int64_t ttr = kShortMs;
  QueueStats s0 = MustStats(q);
  for (const char* id : {"j1", "j2", "j3", "j4"}) MustAdd(q, Spec("ctr", id));
  Deliveries got = ReserveNow(q, {"ctr"}, 4);
  ASSERT_EQ(Ids(got), (std::vector<std::string>{"j1", "j2", "j3", "j4"}));
  ASSERT_TRUE(IsOk(q.Finish("j1", got[0].receipt)));
  ASSERT_TRUE(IsOk(q.Delete("j2")));
  ASSERT_TRUE(IsOk(q.Release("j3", got[2].receipt, 0, "")));
  ASSERT_TRUE(IsOk(q.Bury("j4", got[3].receipt, "")));
  ASSERT_TRUE(IsOk(q.Kick("j4")));
  JobSpec short_ttr = Spec("ctr.ttr", "j5");
  short_ttr.ttr_ms = ttr;
  MustAdd(q, short_ttr);
  ReserveOne(q, "ctr.ttr");
  harness().AdvanceMs(ttr);
  EXPECT_EQ(State(q, "j5"), "ready");
  QueueStats s1 = MustStats(q);
  EXPECT_EQ(s1.added - s0.added, 5u);
  EXPECT_EQ(s1.reserves - s0.reserves, 5u);
  EXPECT_EQ(s1.finished - s0.finished, 1u);
  EXPECT_EQ(s1.deleted - s0.deleted, 1u);
  EXPECT_EQ(s1.released - s0.released, 1u);
  EXPECT_EQ(s1.buried_total - s0.buried_total, 1u);
  EXPECT_EQ(s1.kicked - s0.kicked, 1u);
  EXPECT_EQ(s1.timed_out - s0.timed_out, 1u);
  EXPECT_EQ(s1.replaced - s0.replaced, 0u);
  JobSpec replace = Spec("ctr", "j3");
  replace.replace = true;
  MustAdd(q, replace);
  EXPECT_EQ(MustStats(q).replaced - s0.replaced, 1u);
  // Failed operations count nothing.
  EXPECT_FALSE(q.Finish("j1", "").ok());
  EXPECT_FALSE(q.Add(Spec("ctr", "j3")).ok());
  QueueStats s2 = MustStats(q);
  EXPECT_EQ(s2.finished, s1.finished);
  EXPECT_EQ(s2.replaced - s0.replaced, 1u);
  EXPECT_EQ(s2.jobs, 3u);
}

}  // namespace delayq::conformance
