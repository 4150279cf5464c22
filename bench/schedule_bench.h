// The schedules benchmark of delayq-bench (SPEC §9, docs/schedules.md):
// N schedules created over RESP on running servers, then their firings
// consumed and checked. Prints one JSON object on stdout.
//
//   creation   pipelined SCHEDULE SET <prefix>-<i> cron C topic T over a few
//              connections to the first server: sets/s, and the RSS growth
//              of each server (--pids) per schedule
//   firings    consumers in long-poll RESERVE ... COUNT k on every server,
//              each finishing what it got in one write with its next
//              reserve; over the measured window [W0, W1) of whole seconds:
//              every fire time of every schedule in it delivered (a cron
//              firing each second: schedules x seconds), none twice (a job
//              id delivered with attempts 1 more than once), lateness =
//              wall time the reply was read - fire time (the id's suffix
//              after '@'), early deliveries, and the servers' CPU (utime +
//              stime) per firing delivered
//
// With --seconds 0 only the creation runs (idle schedules: memory), and with
// --keep the schedules are left in place (else each is deleted at the end).
// A run ends by itself: after the window and its drain, or with exit code 1
// when a server stops answering.
#ifndef DELAYQ_BENCH_SCHEDULE_BENCH_H_
#define DELAYQ_BENCH_SCHEDULE_BENCH_H_

#include <cstdint>
#include <string>
#include <vector>

namespace delayq::bench {

struct ScheduleBenchOptions {
  // RESP addresses host:port; schedules are created on the first, consumers
  // are spread round robin over all (servers sharing one Redis).
  std::vector<std::string> servers = {"127.0.0.1:7701"};
  // The servers' process ids, read for VmRSS and CPU (optional; with several
  // servers, figures are summed over them).
  std::vector<int> pids;
  uint64_t schedules = 10'000;
  std::string cron = "* * * * * *";
  std::string topic = "sched.bench";
  std::string body;         // each firing's job's body
  std::string name_prefix;  // schedule i is "<prefix>-<i>"; default "sb<pid>"
  // Measured whole seconds; 0: create only (no consumers, no firings checked).
  int seconds = 30;
  int warmup_seconds = 2;  // after the creation, before the window
  int drain_seconds = 3;   // after the window, for firings of its last second
  int consumers = 8;       // connections in all, round robin over the servers
  int count = 500;         // RESERVE COUNT
  int64_t wait_ms = 1000;  // RESERVE TIMEOUT
  int create_connections = 4;
  int create_depth = 256;       // SCHEDULE SETs in flight per connection
  bool keep = false;            // leave the schedules in place at the end
  double settle_seconds = 0.5;  // before the RSS is read after the creation
  double stall_seconds = 10;
};

// Returns the exit code: 0; 1 (a server failed, stopped answering, or a
// firing was missing, duplicated or early); 2 (bad options).
int RunScheduleBench(const ScheduleBenchOptions& o);

}  // namespace delayq::bench

#endif  // DELAYQ_BENCH_SCHEDULE_BENCH_H_
