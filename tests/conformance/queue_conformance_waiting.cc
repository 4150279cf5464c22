// The conformance tests of waiting reserves and concurrency (the rest are in
// queue_conformance.cc; see queue_conformance.h for how an implementation
// plugs in). Asynchronous answers are awaited with futures and a deadline.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "conformance/queue_conformance.h"

namespace delayq::conformance {

// --- waiting reserves ----------------------------------------------------------------

TEST_P(QueueConformance, WaitingReserveIsAnsweredWhenAJobFallsDue) {
  Queue& q = queue();
  ReserveProbe probe(q, Request({"due"}, kLongMs), [this] { return harness().NowMs(); });
  AddResult a = MustAdd(q, Delayed("due", "j", kShortMs));
  if (harness().exact_time()) {
    EXPECT_FALSE(probe.Answered(kQuiet)) << "answered before the job fell due";
  }
  EXPECT_NE(probe.ticket(), 0u);
  harness().AdvanceMs(kShortMs);
  Deliveries got = probe.TakeOk();
  ASSERT_EQ(Ids(got), std::vector<std::string>{"j"});
  EXPECT_GE(probe.answered_at_ms(), a.run_at_ms);
  if (!harness().exact_time()) {
    // Punctual (SPEC §4): within milliseconds, not on a polling round. The
    // bound is loose so a loaded machine cannot trip it; a 1 s poll would.
    EXPECT_LE(probe.answered_at_ms() - a.run_at_ms, 250) << "late delivery";
  }
  EXPECT_EQ(State(q, "j"), "reserved");
  EXPECT_EQ(MustGet(q, "j").receipt, got[0].receipt);
  EXPECT_EQ(probe.calls(), 1);
}

TEST_P(QueueConformance, WaitingReserveIsServedByEveryWayAJobBecomesReady) {
  Queue& q = queue();
  const int64_t ttr = harness().brief_ms();  // must hold until its turn below
  // Set-up: one job per way, each in its own topic, none ready yet.
  MustAdd(q, Spec("way.release", "release"));
  Delivery rel = ReserveOne(q, "way.release");
  MustAdd(q, Spec("way.kick", "kick"));
  BuryNext(q, "way.kick");
  MustAdd(q, Spec("way.kicktopic", "kicktopic"));
  BuryNext(q, "way.kicktopic");
  MustAdd(q, Delayed("way.kickdelayed", "kickdelayed", kLongMs));
  JobSpec expiring = Spec("way.ttr", "ttr");
  expiring.ttr_ms = ttr;
  MustAdd(q, expiring);
  ReserveOne(q, "way.ttr");
  MustAdd(q, Delayed("way.replace", "replace", kLongMs));

  struct Way {
    const char* topic;
    const char* id;
    std::function<void()> make_ready;
  };
  std::vector<Way> ways = {
      {"way.add", "add", [&] { MustAdd(q, Spec("way.add", "add")); }},
      {"way.release", "release",
       [&] { ASSERT_TRUE(IsOk(q.Release("release", rel.receipt, 0, ""))); }},
      {"way.kick", "kick", [&] { ASSERT_TRUE(IsOk(q.Kick("kick"))); }},
      {"way.kicktopic", "kicktopic",
       [&] { ASSERT_TRUE(IsOk(q.KickTopic("way.kicktopic", 1).status())); }},
      {"way.kickdelayed", "kickdelayed", [&] { ASSERT_TRUE(IsOk(q.Kick("kickdelayed"))); }},
      {"way.ttr", "ttr", [&] { harness().AdvanceMs(ttr); }},
      {"way.replace", "replace",
       [&] {
         JobSpec now = Spec("way.replace", "replace");
         now.replace = true;
         MustAdd(q, now);
       }},
  };
  for (Way& way : ways) {
    SCOPED_TRACE(way.topic);
    ReserveProbe probe(q, Request({way.topic}, kLongMs));
    EXPECT_FALSE(probe.Answered()) << "answered before the job was ready";
    way.make_ready();
    Deliveries got = probe.TakeOk();
    EXPECT_EQ(Ids(got), std::vector<std::string>{way.id});
    EXPECT_EQ(State(q, way.id), "reserved");
  }
}

TEST_P(QueueConformance, WaitingReserveGetsTheJobsReadyAtThatMomentUpToCount) {
  Queue& q = queue();
  const int64_t at = harness().NowMs() + kShortMs;
  for (auto [id, prio] : {std::pair{"c", 3u}, {"a", 1u}, {"b", 2u}}) {
    JobSpec s = Spec("wbatch", id);
    s.priority = prio;
    s.run_at_ms = at;
    MustAdd(q, s);
  }
  ReserveProbe probe(q, Request({"wbatch"}, kLongMs, 2));
  harness().AdvanceMs(kShortMs);
  EXPECT_EQ(Ids(probe.TakeOk()), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(State(q, "c"), "ready");

  // It does not wait to fill the batch.
  ReserveProbe more(q, Request({"wbatch.one"}, kLongMs, 10));
  MustAdd(q, Spec("wbatch.one", "only"));
  EXPECT_EQ(Ids(more.TakeOk()), std::vector<std::string>{"only"});
}

TEST_P(QueueConformance, ABurstForManyWaitingReservesReachesEveryOneOldestFirst) {
  // More jobs at once than one round of serving hands out (the engine serves
  // waiting reserves in slices of ~256 jobs, at least one whole reserve):
  // every waiting reserve still gets its full count, with no other call
  // made, the oldest waiter the first jobs, no job twice. The jobs wait in a
  // paused topic, so that they all become available on one call (Resume)
  // however long adding them took.
  Queue& q = queue();
  const std::vector<uint32_t> counts = {260, 10, 30};
  ASSERT_TRUE(IsOk(q.Pause("burst.many", 0)));  // until resumed
  std::vector<std::string> order;
  uint32_t total = 0;
  for (uint32_t c : counts) total += c;
  for (uint32_t i = 0; i < total; ++i) {
    char id[16];
    std::snprintf(id, sizeof id, "b%05u", i);
    MustAdd(q, Spec("burst.many", id));
    order.push_back(id);
  }
  std::vector<std::unique_ptr<ReserveProbe>> probes;
  for (size_t w = 0; w < counts.size(); ++w) {
    probes.push_back(
        std::make_unique<ReserveProbe>(q, Request({"burst.many"}, kLongMs, counts[w])));
    // One at a time, so that their age is their order here.
    ASSERT_TRUE(WaitersReach(q, "burst.many", w + 1));
  }
  ASSERT_TRUE(IsOk(q.Resume("burst.many")));
  std::set<std::string> seen;
  size_t first = 0;
  for (size_t w = 0; w < counts.size(); ++w) {
    SCOPED_TRACE("waiter " + std::to_string(w));
    Deliveries got = probes[w]->TakeOk();
    ASSERT_EQ(got.size(), counts[w]);
    for (const Delivery& d : got) EXPECT_TRUE(seen.insert(d.id).second) << d.id << " twice";
    // Ready jobs go in the order they were added, to the oldest waiter first.
    EXPECT_EQ(got.front().id, order[first]);
    EXPECT_EQ(got.back().id, order[first + counts[w] - 1]);
    first += counts[w];
  }
  EXPECT_EQ(seen.size(), order.size());
  EXPECT_EQ(MustStats(q).ready, 0u);
}

TEST_P(QueueConformance, WaitThatRunsOutAnswersEmpty) {
  Queue& q = queue();
  const int64_t wait = harness().brief_ms();
  ReserveProbe probe(q, Request({"wait.out"}, wait, 5));
  EXPECT_NE(probe.ticket(), 0u);
  ASSERT_TRUE(WaitersReach(q, "wait.out", 1));
  if (harness().exact_time()) {
    harness().AdvanceMs(wait - 1);
    EXPECT_FALSE(probe.Answered(kQuiet)) << "the wait ended early";
    harness().AdvanceMs(1);
  } else {
    harness().AdvanceMs(wait);
  }
  auto r = probe.Take();
  ASSERT_TRUE(IsOk(r.status()));
  EXPECT_TRUE(r->empty());
  EXPECT_EQ(MustTopic(q, "wait.out").waiting, 0u);
  EXPECT_EQ(MustStats(q).waiting, 0u);
  // A job added afterwards stays ready: the expired waiter is gone.
  MustAdd(q, Spec("wait.out", "late"));
  EXPECT_EQ(State(q, "late"), "ready");
  EXPECT_EQ(probe.calls(), 1);
}

TEST_P(QueueConformance, CancelledReserveNeverRuns) {
  Queue& q = queue();
  ReserveProbe probe(q, Request({"cancel"}, kLongMs));
  ASSERT_NE(probe.ticket(), 0u) << "a reserve that waits must return a ticket";
  EXPECT_TRUE(q.CancelReserve(probe.ticket()));
  EXPECT_EQ(MustTopic(q, "cancel").waiting, 0u);
  MustAdd(q, Spec("cancel", "j"));
  EXPECT_FALSE(probe.Answered(kQuiet));
  EXPECT_EQ(State(q, "j"), "ready");
  EXPECT_FALSE(q.CancelReserve(probe.ticket())) << "a ticket cancels once";
  queue_.reset();  // closing the queue must not answer it either
  EXPECT_EQ(probe.calls(), 0);
}

TEST_P(QueueConformance, CancelReserveAfterTheAnswerReturnsFalse) {
  Queue& q = queue();
  EXPECT_FALSE(q.CancelReserve(0));
  EXPECT_FALSE(q.CancelReserve(987'654'321));
  ReserveProbe waited(q, Request({"cancel.late"}, kLongMs));
  MustAdd(q, Spec("cancel.late", "j"));
  EXPECT_EQ(Ids(waited.TakeOk()), std::vector<std::string>{"j"});
  EXPECT_FALSE(q.CancelReserve(waited.ticket()));
  MustAdd(q, Spec("cancel.late", "k"));
  ReserveProbe at_once(q, Request({"cancel.late"}, kLongMs));
  // Ticket 0 means "done already ran inside this call".
  EXPECT_TRUE(at_once.ticket() != 0 || at_once.Answered());
  EXPECT_EQ(Ids(at_once.TakeOk()), std::vector<std::string>{"k"});
  EXPECT_FALSE(q.CancelReserve(at_once.ticket()));
  EXPECT_EQ(waited.calls() + at_once.calls(), 2);
}

TEST_P(QueueConformance, BlockingReserveReturnsAJobAddedWhileItWaits) {
  Queue& q = queue();
  BlockingReserve blocked(q, Request({"block"}, kLongMs));
  ASSERT_TRUE(WaitersReach(q, "block", 1));
  MustAdd(q, Spec("block", "j"));
  auto r = blocked.Take();
  ASSERT_TRUE(IsOk(r.status()));
  EXPECT_EQ(Ids(*r), std::vector<std::string>{"j"});
}

TEST_P(QueueConformance, BlockingReserveReturnsEmptyWhenItsWaitRunsOut) {
  Queue& q = queue();
  const int64_t wait = harness().brief_ms();  // long enough to see the waiter register
  // Without a wait it answers at once, though a job is delayed.
  MustAdd(q, Delayed("block.out", "later", kLongMs));
  auto now = q.Reserve(Request({"block.out", "never.used"}, 0, 10));
  ASSERT_TRUE(IsOk(now.status()));
  EXPECT_TRUE(now->empty());

  BlockingReserve blocked(q, Request({"block.out"}, wait));
  EXPECT_TRUE(WaitersReach(q, "block.out", 1));
  harness().AdvanceMs(wait);
  auto r = blocked.Take();
  ASSERT_TRUE(IsOk(r.status()));
  EXPECT_TRUE(r->empty());
}

TEST_P(QueueConformance, ReserveCallbackMayCallBackIntoTheQueue) {
  Queue& q = queue();
  // Each callback finishes what it got, adds a follow-up job and reads stats,
  // all from inside the callback.
  struct Seen {
    std::mutex mu;
    std::vector<std::string> log;
  };
  auto seen = std::make_shared<Seen>();
  auto reenter = [&q, seen](const Result<Deliveries>& r) {
    std::vector<std::string> log;
    if (!r.ok()) {
      log.push_back("error " + r.status().ToString());
    } else {
      for (const Delivery& d : *r) {
        log.push_back("finish " + d.id + " " + q.Finish(d.id, d.receipt).ToString());
        auto added = q.Add(Spec("reenter.next", "after-" + d.id));
        log.push_back("add " + (added.ok() ? added->id : added.status().ToString()));
      }
    }
    log.push_back(q.Stats().ok() ? "stats ok" : "stats failed");
    std::lock_guard<std::mutex> lock(seen->mu);
    seen->log.insert(seen->log.end(), log.begin(), log.end());
  };

  // 1. Answered inside ReserveAsync (a job is ready).
  MustAdd(q, Spec("reenter", "inline"));
  std::optional<ReserveProbe> inline_probe;
  bool returned = ReturnsWithinDeadline(
      [&] { inline_probe.emplace(q, Request({"reenter"}, kLongMs), nullptr, reenter); });
  if (!returned) {
    (void)queue_.release();  // deadlocked: leak it rather than hang in its destructor
    FAIL() << "deadlock: a callback answered inside ReserveAsync called back into the queue";
  }
  EXPECT_TRUE(IsOk(inline_probe->Take().status()));

  // 2. Answered later, when time makes a job due (the queue's own thread).
  MustAdd(q, Delayed("reenter", "timed", kShortMs));
  ReserveProbe timed(q, Request({"reenter"}, kLongMs), nullptr, reenter);
  harness().AdvanceMs(kShortMs);
  if (!timed.Answered(kDeadline)) {
    (void)queue_.release();
    FAIL() << "deadlock: a callback answered when a job fell due called back into the queue";
  }

  // 3. Answered when another call makes a job ready.
  ReserveProbe by_add(q, Request({"reenter"}, kLongMs), nullptr, reenter);
  returned = ReturnsWithinDeadline([&] { MustAdd(q, Spec("reenter", "added")); });
  if (!returned || !by_add.Answered(kDeadline)) {
    (void)queue_.release();
    FAIL() << "deadlock: a callback answered by Add called back into the queue";
  }

  for (const char* id : {"inline", "timed", "added"}) {
    EXPECT_EQ(State(q, id), "gone") << id;
    EXPECT_EQ(State(q, std::string("after-") + id), "ready") << id;
  }
  std::lock_guard<std::mutex> lock(seen->mu);
  EXPECT_EQ(seen->log,
            (std::vector<std::string>{"finish inline ok", "add after-inline", "stats ok",
                                      "finish timed ok", "add after-timed", "stats ok",
                                      "finish added ok", "add after-added", "stats ok"}));
}

TEST_P(QueueConformance, DestroyingTheQueueAnswersWaitingReservesWithUnavailable) {
  Queue& q = queue();
  ReserveProbe a(q, Request({"closing"}, kLongMs));
  ReserveProbe b(q, Request({"closing", "closing.other"}, kLongMs, 10));
  ReserveProbe cancelled(q, Request({"closing"}, kLongMs));
  ASSERT_TRUE(q.CancelReserve(cancelled.ticket()));
  MustAdd(q, Delayed("closing", "pending", kLongMs));
  Queue* closing = queue_.release();  // a hung destructor must not meet TearDown
  if (!ReturnsWithinDeadline([closing] { delete closing; })) {
    FAIL() << "destroying a queue with waiting reserves did not return";
  }
  for (ReserveProbe* p : {&a, &b}) {
    auto r = p->Take();
    EXPECT_TRUE(HasCode(r.status(), Code::kUnavailable));
    EXPECT_EQ(p->calls(), 1);
  }
  EXPECT_EQ(cancelled.calls(), 0);
}

// A callback run while the queue closes may reserve again (a worker loop
// retrying after kUnavailable); that reserve must be answered too, at once.
TEST_P(QueueConformance, ReserveFromACallbackWhileClosingIsAnsweredUnavailable) {
  Queue* closing = queue_.release();
  std::atomic<int> retries{0};
  std::promise<Status> second;
  auto second_done = second.get_future();
  ReserveRequest req = Request({"closing.retry"}, kLongMs);
  closing->ReserveAsync(req, [closing, req, &retries, &second](Result<Deliveries> r) {
    EXPECT_TRUE(HasCode(r.status(), Code::kUnavailable));
    if (retries++ == 0) {
      closing->ReserveAsync(req,
                            [&second](Result<Deliveries> r2) { second.set_value(r2.status()); });
    }
  });
  if (!ReturnsWithinDeadline([closing] { delete closing; })) {
    FAIL() << "destroying a queue did not return";
  }
  ASSERT_EQ(second_done.wait_for(kDeadline), std::future_status::ready)
      << "a reserve made while the queue closed was never answered";
  EXPECT_TRUE(HasCode(second_done.get(), Code::kUnavailable));
}

// --- concurrency ---------------------------------------------------------------------

TEST_P(QueueConformance, ConcurrentProducersAndConsumersDeliverEveryJobExactlyOnce) {
  Queue& q = queue();
  constexpr int kProducers = 4;
  constexpr int kJobsEach = 2'000;
  constexpr int kConsumers = 4;
  constexpr int kTotal = kProducers * kJobsEach;
  const std::vector<std::string> topics = {"conc.a", "conc.b", "conc.c"};
  const QueueStats s0 = MustStats(q);

  std::mutex mu;
  std::map<std::string, int> deliveries;  // GUARDED_BY(mu)
  std::atomic<int> finished{0};
  std::atomic<bool> stop{false};
  auto seen = [&](const Delivery& d) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ++deliveries[d.id];
    }
    finished.fetch_add(1);
  };
  std::vector<std::thread> threads;
  for (int c = 0; c < kConsumers; ++c) {
    threads.emplace_back([&] { Consume(q, topics, stop, seen); });
  }
  std::atomic<int> add_failures{0};
  for (int p = 0; p < kProducers; ++p) {
    threads.emplace_back([&, p] {
      for (int i = 0; i < kJobsEach; ++i) {
        JobSpec s = Spec(topics[i % topics.size()], Name(Name("p", p, "-"), i));
        s.priority = static_cast<uint32_t>(i % 7);
        s.body = s.id;
        if (!q.Add(s).ok()) add_failures.fetch_add(1);
      }
    });
  }
  // Through Redis on a loaded two-core machine this takes seconds: what
  // must not happen is a stall.
  bool all = EventuallyWhileProgressing([&] { return finished.load() >= kTotal; },
                                        [&] { return static_cast<uint64_t>(finished.load()); });
  stop.store(true);
  for (std::thread& t : threads) t.join();

  EXPECT_EQ(add_failures.load(), 0);
  EXPECT_TRUE(all) << "only " << finished.load() << " of " << kTotal << " jobs were delivered";
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(deliveries.size(), static_cast<size_t>(kTotal));
  int twice = 0;
  for (const auto& [id, n] : deliveries) twice += n != 1;
  EXPECT_EQ(twice, 0) << "jobs delivered more than once";
  QueueStats s = MustStats(q);
  EXPECT_EQ(s.jobs, 0u);
  EXPECT_EQ(s.waiting, 0u);
  EXPECT_EQ(s.finished - s0.finished, static_cast<uint64_t>(kTotal));
}

TEST_P(QueueConformance, DelayedJobsUnderConcurrentTimeAreDeliveredOnceAndNeverEarly) {
  Queue& q = queue();
  constexpr int kProducers = 2;
  constexpr int kJobsEach = 500;
  constexpr int kTotal = kProducers * kJobsEach;
  const std::vector<std::string> topics = {"tconc.a", "tconc.b"};

  std::mutex mu;
  std::map<std::string, int> deliveries;  // GUARDED_BY(mu)
  int early = 0;                          // GUARDED_BY(mu)
  std::atomic<int> finished{0};
  std::atomic<bool> stop{false};
  auto seen = [&](const Delivery& d) {
    int64_t now = harness().NowMs();  // after the hand-out
    std::lock_guard<std::mutex> lock(mu);
    ++deliveries[d.id];
    if (d.run_at_ms > now) ++early;
    finished.fetch_add(1);
  };
  std::atomic<int64_t> latest_run_at{0};
  std::atomic<int> producing{kProducers};
  std::vector<std::thread> threads;
  for (int c = 0; c < 3; ++c) threads.emplace_back([&] { Consume(q, topics, stop, seen); });
  for (int p = 0; p < kProducers; ++p) {
    threads.emplace_back([&, p] {
      for (int i = 0; i < kJobsEach; ++i) {
        JobSpec s = Delayed(topics[i % 2], Name(Name("p", p, "-"), i), i % 40);
        // The ticker below may run far ahead of the consumers: no TTR may end.
        s.ttr_ms = 4'000'000'000u;
        auto r = q.Add(s);
        EXPECT_TRUE(IsOk(r.status()));
        if (!r.ok()) continue;
        int64_t seen_max = latest_run_at.load();
        while (r->run_at_ms > seen_max &&
               !latest_run_at.compare_exchange_weak(seen_max, r->run_at_ms)) {
        }
      }
      producing.fetch_sub(1);
    });
  }
  // Time moves while jobs are added and reserved, until every job is due.
  std::thread ticker([&] {
    auto until = std::chrono::steady_clock::now() + kDeadline;
    while (std::chrono::steady_clock::now() < until) {
      if (producing.load() == 0 && harness().NowMs() >= latest_run_at.load()) return;
      // Slow producers (a loaded machine) still see their jobs fall due.
      if (producing.load() > 0) until = std::chrono::steady_clock::now() + kDeadline;
      harness().AdvanceMs(1);
      std::this_thread::yield();
    }
  });
  ticker.join();
  bool all = EventuallyWhileProgressing([&] { return finished.load() >= kTotal; },
                                        [&] { return static_cast<uint64_t>(finished.load()); });
  stop.store(true);
  for (std::thread& t : threads) t.join();

  EXPECT_TRUE(all) << "only " << finished.load() << " of " << kTotal << " jobs were delivered";
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(early, 0) << "jobs handed out before their run_at";
  EXPECT_EQ(deliveries.size(), static_cast<size_t>(kTotal));
  int twice = 0;
  for (const auto& [id, n] : deliveries) twice += n != 1;
  EXPECT_EQ(twice, 0) << "jobs delivered more than once";
  EXPECT_EQ(MustStats(q).jobs, 0u);
}

TEST_P(QueueConformance, CancelRacingADeliveryIsExactlyOnce) {
  Queue& q = queue();
  constexpr int kRounds = 200;
  std::vector<std::unique_ptr<ReserveProbe>> probes;
  std::vector<bool> cancelled;
  for (int i = 0; i < kRounds; ++i) {
    std::string topic = Name("race.", i);
    probes.push_back(std::make_unique<ReserveProbe>(q, Request({topic}, kLongMs)));
    std::thread adder([&q, topic] { MustAdd(q, Spec(topic, topic + ".job")); });
    cancelled.push_back(q.CancelReserve(probes.back()->ticket()));
    adder.join();
  }
  int n_cancelled = 0;
  for (int i = 0; i < kRounds; ++i) {
    std::string id = Name("race.", i, ".job");
    if (cancelled[i]) {
      ++n_cancelled;
      EXPECT_EQ(State(q, id), "ready") << "a cancelled reserve took " << id;
    } else {
      EXPECT_EQ(Ids(probes[i]->TakeOk()), std::vector<std::string>{id});
      EXPECT_EQ(State(q, id), "reserved");
    }
  }
  // Give a wrongly answered cancelled reserve a moment to show itself.
  std::this_thread::sleep_for(kQuiet);
  for (int i = 0; i < kRounds; ++i) {
    EXPECT_EQ(probes[i]->calls(), cancelled[i] ? 0 : 1) << "round " << i;
  }
  RecordProperty("cancelled", n_cancelled);
}

TEST_P(QueueConformance, ConcurrentAddsOfOneIdSucceedOnce) {
  Queue& q = queue();
  constexpr int kThreads = 4;
  constexpr int kIds = 300;
  std::vector<std::vector<int>> won(kThreads);
  std::atomic<int> other_errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIds; ++i) {
        JobSpec s = Spec("same", Name("id-", i));
        s.body = std::to_string(t);
        auto r = q.Add(s);
        if (r.ok()) {
          won[t].push_back(i);
        } else if (r.status().code() != Code::kExists) {
          other_errors.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(other_errors.load(), 0);
  std::vector<int> winners(kIds, -1);
  int wins = 0;
  for (int t = 0; t < kThreads; ++t) {
    for (int i : won[t]) {
      EXPECT_EQ(winners[i], -1) << "id-" << i << " was added twice";
      winners[i] = t;
      ++wins;
    }
  }
  EXPECT_EQ(wins, kIds);
  for (int i = 0; i < kIds; i += 37) {
    EXPECT_EQ(MustGet(q, Name("id-", i)).body, std::to_string(winners[i]));
  }
  EXPECT_EQ(MustStats(q).jobs, static_cast<uint64_t>(kIds));
}

TEST_P(QueueConformance, ConcurrentFinishesOfOneDeliverySucceedOnce) {
  Queue& q = queue();
  constexpr int kJobs = 300;
  for (int i = 0; i < kJobs; ++i) MustAdd(q, Spec("fin.race", Name("f", i)));
  Deliveries got = ReserveNow(q, {"fin.race"}, kJobs);
  ASSERT_EQ(got.size(), static_cast<size_t>(kJobs));
  std::atomic<int> ok{0};
  std::atomic<int> other_errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (const Delivery& d : got) {
        Status s = q.Finish(d.id, t % 2 ? d.receipt : "");
        if (s.ok()) {
          ok.fetch_add(1);
        } else if (s.code() != Code::kNotFound) {
          other_errors.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), kJobs);
  EXPECT_EQ(other_errors.load(), 0);
  EXPECT_EQ(MustStats(q).jobs, 0u);
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(QueueConformance);

}  // namespace delayq::conformance
