// Measures the engine alone: one thread, a real clock, no I/O, no locks.
//
// Memory is read as the process RSS (/proc/self/statm) before and after
// adding the pending jobs, so it counts everything the engine holds: records,
// the id hash set, heaps, allocator slack.
#include "engine_bench.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace delayq::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

int64_t RssBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  long pages = 0, resident = 0;
  if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
  std::fclose(f);
  return static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE);
}

std::unique_ptr<engine::Engine> NewEngine() {
  engine::EngineOptions eo;
  eo.clock = SystemClock();
  auto e = engine::Engine::Create(eo);
  if (!e.ok()) {
    std::fprintf(stderr, "engine: %s\n", e.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(e).value();
}

// A client id of exactly `bytes` bytes (at least long enough for the number).
void SetId(JobSpec& spec, size_t bytes, uint64_t n) {
  if (bytes == 0) return;
  spec.id = "job-" + std::to_string(n);
  if (spec.id.size() < bytes) spec.id.insert(4, bytes - spec.id.size(), '0');
}

double LifecyclesPerSecond(const EngineBenchOptions& o) {
  auto e = NewEngine();
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
  auto start = Clock::now();
  for (uint64_t i = 0; i < o.cycles; ++i) {
    SetId(spec, o.id_bytes, i);
    auto added = e->Add(spec);
    e->Reserve(req, take);
    if (!added.ok() || !have || !e->Finish(got.id, got.receipt).ok()) {
      std::fprintf(stderr, "lifecycle %llu failed\n", static_cast<unsigned long long>(i));
      std::exit(1);
    }
  }
  return static_cast<double>(o.cycles) / Seconds(start);
}

std::vector<std::string>& AddedIds();

// Adds `n` delayed jobs (due in 1-2 hours, random order) numbered from `first`.
double AddDelayed(engine::Engine& e, const EngineBenchOptions& o, uint64_t first, uint64_t n,
                  std::mt19937_64& rng, bool keep_ids = true) {
  JobSpec spec;
  spec.topic = "bench";
  spec.body.assign(o.body_bytes, 'x');
  std::uniform_int_distribution<int64_t> delay(3'600'000, 7'200'000);
  // Generated ids are kept (outside the timed loop's cost but for a push)
  // so DeleteRange can find the jobs of the most recent call again.
  std::vector<std::string> ids;
  keep_ids = keep_ids && o.id_bytes == 0;
  if (keep_ids) ids.reserve(n);
  auto start = Clock::now();
  for (uint64_t i = first; i < first + n; ++i) {
    SetId(spec, o.id_bytes, i);
    spec.delay_ms = delay(rng);
    auto added = e.Add(spec);
    if (!added.ok()) {
      std::fprintf(stderr, "add %llu failed\n", static_cast<unsigned long long>(i));
      std::exit(1);
    }
    if (keep_ids) ids.push_back(std::move(added->id));
  }
  double rate = static_cast<double>(n) / Seconds(start);
  AddedIds() = std::move(ids);
  return rate;
}

// Deletes the jobs numbered [first, first + n) that AddDelayed added. With
// generated ids the numbers are not the ids, so the ids are kept on the side.
std::vector<std::string>& AddedIds() {
  static std::vector<std::string> ids;
  return ids;
}

void DeleteRange(engine::Engine& e, const EngineBenchOptions& o, uint64_t first, uint64_t n) {
  JobSpec spec;
  for (uint64_t i = first; i < first + n; ++i) {
    std::string id;
    if (o.id_bytes == 0) {
      id = AddedIds()[i - first];
    } else {
      SetId(spec, o.id_bytes, i);
      id = spec.id;
    }
    if (!e.Delete(id).ok()) {
      std::fprintf(stderr, "delete %s failed\n", id.c_str());
      std::exit(1);
    }
  }
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

double EngineLifecyclesPerSecond(const EngineBenchOptions& o) { return LifecyclesPerSecond(o); }

int RunEngineBench(const EngineBenchOptions& o) {
  std::mt19937_64 rng(o.seed);
  uint64_t adds = o.adds != 0 ? o.adds : (o.jobs < 1'000'000 ? o.jobs : 1'000'000);

  std::vector<double> lifecycles;
  for (int r = 0; r < o.rounds; ++r) lifecycles.push_back(LifecyclesPerSecond(o));

  // What a user sees: adding `adds` jobs to an empty queue, and adding as
  // many to one holding `jobs`. Both include their memory growth (page
  // faults, the id table's rehashes).
  double add_empty;
  {
    auto empty = NewEngine();
    add_empty = AddDelayed(*empty, o, 0, adds, rng, /*keep_ids=*/false);
  }
  auto big = NewEngine();
  int64_t rss_before = RssBytes();
  AddDelayed(*big, o, 0, o.jobs, rng, /*keep_ids=*/false);
  int64_t rss_after = RssBytes();
  double add_pending = AddDelayed(*big, o, o.jobs, adds, rng);
  DeleteRange(*big, o, o.jobs, adds);

  // The data structures alone: each engine has first added and deleted
  // `adds` jobs, so the timed adds reuse memory and table capacity. A VM's
  // speed drifts by tens of percent within a minute, so the empty and
  // pending rounds alternate and the medians are reported.
  std::vector<double> steady_empty, steady_pending;
  for (int r = 0; r < o.rounds; ++r) {
    {
      auto empty = NewEngine();
      AddDelayed(*empty, o, 0, adds, rng);
      DeleteRange(*empty, o, 0, adds);
      steady_empty.push_back(AddDelayed(*empty, o, 0, adds, rng, /*keep_ids=*/false));
    }
    steady_pending.push_back(AddDelayed(*big, o, o.jobs, adds, rng));
    DeleteRange(*big, o, o.jobs, adds);
  }

  double per_job = static_cast<double>(rss_after - rss_before) / static_cast<double>(o.jobs);
  double se = Median(steady_empty), sp = Median(steady_pending);
  std::printf(
      "{\"bench\":\"engine\",\"jobs\":%llu,\"body_bytes\":%zu,\"id\":\"%s\",\"id_bytes\":%zu,"
      "\"cycles\":%llu,\"adds\":%llu,\"rounds\":%d,\"lifecycles_per_s\":%.0f,"
      "\"bytes_per_pending_job\":%.1f,\"add_per_s_empty\":%.0f,\"add_per_s_pending\":%.0f,"
      "\"add_pending_ratio\":%.3f,\"growth_add_per_s_empty\":%.0f,"
      "\"growth_add_per_s_pending\":%.0f,\"growth_add_pending_ratio\":%.3f}\n",
      static_cast<unsigned long long>(o.jobs), o.body_bytes,
      o.id_bytes == 0 ? "generated" : "client", o.id_bytes == 0 ? size_t{24} : o.id_bytes,
      static_cast<unsigned long long>(o.cycles), static_cast<unsigned long long>(adds), o.rounds,
      Median(lifecycles), per_job, se, sp, sp / se, add_empty, add_pending,
      add_pending / add_empty);
  return 0;
}

}  // namespace delayq::bench
