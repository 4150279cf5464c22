// RedisQueue's own behaviour, beyond the conformance suite: several queues
// ("servers") sharing one Redis, wake-ups across them, Redis stopped and
// restarted, bad options, batching, and the merges across buckets (a large
// reserve, kick_topic past one script call), and the timer's due-time
// bookkeeping (rq::DueTimes, alone). Each test of a queue starts its own
// redis-server (redis_harness.h) and uses the default 16 buckets; waits poll
// with deadlines, nothing sleeps for time to pass.
#include "redis_store/redis_queue.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "delayq/clock.h"
#include "delayq/queue.h"
#include "delayq/schedule.h"
#include "delayq/subscription.h"
#include "queue/open.h"
#include "redis/redis_harness.h"
#include "redis_store/redis_queue_ops.h"

namespace delayq {
namespace {

using redis_harness::ElapsedMs;
using redis_harness::RedisServer;
using redis_harness::RedisServerOptions;
using redis_harness::WaitFor;
using Ms = std::chrono::milliseconds;

std::unique_ptr<RedisServer> StartServer(RedisServerOptions options = {}) {
  auto s = RedisServer::Start(std::move(options));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

QueueOptions RedisOptions(const std::string& url, const std::string& prefix,
                          uint32_t buckets = 16) {
  QueueOptions o;
  o.store = StoreKind::kRedis;
  o.redis_url = url;
  o.redis_prefix = prefix;
  o.redis_buckets = buckets;
  return o;
}

std::unique_ptr<ServingQueue> Open(const QueueOptions& o) {
  auto q = OpenServingQueue(o);
  EXPECT_TRUE(q.ok()) << q.status().ToString();
  return q.ok() ? std::move(q).value() : nullptr;
}

JobSpec Job(std::string topic, std::string id = "", int64_t delay_ms = 0) {
  JobSpec s;
  s.topic = std::move(topic);
  s.id = std::move(id);
  if (delay_ms > 0) s.delay_ms = delay_ms;
  return s;
}

ReserveRequest Request(std::vector<std::string> topics, int64_t wait_ms, uint32_t count = 1) {
  ReserveRequest r;
  r.topics = std::move(topics);
  r.wait_ms = wait_ms;
  r.count = count;
  return r;
}

// One ReserveAsync's answer, awaited with a deadline.
struct AsyncReserve {
  std::shared_ptr<std::promise<Result<Deliveries>>> promise =
      std::make_shared<std::promise<Result<Deliveries>>>();
  std::future<Result<Deliveries>> future = promise->get_future();
  uint64_t ticket = 0;

  AsyncReserve(Queue& q, const ReserveRequest& req) {
    auto p = promise;
    ticket = q.ReserveAsync(req, [p](Result<Deliveries> r) { p->set_value(std::move(r)); });
  }
  bool Answered(Ms within) { return future.wait_for(within) == std::future_status::ready; }
};

// `INFO commandstats` calls of one command since the last CONFIG RESETSTAT.
int64_t CommandCalls(const RedisServer& server, std::string_view command) {
  auto info = server.Command({"INFO", "commandstats"});
  if (!info.ok() || !info->is_string()) return -1;
  const std::string& text = info->str();
  const std::string key = "cmdstat_" + std::string(command) + ":calls=";
  size_t at = text.find(key);
  if (at == std::string::npos) return 0;
  return std::stoll(text.substr(at + key.size()));
}

// --- several queues on one Redis ---------------------------------------------------------

TEST(RedisQueueShared, AJobAddedThroughOneQueueIsReservedThroughAnother) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto a = Open(RedisOptions(server->url(), "shared"));
  auto b = Open(RedisOptions(server->url(), "shared"));
  ASSERT_TRUE(a && b);
  JobSpec spec = Job("orders.close", "order-42");
  spec.body = "close it";
  ASSERT_TRUE(a->Add(spec).ok());
  auto got = b->Reserve(Request({"orders.close"}, 0));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].id, "order-42");
  EXPECT_EQ((*got)[0].body, "close it");
  // The reservation is shared too: the other queue sees it and can finish it.
  auto info = a->Get("order-42");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, JobState::kReserved);
  EXPECT_EQ(info->receipt, (*got)[0].receipt);
  EXPECT_TRUE(a->Finish("order-42", (*got)[0].receipt).ok());
  EXPECT_EQ(b->Get("order-42").status().code(), Code::kNotFound);
}

TEST(RedisQueueShared, AReserveWaitingOnOneQueueIsWokenByAnAddOnAnother) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto a = Open(RedisOptions(server->url(), "wake"));
  auto b = Open(RedisOptions(server->url(), "wake"));
  ASSERT_TRUE(a && b);
  AsyncReserve waiting(*b, Request({"wake.t"}, 600'000));
  ASSERT_TRUE(WaitFor([&] { return b->Topic("wake.t")->waiting == 1; }));
  EXPECT_FALSE(waiting.Answered(Ms(20)));
  ASSERT_TRUE(a->Add(Job("wake.t", "j1")).ok());
  ASSERT_TRUE(waiting.Answered(Ms(5000))) << "the wake-up did not reach the other queue";
  auto r = waiting.future.get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].id, "j1");

  // A delayed job added on one queue reaches a reserve waiting on the other
  // when it falls due: punctual, never early.
  AsyncReserve timed(*b, Request({"wake.d"}, 600'000));
  ASSERT_TRUE(WaitFor([&] { return b->Topic("wake.d")->waiting == 1; }));
  auto added = a->Add(Job("wake.d", "later", 100));
  ASSERT_TRUE(added.ok());
  ASSERT_TRUE(timed.Answered(Ms(5000)));
  const int64_t answered_at = SystemClock()->NowMs();
  auto t = timed.future.get();
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->size(), 1u);
  EXPECT_GE(answered_at, added->run_at_ms) << "handed out early";
  EXPECT_LE(answered_at - added->run_at_ms, 250) << "late: no promoter reacted in time";
}

// Two queues, four worker threads each, producers on both: every job is
// delivered exactly once (none twice within its TTR, none lost) and never
// before its run_at.
TEST(RedisQueueShared, NoJobIsHandedToTwoWorkersAndNoneIsLostOrEarly) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  std::vector<std::unique_ptr<Queue>> queues;
  for (int i = 0; i < 2; ++i) queues.push_back(Open(RedisOptions(server->url(), "many")));
  ASSERT_TRUE(queues[0] && queues[1]);
  constexpr int kPerProducer = 1500;
  constexpr int kProducers = 2;
  constexpr int kTotal = kPerProducer * kProducers;
  const std::vector<std::string> topics = {"mt.a", "mt.b", "mt.c"};

  std::mutex mu;
  std::map<std::string, int> delivered;  // GUARDED_BY(mu)
  int early = 0;                         // GUARDED_BY(mu)
  std::atomic<int> finished{0};
  std::atomic<int> errors{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int qi = 0; qi < 2; ++qi) {
    for (int w = 0; w < 4; ++w) {
      threads.emplace_back([&, qi, w] {
        Queue& q = *queues[qi];
        while (!stop.load()) {
          auto got = q.Reserve(Request(topics, 50, 1 + w % 4));
          if (!got.ok()) {
            errors.fetch_add(1);
            continue;
          }
          const int64_t now = SystemClock()->NowMs();
          for (const Delivery& d : *got) {
            {
              std::lock_guard<std::mutex> lock(mu);
              ++delivered[d.id];
              if (d.run_at_ms > now) ++early;
            }
            if (!q.Finish(d.id, d.receipt).ok()) errors.fetch_add(1);
            finished.fetch_add(1);
          }
        }
      });
    }
  }
  for (int p = 0; p < kProducers; ++p) {
    threads.emplace_back([&, p] {
      for (int i = 0; i < kPerProducer; ++i) {
        JobSpec s = Job(topics[i % topics.size()],
                        "p" + std::to_string(p) + "-" + std::to_string(i), i % 30);
        s.priority = static_cast<uint32_t>(i % 5);
        if (!queues[p]->Add(s).ok()) errors.fetch_add(1);
      }
    });
  }
  const bool all = WaitFor([&] { return finished.load() >= kTotal; }, 30000);
  stop.store(true);
  for (std::thread& t : threads) t.join();
  EXPECT_TRUE(all) << finished.load() << " of " << kTotal << " delivered";
  EXPECT_EQ(errors.load(), 0);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(delivered.size(), static_cast<size_t>(kTotal));
  int twice = 0;
  for (const auto& [id, n] : delivered) twice += n != 1;
  EXPECT_EQ(twice, 0) << "jobs handed to two workers";
  EXPECT_EQ(early, 0) << "jobs handed out before their run_at";
  auto stats = queues[0]->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->jobs, 0u);
  EXPECT_EQ(stats->finished, static_cast<uint64_t>(kTotal));
}

// --- Redis away ------------------------------------------------------------------------

TEST(RedisQueueOutage, CallsFailFastWithUnavailableAndWorkAgainAfterRedisRestarts) {
  RedisServerOptions options;
  options.append_only = true;  // the job added before the stop survives it
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);
  auto a = Open(RedisOptions(server->url(), "outage"));
  auto b = Open(RedisOptions(server->url(), "outage"));
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->Add(Job("out.t", "kept")).ok());
  ASSERT_TRUE(server->Stop().ok());

  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(a->Add(Job("out.t", "lost")).status().code(), Code::kUnavailable);
  EXPECT_EQ(a->Get("kept").status().code(), Code::kUnavailable);
  EXPECT_EQ(a->Reserve(Request({"out.t"}, 0)).status().code(), Code::kUnavailable);
  EXPECT_EQ(a->Stats().status().code(), Code::kUnavailable);
  std::promise<Status> async;
  a->FinishAsync("kept", "", [&](Status s) { async.set_value(std::move(s)); });
  EXPECT_EQ(async.get_future().get().code(), Code::kUnavailable);
  // A waiting reserve is answered too, not left hanging.
  EXPECT_EQ(a->Reserve(Request({"out.t"}, 60'000)).status().code(), Code::kUnavailable);
  EXPECT_LT(ElapsedMs(start), 2000) << "calls waited on a dead Redis";

  ASSERT_TRUE(server->Restart().ok());
  ASSERT_TRUE(WaitFor([&] { return a->Get("kept").ok(); }))
      << "the queue did not recover: " << a->Get("kept").status().ToString();
  auto got = a->Reserve(Request({"out.t"}, 0));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].id, "kept");
  EXPECT_TRUE(a->Finish("kept", (*got)[0].receipt).ok());

  // Wake-ups work again once the subscribers are back: a reserve waiting on
  // one queue gets a job added through the other.
  ASSERT_TRUE(WaitFor([&] { return b->Stats().ok(); }));
  bool woken = false;
  for (int round = 0; round < 50 && !woken; ++round) {
    AsyncReserve waiting(*b, Request({"out.w"}, 600'000));
    ASSERT_TRUE(WaitFor([&] { return b->Topic("out.w")->waiting == 1; }));
    ASSERT_TRUE(a->Add(Job("out.w")).ok());
    woken = waiting.Answered(Ms(200));
    if (!woken) {
      // The subscriber may still be reconnecting (it backs off up to 2 s):
      // take the job back and try again.
      b->CancelReserve(waiting.ticket);
      if (waiting.Answered(Ms(0))) break;
      auto r = a->Reserve(Request({"out.w"}, 0, 10));
      ASSERT_TRUE(r.ok());
      for (const Delivery& d : *r) ASSERT_TRUE(a->Finish(d.id, d.receipt).ok());
    }
  }
  EXPECT_TRUE(woken) << "wake-ups never came back after the restart";
}

// --- options ---------------------------------------------------------------------------

// The generated table (src/redis_store/embed_scripts.cmake) names each script
// by the SHA-1 that Redis gives its text, in the order of the enum.
TEST(RedisScripts, TheTableNamesEachScriptByTheSha1RedisGivesIt) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  ASSERT_EQ(rq::kLuaCount, static_cast<size_t>(rq::Lua::kPushLedger) + 1);
  for (size_t i = 0; i < rq::kLuaCount; ++i) {
    const rq::LuaScript& script = rq::kLuaScripts[i];
    auto loaded = server->Command({"SCRIPT", "LOAD", std::string(script.text)});
    ASSERT_TRUE(loaded.ok()) << script.name << ": " << loaded.status().ToString();
    ASSERT_TRUE(loaded->is_string()) << script.name << ": " << loaded->ToString();
    EXPECT_EQ(loaded->str(), script.sha1) << script.name;
    EXPECT_EQ(rq::ScriptOf(static_cast<rq::Lua>(i)).sha1(), script.sha1) << script.name;
  }
  EXPECT_EQ(rq::kLuaScripts[static_cast<size_t>(rq::Lua::kKickTopic)].name, "kick_topic");
}

// Entries that must share one call (a schedule's claim and its jobs) are
// never split over two: a group that does not fit the open command opens a
// new one; one that fits joins it. Single appends fill up to kMaxBatch.
TEST(RedisBatch, EntriesAppendedTogetherAreNeverSplitOverTwoCalls) {
  rq::Context ctx;
  ctx.buckets = 1;
  ctx.tags = {"{p:0}"};
  rq::Batch b(ctx, 1'000);
  auto entry = [](int i) { return std::vector<std::string>{"a", "id" + std::to_string(i), "r"}; };
  for (int i = 0; i < 999; ++i) {
    const rq::Batch::Slot s = b.Append(rq::Lua::kScheduleFire, 0, entry(i));
    ASSERT_EQ(s.cmd, 0u);
    ASSERT_EQ(s.index, static_cast<size_t>(i));
  }
  // 999 + 2 > 1000: both go to a new command.
  const rq::Batch::Slot two =
      b.AppendTogether(rq::Lua::kScheduleFire, 0, {{"c", "s", "x"}, entry(1000)});
  EXPECT_EQ(two.cmd, 1u);
  EXPECT_EQ(two.index, 0u);
  // 2 + 998 = 1000: they fit the open one.
  std::vector<std::vector<std::string>> many;
  for (int i = 0; i < 998; ++i) many.push_back(entry(2000 + i));
  const rq::Batch::Slot fit = b.AppendTogether(rq::Lua::kScheduleFire, 0, std::move(many));
  EXPECT_EQ(fit.cmd, 1u);
  EXPECT_EQ(fit.index, 2u);
  // Full: the next single append opens a third.
  EXPECT_EQ(b.Append(rq::Lua::kScheduleFire, 0, entry(9999)).cmd, 2u);
  ASSERT_EQ(b.commands().size(), 3u);
  // Each command: EVALSHA sha 1 key now_ms, then 3 fields per entry.
  EXPECT_EQ(b.commands()[0].argv.size(), 5u + 3 * 999);
  EXPECT_EQ(b.commands()[1].argv.size(), 5u + 3 * 1000);
  EXPECT_EQ(b.commands()[1].argv[5], "c");
  EXPECT_EQ(b.commands()[1].argv.back(), "r");
}

TEST(RedisQueueOptions, ABucketCountOtherThanThePrefixWasCreatedWithIsRefused) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto first = Open(RedisOptions(server->url(), "buckets", 16));
  ASSERT_NE(first, nullptr);
  auto other = OpenQueue(RedisOptions(server->url(), "buckets", 8));
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), Code::kInvalidArgument);
  EXPECT_NE(other.status().message().find("redis_buckets"), std::string::npos)
      << other.status().ToString();
  EXPECT_NE(other.status().message().find("16"), std::string::npos) << other.status().ToString();
  // The same count, or another prefix, is fine.
  EXPECT_NE(Open(RedisOptions(server->url(), "buckets", 16)), nullptr);
  EXPECT_NE(Open(RedisOptions(server->url(), "buckets2", 8)), nullptr);
}

// Automatic (0, the default): a new prefix on a standalone Redis gets one
// bucket; a prefix in use keeps the count it was first used with.
TEST(RedisQueueOptions, AnAutomaticBucketCountSuitsTheDeploymentAndKeepsAPrefixsCount) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  QueueOptions fresh = RedisOptions(server->url(), "auto.new", 0);
  auto q = OpenQueue(fresh);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(dynamic_cast<RedisQueue&>(**q).buckets(), 1u);
  EXPECT_EQ(QueueOptions().redis_buckets, 0u);  // the default is automatic

  auto eight = Open(RedisOptions(server->url(), "auto.old", 8));
  ASSERT_NE(eight, nullptr);
  auto later = OpenQueue(RedisOptions(server->url(), "auto.old", 0));
  ASSERT_TRUE(later.ok()) << later.status().ToString();
  EXPECT_EQ(dynamic_cast<RedisQueue&>(**later).buckets(), 8u);
  // Both see the same jobs: they put each id in the same bucket.
  JobSpec spec = Job("auto.t", "a1");
  spec.body = "x";
  ASSERT_TRUE(eight->Add(spec).ok());
  auto got = (*later)->Get("a1");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->body, "x");
}

TEST(RedisQueueOptions, BadOptionsAreRefusedNamingTheOption) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  struct Case {
    const char* what;
    QueueOptions options;
    const char* field;
    Code code;
  };
  std::vector<Case> cases = {
      {"empty prefix", RedisOptions(server->url(), ""), "redis_prefix", Code::kInvalidArgument},
      {"brace in prefix", RedisOptions(server->url(), "a{b"), "redis_prefix",
       Code::kInvalidArgument},
      {"too many buckets", RedisOptions(server->url(), "p", 16385), "redis_buckets",
       Code::kInvalidArgument},
      {"bad scheme", RedisOptions("http://127.0.0.1:1", "p"), "redis_url", Code::kInvalidArgument},
      {"bad port", RedisOptions("redis://127.0.0.1:99999", "p"), "redis_url",
       Code::kInvalidArgument},
      {"TLS option with redis://", RedisOptions(server->url(), "p"),
       "redis_tls_ca_file given, but the Redis URL is redis://, not rediss://",
       Code::kInvalidArgument},
      {"unreadable TLS CA file", RedisOptions("rediss://127.0.0.1:1", "p"),
       "redis_tls_ca_file: cannot read CA file /nonexistent/ca.pem", Code::kInvalidArgument},
      {"client key without its certificate", RedisOptions("rediss://127.0.0.1:1", "p"),
       "redis_tls_cert_file and redis_tls_key_file", Code::kInvalidArgument},
  };
  cases[cases.size() - 3].options.redis_tls_ca_file = "/tmp/ca.pem";
  cases[cases.size() - 2].options.redis_tls_ca_file = "/nonexistent/ca.pem";
  cases[cases.size() - 1].options.redis_tls_key_file = "/tmp/client.key";
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto q = OpenQueue(c.options);
    ASSERT_FALSE(q.ok());
    EXPECT_EQ(q.status().code(), c.code) << q.status().ToString();
    EXPECT_NE(q.status().message().find(c.field), std::string::npos) << q.status().ToString();
  }
  // Nobody listening: unavailable, at once.
  auto start = std::chrono::steady_clock::now();
  auto dead = OpenQueue(RedisOptions("redis://127.0.0.1:1", "p"));
  ASSERT_FALSE(dead.ok());
  EXPECT_EQ(dead.status().code(), Code::kUnavailable) << dead.status().ToString();
  EXPECT_LT(ElapsedMs(start), 3000);
}

// --- due times (the timer's bookkeeping; no Redis needed) --------------------------------

using rq::DueTimes;
using rq::kNever;

TEST(RedisDueTimes, EveryBucketIsDueAtStartAndNotesOnlyLowerIt) {
  DueTimes due(2);
  EXPECT_TRUE(due.Known(0, 0));
  EXPECT_TRUE(due.Known(1, 0));
  due.BeginPromote(0);
  due.EndPromote(0, kNever);
  EXPECT_EQ(due.At(0), kNever);
  EXPECT_FALSE(due.Known(0, 1'000'000));
  EXPECT_TRUE(due.Note(0, 500));
  EXPECT_FALSE(due.Note(0, 700)) << "a later note lowered the due time";
  EXPECT_EQ(due.At(0), 500);
  EXPECT_FALSE(due.Known(0, 499));
  EXPECT_TRUE(due.Known(0, 500));
  EXPECT_EQ(due.At(1), 0) << "a bucket's notes moved another";
}

TEST(RedisDueTimes, APromoteReplyReplacesWhatWasNotedBeforeItWasSent) {
  DueTimes due(1);
  due.BeginPromote(0);
  due.EndPromote(0, 100);
  EXPECT_TRUE(due.Note(0, 50));
  due.BeginPromote(0);  // the promote sees the job noted at 50: the reply is the truth
  due.EndPromote(0, 300);
  EXPECT_EQ(due.At(0), 300);
}

// The race behind a waiting reserve answered a second late (the safety
// net's pace): a promote's script runs, then an add of a job due at 500;
// the add's note arrives while the promote's reply is still on its way, and
// is no earlier than the due time then known (0 at start, or the time that
// made the promote run), so it lowered nothing. The reply, which does not
// count the job, must not erase it.
TEST(RedisDueTimes, ANoteMadeWhileAPromoteIsInFlightSurvivesItsReply) {
  DueTimes due(1);
  due.BeginPromote(0);
  EXPECT_FALSE(due.Note(0, 500));  // not earlier than 0
  due.EndPromote(0, kNever);
  EXPECT_EQ(due.At(0), 500) << "the job added during the promote was forgotten";

  due.BeginPromote(0);  // in steady state: promoting what fell due at 500
  EXPECT_FALSE(due.Note(0, 900));
  due.EndPromote(0, 1'200);
  EXPECT_EQ(due.At(0), 900);

  due.BeginPromote(0);  // and an earlier reply still wins
  EXPECT_FALSE(due.Note(0, 2'000));
  due.EndPromote(0, 1'500);
  EXPECT_EQ(due.At(0), 1'500);

  due.BeginPromote(0);  // a note is kept for that promote only
  due.EndPromote(0, kNever);
  EXPECT_EQ(due.At(0), kNever);
}

// --- batching --------------------------------------------------------------------------

// Eight threads adding at once: the dispatcher merges what arrives while a
// round is in flight, so Redis runs far fewer scripts than jobs were added.
TEST(RedisQueueBatching, ConcurrentCallsShareScriptCalls) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto q = Open(RedisOptions(server->url(), "batch"));
  ASSERT_NE(q, nullptr);
  auto* rq = dynamic_cast<RedisQueue*>(q.get());
  ASSERT_NE(rq, nullptr);
  ASSERT_TRUE(server->Command({"CONFIG", "RESETSTAT"}).ok());
  const RedisQueue::DispatchStats before = rq->dispatch_stats();

  constexpr int kThreads = 8;
  constexpr int kEach = 500;
  constexpr int kJobs = kThreads * kEach;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Each thread keeps up to 50 adds in flight, as a server with many
      // connections does.
      std::atomic<int> in_flight{0};
      for (int i = 0; i < kEach; ++i) {
        while (in_flight.load() >= 50) std::this_thread::yield();
        in_flight.fetch_add(1);
        q->AddAsync(Job("batch.t", "t" + std::to_string(t) + "-" + std::to_string(i)),
                    [&](Result<AddResult> r) {
                      if (!r.ok()) failures.fetch_add(1);
                      in_flight.fetch_sub(1);
                    });
      }
      while (in_flight.load() > 0) std::this_thread::yield();
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  const RedisQueue::DispatchStats after = rq->dispatch_stats();
  const int64_t evalsha = CommandCalls(*server, "evalsha");
  const uint64_t rounds = after.rounds - before.rounds;
  RecordProperty("evalsha", static_cast<int>(evalsha));
  RecordProperty("rounds", static_cast<int>(rounds));
  std::printf("%d adds: %lld EVALSHA, %llu rounds\n", kJobs, static_cast<long long>(evalsha),
              static_cast<unsigned long long>(rounds));
  EXPECT_GT(evalsha, 0);
  EXPECT_LT(evalsha * 4, kJobs) << "adds were not merged into shared script calls";
  EXPECT_LT(rounds * 4, static_cast<uint64_t>(kJobs)) << "adds did not share round trips";
  auto stats = q->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->jobs, static_cast<uint64_t>(kJobs));

  // Blocking calls from 8 threads share rounds too (one bucket: every add
  // of a round is one script call).
  auto one = Open(RedisOptions(server->url(), "batch1", 1));
  ASSERT_NE(one, nullptr);
  ASSERT_TRUE(server->Command({"CONFIG", "RESETSTAT"}).ok());
  threads.clear();
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        if (!one->Add(Job("batch.one", "b" + std::to_string(t) + "-" + std::to_string(i))).ok()) {
          failures.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  const int64_t blocking = CommandCalls(*server, "evalsha");
  std::printf("%d blocking adds on 1 bucket: %lld EVALSHA\n", kThreads * 200,
              static_cast<long long>(blocking));
  EXPECT_LT(blocking * 2, kThreads * 200) << "blocking adds were not merged";
}

// An id of a job that lands in `bucket`: `stem` and a number.
std::string IdIn(const RedisQueue& q, uint32_t bucket, const std::string& stem) {
  for (int n = 0;; ++n) {
    std::string id = stem + std::to_string(n);
    if (q.BucketOf(id) == bucket) return id;
  }
}

// Waiters on many different topics (the benchmark's shape: each connection
// its own topic) share their script calls: a round sends one heads and one
// reserve per bucket, however many topic lists wait, and each waiter still
// gets the best job of its topic across buckets.
TEST(RedisQueueBatching, ReservesOnManyTopicsShareHeadsAndReserveCalls) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto q = Open(RedisOptions(server->url(), "many"));
  ASSERT_NE(q, nullptr);
  auto* rq = dynamic_cast<RedisQueue*>(q.get());
  ASSERT_NE(rq, nullptr);
  const uint32_t buckets = rq->buckets();
  constexpr int kTopics = 40;
  auto topic = [](int t) { return "many." + std::to_string(t); };
  // One job of every topic in every bucket. Topic t's first job (the best:
  // equal priorities, the earliest run_at and seq) is in bucket t % buckets,
  // so the reserves spread over every bucket.
  std::vector<std::string> best(kTopics);
  for (int t = 0; t < kTopics; ++t) {
    for (uint32_t k = 0; k < buckets; ++k) {
      const uint32_t bucket = (static_cast<uint32_t>(t) + k) % buckets;
      const std::string id = IdIn(*rq, bucket, "m" + std::to_string(t) + "-");
      ASSERT_TRUE(q->Add(Job(topic(t), id)).ok());
      if (k == 0) best[t] = id;
    }
  }

  ASSERT_TRUE(server->Command({"CONFIG", "RESETSTAT"}).ok());
  const RedisQueue::DispatchStats before = rq->dispatch_stats();
  // The reserves start in an add's callback, which runs on the dispatcher
  // between rounds: all of them are in the next round, whatever the timing.
  std::vector<std::unique_ptr<AsyncReserve>> reserves;
  std::promise<void> started;
  q->AddAsync(Job("many.start", "start"), [&](Result<AddResult> r) {
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    for (int t = 0; t < kTopics; ++t) {
      reserves.push_back(std::make_unique<AsyncReserve>(*q, Request({topic(t)}, 10000)));
    }
    started.set_value();
  });
  ASSERT_EQ(started.get_future().wait_for(Ms(10000)), std::future_status::ready);
  for (int t = 0; t < kTopics; ++t) {
    ASSERT_TRUE(reserves[t]->Answered(Ms(10000))) << topic(t) << " was not answered";
    Result<Deliveries> got = reserves[t]->future.get();
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), 1u) << topic(t);
    EXPECT_EQ(got->front().topic, topic(t));
    EXPECT_EQ(got->front().id, best[t]) << "not the best job of " << topic(t) << " across buckets";
  }
  const RedisQueue::DispatchStats after = rq->dispatch_stats();
  const uint64_t commands = after.commands - before.commands - 1;  // the add that started them
  const uint64_t rounds = after.rounds - before.rounds;
  const int64_t evalsha = CommandCalls(*server, "evalsha");
  std::printf(
      "%d reserves on %d topics over %u buckets: %llu script calls in %llu rounds, %lld "
      "EVALSHA (with the timer's promotes)\n",
      kTopics, kTopics, buckets, static_cast<unsigned long long>(commands),
      static_cast<unsigned long long>(rounds), static_cast<long long>(evalsha));
  // One heads per bucket, then one reserve per bucket (each shared by the
  // groups whose best job is there), and no promote: nothing is due. Each
  // group on its own sent 40 x 16 heads and 40 reserves.
  EXPECT_LE(commands, 2u * buckets) << "heads and reserve calls were not shared by the groups";
  EXPECT_LE(rounds, 3u);  // the add, the heads, the reserves
  EXPECT_LE(evalsha, 4 * static_cast<int64_t>(buckets));
}

// A reserve for many jobs spread over every bucket gets them best first.
TEST(RedisQueueReserve, ABatchAcrossBucketsComesOutInGlobalOrder) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto q = Open(RedisOptions(server->url(), "order"));
  ASSERT_NE(q, nullptr);
  constexpr int kJobs = 200;
  for (int i = 0; i < kJobs; ++i) {
    JobSpec s = Job("ord", "j" + std::to_string(i));
    s.priority =
        static_cast<uint32_t>(kJobs - i) / 10;  // 20 priorities, in order of adding within each
    ASSERT_TRUE(q->Add(s).ok());
  }
  std::vector<Delivery> all;
  while (all.size() < kJobs) {
    auto got = q->Reserve(Request({"ord"}, 0, 37));
    ASSERT_TRUE(got.ok());
    ASSERT_FALSE(got->empty());
    all.insert(all.end(), got->begin(), got->end());
  }
  for (size_t i = 1; i < all.size(); ++i) {
    const Delivery& a = all[i - 1];
    const Delivery& b = all[i];
    ASSERT_TRUE(a.priority < b.priority ||
                (a.priority == b.priority && std::stoi(a.id.substr(1)) < std::stoi(b.id.substr(1))))
        << a.id << " (priority " << a.priority << ") came before " << b.id << " (priority "
        << b.priority << ")";
  }
}

// KickTopic over more buried jobs than one script call takes (1000), spread
// over every bucket: oldest added first, across buckets, in several rounds.
TEST(RedisQueueKickTopic, KicksMoreThanOneCallTakesOldestFirstAcrossBuckets) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  QueueOptions o = RedisOptions(server->url(), "kick");
  auto clock = std::make_shared<ManualClock>();
  o.clock = clock;
  auto q = Open(o);
  ASSERT_NE(q, nullptr);
  constexpr int kJobs = 2500;
  for (int i = 0; i < kJobs; ++i) {
    JobSpec s = Job("kt", "k" + std::to_string(i));
    s.max_attempts = 1;  // buried when its TTR runs out
    s.ttr_ms = 5;
    // Blocking adds, one at a time: the order of adding is the id order.
    ASSERT_TRUE(q->Add(s).ok());
  }
  size_t reserved = 0;
  while (reserved < kJobs) {
    auto got = q->Reserve(Request({"kt"}, 0, 1000));
    ASSERT_TRUE(got.ok());
    ASSERT_FALSE(got->empty());
    reserved += got->size();
  }
  clock->Advance(5);
  ASSERT_TRUE(WaitFor([&] {
    auto t = q->Topic("kt");
    return t.ok() && t->buried == kJobs;
  })) << "the TTRs that ran out did not bury every job";
  auto kicked = q->KickTopic("kt", 2100);
  ASSERT_TRUE(kicked.ok()) << kicked.status().ToString();
  EXPECT_EQ(*kicked, 2100u);
  auto next = q->Peek("kt", JobState::kBuried);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->id, "k2100") << "the oldest were not kicked first";
  auto ready = q->Peek("kt", JobState::kReady);
  ASSERT_TRUE(ready.ok());
  EXPECT_EQ(ready->id, "k0");
  auto rest = q->KickTopic("kt", 1000);
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(*rest, 400u);
}

// Calls made one after the other act one after the other, also when the
// first takes more than one round (a KickTopic over several buckets: heads,
// then kick_topic): a Kick submitted behind it in the same round waited for
// nothing, ran first and made the KickTopic find nothing (a pipelined
// `KICKTOPIC t 100 ; KICK w` answered `0 ; +OK`; the memory store `1 ;
// -INVALID ... is ready`). One bucket, where a KickTopic takes one round,
// and the default 16.
TEST(RedisQueueOrder, AKickTopicIsNotOvertakenByTheCallsSubmittedBehindIt) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  for (uint32_t buckets : {16u, 1u}) {
    SCOPED_TRACE(buckets);
    auto q = Open(RedisOptions(server->url(), "order" + std::to_string(buckets), buckets));
    ASSERT_NE(q, nullptr);
    ASSERT_TRUE(q->Add(Job("kto", "w")).ok());
    auto got = q->Reserve(Request({"kto"}, 0));
    ASSERT_TRUE(got.ok() && got->size() == 1);
    ASSERT_TRUE(q->Bury("w", (*got)[0].receipt, "").ok());

    std::promise<Result<uint64_t>> kicked;
    std::promise<Status> kick;
    std::promise<Result<JobInfo>> get;
    // Submitted from a callback, on the dispatcher's thread: all three are
    // pending when it plans its next round, as a pipeline's calls are.
    q->GetAsync("w", [&](Result<JobInfo>) {
      q->KickTopicAsync("kto", 100, [&](Result<uint64_t> r) { kicked.set_value(std::move(r)); });
      q->KickAsync("w", [&](Status s) { kick.set_value(std::move(s)); });
      q->GetAsync("w", [&](Result<JobInfo> r) { get.set_value(std::move(r)); });
    });
    auto k = kicked.get_future();
    auto w = kick.get_future();
    auto g = get.get_future();
    ASSERT_EQ(k.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    ASSERT_EQ(w.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    ASSERT_EQ(g.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    Result<uint64_t> kicked_n = k.get();
    ASSERT_TRUE(kicked_n.ok()) << kicked_n.status().ToString();
    EXPECT_EQ(*kicked_n, 1u) << "the kick behind it ran first";
    Status s = w.get();
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("is ready"), std::string::npos) << s.ToString();
    Result<JobInfo> info = g.get();
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->state, JobState::kReady);
  }
}

// A read over a topic or the whole queue (Topic, Peek, Stats) sees the calls
// submitted before it and none submitted after it, also when they share a
// round: an add behind it joined the `add` call that an add before it had
// opened, which runs before the read (a pipelined `ADD c x0 ; STATS b ; ADD
// b x1` answered ready 1 for b; the memory store 0). One bucket, so that both
// adds go to the same call.
TEST(RedisQueueOrder, AReadOverATopicDoesNotSeeTheCallsSubmittedBehindIt) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto q = Open(RedisOptions(server->url(), "reads", 1));
  ASSERT_NE(q, nullptr);
  std::promise<Result<TopicInfo>> topic;
  std::promise<Result<JobInfo>> peek;
  std::promise<Result<QueueStats>> stats;
  std::promise<Result<AddResult>> added;
  // Submitted from a callback, on the dispatcher's thread: all are pending
  // when it plans its next round, as a pipeline's calls are.
  q->GetAsync("none", [&](Result<JobInfo>) {
    q->AddAsync(Job("rc", "x0"), [](Result<AddResult>) {});
    q->TopicAsync("rb", [&](Result<TopicInfo> r) { topic.set_value(std::move(r)); });
    q->PeekAsync("rb", JobState::kReady, [&](Result<JobInfo> r) { peek.set_value(std::move(r)); });
    q->StatsAsync([&](Result<QueueStats> r) { stats.set_value(std::move(r)); });
    q->AddAsync(Job("rb", "x1"), [&](Result<AddResult> r) { added.set_value(std::move(r)); });
  });
  auto t = topic.get_future();
  auto p = peek.get_future();
  auto s = stats.get_future();
  auto a = added.get_future();
  for (auto ready : {t.wait_for(Ms(10000)), p.wait_for(Ms(10000)), s.wait_for(Ms(10000)),
                     a.wait_for(Ms(10000))}) {
    ASSERT_EQ(ready, std::future_status::ready);
  }
  ASSERT_TRUE(a.get().ok());
  Result<TopicInfo> ti = t.get();
  ASSERT_TRUE(ti.ok()) << ti.status().ToString();
  EXPECT_EQ(ti->ready, 0u) << "Topic saw the add submitted after it";
  Result<JobInfo> pi = p.get();
  EXPECT_EQ(pi.status().code(), Code::kNotFound) << "Peek saw the add submitted after it";
  Result<QueueStats> st = s.get();
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->ready, 1u) << "Stats must see the add before it, and not the one after it";
}

// Reserves submitted one after the other are served one after the other,
// also on different topic lists that share a topic: the later ones with the
// same topics as the first joined its group, ahead of one in between (a
// pipelined `RESERVE COUNT 1 FROM b a c ; RESERVE FROM c a ; RESERVE COUNT 3
// FROM b a c` with two jobs in c answered j1 ; nil ; j2, the memory store
// j1 ; j2 ; nil). One bucket (a reserve without heads) and 16.
TEST(RedisQueueOrder, ReservesOnOverlappingTopicsAreServedInTheOrderSubmitted) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  for (uint32_t buckets : {1u, 16u}) {
    SCOPED_TRACE(buckets);
    auto q = Open(RedisOptions(server->url(), "overlap" + std::to_string(buckets), buckets));
    ASSERT_NE(q, nullptr);
    ASSERT_TRUE(q->Add(Job("oc", "x1")).ok());
    ASSERT_TRUE(q->Add(Job("oc", "x2")).ok());
    std::vector<std::unique_ptr<AsyncReserve>> reserves;
    std::promise<void> started;
    // Submitted from a callback, on the dispatcher's thread: all three are
    // pending when it plans its next round, as a pipeline's reserves are.
    q->GetAsync("none", [&](Result<JobInfo>) {
      reserves.push_back(std::make_unique<AsyncReserve>(*q, Request({"ob", "oa", "oc"}, 0, 1)));
      reserves.push_back(std::make_unique<AsyncReserve>(*q, Request({"oc", "oa"}, 0, 1)));
      reserves.push_back(std::make_unique<AsyncReserve>(*q, Request({"ob", "oa", "oc"}, 0, 3)));
      started.set_value();
    });
    ASSERT_EQ(started.get_future().wait_for(Ms(10000)), std::future_status::ready);
    std::vector<std::string> got;
    for (auto& r : reserves) {
      ASSERT_TRUE(r->Answered(Ms(10000)));
      Result<Deliveries> d = r->future.get();
      ASSERT_TRUE(d.ok()) << d.status().ToString();
      std::string ids;
      for (const Delivery& j : *d) ids += (ids.empty() ? "" : ",") + j.id;
      got.push_back(ids.empty() ? "nil" : ids);
    }
    EXPECT_EQ(got, (std::vector<std::string>{"x1", "x2", "nil"}));
  }
}

// A reserve submitted behind one whose batch was cut to its byte budget gets
// the jobs the cut left, as it would one after the other: they shared a
// round, the first took them and gave them back only after the second had
// its answer (`RESERVE COUNT 4 MAXBYTES 10 FROM c ; RESERVE FROM c` answered
// j1 ; nil, the memory store j1 ; j2). The jobs past every budget are ready
// again once the reserves are answered. One bucket and 16.
TEST(RedisQueueOrder, AReserveBehindABatchCutToItsBudgetGetsTheJobsTheCutLeft) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  for (uint32_t buckets : {1u, 16u}) {
    SCOPED_TRACE(buckets);
    auto q = Open(RedisOptions(server->url(), "cut" + std::to_string(buckets), buckets));
    ASSERT_NE(q, nullptr);
    for (const char* id : {"y1", "y2", "y3"}) {
      JobSpec s = Job("cc", id);
      s.body = "0123456789ab";  // 12 bytes: one per budget of 20
      ASSERT_TRUE(q->Add(s).ok());
    }
    ReserveRequest cut = Request({"cc"}, 0, 4);
    cut.max_bytes = 20;
    std::vector<std::unique_ptr<AsyncReserve>> reserves;
    std::promise<void> started;
    // Submitted from a callback, on the dispatcher's thread: both are
    // pending when it plans its next round, as a pipeline's reserves are.
    q->GetAsync("none", [&](Result<JobInfo>) {
      reserves.push_back(std::make_unique<AsyncReserve>(*q, cut));
      reserves.push_back(std::make_unique<AsyncReserve>(*q, Request({"cc"}, 0, 1)));
      started.set_value();
    });
    ASSERT_EQ(started.get_future().wait_for(Ms(10000)), std::future_status::ready);
    std::vector<std::string> got;
    for (auto& r : reserves) {
      ASSERT_TRUE(r->Answered(Ms(10000)));
      Result<Deliveries> d = r->future.get();
      ASSERT_TRUE(d.ok()) << d.status().ToString();
      std::string ids;
      for (const Delivery& j : *d) ids += (ids.empty() ? "" : ",") + j.id;
      got.push_back(ids.empty() ? "nil" : ids);
    }
    EXPECT_EQ(got, (std::vector<std::string>{"y1", "y2"}));
    auto topic = q->Topic("cc");
    ASSERT_TRUE(topic.ok());
    EXPECT_EQ(topic->ready, 1u) << "the job past every budget was not given back first";
    EXPECT_EQ(topic->reserved, 2u);
  }
}

// --- replicas (--redis-wait-replicas) ---------------------------------------------------

// One figure of the store, by name (0 when absent).
uint64_t Figure(const StoreFigures& f, std::string_view name) {
  for (const auto& [n, v] : f.fields) {
    if (n == name) return v;
  }
  return 0;
}

// A master and its replica, online and caught up; nullptrs on failure.
redis_harness::RedisPair StartPair() {
  auto pair = redis_harness::RedisPair::Start();
  EXPECT_TRUE(pair.ok()) << pair.status().ToString();
  return pair.ok() ? std::move(*pair) : redis_harness::RedisPair{};
}

QueueOptions WaitingFor(const RedisServer& master, uint32_t replicas, int64_t timeout_ms) {
  QueueOptions o = RedisOptions(master.url(), "wait", 4);
  o.redis_wait_replicas = replicas;
  o.redis_wait_timeout_ms = timeout_ms;
  return o;
}

// Every change waits for the replica; the figures and the topology say so,
// and reads need no WAIT.
TEST(RedisQueueWait, ChangesAreConfirmedByTheReplicaAndTheFiguresSaySo) {
  auto r = StartPair();
  ASSERT_TRUE(r.master && r.replica);
  auto q = Open(WaitingFor(*r.master, 1, 5000));
  ASSERT_NE(q, nullptr);
  ASSERT_TRUE(q->Add(Job("w.t", "j1")).ok());
  auto got = q->Reserve(Request({"w.t"}, 0));
  ASSERT_TRUE(got.ok() && got->size() == 1) << got.status().ToString();
  ASSERT_TRUE(q->Finish("j1", (*got)[0].receipt).ok());
  StoreFigures f = q->Figures();
  EXPECT_TRUE(f.health.ok()) << f.health.ToString();
  EXPECT_EQ(Figure(f, "redis_masters"), 1u);
  EXPECT_EQ(Figure(f, "redis_replicas"), 1u);
  EXPECT_EQ(Figure(f, "redis_wait_replicas"), 1u);
  EXPECT_EQ(Figure(f, "redis_replicas_acked"), 1u);
  EXPECT_EQ(Figure(f, "redis_wait_shortfalls"), 0u);
  const uint64_t waits = Figure(f, "redis_waits");
  EXPECT_GE(waits, 3u);  // add, reserve, finish (each its own round here)
  EXPECT_EQ(f.topology, "standalone: " + r.master->address() + " (1 replicas, last WAIT 1)");

  // Reads wait for nobody: no more WAITs.
  ASSERT_EQ(q->Get("j1").status().code(), Code::kNotFound);
  ASSERT_TRUE(q->Stats().ok());
  EXPECT_EQ(Figure(q->Figures(), "redis_waits"), waits);
}

// The replica hangs: a change is answered unavailable after the WAIT's
// timeout, /healthz would say degraded, reads go on; the change was made on
// the master, so the same add again finds it; a reserve whose WAIT fell short
// hands nothing out and its job comes back when the TTR runs out.
TEST(RedisQueueWait, AReplicaThatDoesNotConfirmMakesChangesUnavailableAndLosesNothing) {
  auto r = StartPair();
  ASSERT_TRUE(r.master && r.replica);
  QueueOptions o = WaitingFor(*r.master, 1, 200);
  auto clock = std::make_shared<ManualClock>();
  o.clock = clock;
  auto q = Open(o);
  ASSERT_NE(q, nullptr);
  JobSpec first = Job("w.t", "first");
  first.ttr_ms = 1000;
  first.idempotency_key = "k-first";
  // The replica's acknowledgement can miss a 200 ms WAIT under load (the
  // sanitizer pass): the add is made again, its key making that safe, until
  // a WAIT confirms it.
  Result<AddResult> first_added = Unavailable("not yet added");
  ASSERT_TRUE(WaitFor([&] {
    first_added = q->Add(first);
    return first_added.ok();
  })) << first_added.status().ToString();

  ASSERT_TRUE(r.replica->Pause().ok());
  JobSpec second = Job("w.t", "second");
  second.idempotency_key = "k-second";
  auto added = q->Add(second);
  ASSERT_EQ(added.status().code(), Code::kUnavailable);
  EXPECT_NE(added.status().message().find("WAIT confirmed 0 of 1 replicas within 200 ms"),
            std::string::npos)
      << added.status().message();
  StoreFigures f = q->Figures();
  EXPECT_FALSE(f.health.ok());
  EXPECT_NE(f.health.message().find("--redis-wait-replicas"), std::string::npos)
      << f.health.message();
  EXPECT_GE(Figure(f, "redis_wait_shortfalls"), 1u);
  EXPECT_TRUE(q->Get("first").ok());  // a read: no WAIT

  auto reserve = q->Reserve(Request({"w.t"}, 0));
  EXPECT_EQ(reserve.status().code(), Code::kUnavailable) << "handed out unconfirmed";

  ASSERT_TRUE(r.replica->Resume().ok());
  // The add was made on the master: the same add again is answered as the
  // first would have been, and adds nothing twice.
  Result<AddResult> again = Unavailable("not tried");
  ASSERT_TRUE(WaitFor([&] {
    again = q->Add(second);
    return again.status().code() != Code::kUnavailable;
  }));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->id, "second");
  EXPECT_TRUE(q->Figures().health.ok());

  // The reserve that was not confirmed holds "first" (or not, if the script
  // never ran): either way it is handed out once its TTR is over.
  clock->Advance(1000);
  std::vector<std::string> seen;
  ASSERT_TRUE(WaitFor([&] {
    auto got = q->Reserve(Request({"w.t"}, 0, 10));
    if (!got.ok()) return false;
    for (const Delivery& d : *got) {
      seen.push_back(d.id);
      EXPECT_TRUE(q->Finish(d.id, d.receipt).ok());
    }
    return seen.size() >= 2;
  })) << "seen "
      << seen.size();
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<std::string>{"first", "second"}));
}

// Once a master's WAIT fell short, reserves leave its buckets alone (what
// they took could not be handed out, and would sit reserved for nobody until
// its TTR): a reserve whose every bucket is there answers unavailable at once,
// and its jobs are handed out as soon as a WAIT confirms again.
TEST(RedisQueueWait, AReserveTakesNothingFromAMasterShortOfReplicas) {
  auto r = StartPair();
  ASSERT_TRUE(r.master && r.replica);
  auto q = Open(WaitingFor(*r.master, 1, 1000));
  ASSERT_NE(q, nullptr);
  JobSpec waiting = Job("w.s", "waiting");
  waiting.ttr_ms = 600'000;  // a reservation for nobody would hold it for 10 minutes
  ASSERT_TRUE(q->Add(waiting).ok());

  ASSERT_TRUE(r.replica->Pause().ok());
  ASSERT_EQ(q->Add(Job("w.s", "refused")).status().code(), Code::kUnavailable);
  auto began = std::chrono::steady_clock::now();
  auto reserve = q->Reserve(Request({"w.s"}, 0));
  ASSERT_EQ(reserve.status().code(), Code::kUnavailable);
  EXPECT_NE(reserve.status().message().find("lack the replicas"), std::string::npos)
      << reserve.status().message();
  EXPECT_LT(ElapsedMs(began), 500) << "it waited for a WAIT it knew would fall short";

  ASSERT_TRUE(r.replica->Resume().ok());
  ASSERT_TRUE(WaitFor([&] { return q->Add(Job("w.s", "after")).ok(); }));
  Result<Deliveries> got = Deliveries{};
  ASSERT_TRUE(WaitFor([&] {
    got = q->Reserve(Request({"w.s"}, 0, 10));
    return got.ok() && !got->empty();
  }));
  bool found = false;
  for (const Delivery& d : *got) {
    if (d.id == "waiting") {
      found = true;
      EXPECT_EQ(d.attempts, 1u) << "it was reserved before, for nobody";
    }
  }
  EXPECT_TRUE(found);
}

// Lists of subscriptions and schedules are reads: a replica that does not
// confirm does not stop push delivery or the scheduler from reading them.
TEST(RedisQueueWait, ReadingSubscriptionsAndSchedulesWaitsForNoReplica) {
  auto r = StartPair();
  ASSERT_TRUE(r.master && r.replica);
  auto q = Open(WaitingFor(*r.master, 1, 200));
  ASSERT_NE(q, nullptr);
  Subscription sub;
  sub.name = "app";
  sub.url = "http://127.0.0.1:9/hook";
  sub.topics = {"w.t"};
  // A put is a change: its WAIT of 200 ms can miss the replica's first
  // acknowledgement on a loaded machine. Put again (the same instance)
  // until one is confirmed.
  Status put_status = Unavailable("not yet put");
  for (int i = 0; i < 20 && !put_status.ok(); ++i) {
    std::promise<Result<Subscription>> put;
    q->PutSubscriptionAsync(sub, [&](Result<Subscription> s) { put.set_value(std::move(s)); });
    put_status = put.get_future().get().status();
  }
  ASSERT_TRUE(put_status.ok()) << put_status.ToString();

  ASSERT_TRUE(r.replica->Pause().ok());
  std::promise<Result<std::vector<Subscription>>> listed;
  q->SubscriptionsAsync("", [&](auto s) { listed.set_value(std::move(s)); });
  auto subs = listed.get_future().get();
  ASSERT_TRUE(subs.ok()) << subs.status().ToString();
  EXPECT_EQ(subs->size(), 1u);
  std::promise<Result<std::vector<Schedule>>> schedules;
  q->SchedulesAsync("", [&](auto s) { schedules.set_value(std::move(s)); });
  auto listed_schedules = schedules.get_future().get();
  EXPECT_TRUE(listed_schedules.ok()) << listed_schedules.status().ToString();
  ASSERT_TRUE(r.replica->Resume().ok());
}

// A cluster master dies and no replica takes over: reserves are served from
// the buckets of the masters that answer, not refused as a whole.
TEST(RedisQueueOutage, AReserveIsServedFromTheMastersThatAnswer) {
  auto cluster = redis_harness::RedisCluster::Start(3);
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  auto q = Open(RedisOptions((*cluster)->url(), "part", 16));
  ASSERT_NE(q, nullptr);
  for (int i = 0; i < 64; ++i) ASSERT_TRUE(q->Add(Job("p.t", "p" + std::to_string(i))).ok());
  ASSERT_TRUE((*cluster)->node(2).Kill().ok());

  auto got = q->Reserve(Request({"p.t"}, 0, 100));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_GT(got->size(), 0u);
  EXPECT_LT(got->size(), 64u);  // the dead master's buckets are out of reach
  for (const Delivery& d : *got) EXPECT_TRUE(q->Finish(d.id, d.receipt).ok()) << d.id;
  // Adds whose bucket lives on the dead master are refused; the rest go on.
  int added = 0, refused = 0;
  for (int i = 0; i < 64; ++i) {
    auto a = q->Add(Job("p.t", "q" + std::to_string(i)));
    if (a.ok()) {
      ++added;
    } else {
      EXPECT_EQ(a.status().code(), Code::kUnavailable);
      ++refused;
    }
  }
  EXPECT_GT(added, 0);
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace delayq
