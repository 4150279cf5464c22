// Engine: the state machine of SPEC §4 and the operations of SPEC §5, driven
// by a ManualClock. Nothing here sleeps: time moves by clock_->Advance() /
// StepWall(), and the engine acts on it at its next call (or Tick()).
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "delayq/clock.h"
#include "delayq/job.h"
#include "delayq/queue.h"
#include "delayq/status.h"

namespace delayq::engine {
namespace {

constexpr int64_t kStart = 1'700'000'000'000;

// What a waiting reserve was answered with.
struct Answer {
  int calls = 0;
  std::optional<Result<Deliveries>> result;

  bool called() const { return calls > 0; }
  // The delivered ids; empty when not called or answered with an error.
  std::vector<std::string> ids() const {
    std::vector<std::string> out;
    if (result && result->ok()) {
      for (const Delivery& d : **result) out.push_back(d.id);
    }
    return out;
  }
};

std::vector<std::string> IdsOf(const Deliveries& ds) {
  std::vector<std::string> out;
  for (const Delivery& d : ds) out.push_back(d.id);
  return out;
}

// prefix + decimal i; spelt out because GCC 12 warns (-Wrestrict, falsely)
// on "literal" + std::to_string(i).
std::string Name(std::string_view prefix, int i) {
  std::string s(prefix);
  s += std::to_string(i);
  return s;
}

JobSpec Spec(std::string topic, std::string id, std::string body = "body") {
  JobSpec spec;
  spec.topic = std::move(topic);
  spec.id = std::move(id);
  spec.body = std::move(body);
  return spec;
}

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override { Make(Limits{}, size_t{256} << 20); }

  void Make(Limits limits, size_t arena_bytes) {
    clock_ = std::make_shared<ManualClock>(kStart);
    EngineOptions options;
    options.clock = clock_;
    options.limits = limits;
    options.arena_reserve_bytes = arena_bytes;
    auto e = Engine::Create(std::move(options));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    engine_ = std::move(e).value();
  }

  AddResult MustAdd(const JobSpec& spec) {
    Result<AddResult> r = engine_->Add(spec);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : AddResult{};
  }

  AddResult AddReady(const std::string& topic, const std::string& id,
                     uint32_t priority = kDefaultPriority, uint32_t ttr_ms = kDefaultTtrMs) {
    JobSpec spec = Spec(topic, id);
    spec.priority = priority;
    spec.ttr_ms = ttr_ms;
    return MustAdd(spec);
  }

  AddResult AddDelayed(const std::string& topic, const std::string& id, int64_t delay_ms,
                       uint32_t priority = kDefaultPriority) {
    JobSpec spec = Spec(topic, id);
    spec.delay_ms = delay_ms;
    spec.priority = priority;
    return MustAdd(spec);
  }

  // A reserve without waiting; it must answer inside the call.
  Result<Deliveries> TryTake(std::vector<std::string> topics, uint32_t count = 1) {
    ReserveRequest req;
    req.topics = std::move(topics);
    req.count = count;
    std::optional<Result<Deliveries>> got;
    int calls = 0;
    uint64_t ticket = engine_->Reserve(req, [&](Result<Deliveries> r) {
      ++calls;
      got.emplace(std::move(r));
    });
    EXPECT_EQ(ticket, 0u);
    EXPECT_EQ(calls, 1);
    if (!got) return Internal("reserve did not answer");
    return std::move(*got);
  }

  Deliveries Take(std::vector<std::string> topics, uint32_t count = 1) {
    Result<Deliveries> r = TryTake(std::move(topics), count);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : Deliveries{};
  }

  // Reserves exactly one job of `topic`, which must be `id` when given.
  Delivery TakeOne(const std::string& topic, const std::string& id = "") {
    Deliveries ds = Take({topic});
    EXPECT_EQ(ds.size(), 1u) << "nothing reservable in " << topic;
    if (ds.empty()) return Delivery{};
    if (!id.empty()) {
      EXPECT_EQ(ds[0].id, id);
    }
    return ds[0];
  }

  uint64_t Wait(std::vector<std::string> topics, int64_t wait_ms, std::shared_ptr<Answer> answer,
                uint32_t count = 1) {
    ReserveRequest req;
    req.topics = std::move(topics);
    req.wait_ms = wait_ms;
    req.count = count;
    return engine_->Reserve(req, [answer](Result<Deliveries> r) {
      ++answer->calls;
      answer->result.emplace(std::move(r));
    });
  }

  JobInfo MustGet(const std::string& id) {
    Result<JobInfo> r = engine_->Get(id);
    EXPECT_TRUE(r.ok()) << id << ": " << r.status().ToString();
    return r.ok() ? *r : JobInfo{};
  }

  std::optional<JobState> StateOf(const std::string& id) {
    Result<JobInfo> r = engine_->Get(id);
    if (!r.ok()) return std::nullopt;
    return r->state;
  }

  TopicInfo MustTopic(const std::string& name) {
    Result<TopicInfo> r = engine_->Topic(name);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : TopicInfo{};
  }

  std::shared_ptr<ManualClock> clock_;
  std::unique_ptr<Engine> engine_;
};

// --- creation --------------------------------------------------------------------

TEST(EngineCreate, WithoutClockIsInvalidArgument) {
  EngineOptions options;
  auto e = Engine::Create(options);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), Code::kInvalidArgument);
}

TEST_F(EngineTest, FreshEngineIsEmpty) {
  EXPECT_EQ(engine_->job_count(), 0u);
  EXPECT_TRUE(engine_->Topics().empty());
  QueueStats s = engine_->Stats();
  EXPECT_EQ(s.jobs, 0u);
  EXPECT_EQ(s.topics, 0u);
  EXPECT_EQ(engine_->MsUntilNextDeadline(), -1);
}

// --- add -------------------------------------------------------------------------

TEST_F(EngineTest, AddWithoutDelayIsReadyAtOnce) {
  AddResult r = MustAdd(Spec("t", "a"));
  EXPECT_EQ(r.id, "a");
  EXPECT_EQ(r.state, JobState::kReady);
  EXPECT_EQ(r.run_at_ms, kStart);
  EXPECT_EQ(StateOf("a"), JobState::kReady);
  EXPECT_EQ(engine_->job_count(), 1u);
}

TEST_F(EngineTest, AddWithZeroDelayIsReadyAtOnce) {
  AddResult r = AddDelayed("t", "a", 0);
  EXPECT_EQ(r.state, JobState::kReady);
  EXPECT_EQ(r.run_at_ms, kStart);
  TakeOne("t", "a");
}

TEST_F(EngineTest, AddWithRunAtInPastIsReadyAndKeepsRunAt) {
  JobSpec spec = Spec("t", "a");
  spec.run_at_ms = kStart - 5'000;
  AddResult r = MustAdd(spec);
  EXPECT_EQ(r.state, JobState::kReady);
  EXPECT_EQ(r.run_at_ms, kStart - 5'000);
  EXPECT_EQ(MustGet("a").run_at_ms, kStart - 5'000);
  TakeOne("t", "a");
}

TEST_F(EngineTest, AddWithRunAtNowIsReady) {
  JobSpec spec = Spec("t", "a");
  spec.run_at_ms = kStart;
  EXPECT_EQ(MustAdd(spec).state, JobState::kReady);
}

TEST_F(EngineTest, AddWithDelayIsDelayedUntilNowPlusDelay) {
  AddResult r = AddDelayed("t", "a", 1'500);
  EXPECT_EQ(r.state, JobState::kDelayed);
  EXPECT_EQ(r.run_at_ms, kStart + 1'500);
  JobInfo info = MustGet("a");
  EXPECT_EQ(info.state, JobState::kDelayed);
  EXPECT_EQ(info.run_at_ms, kStart + 1'500);
  EXPECT_TRUE(Take({"t"}).empty());
}

TEST_F(EngineTest, AddWithRunAtInFutureIsDelayedUntilThen) {
  JobSpec spec = Spec("t", "a");
  spec.run_at_ms = kStart + 60'000;
  AddResult r = MustAdd(spec);
  EXPECT_EQ(r.state, JobState::kDelayed);
  EXPECT_EQ(r.run_at_ms, kStart + 60'000);
}

TEST_F(EngineTest, JobDueAtTIsNotReservableOneMillisecondBefore) {
  AddDelayed("t", "a", 1'000);
  clock_->Advance(999);
  engine_->Tick();
  EXPECT_EQ(StateOf("a"), JobState::kDelayed);
  EXPECT_TRUE(Take({"t"}).empty());
  clock_->Advance(1);
  Delivery d = TakeOne("t", "a");
  EXPECT_EQ(d.run_at_ms, kStart + 1'000);
}

TEST_F(EngineTest, DelayedJobBecomesReadyOnTickWhenDue) {
  AddDelayed("t", "a", 300);
  clock_->Advance(300);
  engine_->Tick();
  EXPECT_EQ(StateOf("a"), JobState::kReady);
  EXPECT_EQ(MustTopic("t").ready, 1u);
  EXPECT_EQ(MustTopic("t").delayed, 0u);
}

TEST_F(EngineTest, ManyDelayedJobsFallDueExactlyOnTheirTime) {
  // Delays 1..200 ms, added in scrambled order; each becomes reservable at
  // its own millisecond and not before.
  for (int i = 0; i < 200; ++i) {
    int delay = (i * 73) % 200 + 1;
    AddDelayed("t", Name("j", delay), delay);
  }
  for (int ms = 1; ms <= 200; ++ms) {
    clock_->Advance(1);
    Deliveries ds = Take({"t"}, 10);
    ASSERT_EQ(ds.size(), 1u) << "at " << ms << " ms";
    EXPECT_EQ(ds[0].id, Name("j", ms));
  }
}

TEST_F(EngineTest, ABurstDueOnOneTickIsHandedOutInPriorityThenRunAtThenAddOrder) {
  // 3,000 jobs due within one 256 ms unit (ties in the delayed heap's
  // inline key) and 1,000 due later: the tick that reaches them all takes
  // the due ones out at once (the heap rebuilt, not popped one by one).
  // Whatever the way, they are handed out in (priority, run_at, add) order
  // and the later ones stay delayed, each falling due on its own time.
  struct Want {
    uint32_t priority;
    int64_t run_at;
    int order;
    std::string id;
  };
  std::vector<Want> due;
  for (int i = 0; i < 4000; ++i) {
    JobSpec spec = Spec("t", Name("b", i));
    spec.priority = static_cast<uint32_t>((i * 7919) % 5);
    const bool later = i % 4 == 3;
    spec.run_at_ms = kStart + (later ? 5000 + (i * 31) % 900 : 100 + (i * 13) % 50);
    MustAdd(spec);
    if (!later) due.push_back(Want{spec.priority, *spec.run_at_ms, i, spec.id});
  }
  std::sort(due.begin(), due.end(), [](const Want& a, const Want& b) {
    if (a.priority != b.priority) return a.priority < b.priority;
    if (a.run_at != b.run_at) return a.run_at < b.run_at;
    return a.order < b.order;
  });
  clock_->Advance(150);
  engine_->Tick();
  EXPECT_EQ(MustTopic("t").ready, 3000u);
  EXPECT_EQ(MustTopic("t").delayed, 1000u);
  Deliveries got;
  for (int round = 0; round < 4; ++round) {
    for (Delivery& d : Take({"t"}, 1000)) got.push_back(std::move(d));
  }
  ASSERT_EQ(got.size(), due.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].id, due[i].id) << "at " << i;
  }
  // The survivors kept their order: each falls due on its own millisecond.
  clock_->Advance(5000 - 150 - 1);
  EXPECT_TRUE(Take({"t"}, 10).empty());
  int64_t now = kStart + 4999;
  int seen = 0;
  while (seen < 1000) {
    clock_->Advance(1);
    ++now;
    for (const Delivery& d : Take({"t"}, 1000)) {
      ASSERT_EQ(d.run_at_ms, now) << d.id;
      ++seen;
    }
    ASSERT_LE(now, kStart + 5900);
  }
}

TEST_F(EngineTest, InvalidSpecsAreRejectedAndAddNothing) {
  struct Case {
    JobSpec spec;
    Code code;
    std::string field;
  };
  std::vector<Case> cases;
  JobSpec s = Spec("bad topic", "a");
  cases.push_back({s, Code::kInvalidArgument, "topic"});
  s = Spec("", "a");
  cases.push_back({s, Code::kInvalidArgument, "topic"});
  s = Spec("t", std::string(257, 'i'));
  cases.push_back({s, Code::kInvalidArgument, "id"});
  s = Spec("t", "a\tb");
  cases.push_back({s, Code::kInvalidArgument, "id"});
  s = Spec("t", "a");
  s.delay_ms = -1;
  cases.push_back({s, Code::kInvalidArgument, "delay_ms"});
  s = Spec("t", "a");
  s.delay_ms = 1;
  s.run_at_ms = kStart;
  cases.push_back({s, Code::kInvalidArgument, "run_at_ms"});
  s = Spec("t", "a");
  s.run_at_ms = kMaxRunAtMs + 1;
  cases.push_back({s, Code::kInvalidArgument, "run_at_ms"});
  s = Spec("t", "a");
  s.ttr_ms = 0;
  cases.push_back({s, Code::kInvalidArgument, "ttr_ms"});
  s = Spec("t", "a", std::string(kDefaultMaxBodyBytes + 1, 'b'));
  cases.push_back({s, Code::kTooLarge, "body"});
  for (const Case& c : cases) {
    Result<AddResult> r = engine_->Add(c.spec);
    ASSERT_FALSE(r.ok()) << c.field;
    EXPECT_EQ(r.status().code(), c.code) << r.status().ToString();
    EXPECT_NE(r.status().message().find(c.field), std::string::npos) << r.status().ToString();
  }
  EXPECT_EQ(engine_->job_count(), 0u);
  EXPECT_EQ(engine_->Stats().added, 0u);
  EXPECT_TRUE(engine_->Topics().empty());
}

TEST_F(EngineTest, InvalidReplaceLeavesLiveJobUnchanged) {
  AddReady("t", "a");
  JobSpec bad = Spec("t", "a", "new");
  bad.replace = true;
  bad.ttr_ms = 0;
  EXPECT_EQ(engine_->Add(bad).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(MustGet("a").body, "body");
  EXPECT_EQ(MustGet("a").ttr_ms, kDefaultTtrMs);
}

TEST_F(EngineTest, BodyLimitComesFromEngineOptions) {
  Limits limits;
  limits.max_body_bytes = 10;
  Make(limits, size_t{64} << 20);
  EXPECT_TRUE(engine_->Add(Spec("t", "a", std::string(10, 'x'))).ok());
  EXPECT_EQ(engine_->Add(Spec("t", "b", std::string(11, 'x'))).status().code(), Code::kTooLarge);
  EXPECT_EQ(engine_->job_count(), 1u);
}

TEST_F(EngineTest, AddOfLiveIdFailsWithExistsAndChangesNothing) {
  JobSpec first = Spec("t", "a", "first");
  first.delay_ms = 1'000;
  first.priority = 5;
  first.ttr_ms = 7'000;
  MustAdd(first);
  JobSpec second = Spec("u", "a", "second");
  second.priority = 1;
  Result<AddResult> r = engine_->Add(second);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kExists);
  JobInfo info = MustGet("a");
  EXPECT_EQ(info.topic, "t");
  EXPECT_EQ(info.body, "first");
  EXPECT_EQ(info.priority, 5u);
  EXPECT_EQ(info.ttr_ms, 7'000u);
  EXPECT_EQ(info.state, JobState::kDelayed);
  EXPECT_EQ(info.run_at_ms, kStart + 1'000);
  EXPECT_EQ(engine_->job_count(), 1u);
  EXPECT_TRUE(Take({"u"}).empty());
  EXPECT_EQ(engine_->Stats().added, 1u);
}

TEST_F(EngineTest, AddOfReservedIdFailsWithExistsAndReservationStands) {
  AddReady("t", "a");
  Delivery d = TakeOne("t", "a");
  EXPECT_EQ(engine_->Add(Spec("t", "a")).status().code(), Code::kExists);
  EXPECT_EQ(StateOf("a"), JobState::kReserved);
  EXPECT_TRUE(engine_->Finish("a", d.receipt).ok());
}

TEST_F(EngineTest, IdOfFinishedJobCanBeAddedAgain) {
  AddReady("t", "a");
  EXPECT_TRUE(engine_->Finish("a", TakeOne("t", "a").receipt).ok());
  EXPECT_TRUE(engine_->Add(Spec("t", "a")).ok());
  EXPECT_EQ(StateOf("a"), JobState::kReady);
}

TEST_F(EngineTest, ReplaceUpdatesBodyPriorityTtrAttemptsLimitAndDueTime) {
  JobSpec first = Spec("t", "a", "old");
  first.delay_ms = 10'000;
  MustAdd(first);
  clock_->Advance(100);
  JobSpec second = Spec("t", "a", "new");
  second.replace = true;
  second.priority = 7;
  second.ttr_ms = 5'000;
  second.max_attempts = 3;
  AddResult r = MustAdd(second);
  EXPECT_EQ(r.id, "a");
  EXPECT_EQ(r.state, JobState::kReady);
  EXPECT_EQ(r.run_at_ms, kStart + 100);
  JobInfo info = MustGet("a");
  EXPECT_EQ(info.body, "new");
  EXPECT_EQ(info.priority, 7u);
  EXPECT_EQ(info.ttr_ms, 5'000u);
  EXPECT_EQ(info.max_attempts, 3u);
  EXPECT_EQ(info.state, JobState::kReady);
  EXPECT_EQ(info.run_at_ms, kStart + 100);
  EXPECT_EQ(engine_->job_count(), 1u);
  EXPECT_EQ(engine_->Stats().replaced, 1u);
  EXPECT_EQ(MustTopic("t").delayed, 0u);
  EXPECT_EQ(MustTopic("t").ready, 1u);
  Delivery d = TakeOne("t", "a");
  EXPECT_EQ(d.body, "new");
  EXPECT_EQ(d.ttr_ms, 5'000u);
}

TEST_F(EngineTest, ReplaceOfReadyJobWithDelayReschedulesIt) {
  AddReady("t", "a");
  JobSpec spec = Spec("t", "a");
  spec.replace = true;
  spec.delay_ms = 2'000;
  EXPECT_EQ(MustAdd(spec).state, JobState::kDelayed);
  EXPECT_TRUE(Take({"t"}).empty());
  EXPECT_EQ(engine_->NextDeadlines().wall_ms, kStart + 2'000);
  clock_->Advance(2'000);
  TakeOne("t", "a");
}

TEST_F(EngineTest, ReplaceOfReservedJobMakesOldReceiptStale) {
  AddReady("t", "a", kDefaultPriority, 1'000);
  Delivery old = TakeOne("t", "a");
  JobSpec spec = Spec("t", "a", "v2");
  spec.replace = true;
  MustAdd(spec);
  EXPECT_EQ(StateOf("a"), JobState::kReady);
  EXPECT_EQ(MustTopic("t").reserved, 0u);
  EXPECT_EQ(engine_->Finish("a", old.receipt).code(), Code::kStaleReceipt);
  EXPECT_EQ(engine_->Touch("a", old.receipt).code(), Code::kStaleReceipt);
  Delivery fresh = TakeOne("t", "a");
  EXPECT_NE(fresh.receipt, old.receipt);
  EXPECT_EQ(fresh.body, "v2");
  EXPECT_EQ(engine_->Finish("a", old.receipt).code(), Code::kStaleReceipt);
  // The old reservation's TTR no longer applies.
  clock_->Advance(1'000);
  engine_->Tick();
  EXPECT_EQ(StateOf("a"), JobState::kReserved);
  EXPECT_TRUE(engine_->Finish("a", fresh.receipt).ok());
}

TEST_F(EngineTest, ReplaceOfBuriedJobMakesItLiveAgain) {
  AddReady("t", "a");
  Delivery d = TakeOne("t", "a");
  ASSERT_TRUE(engine_->Bury("a", d.receipt, "why").ok());
  JobSpec spec = Spec("t", "a");
  spec.replace = true;
  MustAdd(spec);
  EXPECT_EQ(StateOf("a"), JobState::kReady);
  EXPECT_EQ(MustTopic("t").buried, 0u);
}

TEST_F(EngineTest, ReplaceCanMoveJobToAnotherTopic) {
  AddReady("t", "a");
  JobSpec spec = Spec("u", "a");
  spec.replace = true;
  MustAdd(spec);
  EXPECT_TRUE(Take({"t"}).empty());
  EXPECT_EQ(MustGet("a").topic, "u");
  TakeOne("u", "a");
}

TEST_F(EngineTest, ReplaceOfUnknownIdAddsIt) {
  JobSpec spec = Spec("t", "a");
  spec.replace = true;
  EXPECT_EQ(MustAdd(spec).state, JobState::kReady);
  EXPECT_EQ(engine_->job_count(), 1u);
}

TEST_F(EngineTest, GeneratedIdsAreUniqueTimeOrderedTwentyFourHexDigits) {
  std::vector<std::string> ids;
  for (int i = 0; i < 500; ++i) {
    if (i % 50 == 0) clock_->Advance(1);
    if (i == 250) clock_->StepWall(-10'000);  // ids stay ordered even then
    AddResult r = MustAdd(Spec("t", ""));
    ASSERT_EQ(r.id.size(), 24u) << r.id;
    for (char c : r.id) {
      EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << r.id;
    }
    ids.push_back(r.id);
  }
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), ids.size());
  // Addressable by their generated id text.
  EXPECT_EQ(MustGet(ids[0]).id, ids[0]);
  EXPECT_TRUE(engine_->Delete(ids[1]).ok());
}

TEST_F(EngineTest, GeneratedIdsOfLaterAddsSortAfterEarlierOnes) {
  std::string a = MustAdd(Spec("t", "")).id;
  clock_->Advance(1'000);
  std::string b = MustAdd(Spec("t", "")).id;
  EXPECT_LT(a, b);
  EXPECT_EQ(MustGet(b).created_at_ms, kStart + 1'000);
}

TEST_F(EngineTest, GeneratedIdNeverCollidesWithLiveClientId) {
  // A generated id is the add's seq and the record's handle. A client takes
  // the exact texts the next generated adds would get (the clock stands
  // still, so seqs go up by one per add and handles by one slot); the
  // generator must step over every one of them.
  std::string g1 = MustAdd(Spec("gen", "")).id;
  std::string g2 = MustAdd(Spec("gen", "")).id;
  uint64_t seq2 = std::stoull(g2.substr(0, 16), nullptr, 16);
  uint32_t h1 = static_cast<uint32_t>(std::stoul(g1.substr(16), nullptr, 16));
  uint32_t h2 = static_cast<uint32_t>(std::stoul(g2.substr(16), nullptr, 16));
  uint32_t next_handle = h2 + (h2 - h1);
  std::set<std::string> client_ids;
  constexpr uint64_t kClients = 20;
  for (uint64_t k = kClients + 1; k <= 2 * kClients; ++k) {
    char buf[kGeneratedIdBytes];
    std::string id(FormatGeneratedId(seq2 + k, next_handle, buf));
    MustAdd(Spec("client", id));  // takes seq2 + 1 .. seq2 + kClients
    client_ids.insert(id);
  }
  for (int i = 0; i < 100; ++i) {
    Result<AddResult> r = engine_->Add(Spec("gen", ""));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(client_ids.count(r->id), 0u) << "generated id " << r->id << " is a client's";
    EXPECT_EQ(MustGet(r->id).topic, "gen");
  }
  EXPECT_EQ(engine_->job_count(), 122u);
  for (const std::string& id : client_ids) EXPECT_EQ(MustGet(id).topic, "client");
}

TEST_F(EngineTest, ForgedGeneratedIdsFindNothingAndChangeNothing) {
  // A generated id names a handle; one sent by a client is checked before it
  // is trusted: wrong seq, a freed slot, a handle inside a record (pointing
  // at a body crafted to look like a header), past the arena, or seq 0.
  std::string live = MustAdd(Spec("t", "")).id;
  std::string gone = MustAdd(Spec("t", "")).id;
  ASSERT_TRUE(engine_->Delete(gone).ok());
  uint64_t seq = std::stoull(live.substr(0, 16), nullptr, 16);
  uint32_t h = static_cast<uint32_t>(std::stoul(live.substr(16), nullptr, 16));
  // A body that holds a fake header whose seq and state look live.
  std::string fake(64, '\0');
  JobRecord header{};
  header.seq = seq + 1000;
  header.state = static_cast<uint8_t>(JobState::kDelayed);
  std::memcpy(fake.data(), &header, sizeof header);
  std::string crafted = MustAdd(Spec("t", "", fake)).id;
  uint32_t hc = static_cast<uint32_t>(std::stoul(crafted.substr(16), nullptr, 16));
  char buf[kGeneratedIdBytes];
  std::vector<std::string> forged = {
      std::string(FormatGeneratedId(seq + 1, h, buf)),          // wrong seq
      gone,                                                     // freed slot
      std::string(FormatGeneratedId(seq + 1000, hc + 6, buf)),  // inside a body
      std::string(FormatGeneratedId(seq, 0xfffffff0u, buf)),    // past the arena
      std::string(FormatGeneratedId(0, h + 1, buf)),            // seq 0, not a slot
      std::string(FormatGeneratedId(0, 0, buf)),                // null handle
  };
  for (const std::string& id : forged) {
    EXPECT_EQ(engine_->Get(id).status().code(), Code::kNotFound) << id;
    EXPECT_EQ(engine_->Delete(id).code(), Code::kNotFound) << id;
    EXPECT_EQ(engine_->Finish(id, "").code(), Code::kNotFound) << id;
    EXPECT_EQ(engine_->Kick(id).code(), Code::kNotFound) << id;
  }
  EXPECT_EQ(engine_->job_count(), 2u);
  EXPECT_EQ(MustGet(live).id, live);
  EXPECT_EQ(MustGet(crafted).body, fake);
}

// --- reserve -------------------------------------------------------------------

// Regression: a delay near INT64_MAX overflowed run_at before validation
// (undefined behaviour; the sanitizer build aborted).
TEST_F(EngineTest, HugeDelayIsRejectedWithoutOverflow) {
  for (int64_t delay : {INT64_MAX, INT64_MAX - 1, kMaxDelayMs + 1}) {
    JobSpec spec = Spec("t", "huge");
    spec.delay_ms = delay;
    Result<AddResult> r = engine_->Add(spec);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find("delay_ms"), std::string::npos);
  }
  EXPECT_EQ(engine_->job_count(), 0u);
}

TEST_F(EngineTest, ReserveHandsOutJobWithItsFields) {
  JobSpec spec = Spec("t", "a", "payload");
  spec.priority = 9;
  spec.ttr_ms = 30'000;
  MustAdd(spec);
  clock_->Advance(50);
  Delivery d = TakeOne("t", "a");
  EXPECT_EQ(d.topic, "t");
  EXPECT_EQ(d.body, "payload");
  EXPECT_FALSE(d.receipt.empty());
  EXPECT_EQ(d.attempts, 1u);
  EXPECT_EQ(d.ttr_ms, 30'000u);
  EXPECT_EQ(d.priority, 9u);
  EXPECT_EQ(d.run_at_ms, kStart);
  EXPECT_EQ(d.reserved_until_ms, kStart + 50 + 30'000);
  JobInfo info = MustGet("a");
  EXPECT_EQ(info.state, JobState::kReserved);
  EXPECT_EQ(info.receipt, d.receipt);
  EXPECT_EQ(info.reserved_until_ms, d.reserved_until_ms);
  EXPECT_EQ(info.attempts, 1u);
  EXPECT_EQ(MustTopic("t").reserved, 1u);
  EXPECT_EQ(MustTopic("t").ready, 0u);
  EXPECT_TRUE(Take({"t"}).empty()) << "a reserved job must not be handed out twice";
}

TEST_F(EngineTest, ReserveWithoutWaitOnEmptyTopicAnswersEmptyAtOnce) {
  Result<Deliveries> r = TryTake({"nothing.here"});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());
  EXPECT_EQ(engine_->Stats().waiting, 0u);
}

TEST_F(EngineTest, ReserveRejectsBadRequestsNamingTheField) {
  struct Case {
    std::vector<std::string> topics;
    uint32_t count;
    int64_t wait_ms;
    std::string field;
  };
  std::vector<Case> cases = {
      {{}, 1, 0, "topics"},
      {{"t"}, 0, 0, "count"},
      {{"t"}, kMaxReserveCount + 1, 0, "count"},
      {{"t", "bad topic"}, 1, 0, "topic"},
      {{""}, 1, 0, "topic"},
      {{"t"}, 1, -1, "wait_ms"},
      {std::vector<std::string>(kMaxReserveTopics + 1, "t"), 1, 0, "topics"},
  };
  AddReady("t", "a");
  for (const Case& c : cases) {
    ReserveRequest req;
    req.topics = c.topics;
    req.count = c.count;
    req.wait_ms = c.wait_ms;
    int calls = 0;
    std::optional<Result<Deliveries>> got;
    uint64_t ticket = engine_->Reserve(req, [&](Result<Deliveries> r) {
      ++calls;
      got.emplace(std::move(r));
    });
    EXPECT_EQ(ticket, 0u);
    ASSERT_EQ(calls, 1) << c.field;
    ASSERT_FALSE(got->ok()) << c.field;
    EXPECT_EQ(got->status().code(), Code::kInvalidArgument);
    EXPECT_NE(got->status().message().find(c.field), std::string::npos) << got->status().ToString();
  }
  EXPECT_EQ(StateOf("a"), JobState::kReady);
  EXPECT_EQ(engine_->Stats().waiting, 0u);
}

TEST_F(EngineTest, MaxReserveCountIsAccepted) {
  for (int i = 0; i < 1'200; ++i) AddReady("t", Name("j", i));
  EXPECT_EQ(Take({"t"}, kMaxReserveCount).size(), kMaxReserveCount);
}

TEST_F(EngineTest, OrderWithinTopicIsPriorityThenRunAtThenOrderOfAdding) {
  auto add = [&](const std::string& id, uint32_t priority, int64_t run_at) {
    JobSpec spec = Spec("t", id);
    spec.priority = priority;
    spec.run_at_ms = run_at;
    MustAdd(spec);
  };
  add("p2", 2, kStart - 900);
  add("p1-late", 1, kStart - 50);
  add("p1-early", 1, kStart - 200);
  add("p1-late-second", 1, kStart - 50);
  add("p0", 0, kStart);
  add("p1-late-third", 1, kStart - 50);
  std::vector<std::string> expected = {
      "p0", "p1-early", "p1-late", "p1-late-second", "p1-late-third", "p2"};
  EXPECT_EQ(IdsOf(Take({"t"}, 10)), expected);
}

TEST_F(EngineTest, OrderOneAtATimeMatchesBatchOrder) {
  for (int i = 0; i < 30; ++i) AddReady("t", Name("j", i), (i * 7) % 5);
  std::vector<std::string> got;
  for (int i = 0; i < 30; ++i) got.push_back(TakeOne("t").id);
  std::vector<std::string> expected;
  for (uint32_t p = 0; p < 5; ++p) {
    for (int i = 0; i < 30; ++i) {
      if (static_cast<uint32_t>((i * 7) % 5) == p) expected.push_back(Name("j", i));
    }
  }
  EXPECT_EQ(got, expected);
}

TEST_F(EngineTest, EqualJobsAreServedInOrderOfAdding) {
  for (int i = 0; i < 50; ++i) AddReady("t", Name("j", i));
  Deliveries ds = Take({"t"}, 50);
  ASSERT_EQ(ds.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(ds[i].id, Name("j", i));
}

TEST_F(EngineTest, JobsFallingDueTogetherAreServedByPriorityThenRunAt) {
  AddDelayed("t", "late-low", 300, 10);
  AddDelayed("t", "early-low", 100, 10);
  AddDelayed("t", "late-high", 300, 1);
  AddDelayed("t", "mid-high", 200, 1);
  clock_->Advance(300);
  std::vector<std::string> expected = {"mid-high", "late-high", "early-low", "late-low"};
  EXPECT_EQ(IdsOf(Take({"t"}, 10)), expected);
}

TEST_F(EngineTest, ReserveAcrossTopicsTakesTheBestOfAll) {
  AddReady("a", "a-5", 5);
  AddReady("b", "b-1", 1);
  AddReady("c", "c-3", 3);
  AddReady("b", "b-5", 5);
  AddReady("a", "a-1", 1);
  AddReady("other", "other-0", 0);
  std::vector<std::string> expected = {"b-1", "a-1", "c-3", "a-5", "b-5"};
  EXPECT_EQ(IdsOf(Take({"a", "b", "c"}, 10)), expected);
  EXPECT_EQ(StateOf("other-0"), JobState::kReady);
}

TEST_F(EngineTest, CountLimitsTheBatch) {
  for (int i = 0; i < 5; ++i) AddReady("t", Name("j", i));
  Deliveries first = Take({"t"}, 3);
  EXPECT_EQ(IdsOf(first), (std::vector<std::string>{"j0", "j1", "j2"}));
  Deliveries rest = Take({"t"}, 3);
  EXPECT_EQ(IdsOf(rest), (std::vector<std::string>{"j3", "j4"}));
  std::set<std::string> receipts;
  for (const Delivery& d : first) receipts.insert(d.receipt);
  for (const Delivery& d : rest) receipts.insert(d.receipt);
  EXPECT_EQ(receipts.size(), 5u);
  EXPECT_EQ(MustTopic("t").reserved, 5u);
}

TEST_F(EngineTest, DuplicateTopicsInRequestHandOutEachJobOnce) {
  AddReady("t", "a");
  AddReady("t", "b");
  Deliveries ds = Take({"t", "t", "t"}, 10);
  EXPECT_EQ(IdsOf(ds), (std::vector<std::string>{"a", "b"}));
}

// --- finish ---------------------------------------------------------------------

TEST_F(EngineTest, FinishWithReceiptRemovesReservedJob) {
  AddReady("t", "a");
  Delivery d = TakeOne("t", "a");
  EXPECT_TRUE(engine_->Finish("a", d.receipt).ok());
  EXPECT_EQ(engine_->Get("a").status().code(), Code::kNotFound);
  EXPECT_EQ(engine_->job_count(), 0u);
  EXPECT_EQ(MustTopic("t").reserved, 0u);
  EXPECT_EQ(engine_->Stats().finished, 1u);
  EXPECT_EQ(engine_->Finish("a", d.receipt).code(), Code::kNotFound);
}

TEST_F(EngineTest, FinishWithoutReceiptSkipsTheCheck) {
  AddReady("t", "a");
  TakeOne("t", "a");
  EXPECT_TRUE(engine_->Finish("a", "").ok());
  EXPECT_EQ(engine_->job_count(), 0u);
}

TEST_F(EngineTest, FinishOfUnknownJobIsNotFound) {
  EXPECT_EQ(engine_->Finish("nope", "").code(), Code::kNotFound);
  EXPECT_EQ(engine_->Finish("nope", "000000000000000000000000").code(), Code::kNotFound);
}

TEST_F(EngineTest, FinishOfJobNotReservedWithoutReceiptIsNotReservedAndChangesNothing) {
  AddReady("t", "ready");
  AddDelayed("t", "delayed", 1'000);
  AddReady("b", "buried");
  ASSERT_TRUE(engine_->Bury("buried", TakeOne("b", "buried").receipt, "x").ok());
  for (const char* id : {"ready", "delayed", "buried"}) {
    std::optional<JobState> before = StateOf(id);
    Status s = engine_->Finish(id, "");
    EXPECT_EQ(s.code(), Code::kNotReserved) << id << ": " << s.ToString();
    EXPECT_EQ(StateOf(id), before) << id;
  }
  EXPECT_EQ(engine_->job_count(), 3u);
}

TEST_F(EngineTest, FinishWithReceiptOfJobNoLongerReservedIsStale) {
  AddReady("t", "a", kDefaultPriority, 1'000);
  Delivery d = TakeOne("t", "a");
  clock_->Advance(1'000);
  EXPECT_EQ(engine_->Finish("a", d.receipt).code(), Code::kStaleReceipt);
  EXPECT_EQ(StateOf("a"), JobState::kReady);
}

TEST_F(EngineTest, FinishWithStaleReceiptAfterTtrExpiryAndReReserveFails) {
  AddReady("t", "a", kDefaultPriority, 1'000);
  Delivery first = TakeOne("t", "a");
  clock_->Advance(1'000);
  Delivery second = TakeOne("t", "a");
  EXPECT_EQ(second.attempts, 2u);
  EXPECT_NE(second.receipt, first.receipt);
  Status s = engine_->Finish("a", first.receipt);
  EXPECT_EQ(s.code(), Code::kStaleReceipt);
  EXPECT_EQ(StateOf("a"), JobState::kReserved);
  EXPECT_EQ(engine_->Release("a", first.receipt, 0, "").code(), Code::kStaleReceipt);
  EXPECT_EQ(engine_->Touch("a", first.receipt).code(), Code::kStaleReceipt);
  EXPECT_EQ(engine_->Bury("a", first.receipt, "").code(), Code::kStaleReceipt);
  EXPECT_EQ(StateOf("a"), JobState::kReserved);
  EXPECT_TRUE(engine_->Finish("a", second.receipt).ok());
}

TEST_F(EngineTest, FinishWithMadeUpReceiptIsStale) {
  AddReady("t", "a");
  Delivery d = TakeOne("t", "a");
  EXPECT_EQ(engine_->Finish("a", "000000000000000000000000").code(), Code::kStaleReceipt);
  EXPECT_EQ(engine_->Finish("a", "ffffffffffffffffffffffff").code(), Code::kStaleReceipt);
  EXPECT_EQ(StateOf("a"), JobState::kReserved);
}

// A receipt that is not 24 hex digits is a mistake in the request, not a
// delivery that went stale; it is refused before the job is looked at.
TEST_F(EngineTest, MalformedReceiptIsInvalidArgumentAndChangesNothing) {
  AddReady("t", "a");
  Delivery d = TakeOne("t", "a");
  for (std::string bad : {std::string("not-a-receipt"), d.receipt + "0", d.receipt.substr(1),
                          d.receipt.substr(0, 23) + "g"}) {
    SCOPED_TRACE(bad);
    Status s = engine_->Finish("a", bad);
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_NE(s.message().find("receipt: expected the 24 hex digits"), std::string::npos)
        << s.ToString();
    EXPECT_EQ(engine_->Touch("a", bad).code(), Code::kInvalidArgument);
    EXPECT_EQ(engine_->Release("a", bad, 0, "").code(), Code::kInvalidArgument);
    EXPECT_EQ(engine_->Bury("a", bad, "").code(), Code::kInvalidArgument);
    EXPECT_EQ(engine_->Unreserve("a", bad).code(), Code::kInvalidArgument);
    EXPECT_EQ(engine_->Finish("nope", bad).code(), Code::kInvalidArgument);
  }
  EXPECT_EQ(StateOf("a"), JobState::kReserved);
  EXPECT_EQ(MustGet("a").receipt, d.receipt);
}

TEST_F(EngineTest, ReceiptOfOneJobDoesNotFinishAnother) {
  AddReady("t", "a");
  AddReady("t", "b");
  Deliveries ds = Take({"t"}, 2);
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_EQ(engine_->Finish("b", ds[0].receipt).code(), Code::kStaleReceipt);
  EXPECT_TRUE(engine_->Finish("b", ds[1].receipt).ok());
}

// --- TTR and touch ---------------------------------------------------------------

TEST_F(EngineTest, TtrExpiryReturnsJobToReadyWithAttemptCounted) {
  AddReady("t", "a", kDefaultPriority, 1'000);
  TakeOne("t", "a");
  clock_->Advance(999);
  engine_->Tick();
  EXPECT_EQ(StateOf("a"), JobState::kReserved);
  clock_->Advance(1);
  engine_->Tick();
  JobInfo info = MustGet("a");
  EXPECT_EQ(info.state, JobState::kReady);
  EXPECT_EQ(info.attempts, 1u);
  EXPECT_TRUE(info.receipt.empty());
  EXPECT_EQ(info.reserved_until_ms, 0);
  EXPECT_NE(info.last_error.find("ttr"), std::string::npos) << info.last_error;
  EXPECT_EQ(engine_->Stats().timed_out, 1u);
  EXPECT_EQ(MustTopic("t").reserved, 0u);
  EXPECT_EQ(TakeOne("t", "a").attempts, 2u);
}

TEST_F(EngineTest, TtrExpiredJobKeepsItsPlaceInLine) {
  AddReady("t", "first", kDefaultPriority, 1'000);
  TakeOne("t", "first");
  clock_->Advance(10);
  AddReady("t", "second");
  clock_->Advance(990);
  EXPECT_EQ(IdsOf(Take({"t"}, 2)), (std::vector<std::string>{"first", "second"}));
}

TEST_F(EngineTest, TouchExtendsReservationToFullTtrFromNow) {
  AddReady("t", "a", kDefaultPriority, 1'000);
  Delivery d = TakeOne("t", "a");
  clock_->Advance(800);
  ASSERT_TRUE(engine_->Touch("a", d.receipt).ok());
  EXPECT_EQ(MustGet("a").reserved_until_ms, kStart + 1'800);
  clock_->Advance(999);
  engine_->Tick();
  EXPECT_EQ(StateOf("a"), JobState::kReserved);
  EXPECT_EQ(engine_->NextDeadlines().mono_ms, 1'800);
  clock_->Advance(1);
  engine_->Tick();
  EXPECT_EQ(StateOf("a"), JobState::kReady);
}

TEST_F(EngineTest, TouchKeepsReceiptValid) {
  AddReady("t", "a", kDefaultPriority, 1'000);
  Delivery d = TakeOne("t", "a");
  ASSERT_TRUE(engine_->Touch("a", d.receipt).ok());
  ASSERT_TRUE(engine_->Touch("a", "").ok());
  EXPECT_EQ(MustGet("a").receipt, d.receipt);
  EXPECT_TRUE(engine_->Finish("a", d.receipt).ok());
}

TEST_F(EngineTest, TouchOfJobThatIsNotReservedFails) {
  EXPECT_EQ(engine_->Touch("nope", "").code(), Code::kNotFound);
  AddReady("t", "a");
  EXPECT_EQ(engine_->Touch("a", "").code(), Code::kNotReserved);
  EXPECT_EQ(engine_->Touch("a", "000000000000000000000000").code(), Code::kStaleReceipt);
  EXPECT_EQ(StateOf("a"), JobState::kReady);
}

TEST_F(EngineTest, TouchingOneOfManyReservationsKeepsTheOthersOnTime) {
  for (int i = 0; i < 20; ++i) AddReady("t", Name("j", i), kDefaultPriority, 1'000);
  Deliveries ds = Take({"t"}, 20);
  ASSERT_EQ(ds.size(), 20u);
  clock_->Advance(500);
  ASSERT_TRUE(engine_->Touch("j7", ds[7].receipt).ok());
  clock_->Advance(500);
  engine_->Tick();
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(StateOf(Name("j", i)), i == 7 ? JobState::kReserved : JobState::kReady) << i;
  }
  clock_->Advance(500);
  engine_->Tick();
  EXPECT_EQ(StateOf("j7"), JobState::kReady);
}

// --- release ----------------------------------------------------------------------

TEST_F(EngineTest, ReleaseWithoutDelayMakesJobReadyAgain) {
  AddReady("t", "a");
  Delivery d = TakeOne("t", "a");
  ASSERT_TRUE(engine_->Release("a", d.receipt, 0, "").ok());
  EXPECT_EQ(StateOf("a"), JobState::kReady);
  EXPECT_EQ(engine_->Stats().released, 1u);
  Delivery again = TakeOne("t", "a");
  EXPECT_EQ(again.attempts, 2u);
  EXPECT_NE(again.receipt, d.receipt);
}

TEST_F(EngineTest, ReleaseWithDelayMakesJobDelayedThenReady) {
  AddReady("t", "a");
  Delivery d = TakeOne("t", "a");
  clock_->Advance(100);
  ASSERT_TRUE(engine_->Release("a", d.receipt, 500, "").ok());
  JobInfo info = MustGet("a");
  EXPECT_EQ(info.state, JobState::kDelayed);
  EXPECT_EQ(info.run_at_ms, kStart + 600);
  EXPECT_EQ(engine_->NextDeadlines().wall_ms, kStart + 600);
  clock_->Advance(499);
  EXPECT_TRUE(Take({"t"}).empty());
  clock_->Advance(1);
  EXPECT_EQ(TakeOne("t", "a").attempts, 2u);
}

TEST_F(EngineTest, ReleaseKeepsErrorAsLastError) {
  AddReady("t", "a");
  Delivery d = TakeOne("t", "a");
  ASSERT_TRUE(engine_->Release("a", d.receipt, 0, "connection refused").ok());
  EXPECT_EQ(MustGet("a").last_error, "connection refused");
  Delivery d2 = TakeOne("t", "a");
  ASSERT_TRUE(engine_->Release("a", d2.receipt, 0, "timeout").ok());
  EXPECT_EQ(MustGet("a").last_error, "timeout");
}

TEST_F(EngineTest, ReleaseErrorsChangeNothing) {
  EXPECT_EQ(engine_->Release("nope", "", 0, "").code(), Code::kNotFound);
  AddReady("t", "ready");
  EXPECT_EQ(engine_->Release("ready", "", 0, "").code(), Code::kNotReserved);
  AddReady("u", "a");
  Delivery d = TakeOne("u", "a");
  Status neg = engine_->Release("a", d.receipt, -1, "");
  EXPECT_EQ(neg.code(), Code::kInvalidArgument);
  EXPECT_NE(neg.message().find("delay_ms"), std::string::npos) << neg.ToString();
  EXPECT_EQ(engine_->Release("a", d.receipt, kMaxDelayMs + 1, "").code(), Code::kInvalidArgument);
  EXPECT_EQ(engine_->Release("a", "000000000000000000000000", 0, "").code(), Code::kStaleReceipt);
  EXPECT_EQ(StateOf("a"), JobState::kReserved);
  EXPECT_EQ(MustGet("a").receipt, d.receipt);
  EXPECT_EQ(engine_->Stats().released, 0u);
}

TEST_F(EngineTest, ReleasedJobGoesBehindEqualJobsAlreadyDue) {
  AddReady("t", "a");
  Delivery d = TakeOne("t", "a");
  clock_->Advance(10);
  AddReady("t", "b");
  clock_->Advance(10);
  ASSERT_TRUE(engine_->Release("a", d.receipt, 0, "").ok());
  // a is due again at its release time, after b's run_at.
  EXPECT_EQ(IdsOf(Take({"t"}, 2)), (std::vector<std::string>{"b", "a"}));
}

// --- max_attempts -----------------------------------------------------------------

TEST_F(EngineTest, MaxAttemptsBuriesOnReleaseOfLastAttempt) {
  JobSpec spec = Spec("t", "a");
  spec.max_attempts = 2;
  MustAdd(spec);
  Delivery d1 = TakeOne("t", "a");
  ASSERT_TRUE(engine_->Release("a", d1.receipt, 0, "e1").ok());
  EXPECT_EQ(StateOf("a"), JobState::kReady);
  Delivery d2 = TakeOne("t", "a");
  EXPECT_EQ(d2.attempts, 2u);
  ASSERT_TRUE(engine_->Release("a", d2.receipt, 5'000, "e2").ok());
  JobInfo info = MustGet("a");
  EXPECT_EQ(info.state, JobState::kBuried);
  EXPECT_EQ(info.attempts, 2u);
  EXPECT_NE(info.last_error.find("e2"), std::string::npos) << info.last_error;
  EXPECT_NE(info.last_error.find("max_attempts"), std::string::npos) << info.last_error;
  EXPECT_EQ(MustTopic("t").buried, 1u);
  EXPECT_EQ(engine_->Stats().buried_total, 1u);
  clock_->Advance(5'000);
  EXPECT_TRUE(Take({"t"}).empty());
}

TEST_F(EngineTest, MaxAttemptsBuriesWhenTtrOfLastAttemptRunsOut) {
  JobSpec spec = Spec("t", "a");
  spec.max_attempts = 3;
  spec.ttr_ms = 100;
  MustAdd(spec);
  for (uint32_t attempt = 1; attempt <= 3; ++attempt) {
    EXPECT_EQ(TakeOne("t", "a").attempts, attempt);
    clock_->Advance(100);
    engine_->Tick();
    EXPECT_EQ(StateOf("a"), attempt < 3 ? JobState::kReady : JobState::kBuried) << attempt;
  }
  JobInfo info = MustGet("a");
  EXPECT_NE(info.last_error.find("max_attempts"), std::string::npos) << info.last_error;
  EXPECT_EQ(engine_->Stats().timed_out, 3u);
  EXPECT_TRUE(Take({"t"}).empty());
}

TEST_F(EngineTest, MaxAttemptsOneBuriesAfterFirstDelivery) {
  JobSpec spec = Spec("t", "a");
  spec.max_attempts = 1;
  MustAdd(spec);
  Delivery d = TakeOne("t", "a");
  ASSERT_TRUE(engine_->Release("a", d.receipt, 0, "").ok());
  EXPECT_EQ(StateOf("a"), JobState::kBuried);
}

TEST_F(EngineTest, MaxAttemptsZeroMeansUnlimited) {
  AddReady("t", "a", kDefaultPriority, 10);
  for (int i = 1; i <= 50; ++i) {
    ASSERT_EQ(TakeOne("t", "a").attempts, static_cast<uint32_t>(i));
    clock_->Advance(10);
  }
  EXPECT_EQ(StateOf("a"), JobState::kReady);
}

// --- bury and kick ----------------------------------------------------------------

TEST_F(EngineTest, BuryMovesReservedJobToBuriedWithReason) {
  AddReady("t", "a");
  Delivery d = TakeOne("t", "a");
  ASSERT_TRUE(engine_->Bury("a", d.receipt, "poison").ok());
  JobInfo info = MustGet("a");
  EXPECT_EQ(info.state, JobState::kBuried);
  EXPECT_EQ(info.last_error, "poison");
  EXPECT_TRUE(info.receipt.empty());
  EXPECT_EQ(MustTopic("t").buried, 1u);
  EXPECT_EQ(MustTopic("t").reserved, 0u);
  EXPECT_EQ(engine_->NextDeadlines().mono_ms, kNever);
  clock_->Advance(kDefaultTtrMs * 2);
  EXPECT_TRUE(Take({"t"}).empty());
  EXPECT_EQ(engine_->Finish("a", d.receipt).code(), Code::kStaleReceipt);
  EXPECT_EQ(engine_->Finish("a", "").code(), Code::kNotReserved);
}

TEST_F(EngineTest, BuryOfJobThatIsNotReservedFails) {
  EXPECT_EQ(engine_->Bury("nope", "", "").code(), Code::kNotFound);
  AddReady("t", "a");
  EXPECT_EQ(engine_->Bury("a", "", "").code(), Code::kNotReserved);
  AddDelayed("t", "b", 100);
  EXPECT_EQ(engine_->Bury("b", "", "").code(), Code::kNotReserved);
  EXPECT_EQ(engine_->Bury("b", "000000000000000000000000", "").code(), Code::kStaleReceipt);
  EXPECT_EQ(StateOf("a"), JobState::kReady);
  EXPECT_EQ(StateOf("b"), JobState::kDelayed);
}

TEST_F(EngineTest, KickMakesBuriedJobReady) {
  AddReady("t", "a");
  ASSERT_TRUE(engine_->Bury("a", TakeOne("t", "a").receipt, "").ok());
  ASSERT_TRUE(engine_->Kick("a").ok());
  EXPECT_EQ(StateOf("a"), JobState::kReady);
  EXPECT_EQ(engine_->Stats().kicked, 1u);
  EXPECT_EQ(TakeOne("t", "a").attempts, 2u);
}

TEST_F(EngineTest, KickMakesDelayedJobReadyNow) {
  AddDelayed("t", "a", 60'000);
  clock_->Advance(10);
  ASSERT_TRUE(engine_->Kick("a").ok());
  JobInfo info = MustGet("a");
  EXPECT_EQ(info.state, JobState::kReady);
  EXPECT_EQ(info.run_at_ms, kStart + 10);
  EXPECT_EQ(engine_->NextDeadlines().wall_ms, kNever);
  TakeOne("t", "a");
}

TEST_F(EngineTest, KickOfReadyOrReservedJobIsInvalidArgument) {
  EXPECT_EQ(engine_->Kick("nope").code(), Code::kNotFound);
  AddReady("t", "a");
  EXPECT_EQ(engine_->Kick("a").code(), Code::kInvalidArgument);
  EXPECT_EQ(StateOf("a"), JobState::kReady);
  Delivery d = TakeOne("t", "a");
  EXPECT_EQ(engine_->Kick("a").code(), Code::kInvalidArgument);
  EXPECT_EQ(StateOf("a"), JobState::kReserved);
  EXPECT_TRUE(engine_->Finish("a", d.receipt).ok());
  EXPECT_EQ(engine_->Stats().kicked, 0u);
}

TEST_F(EngineTest, KickTopicKicksOldestFirstAndReturnsCount) {
  for (const char* id : {"j1", "j2", "j3"}) AddReady("t", id);
  Deliveries ds = Take({"t"}, 3);
  ASSERT_EQ(ds.size(), 3u);
  for (const Delivery& d : ds) ASSERT_TRUE(engine_->Bury(d.id, d.receipt, "").ok());
  Result<uint64_t> kicked = engine_->KickTopic("t", 2);
  ASSERT_TRUE(kicked.ok());
  EXPECT_EQ(*kicked, 2u);
  EXPECT_EQ(StateOf("j1"), JobState::kReady);
  EXPECT_EQ(StateOf("j2"), JobState::kReady);
  EXPECT_EQ(StateOf("j3"), JobState::kBuried);
  EXPECT_EQ(engine_->KickTopic("t", 10).value(), 1u);
  EXPECT_EQ(StateOf("j3"), JobState::kReady);
  EXPECT_EQ(engine_->KickTopic("t", 10).value(), 0u);
  EXPECT_EQ(engine_->Stats().kicked, 3u);
}

TEST_F(EngineTest, KickedBuriedJobKeepsItsPlaceInLine) {
  // A buried job keeps its run_at, so once kicked it goes ahead of equal
  // jobs that fell due after it (a kicked delayed job, by contrast, is due now).
  AddReady("t", "old1");
  AddReady("t", "old2");
  Deliveries ds = Take({"t"}, 2);
  ASSERT_EQ(ds.size(), 2u);
  ASSERT_TRUE(engine_->Bury("old1", ds[0].receipt, "").ok());
  ASSERT_TRUE(engine_->Bury("old2", ds[1].receipt, "").ok());
  clock_->Advance(100);
  AddReady("t", "new");
  clock_->Advance(100);
  ASSERT_TRUE(engine_->Kick("old2").ok());
  ASSERT_EQ(engine_->KickTopic("t", 1).value(), 1u);
  EXPECT_EQ(MustGet("old1").run_at_ms, kStart);
  EXPECT_EQ(IdsOf(Take({"t"}, 3)), (std::vector<std::string>{"old1", "old2", "new"}));
}

TEST_F(EngineTest, KickTopicTouchesOnlyThatTopicsBuriedJobs) {
  AddReady("t", "a");
  AddReady("u", "b");
  AddReady("t", "c");
  ASSERT_TRUE(engine_->Bury("a", TakeOne("t", "a").receipt, "").ok());
  ASSERT_TRUE(engine_->Bury("b", TakeOne("u", "b").receipt, "").ok());
  EXPECT_EQ(engine_->KickTopic("t", 0).value(), 0u);
  EXPECT_EQ(engine_->KickTopic("t", 5).value(), 1u);
  EXPECT_EQ(StateOf("b"), JobState::kBuried);
  EXPECT_EQ(StateOf("c"), JobState::kReady);
  EXPECT_EQ(engine_->KickTopic("unknown.topic", 5).value(), 0u);
  EXPECT_EQ(engine_->KickTopic("bad topic", 5).status().code(), Code::kInvalidArgument);
}

// --- delete -----------------------------------------------------------------------

TEST_F(EngineTest, DeleteRemovesJobInEveryState) {
  AddDelayed("t", "delayed", 1'000);
  AddReady("t", "ready");
  AddReady("r", "reserved");
  Delivery d = TakeOne("r", "reserved");
  AddReady("b", "buried");
  ASSERT_TRUE(engine_->Bury("buried", TakeOne("b", "buried").receipt, "x").ok());
  for (const char* id : {"delayed", "ready", "reserved", "buried"}) {
    EXPECT_TRUE(engine_->Delete(id).ok()) << id;
    EXPECT_EQ(engine_->Get(id).status().code(), Code::kNotFound) << id;
    EXPECT_EQ(engine_->Delete(id).code(), Code::kNotFound) << id;
  }
  EXPECT_EQ(engine_->job_count(), 0u);
  EXPECT_TRUE(engine_->Topics().empty());
  EXPECT_EQ(engine_->Stats().deleted, 4u);
  EXPECT_EQ(engine_->NextDeadlines().wall_ms, kNever);
  EXPECT_EQ(engine_->NextDeadlines().mono_ms, kNever);
  EXPECT_EQ(engine_->Finish("reserved", d.receipt).code(), Code::kNotFound);
  clock_->Advance(kDefaultTtrMs + 1'000);
  EXPECT_TRUE(Take({"t", "r", "b"}, 10).empty());
}

TEST_F(EngineTest, DeleteOfOneDelayedJobKeepsTheOthersOnTime) {
  for (int i = 1; i <= 30; ++i) AddDelayed("t", Name("j", i), i * 10);
  ASSERT_TRUE(engine_->Delete("j1").ok());
  ASSERT_TRUE(engine_->Delete("j17").ok());
  EXPECT_EQ(engine_->NextDeadlines().wall_ms, kStart + 20);
  for (int i = 1; i <= 30; ++i) {
    clock_->Advance(10);
    Deliveries ds = Take({"t"}, 5);
    if (i == 1 || i == 17) {
      EXPECT_TRUE(ds.empty());
    } else {
      EXPECT_EQ(IdsOf(ds), std::vector<std::string>{Name("j", i)});
    }
  }
}

// --- get and peek -----------------------------------------------------------------

TEST_F(EngineTest, GetReportsAllFields) {
  JobSpec spec = Spec("t", "a", "the body");
  spec.delay_ms = 1'000;
  spec.priority = 3;
  spec.ttr_ms = 2'000;
  spec.max_attempts = 4;
  MustAdd(spec);
  JobInfo info = MustGet("a");
  EXPECT_EQ(info.id, "a");
  EXPECT_EQ(info.topic, "t");
  EXPECT_EQ(info.state, JobState::kDelayed);
  EXPECT_EQ(info.body, "the body");
  EXPECT_EQ(info.priority, 3u);
  EXPECT_EQ(info.ttr_ms, 2'000u);
  EXPECT_EQ(info.max_attempts, 4u);
  EXPECT_EQ(info.attempts, 0u);
  EXPECT_EQ(info.created_at_ms, kStart);
  EXPECT_EQ(info.run_at_ms, kStart + 1'000);
  EXPECT_EQ(info.reserved_until_ms, 0);
  EXPECT_TRUE(info.receipt.empty());
  EXPECT_TRUE(info.last_error.empty());

  clock_->Advance(1'500);
  Delivery d = TakeOne("t", "a");
  clock_->Advance(300);
  info = MustGet("a");
  EXPECT_EQ(info.state, JobState::kReserved);
  EXPECT_EQ(info.created_at_ms, kStart);
  EXPECT_EQ(info.run_at_ms, kStart + 1'000);
  EXPECT_EQ(info.reserved_until_ms, kStart + 1'500 + 2'000);
  EXPECT_EQ(info.receipt, d.receipt);
  EXPECT_EQ(info.attempts, 1u);

  ASSERT_TRUE(engine_->Release("a", d.receipt, 0, "").ok());
  info = MustGet("a");
  EXPECT_EQ(info.reserved_until_ms, 0);
  EXPECT_TRUE(info.receipt.empty());
}

TEST_F(EngineTest, GetOfUnknownJobIsNotFound) {
  Result<JobInfo> r = engine_->Get("nope");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_NE(r.status().message().find("nope"), std::string::npos);
}

TEST_F(EngineTest, PeekReadyShowsNextToBeReservedWithoutReservingIt) {
  AddReady("t", "low", 10);
  AddReady("t", "high", 1);
  Result<JobInfo> r = engine_->Peek("t", JobState::kReady);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->id, "high");
  EXPECT_EQ(r->state, JobState::kReady);
  EXPECT_EQ(StateOf("high"), JobState::kReady);
  TakeOne("t", "high");
}

TEST_F(EngineTest, PeekDelayedShowsNextToFallDue) {
  AddDelayed("t", "later", 2'000, 0);
  AddDelayed("t", "sooner", 1'000, 100);
  Result<JobInfo> r = engine_->Peek("t", JobState::kDelayed);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->id, "sooner");
  EXPECT_EQ(r->run_at_ms, kStart + 1'000);
}

TEST_F(EngineTest, PeekBuriedShowsOldest) {
  AddReady("t", "old");
  AddReady("t", "new");
  Deliveries ds = Take({"t"}, 2);
  ASSERT_TRUE(engine_->Bury("new", ds[1].receipt, "").ok());
  ASSERT_TRUE(engine_->Bury("old", ds[0].receipt, "").ok());
  Result<JobInfo> r = engine_->Peek("t", JobState::kBuried);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->id, "old");
  EXPECT_EQ(r->state, JobState::kBuried);
}

TEST_F(EngineTest, PeekErrors) {
  AddReady("t", "a");
  TakeOne("t", "a");
  EXPECT_EQ(engine_->Peek("t", JobState::kReserved).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(engine_->Peek("t", JobState::kReady).status().code(), Code::kNotFound);
  EXPECT_EQ(engine_->Peek("t", JobState::kDelayed).status().code(), Code::kNotFound);
  EXPECT_EQ(engine_->Peek("t", JobState::kBuried).status().code(), Code::kNotFound);
  EXPECT_EQ(engine_->Peek("never.seen", JobState::kReady).status().code(), Code::kNotFound);
  EXPECT_EQ(engine_->Peek("bad topic", JobState::kReady).status().code(), Code::kInvalidArgument);
}

// --- pause and resume ---------------------------------------------------------------

TEST_F(EngineTest, PauseBlocksReserveUntilResume) {
  AddReady("t", "a");
  ASSERT_TRUE(engine_->Pause("t", 0).ok());
  EXPECT_TRUE(Take({"t"}).empty());
  EXPECT_EQ(StateOf("a"), JobState::kReady);
  TopicInfo info = MustTopic("t");
  EXPECT_TRUE(info.paused);
  EXPECT_EQ(info.paused_for_ms, -1);
  clock_->Advance(24LL * 3600 * 1000);
  EXPECT_TRUE(Take({"t"}).empty());
  ASSERT_TRUE(engine_->Resume("t").ok());
  EXPECT_FALSE(MustTopic("t").paused);
  TakeOne("t", "a");
}

TEST_F(EngineTest, TimedPauseEndsByItself) {
  AddReady("t", "a");
  ASSERT_TRUE(engine_->Pause("t", 1'000).ok());
  EXPECT_EQ(engine_->NextDeadlines().mono_ms, 1'000);
  clock_->Advance(999);
  EXPECT_TRUE(Take({"t"}).empty());
  TopicInfo info = MustTopic("t");
  EXPECT_TRUE(info.paused);
  EXPECT_EQ(info.paused_for_ms, 1);
  clock_->Advance(1);
  TakeOne("t", "a");
  EXPECT_FALSE(MustTopic("t").paused);
}

TEST_F(EngineTest, PauseOfOneTopicDoesNotBlockOthersInTheSameReserve) {
  AddReady("t", "paused-job", 0);
  AddReady("u", "free-job", 100);
  ASSERT_TRUE(engine_->Pause("t", 0).ok());
  EXPECT_EQ(IdsOf(Take({"t", "u"}, 10)), std::vector<std::string>{"free-job"});
}

TEST_F(EngineTest, JobsKeepFallingDueWhilePaused) {
  AddDelayed("t", "a", 100);
  ASSERT_TRUE(engine_->Pause("t", 0).ok());
  clock_->Advance(100);
  engine_->Tick();
  EXPECT_EQ(StateOf("a"), JobState::kReady);
  EXPECT_TRUE(Take({"t"}).empty());
}

TEST_F(EngineTest, ResumeServesWaitersAtOnce) {
  AddReady("t", "a");
  ASSERT_TRUE(engine_->Pause("t", 0).ok());
  auto answer = std::make_shared<Answer>();
  EXPECT_NE(Wait({"t"}, 10'000, answer), 0u);
  EXPECT_FALSE(answer->called());
  ASSERT_TRUE(engine_->Resume("t").ok());
  ASSERT_EQ(answer->calls, 1);
  EXPECT_EQ(answer->ids(), std::vector<std::string>{"a"});
  EXPECT_EQ(StateOf("a"), JobState::kReserved);
}

TEST_F(EngineTest, EndOfTimedPauseServesWaitersOnTick) {
  AddReady("t", "a");
  ASSERT_TRUE(engine_->Pause("t", 500).ok());
  auto answer = std::make_shared<Answer>();
  Wait({"t"}, 10'000, answer);
  clock_->Advance(499);
  engine_->Tick();
  EXPECT_FALSE(answer->called());
  clock_->Advance(1);
  engine_->Tick();
  ASSERT_EQ(answer->calls, 1);
  EXPECT_EQ(answer->ids(), std::vector<std::string>{"a"});
}

TEST_F(EngineTest, PauseAndResumeValidateArguments) {
  EXPECT_EQ(engine_->Pause("t", -1).code(), Code::kInvalidArgument);
  EXPECT_EQ(engine_->Pause("bad topic", 10).code(), Code::kInvalidArgument);
  EXPECT_EQ(engine_->Resume("bad topic").code(), Code::kInvalidArgument);
  EXPECT_TRUE(engine_->Resume("never.paused").ok());
  EXPECT_FALSE(MustTopic("t").paused);
}

// --- topics and stats ---------------------------------------------------------------

TEST_F(EngineTest, TopicsListsTopicsWithJobsWaitersOrPauseByName) {
  AddDelayed("zeta", "d", 1'000);
  AddReady("alpha", "r1");
  AddReady("alpha", "r2");
  AddReady("mid", "x");
  ASSERT_TRUE(engine_->Bury("x", TakeOne("mid", "x").receipt, "").ok());
  AddReady("mid", "y");
  TakeOne("mid", "y");
  ASSERT_TRUE(engine_->Pause("paused.only", 0).ok());
  auto answer = std::make_shared<Answer>();
  Wait({"waiting.only"}, 5'000, answer);
  AddReady("gone", "g");
  ASSERT_TRUE(engine_->Delete("g").ok());

  std::vector<TopicInfo> topics = engine_->Topics();
  std::vector<std::string> names;
  for (const TopicInfo& t : topics) names.push_back(t.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"alpha", "mid", "paused.only", "waiting.only", "zeta"}));
  ASSERT_EQ(topics.size(), 5u);
  EXPECT_EQ(topics[0].ready, 2u);
  EXPECT_EQ(topics[1].buried, 1u);
  EXPECT_EQ(topics[1].reserved, 1u);
  EXPECT_TRUE(topics[2].paused);
  EXPECT_EQ(topics[3].waiting, 1u);
  EXPECT_EQ(topics[4].delayed, 1u);
}

TEST_F(EngineTest, TopicOfUnknownValidNameReadsEmpty) {
  Result<TopicInfo> r = engine_->Topic("nobody.home");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->name, "nobody.home");
  EXPECT_EQ(r->delayed + r->ready + r->reserved + r->buried + r->waiting, 0u);
  EXPECT_FALSE(r->paused);
  EXPECT_EQ(engine_->Topic("bad topic").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(engine_->Topic("").status().code(), Code::kInvalidArgument);
}

TEST_F(EngineTest, StatsCountStatesAndLifetimeCounters) {
  AddDelayed("t", "d", 1'000);
  AddReady("t", "r");
  AddReady("u", "x");
  AddReady("u", "y");
  AddReady("u", "z");
  Deliveries ds = Take({"u"}, 3);
  ASSERT_EQ(ds.size(), 3u);
  ASSERT_TRUE(engine_->Finish("x", ds[0].receipt).ok());
  ASSERT_TRUE(engine_->Bury("y", ds[1].receipt, "").ok());
  ASSERT_TRUE(engine_->Release("z", ds[2].receipt, 0, "").ok());
  TakeOne("u", "z");
  JobSpec replace = Spec("t", "r");
  replace.replace = true;
  MustAdd(replace);
  ASSERT_TRUE(engine_->Kick("y").ok());
  AddReady("v", "gone");
  ASSERT_TRUE(engine_->Delete("gone").ok());
  auto answer = std::make_shared<Answer>();
  Wait({"w"}, 1'000, answer);

  QueueStats s = engine_->Stats();
  EXPECT_EQ(s.jobs, 4u);  // d, r, y, z
  EXPECT_EQ(s.delayed, 1u);
  EXPECT_EQ(s.ready, 2u);  // r, y
  EXPECT_EQ(s.reserved, 1u);
  EXPECT_EQ(s.buried, 0u);
  EXPECT_EQ(s.topics, 3u);  // t, u, w (waiting)
  EXPECT_EQ(s.waiting, 1u);
  EXPECT_EQ(s.added, 7u);
  EXPECT_EQ(s.replaced, 1u);
  EXPECT_EQ(s.reserves, 4u);
  EXPECT_EQ(s.finished, 1u);
  EXPECT_EQ(s.deleted, 1u);
  EXPECT_EQ(s.released, 1u);
  EXPECT_EQ(s.buried_total, 1u);
  EXPECT_EQ(s.kicked, 1u);
  EXPECT_EQ(s.timed_out, 0u);
  EXPECT_EQ(s.jobs, engine_->job_count());
}

// --- waiting reserves ---------------------------------------------------------------

TEST_F(EngineTest, ReserveWithWaitRegistersWaiterWhenNothingIsReady) {
  AddDelayed("t", "later", 1'000);
  auto answer = std::make_shared<Answer>();
  uint64_t waiter = Wait({"t"}, 5'000, answer);
  EXPECT_NE(waiter, 0u);
  EXPECT_FALSE(answer->called());
  EXPECT_EQ(MustTopic("t").waiting, 1u);
  EXPECT_EQ(engine_->Stats().waiting, 1u);
}

TEST_F(EngineTest, ReserveWithWaitAnswersInsideTheCallWhenJobIsReady) {
  AddReady("t", "a");
  auto answer = std::make_shared<Answer>();
  EXPECT_EQ(Wait({"t"}, 5'000, answer), 0u);
  ASSERT_EQ(answer->calls, 1);
  EXPECT_EQ(answer->ids(), std::vector<std::string>{"a"});
  EXPECT_EQ(engine_->Stats().waiting, 0u);
}

TEST_F(EngineTest, JobAddedWhileConsumerWaitsIsHandedOverInsideAdd) {
  auto answer = std::make_shared<Answer>();
  Wait({"t"}, 5'000, answer);
  clock_->Advance(100);
  AddReady("t", "a");
  ASSERT_EQ(answer->calls, 1);
  ASSERT_TRUE(answer->result->ok());
  const Delivery& d = (**answer->result)[0];
  EXPECT_EQ(d.id, "a");
  EXPECT_EQ(d.attempts, 1u);
  EXPECT_EQ(MustGet("a").receipt, d.receipt);
  EXPECT_EQ(StateOf("a"), JobState::kReserved);
  EXPECT_EQ(MustTopic("t").waiting, 0u);
}

TEST_F(EngineTest, DelayedJobAddedWhileConsumerWaitsIsNotHandedOverEarly) {
  auto answer = std::make_shared<Answer>();
  Wait({"t"}, 5'000, answer);
  AddDelayed("t", "a", 100);
  EXPECT_FALSE(answer->called());
}

TEST_F(EngineTest, JobDueWhileConsumerWaitsIsDeliveredAtOnce) {
  AddDelayed("t", "a", 500);
  auto answer = std::make_shared<Answer>();
  Wait({"t"}, 10'000, answer);
  EXPECT_EQ(engine_->MsUntilNextDeadline(), 500);
  clock_->Advance(499);
  engine_->Tick();
  EXPECT_FALSE(answer->called());
  clock_->Advance(1);
  engine_->Tick();
  ASSERT_EQ(answer->calls, 1);
  EXPECT_EQ(answer->ids(), std::vector<std::string>{"a"});
}

TEST_F(EngineTest, OldestWaiterIsServedFirst) {
  auto first = std::make_shared<Answer>();
  auto second = std::make_shared<Answer>();
  auto third = std::make_shared<Answer>();
  Wait({"t"}, 5'000, first);
  Wait({"t"}, 5'000, second);
  Wait({"t"}, 5'000, third);
  AddReady("t", "a");
  EXPECT_EQ(first->ids(), std::vector<std::string>{"a"});
  EXPECT_FALSE(second->called());
  EXPECT_FALSE(third->called());
  AddReady("t", "b");
  EXPECT_EQ(second->ids(), std::vector<std::string>{"b"});
  EXPECT_FALSE(third->called());
  EXPECT_EQ(first->calls, 1);
  EXPECT_EQ(MustTopic("t").waiting, 1u);
}

TEST_F(EngineTest, ABurstForManyWaitersIsServedInSlicesOldestFirst) {
  // 8 waiters of 500 and 4,000 jobs falling due on one tick: a tick serves
  // one slice (about kServeSliceJobs jobs, at least one whole waiter), says
  // more is left, and is due again at once; the next ticks serve the rest.
  constexpr int kWaiters = 8;
  constexpr uint32_t kCount = 500;
  static_assert(kCount >= Engine::kServeSliceJobs, "one waiter fills a slice");
  std::vector<std::shared_ptr<Answer>> answers;
  for (int i = 0; i < kWaiters; ++i) {
    answers.push_back(std::make_shared<Answer>());
    Wait({"t"}, 60'000, answers.back(), kCount);
  }
  for (int i = 0; i < kWaiters * static_cast<int>(kCount); ++i) AddDelayed("t", Name("j", i), 100);
  clock_->Advance(100);
  engine_->Tick();
  EXPECT_TRUE(answers[0]->called());
  EXPECT_FALSE(answers[1]->called()) << "one tick served more than a slice";
  EXPECT_TRUE(engine_->ServeLeft());
  EXPECT_EQ(engine_->NextDeadlines().wall_ms, kStart + 100) << "the next slice is due now";
  EXPECT_EQ(engine_->MsUntilNextDeadline(), 0);
  int ticks = 1;
  while (engine_->ServeLeft() && ticks < 100) {
    engine_->Tick();
    ++ticks;
  }
  EXPECT_EQ(ticks, kWaiters);
  std::set<std::string> seen;
  for (int w = 0; w < kWaiters; ++w) {
    std::vector<std::string> ids = answers[static_cast<size_t>(w)]->ids();
    ASSERT_EQ(ids.size(), kCount) << "waiter " << w;
    EXPECT_EQ(ids.front(), Name("j", w * static_cast<int>(kCount))) << "waiter " << w;
    for (const std::string& id : ids) EXPECT_TRUE(seen.insert(id).second) << id;
  }
  EXPECT_EQ(MustTopic("t").waiting, 0u);
  EXPECT_EQ(MustTopic("t").ready, 0u);
}

TEST_F(EngineTest, AWaitEndingWhileItsBurstIsSlicedGetsJobsNotAnEmptyAnswer) {
  // Three waiters whose waits end on the very millisecond 1,500 jobs fall
  // due: the first tick serves one slice; the others' deadlines have passed,
  // but jobs are ready for them, so they are served, not answered empty.
  std::vector<std::shared_ptr<Answer>> answers;
  for (int i = 0; i < 3; ++i) {
    answers.push_back(std::make_shared<Answer>());
    Wait({"t"}, 100, answers.back(), 500);
  }
  for (int i = 0; i < 1500; ++i) AddDelayed("t", Name("j", i), 100);
  clock_->Advance(100);
  engine_->Tick();
  EXPECT_TRUE(engine_->ServeLeft());
  EXPECT_FALSE(answers[2]->called());
  // Any call serves the next slice, not only Tick.
  EXPECT_TRUE(engine_->Get("j0").ok());
  engine_->Tick();
  for (const auto& a : answers) EXPECT_EQ(a->ids().size(), 500u);
  EXPECT_FALSE(engine_->ServeLeft());
}

TEST_F(EngineTest, OldestWaiterAcrossTopicListsIsServedFirst) {
  auto multi = std::make_shared<Answer>();
  auto single = std::make_shared<Answer>();
  Wait({"x", "t"}, 5'000, multi);
  Wait({"t"}, 5'000, single);
  AddReady("t", "a");
  EXPECT_EQ(multi->ids(), std::vector<std::string>{"a"});
  EXPECT_FALSE(single->called());
  // multi is gone from x's list too.
  EXPECT_EQ(MustTopic("x").waiting, 0u);
  AddReady("x", "b");
  EXPECT_FALSE(single->called());
  EXPECT_EQ(StateOf("b"), JobState::kReady);
}

TEST_F(EngineTest, OneJobGoesToExactlyOneWaiter) {
  std::vector<std::shared_ptr<Answer>> answers;
  for (int i = 0; i < 5; ++i) {
    answers.push_back(std::make_shared<Answer>());
    Wait({"t"}, 5'000, answers.back(), 3);
  }
  AddDelayed("t", "a", 100);
  clock_->Advance(100);
  engine_->Tick();
  int served = 0;
  for (const auto& a : answers) served += a->calls;
  EXPECT_EQ(served, 1);
  EXPECT_EQ(answers[0]->ids(), std::vector<std::string>{"a"});
  EXPECT_EQ(engine_->Stats().reserves, 1u);
  EXPECT_EQ(MustTopic("t").waiting, 4u);
}

TEST_F(EngineTest, WaiterGetsUpToCountOfJobsReadyAtThatMoment) {
  for (int i = 0; i < 4; ++i) AddDelayed("t", Name("j", i), 100);
  AddDelayed("t", "later", 200);
  auto answer = std::make_shared<Answer>();
  Wait({"t"}, 5'000, answer, 3);
  clock_->Advance(100);
  engine_->Tick();
  EXPECT_EQ(answer->ids(), (std::vector<std::string>{"j0", "j1", "j2"}));
  EXPECT_EQ(StateOf("j3"), JobState::kReady);
}

TEST_F(EngineTest, WaiterForBatchIsAnsweredWithFirstJobWithoutWaitingToFill) {
  auto answer = std::make_shared<Answer>();
  Wait({"t"}, 5'000, answer, 10);
  AddReady("t", "a");
  EXPECT_EQ(answer->ids(), std::vector<std::string>{"a"});
}

TEST_F(EngineTest, WaiterOnSeveralTopicsGetsJobFromAnyOfThem) {
  auto answer = std::make_shared<Answer>();
  Wait({"a", "b", "c"}, 5'000, answer);
  AddReady("other", "o");
  EXPECT_FALSE(answer->called());
  AddReady("c", "from-c");
  EXPECT_EQ(answer->ids(), std::vector<std::string>{"from-c"});
  EXPECT_EQ(MustTopic("a").waiting, 0u);
  EXPECT_EQ(MustTopic("b").waiting, 0u);
}

TEST_F(EngineTest, WaiterTimesOutWithEmptyResult) {
  auto answer = std::make_shared<Answer>();
  uint64_t waiter = Wait({"t"}, 1'000, answer);
  EXPECT_EQ(engine_->NextDeadlines().mono_ms, 1'000);
  clock_->Advance(999);
  engine_->Tick();
  EXPECT_FALSE(answer->called());
  clock_->Advance(1);
  engine_->Tick();
  ASSERT_EQ(answer->calls, 1);
  ASSERT_TRUE(answer->result->ok());
  EXPECT_TRUE((*answer->result)->empty());
  EXPECT_FALSE(engine_->CancelWaiter(waiter));
  EXPECT_EQ(MustTopic("t").waiting, 0u);
  AddReady("t", "a");
  EXPECT_EQ(answer->calls, 1);
  EXPECT_EQ(StateOf("a"), JobState::kReady);
}

TEST_F(EngineTest, WaitIsMeasuredOnTheMonotonicClock) {
  auto answer = std::make_shared<Answer>();
  Wait({"t"}, 1'000, answer);
  clock_->StepWall(3'600'000);
  engine_->Tick();
  EXPECT_FALSE(answer->called());
  clock_->Advance(1'000);
  engine_->Tick();
  EXPECT_EQ(answer->calls, 1);
}

TEST_F(EngineTest, CancelledWaiterIsNeverAnswered) {
  auto answer = std::make_shared<Answer>();
  uint64_t waiter = Wait({"t"}, 1'000, answer);
  ASSERT_NE(waiter, 0u);
  EXPECT_TRUE(engine_->CancelWaiter(waiter));
  EXPECT_FALSE(engine_->CancelWaiter(waiter));
  EXPECT_EQ(MustTopic("t").waiting, 0u);
  EXPECT_EQ(engine_->NextDeadlines().mono_ms, kNever) << "a cancelled wait still has a deadline";
  EXPECT_EQ(engine_->MsUntilNextDeadline(), -1);
  AddReady("t", "a");
  clock_->Advance(2'000);
  engine_->Tick();
  EXPECT_FALSE(answer->called());
  EXPECT_EQ(StateOf("a"), JobState::kReady);
  EXPECT_EQ(engine_->NextDeadlines().mono_ms, kNever);
}

TEST_F(EngineTest, CancelOfUnknownOrAnsweredWaiterReturnsFalse) {
  EXPECT_FALSE(engine_->CancelWaiter(0));
  EXPECT_FALSE(engine_->CancelWaiter(987654));
  auto answer = std::make_shared<Answer>();
  uint64_t waiter = Wait({"t"}, 1'000, answer);
  AddReady("t", "a");
  ASSERT_TRUE(answer->called());
  EXPECT_FALSE(engine_->CancelWaiter(waiter));
}

TEST_F(EngineTest, FailWaitersAnswersEveryWaiterWithTheStatus) {
  auto a = std::make_shared<Answer>();
  auto b = std::make_shared<Answer>();
  uint64_t wa = Wait({"t"}, 1'000, a);
  Wait({"u", "t"}, 1'000, b);
  engine_->FailWaiters(Unavailable("shutting down"));
  for (const auto& ans : {a, b}) {
    ASSERT_EQ(ans->calls, 1);
    ASSERT_FALSE(ans->result->ok());
    EXPECT_EQ(ans->result->status().code(), Code::kUnavailable);
  }
  EXPECT_FALSE(engine_->CancelWaiter(wa));
  EXPECT_EQ(engine_->NextDeadlines().mono_ms, kNever) << "failed waits still have deadlines";
  EXPECT_EQ(engine_->Stats().waiting, 0u);
  EXPECT_EQ(MustTopic("t").waiting, 0u);
  AddReady("t", "x");
  clock_->Advance(5'000);
  engine_->Tick();
  EXPECT_EQ(a->calls, 1);
  EXPECT_EQ(b->calls, 1);
  EXPECT_EQ(StateOf("x"), JobState::kReady);
}

TEST_F(EngineTest, TtrExpiryHandsJobToWaiter) {
  AddReady("t", "a", kDefaultPriority, 1'000);
  Delivery first = TakeOne("t", "a");
  auto answer = std::make_shared<Answer>();
  Wait({"t"}, 5'000, answer);
  clock_->Advance(1'000);
  engine_->Tick();
  ASSERT_EQ(answer->calls, 1);
  ASSERT_EQ(answer->ids(), std::vector<std::string>{"a"});
  EXPECT_EQ((**answer->result)[0].attempts, 2u);
  EXPECT_EQ(engine_->Finish("a", first.receipt).code(), Code::kStaleReceipt);
}

TEST_F(EngineTest, ReleaseAndKickHandJobToWaiter) {
  AddReady("t", "a");
  Delivery d = TakeOne("t", "a");
  auto w1 = std::make_shared<Answer>();
  Wait({"t"}, 5'000, w1);
  ASSERT_TRUE(engine_->Release("a", d.receipt, 0, "").ok());
  ASSERT_EQ(w1->ids(), std::vector<std::string>{"a"});
  ASSERT_TRUE(engine_->Bury("a", (**w1->result)[0].receipt, "").ok());
  auto w2 = std::make_shared<Answer>();
  Wait({"t"}, 5'000, w2);
  ASSERT_TRUE(engine_->Kick("a").ok());
  ASSERT_EQ(w2->ids(), std::vector<std::string>{"a"});
  ASSERT_TRUE(engine_->Bury("a", (**w2->result)[0].receipt, "").ok());
  auto w3 = std::make_shared<Answer>();
  Wait({"t"}, 5'000, w3);
  ASSERT_EQ(engine_->KickTopic("t", 1).value(), 1u);
  EXPECT_EQ(w3->ids(), std::vector<std::string>{"a"});
}

TEST_F(EngineTest, WaiterGetsJobThatFellDueDuringItsWaitEvenIfTickIsLate) {
  // The engine promises that results do not depend on how punctual the
  // owner's timer was: a job due at +500 ms falls due during a 1000 ms wait,
  // so the waiter must get it even if the owner ticks only at +2000 ms.
  AddDelayed("t", "a", 500);
  auto answer = std::make_shared<Answer>();
  Wait({"t"}, 1'000, answer);
  clock_->Advance(2'000);
  engine_->Tick();
  ASSERT_EQ(answer->calls, 1);
  EXPECT_EQ(answer->ids(), std::vector<std::string>{"a"});
  EXPECT_EQ(StateOf("a"), JobState::kReserved);
}

TEST_F(EngineTest, OldestWaiterFirstWhenJobsOfTwoTopicsFallDueTogether) {
  // older waits on {a}; younger waits on {a, b}. A job of each topic falls
  // due in the same tick; a's is better. The older waiter must get a's job
  // and the younger b's. Both orders of adding are tried.
  for (bool b_first : {false, true}) {
    SCOPED_TRACE(b_first ? "b added first" : "a added first");
    Make(Limits{}, size_t{64} << 20);
    auto older = std::make_shared<Answer>();
    auto younger = std::make_shared<Answer>();
    Wait({"a"}, 10'000, older);
    Wait({"a", "b"}, 10'000, younger);
    if (b_first) AddDelayed("b", "b-job", 100, 5);
    AddDelayed("a", "a-job", 100, 1);
    if (!b_first) AddDelayed("b", "b-job", 100, 5);
    clock_->Advance(100);
    engine_->Tick();
    EXPECT_EQ(older->ids(), std::vector<std::string>{"a-job"});
    EXPECT_EQ(younger->ids(), std::vector<std::string>{"b-job"});
  }
}

// --- deadlines -----------------------------------------------------------------------

TEST_F(EngineTest, NothingScheduledMeansNoDeadline) {
  AddReady("t", "a");
  Engine::Deadlines d = engine_->NextDeadlines();
  EXPECT_EQ(d.wall_ms, kNever);
  EXPECT_EQ(d.mono_ms, kNever);
  EXPECT_EQ(engine_->MsUntilNextDeadline(), -1);
}

TEST_F(EngineTest, NextDeadlinesReportEarliestDueTimeAcrossTopics) {
  AddDelayed("t", "a", 5'000);
  AddDelayed("u", "b", 2'000);
  AddDelayed("u", "c", 3'000);
  AddDelayed("v", "d", 9'000);
  EXPECT_EQ(engine_->NextDeadlines().wall_ms, kStart + 2'000);
  EXPECT_EQ(engine_->MsUntilNextDeadline(), 2'000);
  clock_->Advance(500);
  EXPECT_EQ(engine_->MsUntilNextDeadline(), 1'500);
  clock_->Advance(1'500);
  engine_->Tick();
  EXPECT_EQ(engine_->NextDeadlines().wall_ms, kStart + 3'000);
  ASSERT_TRUE(engine_->Delete("c").ok());
  EXPECT_EQ(engine_->NextDeadlines().wall_ms, kStart + 5'000);
  ASSERT_TRUE(engine_->Kick("a").ok());
  EXPECT_EQ(engine_->NextDeadlines().wall_ms, kStart + 9'000);
}

TEST_F(EngineTest, NextDeadlinesReportEarliestTtrDeadline) {
  AddReady("t", "long", 1, 60'000);
  AddReady("t", "short", 2, 1'500);
  Take({"t"}, 2);
  Engine::Deadlines d = engine_->NextDeadlines();
  EXPECT_EQ(d.wall_ms, kNever);
  EXPECT_EQ(d.mono_ms, 1'500);
  EXPECT_EQ(engine_->MsUntilNextDeadline(), 1'500);
  ASSERT_TRUE(engine_->Finish("short", "").ok());
  EXPECT_EQ(engine_->NextDeadlines().mono_ms, 60'000);
}

TEST_F(EngineTest, MsUntilNextDeadlineTakesTheEarlierOfBothClocks) {
  AddDelayed("t", "a", 3'000);
  AddReady("u", "b", kDefaultPriority, 1'000);
  TakeOne("u", "b");
  EXPECT_EQ(engine_->MsUntilNextDeadline(), 1'000);
  ASSERT_TRUE(engine_->Finish("b", "").ok());
  EXPECT_EQ(engine_->MsUntilNextDeadline(), 3'000);
}

TEST_F(EngineTest, MsUntilNextDeadlineIsZeroWhenOverdue) {
  AddDelayed("t", "a", 100);
  clock_->Advance(5'000);
  EXPECT_EQ(engine_->MsUntilNextDeadline(), 0);
  engine_->Tick();
  EXPECT_EQ(engine_->MsUntilNextDeadline(), -1);
}

TEST_F(EngineTest, WaiterAndPauseDeadlinesAreReported) {
  auto answer = std::make_shared<Answer>();
  Wait({"t"}, 700, answer);
  ASSERT_TRUE(engine_->Pause("u", 400).ok());
  EXPECT_EQ(engine_->NextDeadlines().mono_ms, 400);
  EXPECT_EQ(engine_->MsUntilNextDeadline(), 400);
  clock_->Advance(400);
  engine_->Tick();
  EXPECT_EQ(engine_->NextDeadlines().mono_ms, 700);
  EXPECT_EQ(engine_->MsUntilNextDeadline(), 300);
}

// --- wall clock steps ----------------------------------------------------------------

TEST_F(EngineTest, WallClockSteppedForwardMakesDelayedJobsDue) {
  AddDelayed("t", "a", 3'600'000);
  AddDelayed("t", "b", 7'200'000);
  clock_->StepWall(3'600'000);
  EXPECT_EQ(TakeOne("t").id, "a");
  EXPECT_EQ(StateOf("b"), JobState::kDelayed);
  EXPECT_EQ(clock_->MonotonicMs(), 0);
}

TEST_F(EngineTest, WallClockSteppedForwardDoesNotExpireReservations) {
  AddReady("t", "a", kDefaultPriority, 1'000);
  Delivery d = TakeOne("t", "a");
  clock_->StepWall(3'600'000);
  engine_->Tick();
  EXPECT_EQ(StateOf("a"), JobState::kReserved);
  EXPECT_TRUE(engine_->Finish("a", d.receipt).ok());
}

TEST_F(EngineTest, WallClockSteppedBackDoesNotStretchReservations) {
  AddReady("t", "a", kDefaultPriority, 1'000);
  Delivery d = TakeOne("t", "a");
  clock_->StepWall(-3'600'000);
  engine_->Tick();
  EXPECT_EQ(StateOf("a"), JobState::kReserved);
  clock_->Advance(999);
  engine_->Tick();
  EXPECT_EQ(StateOf("a"), JobState::kReserved);
  EXPECT_EQ(engine_->Touch("a", d.receipt).code(), Code::kOk);
  clock_->Advance(1'000);
  engine_->Tick();
  EXPECT_NE(StateOf("a"), JobState::kReserved);
  EXPECT_EQ(engine_->Finish("a", d.receipt).code(), Code::kStaleReceipt);
  EXPECT_EQ(engine_->Stats().timed_out, 1u);
}

TEST_F(EngineTest, JobWhoseTtrRunsOutAfterWallClockStepBackIsReadyAtOnce) {
  // The job was due and handed out; its worker died. SPEC §4: TTR expiry
  // returns it to ready, and a wall-clock step must not hold it back.
  AddReady("t", "a", kDefaultPriority, 1'000);
  TakeOne("t", "a");
  clock_->StepWall(-3'600'000);
  clock_->Advance(1'000);
  engine_->Tick();
  EXPECT_EQ(StateOf("a"), JobState::kReady);
  TakeOne("t", "a");
}

TEST_F(EngineTest, WallClockSteppedBackKeepsDelayedJobsWaitingForRunAt) {
  AddDelayed("t", "a", 1'000);
  clock_->StepWall(-10'000);
  clock_->Advance(1'000);
  EXPECT_TRUE(Take({"t"}).empty());
  EXPECT_EQ(StateOf("a"), JobState::kDelayed);
  clock_->Advance(10'000);
  TakeOne("t", "a");
}

TEST_F(EngineTest, WallClockSteppedBackKeepsReadyJobsReady) {
  AddReady("t", "a");
  AddDelayed("t", "b", 10);
  clock_->Advance(10);
  engine_->Tick();
  clock_->StepWall(-60'000);
  EXPECT_EQ(IdsOf(Take({"t"}, 5)), (std::vector<std::string>{"a", "b"}));
}

// --- bodies ------------------------------------------------------------------------------

std::string PatternBody(size_t n, unsigned seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + seed) & 0xff);
  return s;
}

TEST_F(EngineTest, BodiesOfEverySizeAroundTheRecordLimitRoundTrip) {
  // A record is 48 + id + body bytes; above 4096 the body moves out of line.
  const std::string id = "j";
  std::vector<size_t> sizes = {
      0, 1, 100, 4000, 4046, 4047, 4048, 4096, 4097, 10'000, kDefaultMaxBodyBytes};
  for (size_t n : sizes) {
    SCOPED_TRACE(n);
    std::string body = PatternBody(n, static_cast<unsigned>(n));
    MustAdd(Spec("t", id, body));
    EXPECT_EQ(MustGet(id).body, body);
    EXPECT_EQ(engine_->Peek("t", JobState::kReady)->body, body);
    Delivery d = TakeOne("t", id);
    EXPECT_EQ(d.body, body);
    ASSERT_TRUE(engine_->Finish(id, d.receipt).ok());
  }
}

TEST_F(EngineTest, LargeBodiesSurviveReplaceReleaseAndDelete) {
  std::string big1 = PatternBody(100'000, 1);
  std::string big2 = PatternBody(5'000, 2);
  std::string small = "tiny";
  MustAdd(Spec("t", "a", big1));
  MustAdd(Spec("u", "b", big2));
  JobSpec r = Spec("t", "a", small);
  r.replace = true;
  MustAdd(r);
  EXPECT_EQ(MustGet("a").body, small);
  r = Spec("t", "a", big2);
  r.replace = true;
  MustAdd(r);
  EXPECT_EQ(MustGet("a").body, big2);
  Delivery d = TakeOne("t", "a");
  ASSERT_TRUE(engine_->Release("a", d.receipt, 0, "").ok());
  EXPECT_EQ(TakeOne("t", "a").body, big2);
  ASSERT_TRUE(engine_->Delete("a").ok());
  EXPECT_EQ(MustGet("b").body, big2);
  // Many out-of-line bodies left live: the engine frees them on destruction.
  for (int i = 0; i < 50; ++i) MustAdd(Spec("t", Name("big", i), big1));
  EXPECT_EQ(MustGet("big49").body, big1);
}

TEST_F(EngineTest, BinaryBodyWithNulBytesRoundTrips) {
  std::string body("\0a\0\0b\xff\x01\0", 8);
  MustAdd(Spec("t", "a", body));
  EXPECT_EQ(MustGet("a").body, body);
  EXPECT_EQ(MustGet("a").body.size(), 8u);
  EXPECT_EQ(TakeOne("t", "a").body, body);
}

TEST_F(EngineTest, LongestIdRoundTrips) {
  std::string id(256, 'x');
  id[0] = ' ';
  id[255] = '~';
  MustAdd(Spec("t", id, PatternBody(3'800, 9)));
  EXPECT_EQ(MustGet(id).id, id);
  EXPECT_EQ(TakeOne("t", id).id, id);
  EXPECT_TRUE(engine_->Finish(id, "").ok());
}

TEST_F(EngineTest, ManyJobsKeepTheirOwnBodiesAndIds) {
  for (int i = 0; i < 2'000; ++i) {
    MustAdd(Spec("t", Name("job-", i), PatternBody(i % 300, i)));
  }
  for (int i = 0; i < 2'000; i += 2) ASSERT_TRUE(engine_->Delete(Name("job-", i)).ok());
  for (int i = 2'000; i < 3'000; ++i) {
    MustAdd(Spec("t", Name("job-", i), PatternBody(i % 300, i)));
  }
  for (int i = 1; i < 3'000; i += (i < 2'000 ? 2 : 1)) {
    JobInfo info = MustGet(Name("job-", i));
    ASSERT_EQ(info.body, PatternBody(i % 300, i)) << i;
  }
  EXPECT_EQ(engine_->job_count(), 2'000u);
}

// --- memory exhaustion -----------------------------------------------------------------

// A 16-page arena with one record in each of 16 size classes: ids "j00".."j15"
// with bodies of 8*i bytes make records of 7..22 units. A record of any other
// size class then finds no free page.
class FullArenaTest : public EngineTest {
 protected:
  void FillSixteenSizeClasses() {
    Make(Limits{}, 16 * JobArena::kPageBytes);
    for (int i = 0; i < 16; ++i) {
      char id[4];
      std::snprintf(id, sizeof id, "j%02d", i);
      MustAdd(Spec("t", id, PatternBody(8 * i, i)));
    }
  }
};

TEST_F(FullArenaTest, AddOfNewSizeClassIsUnavailableAndAddsNothing) {
  FillSixteenSizeClasses();
  Result<AddResult> r = engine_->Add(Spec("t", "k00", PatternBody(8 * 20, 1)));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_EQ(engine_->job_count(), 16u);
  EXPECT_EQ(engine_->Get("k00").status().code(), Code::kNotFound);
  EXPECT_EQ(engine_->Stats().added, 16u);
  // A record of a class that has a page still fits.
  EXPECT_TRUE(engine_->Add(Spec("t", "k01", "")).ok());
}

TEST_F(FullArenaTest, ReplaceThatCannotGetMemoryKeepsTheOldJob) {
  FillSixteenSizeClasses();
  JobSpec spec = Spec("t", "j00", PatternBody(8 * 20, 1));
  spec.replace = true;
  Result<AddResult> r = engine_->Add(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  // SPEC §5: an error never leaves a changed job.
  Result<JobInfo> old = engine_->Get("j00");
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->body, "");
  EXPECT_EQ(engine_->job_count(), 16u);
  EXPECT_EQ(engine_->Stats().replaced, 0u);
}

// --- byte budget of a reserve (ReserveRequest::max_bytes) ----------------------

TEST_F(EngineTest, ReserveStopsBeforeTheJobThatWouldExceedMaxBytes) {
  for (int i = 0; i < 5; ++i) MustAdd(Spec("t", Name("j", i), std::string(100, 'x')));
  ReserveRequest req;
  req.topics = {"t"};
  req.count = 5;
  req.max_bytes = 250;  // two bodies fit, a third would make 300
  std::optional<Result<Deliveries>> got;
  engine_->Reserve(req, [&](Result<Deliveries> r) { got.emplace(std::move(r)); });
  ASSERT_TRUE(got && got->ok());
  EXPECT_EQ(IdsOf(**got), (std::vector<std::string>{"j0", "j1"}));
  // The rest are untouched: ready, in line, never attempted.
  EXPECT_EQ(MustTopic("t").ready, 3u);
  EXPECT_EQ(MustGet("j2").attempts, 0u);
  EXPECT_EQ(IdsOf(Take({"t"}, 5)), (std::vector<std::string>{"j2", "j3", "j4"}));
}

TEST_F(EngineTest, ReserveHandsOutOneJobLargerThanMaxBytes) {
  MustAdd(Spec("t", "big", std::string(1000, 'x')));
  MustAdd(Spec("t", "small", "s"));
  ReserveRequest req;
  req.topics = {"t"};
  req.count = 2;
  req.max_bytes = 10;
  std::optional<Result<Deliveries>> got;
  engine_->Reserve(req, [&](Result<Deliveries> r) { got.emplace(std::move(r)); });
  ASSERT_TRUE(got && got->ok());
  EXPECT_EQ(IdsOf(**got), (std::vector<std::string>{"big"}));
  EXPECT_EQ(StateOf("small"), JobState::kReady);
}

TEST_F(EngineTest, WaitingReserveKeepsItsMaxBytesWhenJobsArrive) {
  auto answer = std::make_shared<Answer>();
  ReserveRequest req;
  req.topics = {"t"};
  req.count = 10;
  req.wait_ms = 1'000;
  req.max_bytes = 200;
  ASSERT_NE(engine_->Reserve(req,
                             [answer](Result<Deliveries> r) {
                               ++answer->calls;
                               answer->result.emplace(std::move(r));
                             }),
            0u);
  // Four 100-byte jobs fall due together.
  for (int i = 0; i < 4; ++i) {
    JobSpec spec = Spec("t", Name("j", i), std::string(100, 'x'));
    spec.delay_ms = 500;
    MustAdd(spec);
  }
  clock_->Advance(500);
  engine_->Tick();
  ASSERT_TRUE(answer->called());
  EXPECT_EQ(answer->ids(), (std::vector<std::string>{"j0", "j1"}));
  EXPECT_EQ(MustTopic("t").ready, 2u);
}

// --- unreserve: a delivery that never reached its client -------------------------

TEST_F(EngineTest, UnreserveMakesTheJobReadyInItsPlaceWithoutCountingTheAttempt) {
  JobSpec a = Spec("t", "a");
  a.max_attempts = 1;
  MustAdd(a);
  AddReady("t", "b");
  Delivery d = TakeOne("t", "a");
  ASSERT_EQ(d.attempts, 1u);
  ASSERT_TRUE(engine_->Unreserve("a", d.receipt).ok());
  JobInfo info = MustGet("a");
  EXPECT_EQ(info.state, JobState::kReady);
  EXPECT_EQ(info.attempts, 0u);
  EXPECT_EQ(MustTopic("t").reserved, 0u);
  // Still first in line, and with max_attempts 1 it still has its attempt:
  // a release after the next delivery buries it, not this give-back.
  Delivery again = TakeOne("t", "a");
  EXPECT_EQ(again.attempts, 1u);
  EXPECT_EQ(engine_->Stats().buried, 0u);
  EXPECT_EQ(engine_->Stats().released, 0u);
}

TEST_F(EngineTest, UnreserveWithoutMatchingReceiptChangesNothing) {
  AddReady("t", "a", kDefaultPriority, 100);
  Delivery d = TakeOne("t", "a");
  EXPECT_EQ(engine_->Unreserve("a", "").code(), Code::kInvalidArgument);
  EXPECT_EQ(engine_->Unreserve("a", "000000000000000000000000").code(), Code::kStaleReceipt);
  EXPECT_EQ(engine_->Unreserve("nope", d.receipt).code(), Code::kNotFound);
  EXPECT_EQ(StateOf("a"), JobState::kReserved);
  // Once its TTR ran out and it went out again, the first delivery is stale.
  clock_->Advance(100);
  Delivery d2 = TakeOne("t", "a");
  EXPECT_EQ(engine_->Unreserve("a", d.receipt).code(), Code::kStaleReceipt);
  EXPECT_EQ(MustGet("a").attempts, 2u);
  EXPECT_TRUE(engine_->Unreserve("a", d2.receipt).ok());
  EXPECT_EQ(MustGet("a").attempts, 1u);
}

// A receipt names one delivery: the delivery after a give-back gets a new
// one (the delivery number counts give-backs, attempts do not), the journal
// is told the count, and it goes with the job (a job made later in its
// record's slot starts from none).
TEST_F(EngineTest, UnreserveNeverLetsTheNextDeliveryReuseItsReceipt) {
  AddReady("t", "a");
  Delivery d = TakeOne("t", "a");
  ASSERT_TRUE(engine_->Unreserve("a", d.receipt).ok());
  Delivery again = TakeOne("t", "a");
  EXPECT_EQ(again.attempts, 1u);
  EXPECT_NE(again.receipt, d.receipt);
  EXPECT_EQ(again.receipt.substr(16), "00000002");  // the second delivery
  EXPECT_EQ(engine_->Finish("a", d.receipt).code(), Code::kStaleReceipt);
  EXPECT_EQ(engine_->Unreserve("a", d.receipt).code(), Code::kStaleReceipt);
  ASSERT_TRUE(engine_->Finish("a", again.receipt).ok());
  AddReady("t", "b");
  EXPECT_EQ(TakeOne("t", "b").receipt.substr(16), "00000001");
}

TEST_F(EngineTest, UnreservedJobGoesToAWaitingReserve) {
  AddReady("t", "a");
  Delivery d = TakeOne("t", "a");
  auto answer = std::make_shared<Answer>();
  ASSERT_NE(Wait({"t"}, 1'000, answer), 0u);
  ASSERT_TRUE(engine_->Unreserve("a", d.receipt).ok());
  ASSERT_TRUE(answer->called());
  EXPECT_EQ(answer->ids(), (std::vector<std::string>{"a"}));
  EXPECT_EQ(MustGet("a").attempts, 1u);
}

}  // namespace
}  // namespace delayq::engine
