// The worker runtime through the network client (issue 17: a Worker over
// StoreKind::kRemote against `delayq serve`, 50 handler slots, 100-byte
// bodies, no-op handler, >= 10x a BullMQ Worker of concurrency 50 on the
// memory store, >= 5x on the Redis store): see RunRemoteWorkerBench.
#ifndef DELAYQ_BENCH_REMOTE_WORKER_BENCH_H_
#define DELAYQ_BENCH_REMOTE_WORKER_BENCH_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace delayq::bench {

struct RemoteWorkerBenchOptions {
  std::string servers = "127.0.0.1:7701";  // QueueOptions::servers of the Worker's queue
  uint32_t threads = 50;                   // the Worker's handler threads (its slots)
  uint32_t producers = 2;                  // connections adding, each its own thread
  std::string add_mode = "pipeline";       // "pipeline" | "client" (see below)
  uint32_t batch = 50;                     // pipeline: ADDs per write
  uint64_t window = 1000;                  // jobs added and not yet finished, at most
  size_t body_bytes = 100;
  double seconds = 10;        // measured, after warmup_seconds
  double warmup_seconds = 2;  // not counted
  double drain_seconds = 15;  // after the run, for the jobs still outstanding
};

// The peer of bench/bullmq/lifecycle.js: producers add jobs due at once
// (TTR 60 s) to one topic while one Worker (`threads` threads, the topic's
// concurrency up to all of them, a handler that does nothing) reserves,
// runs and finishes them; at most `window` are outstanding, so the figure
// is steady-state throughput. add_mode "pipeline": each producer writes
// `batch` RESP `ADD topic * 0 60000 body` at once on its own connection and
// reads their replies (BullMQ's addBulk of 50: one pipeline); "client":
// each producer calls Queue::Add of its own RemoteQueue, one round trip per
// job. Counted between the warm-up's end and the end: the Worker's
// succeeded finishes (`lifecycles_per_s`), the adds answered, the
// process's CPU (producers + Worker), the Worker's reserves per job. Prints
// one JSON object; exit 1 on errors (adds refused, the Worker's queue calls
// that failed, jobs left after the drain).
int RunRemoteWorkerBench(const RemoteWorkerBenchOptions& opts);

}  // namespace delayq::bench

#endif  // DELAYQ_BENCH_REMOTE_WORKER_BENCH_H_
