// The engine micro-benchmark (SPEC §12 "engine alone" and "memory per pending
// job"): see RunEngineBench.
#ifndef DELAYQ_BENCH_ENGINE_BENCH_H_
#define DELAYQ_BENCH_ENGINE_BENCH_H_

#include <cstddef>
#include <cstdint>

namespace delayq::bench {

struct EngineBenchOptions {
  uint64_t jobs = 1'000'000;  // pending jobs for the memory and add-rate runs
  size_t body_bytes = 100;
  size_t id_bytes = 0;  // 0: generated ids
  uint64_t cycles = 2'000'000;
  uint64_t adds = 0;  // 0: min(jobs, 1M)
  uint64_t seed = 42;
  int rounds = 5;  // each rate is the median of this many rounds
};

// Prints one JSON object:
//   lifecycles_per_s        add -> reserve -> finish on one thread, few
//                           pending (median of `rounds`)
//   bytes_per_pending_job   RSS growth while adding `jobs` delayed jobs, / jobs
//   add_per_s_empty         adding `adds` jobs to an engine with none pending
//   add_per_s_pending       adding `adds` jobs with `jobs` already pending
//                           (both after the engine has added and deleted
//                           `adds` jobs, so memory and table capacity are
//                           reused as in a running queue: the data structures
//                           alone; medians of alternating rounds)
//   growth_add_per_s_*      the same into a brand-new engine and on top of
//                           the `jobs` just added: includes the kernel's page
//                           faults for new memory and the id table's growth
// Returns the process exit code.
int RunEngineBench(const EngineBenchOptions& opts);

// One round of `lifecycles_per_s` above (o.cycles, o.body_bytes, o.id_bytes):
// the engine's own figure, which `delayq-bench worker` sets beside its own.
double EngineLifecyclesPerSecond(const EngineBenchOptions& o);

}  // namespace delayq::bench

#endif  // DELAYQ_BENCH_ENGINE_BENCH_H_
