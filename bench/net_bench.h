// The network benchmarks of delayq-bench: load a running server (delayq or
// a peer) over its own protocol and print one JSON object on stdout.
// See bench/README.md for what each measures and how bench/server.sh uses
// them; SPEC §12 for the targets.
//
//   cycle     add -> reserve -> finish, N connections, D cycles in flight each
//   put       adds only
//   reservelat one connection, one request at a time: add, reserve,
//             finish; the round trip of each reserve
//   lateness  delivery time - due time of 1M timed jobs, optionally under load
//   memory    RSS growth of the server per pending job
//   fill      exactly N jobs due far ahead (1-30 days), pipelined; a sample
//             of their ids to a file
//   probe     GET, then DELETE, of the sampled ids one at a time: latency
//
// Every run ends by itself: after its seconds or its jobs, or with exit code
// 1 and a message on stderr when the server stops answering (stall limit).
#ifndef DELAYQ_BENCH_NET_BENCH_H_
#define DELAYQ_BENCH_NET_BENCH_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace delayq::bench {

// Where and how to talk.
struct NetTarget {
  // resp | http | beanstalk; redis-set (put only); redis-hashzset (memory only)
  std::string proto = "resp";
  std::string host = "127.0.0.1";
  int port = 0;               // 0: the protocol's default (7701, 7700, 11300, 6379)
  double stall_seconds = 10;  // no reply for this long (beyond a reserve's wait): fail
  // PEM CA file: speak TLS, the server's certificate verified with it for
  // `host` (handshakes at setup, not timed). Empty: plaintext.
  std::string tls_ca;
};

// Each connection works on its own topic (beanstalk: tube), so a reserve
// always finds that connection's own job. A connection keeps `depth`
// cycles in flight as a rolling pipeline: one write carries the finishes
// of the jobs the previous batch reserved plus `depth` adds and `depth`
// reserves; the next batch is written when all of its replies are in. So a
// cycle costs one round trip per `depth` cycles, and a reserve always
// follows its add on the same connection.
struct CycleOptions {
  NetTarget target;
  int connections = 50;
  int depth = 16;
  size_t body_bytes = 100;
  double seconds = 10;
  double warmup_seconds = 1;
  int64_t reserve_wait_ms = 1000;  // a reserve finds its job at once; this is a safety net
  // Topics the connections share: connection i uses topic i % topics. 0: a
  // topic of its own each. 1: one queue for all, like a BullMQ queue with
  // many workers.
  int topics = 0;
  double rate = 0;  // cycles/s in all, paced; 0: as fast as replies come
  // > 0: begin exactly this many cycles, then end once they are finished
  // (no time limit; every cycle is counted, warmup_seconds is not used).
  uint64_t jobs = 0;
};

// Adds only: each connection writes `depth` adds and waits for their
// replies (redis-benchmark's -P), delay `delay_ms`, TTR 60 s.
struct PutOptions {
  NetTarget target;
  int connections = 50;
  int depth = 1;
  size_t body_bytes = 100;
  double seconds = 10;
  double warmup_seconds = 1;
  int64_t delay_ms = 0;
  // > 0: add exactly this many jobs, then end once all are answered (no
  // time limit; every add is counted, warmup_seconds is not used).
  uint64_t jobs = 0;
  // Connection i adds to topic "<topic_prefix>-<i>"; empty: a prefix of the
  // process id's.
  std::string topic_prefix;
};

// One connection, one request in flight: add, then reserve that job, then
// finish it, each written after the previous reply, `cycles` times after
// `warmup_cycles` uncounted ones. Reports the round trip of each kind of
// request, the reserve's above all: how fast the server finds a due job
// (SPEC §12: reserve after 10M finished jobs vs a fresh server).
struct ReserveLatencyOptions {
  NetTarget target;
  uint64_t cycles = 20'000;
  uint64_t warmup_cycles = 1'000;
  size_t body_bytes = 100;
  int64_t reserve_wait_ms = 1000;  // the job is due at once; this is a safety net
};

// Preloads `jobs` jobs due uniformly at random over [t0 + lead, t0 + lead +
// window] (resp AT / http run_at_ms, absolute; beanstalk whole seconds from
// the put's send time, which then is the job's due time), with `consumers`
// connections waiting in long-poll reserves that finish each job they get.
// Each body starts with "<due ms> <sequence> ". Lateness = wall-clock time
// the reply was read - due time. With load_rate > 0, `load_connections`
// more connections run cycles on their own topics at that many cycles/s in
// total, as in CycleOptions, paced in batches of `load_depth` (so that half
// the rate of an unpaced `cycle` run costs the server about half its CPU).
//
// With far_jobs > 0, that many jobs due 1-2 hours out are added to the same
// topic first (not timed, never delivered in the run): the server then holds
// far_jobs + jobs pending while only `jobs` fall due, so the figure measures
// the timers of a big queue rather than how fast K consumers can drain tens
// of thousands of deliveries a second.
struct LatenessOptions {
  NetTarget target;
  uint64_t jobs = 1'000'000;
  uint64_t far_jobs = 0;
  double window_seconds = 30;
  double lead_seconds = 10;  // must exceed the preload's duration
  int consumers = 8;
  // Reserves in flight per consumer connection: the server holds the next
  // one while the client finishes a job, so deliveries do not wait for a
  // consumer's round trip (count 1 each).
  int consumer_depth = 4;
  double load_rate = 0;
  int load_connections = 8;
  int load_depth = 16;
  int preload_connections = 4;
  int preload_depth = 64;  // adds in flight per preload connection
  // Whole-second protocols only: the timed adds are paced evenly over this
  // many seconds. A job's due time is its put's send time + whole seconds,
  // so its place within a second is the send time's: a preload done in a
  // burst would make every job of a second fall due in that burst.
  double paced_preload_seconds = 2;
  size_t body_bytes = 100;
  int64_t wait_ms = 1000;     // consumers' long-poll wait
  double drain_seconds = 10;  // after the last due time, wait this long for stragglers
  uint64_t seed = 42;
};

// RSS growth of process `pid` (read from /proc/PID/status) while adding
// `jobs` jobs delayed by one hour, / jobs.
struct MemoryOptions {
  NetTarget target;
  uint64_t jobs = 1'000'000;
  size_t body_bytes = 100;
  int pid = 0;
  int connections = 4;
  int depth = 256;              // adds in flight per connection
  double settle_seconds = 0.5;  // pause before reading RSS after the last reply
};

// Adds exactly `jobs` jobs over `connections` connections, `depth` adds in
// flight on each (refilled once half came back), each due at a time drawn
// uniformly from [now + min_delay_ms, now + max_delay_ms] (an absolute
// AT / run_at_ms, "now" being the wall clock when the add is written), TTR
// 60 s. Ids: the server's (id_bytes 0) or the client's, id_prefix then the
// job's number zero-padded to exactly id_bytes bytes (unique within a run;
// give each run on a server its own prefix). A uniform sample of `sample`
// acknowledged ids (reservoir, over the replies) goes to sample_file, one
// per line. Job k goes to topic "<topic>" (topics 1) or "<topic>-<k %
// topics>".
struct FillOptions {
  NetTarget target;
  uint64_t jobs = 1'000'000;
  size_t body_bytes = 100;
  int connections = 4;
  int depth = 256;
  int64_t min_delay_ms = 86'400'000;     // 1 day
  int64_t max_delay_ms = 2'592'000'000;  // 30 days
  uint64_t seed = 1;
  size_t id_bytes = 0;    // 0: ids chosen by the server
  std::string id_prefix;  // client ids: empty means "f<pid>-"
  std::string topic;      // empty: a per-run one ("b<pid>-far")
  int topics = 1;
  uint64_t sample = 0;
  std::string sample_file;
};

// Reads ids (one per line) from sample_file and, on one connection, one
// request at a time (RESP), GETs each of them in an order shuffled by
// `seed`, then DELETEs the first `deletes` of that order (-1: all), then
// GETs those again (untimed: each must be gone). Each request is timed
// from its write to its reply. `warmup` GETs of an id that does not exist
// come first, untimed. Every sampled id must be found by the GET and by
// the DELETE: exit code 1 otherwise.
struct ProbeOptions {
  NetTarget target;
  std::string sample_file;
  int64_t deletes = -1;
  uint64_t warmup = 100;
  uint64_t seed = 1;
};

// Each returns the process exit code: 0, 1 (the server failed or stopped
// answering), 2 (bad options).
int RunCycleBench(const CycleOptions& o);
int RunPutBench(const PutOptions& o);
int RunReserveLatencyBench(const ReserveLatencyOptions& o);
int RunLatenessBench(const LatenessOptions& o);
int RunMemoryBench(const MemoryOptions& o);
int RunFillBench(const FillOptions& o);
int RunProbeBench(const ProbeOptions& o);

}  // namespace delayq::bench

#endif  // DELAYQ_BENCH_NET_BENCH_H_
