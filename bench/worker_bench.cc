// Measures the worker runtime over the in-process queue (store memory, real
// clock), beside the engine alone and the Queue alone, in the same process
// and run, so the ratios are not skewed by the VM's drift between runs.
#include "worker_bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "delayq/queue.h"
#include "delayq/worker.h"
#include "engine_bench.h"

namespace delayq::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

double Seconds(SteadyClock::time_point since) {
  return std::chrono::duration<double>(SteadyClock::now() - since).count();
}

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

[[noreturn]] void Fail(const std::string& what, const Status& s) {
  std::fprintf(stderr, "%s: %s\n", what.c_str(), s.ToString().c_str());
  std::exit(1);
}

std::unique_ptr<Queue> OpenMemory() {
  QueueOptions o;
  o.store = StoreKind::kMemory;
  auto q = OpenQueue(o);
  if (!q.ok()) Fail("open", q.status());
  return std::move(q).value();
}

// add -> reserve -> finish through the Queue interface on one thread.
double QueueLifecyclesPerSecond(const WorkerBenchOptions& o) {
  auto q = OpenMemory();
  JobSpec spec;
  spec.topic = "bench";
  spec.body.assign(o.body_bytes, 'x');
  ReserveRequest req;
  req.topics = {"bench"};
  Delivery got;
  bool have = false;
  ReserveCallback take = [&](Result<Deliveries> r) {
    have = r.ok() && !r->empty();
    if (have) got = std::move(r->front());
  };
  auto start = SteadyClock::now();
  for (uint64_t i = 0; i < o.jobs; ++i) {
    auto added = q->Add(spec);
    if (!added.ok()) Fail("add", added.status());
    have = false;
    q->ReserveAsync(req, take);
    if (!have) Fail("reserve", Internal("nothing handed out"));
    if (Status s = q->Finish(got.id, got.receipt); !s.ok()) Fail("finish", s);
  }
  return static_cast<double>(o.jobs) / Seconds(start);
}

struct WorkerRound {
  double per_s = 0;
  double cpu_s = 0;
  double reserves_per_job = 0;
};

WorkerRound WorkerLifecycles(const WorkerBenchOptions& o) {
  auto q = OpenMemory();
  WorkerOptions wo;
  wo.threads = o.threads;
  auto w = Worker::Create(*q, wo);
  if (!w.ok()) Fail("worker", w.status());
  std::atomic<uint64_t> handled{0};
  Status s = (*w)->Handle("bench", [&](const Delivery&) {
    handled.fetch_add(1, std::memory_order_relaxed);
    handled.notify_one();  // no system call unless the producer waits
    return Outcome::Success();
  });
  if (!s.ok()) Fail("handle", s);
  if (s = (*w)->Start(); !s.ok()) Fail("start", s);
  JobSpec spec;
  spec.topic = "bench";
  spec.body.assign(o.body_bytes, 'x');
  const double cpu0 = CpuSeconds();
  const auto start = SteadyClock::now();
  for (uint64_t i = 0; i < o.jobs; ++i) {
    // A full window: the producer sleeps until a handler runs, rather than
    // spin for a core the worker's threads need.
    for (uint64_t h = handled.load(); i - h >= o.window; h = handled.load()) handled.wait(h);
    auto added = q->Add(spec);
    if (!added.ok()) Fail("add", added.status());
  }
  // Done when the last finish is in: the worker counts it after the call.
  const auto deadline = SteadyClock::now() + std::chrono::seconds(60);
  while ((*w)->Stats().succeeded < o.jobs) {
    if (SteadyClock::now() > deadline) Fail("worker", Internal("stalled"));
    std::this_thread::yield();
  }
  WorkerRound r;
  r.per_s = static_cast<double>(o.jobs) / Seconds(start);
  r.cpu_s = CpuSeconds() - cpu0;
  WorkerStats st = (*w)->Stats();
  if (st.errors != 0) Fail("worker", Internal(st.last_error));
  r.reserves_per_job = static_cast<double>(st.reserves) / static_cast<double>(o.jobs);
  (*w)->Stop(0);
  return r;
}

}  // namespace

int RunWorkerBench(const WorkerBenchOptions& o) {
  EngineBenchOptions eo;
  eo.cycles = o.jobs;
  eo.body_bytes = o.body_bytes;
  std::vector<double> engine, queue, worker, cpu, reserves;
  // Alternating, so drift of the VM's speed hits all three alike.
  for (int r = 0; r < o.rounds; ++r) {
    engine.push_back(EngineLifecyclesPerSecond(eo));
    queue.push_back(QueueLifecyclesPerSecond(o));
    WorkerRound w = WorkerLifecycles(o);
    worker.push_back(w.per_s);
    cpu.push_back(w.cpu_s);
    reserves.push_back(w.reserves_per_job);
  }
  const double e = Median(engine), q = Median(queue), w = Median(worker);
  std::printf(
      "{\"bench\":\"worker\",\"jobs\":%llu,\"threads\":%u,\"body_bytes\":%zu,\"window\":%llu,"
      "\"rounds\":%d,\"engine_lifecycles_per_s\":%.0f,\"queue_lifecycles_per_s\":%.0f,"
      "\"worker_lifecycles_per_s\":%.0f,\"worker_cpu_s\":%.2f,\"worker_reserves_per_job\":%.3f,"
      "\"worker_ratio\":%.3f,\"queue_ratio\":%.3f}\n",
      static_cast<unsigned long long>(o.jobs), o.threads, o.body_bytes,
      static_cast<unsigned long long>(o.window), o.rounds, e, q, w, Median(cpu), Median(reserves),
      w / e, q / e);
  return 0;
}

}  // namespace delayq::bench
