// The worker runtime's benchmark (issue 17: Worker over the in-process
// queue, no-op handler, >= 50% of the engine's own lifecycles/s in the same
// run): see RunWorkerBench.
#ifndef DELAYQ_BENCH_WORKER_BENCH_H_
#define DELAYQ_BENCH_WORKER_BENCH_H_

#include <cstddef>
#include <cstdint>

namespace delayq::bench {

struct WorkerBenchOptions {
  uint64_t jobs = 1'000'000;  // lifecycles timed per round
  uint32_t threads = 4;       // the Worker's handler threads (its default)
  size_t body_bytes = 100;
  // Jobs added and not yet handled, at most: a backlog, so the worker's
  // reserves find jobs ready and come in batches (with a few, a waiting
  // reserve is answered by each add, one job and one thread wake-up each:
  // then the producer, not the worker, sets the pace). The producer sleeps
  // while the window is full.
  uint64_t window = 10'000;
  int rounds = 3;  // each rate is the median of this many rounds
};

// Prints one JSON object, each rate the median of `rounds`:
//   engine_lifecycles_per_s  the engine alone, one thread (as `engine`)
//   queue_lifecycles_per_s   the same loop through the in-process Queue
//                            (store memory: its mutex, ReserveAsync's
//                            callback), one thread
//   worker_lifecycles_per_s  a producer thread adds `jobs` (at most `window`
//                            ahead), a Worker with `threads` threads and a
//                            no-op handler reserves, runs and finishes them;
//                            from the first add to the last finish
//   worker_cpu_s             the process's CPU seconds in that round (the
//                            producer and the worker share the machine)
//   worker_ratio             worker / engine
// Returns the process exit code.
int RunWorkerBench(const WorkerBenchOptions& opts);

}  // namespace delayq::bench

#endif  // DELAYQ_BENCH_WORKER_BENCH_H_
