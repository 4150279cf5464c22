// delayq-bench: load generator and micro-benchmarks. Each subcommand prints
// one JSON object on stdout, so scripts in bench/ can collect figures into
// docs/benchmarks.md.
//
//   delayq-bench engine --jobs N --body 100   the engine alone, in process
//   delayq-bench worker --jobs N --threads T  the Worker over the in-process
//                                             queue, beside the engine
//   delayq-bench remote-worker --servers H:P  the Worker through the network
//                                             client to a running server
//   delayq-bench cycle|put|reservelat|lateness|memory --proto resp|http|beanstalk ...
//                                             a running server over the
//                                             network (net_bench.h)
//   delayq-bench fill --jobs N --sample-file F
//                                             N jobs due in 1-30 days, a
//                                             sample of their ids to F
//   delayq-bench probe --sample-file F        GET and DELETE of those ids,
//                                             one at a time: latency
//   delayq-bench receive --port P --jobs N    the receiving end of push
//                                             delivery (push_receiver.h)
//   delayq-bench schedules --servers H:P --pids PID
//                                             N schedules on running servers:
//                                             memory, firings delivered once,
//                                             lateness (schedule_bench.h)
#include <cstdio>
#include <string>

#include "CLI/CLI.hpp"
#include "engine_bench.h"
#include "net_bench.h"
#include "push_receiver.h"
#include "remote_worker_bench.h"
#include "schedule_bench.h"
#include "worker_bench.h"

namespace {

using delayq::bench::NetTarget;

// `extra`: a plain-Redis protocol this subcommand also speaks, or nullptr.
void AddTarget(CLI::App* cmd, NetTarget* t, const char* extra) {
  std::string protos = "resp | http | beanstalk";
  if (extra != nullptr) protos += std::string(" | ") + extra;
  cmd->add_option("--proto", t->proto, protos)->capture_default_str();
  cmd->add_option("--host", t->host, "server address (IPv4)")->capture_default_str();
  cmd->add_option("--port", t->port,
                  "server port (0: 7701 resp, 7700 http, 11300 beanstalk, 6379 redis)")
      ->capture_default_str();
  cmd->add_option("--stall-seconds", t->stall_seconds,
                  "fail when the server owes replies this long")
      ->capture_default_str();
  cmd->add_option("--tls-ca", t->tls_ca,
                  "speak TLS, verifying the server's certificate with this PEM CA file "
                  "(handshakes before the timed part)");
}

CLI::App* AddEngine(CLI::App* app, delayq::bench::EngineBenchOptions* o) {
  CLI::App* engine = app->add_subcommand("engine", "the engine alone, in process, no I/O");
  engine->add_option("--jobs", o->jobs, "pending jobs for the memory and add-rate runs")
      ->capture_default_str();
  engine->add_option("--body", o->body_bytes, "body bytes per job")->capture_default_str();
  engine->add_option("--id-bytes", o->id_bytes, "client-chosen id length; 0 = generated ids")
      ->capture_default_str();
  engine->add_option("--cycles", o->cycles, "add->reserve->finish lifecycles to time")
      ->capture_default_str();
  engine->add_option("--adds", o->adds, "adds timed for the add rates (0 = min(jobs, 1M))")
      ->capture_default_str();
  engine->add_option("--seed", o->seed, "random seed")->capture_default_str();
  engine->add_option("--rounds", o->rounds, "rounds per figure (medians are reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  return engine;
}

CLI::App* AddWorker(CLI::App* app, delayq::bench::WorkerBenchOptions* o) {
  CLI::App* worker = app->add_subcommand(
      "worker", "delayq::Worker over the in-process queue, no-op handler, beside the engine");
  worker->add_option("--jobs", o->jobs, "lifecycles per round")->capture_default_str();
  worker->add_option("--threads", o->threads, "the worker's handler threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  worker->add_option("--body", o->body_bytes, "body bytes per job")->capture_default_str();
  worker->add_option("--window", o->window, "jobs added ahead of the worker, at most")
      ->capture_default_str()
      ->check(CLI::Range(1, 100'000'000));
  worker->add_option("--rounds", o->rounds, "rounds per figure (medians are reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  return worker;
}

CLI::App* AddRemoteWorker(CLI::App* app, delayq::bench::RemoteWorkerBenchOptions* o) {
  CLI::App* rw = app->add_subcommand(
      "remote-worker",
      "delayq::Worker through the network client to a running server, no-op handler, fed by "
      "producers (bench/bullmq/lifecycle.js's peer)");
  rw->add_option("--servers", o->servers, "the servers, host:port[,host:port...]")
      ->capture_default_str();
  rw->add_option("--threads", o->threads, "the worker's handler threads (its slots)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  rw->add_option("--producers", o->producers, "producer threads, a connection each")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  rw->add_option("--add-mode", o->add_mode,
                 "pipeline: --batch RESP ADDs per write; client: Queue::Add, one at a time")
      ->capture_default_str()
      ->check(CLI::IsMember({"pipeline", "client"}));
  rw->add_option("--batch", o->batch, "pipeline: ADDs per write")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  rw->add_option("--window", o->window, "jobs outstanding (added, not yet handled), at most")
      ->capture_default_str()
      ->check(CLI::Range(1, 100'000'000));
  rw->add_option("--body", o->body_bytes, "body bytes per job")->capture_default_str();
  rw->add_option("--seconds", o->seconds, "timed seconds")->capture_default_str();
  rw->add_option("--warmup-seconds", o->warmup_seconds, "untimed seconds first")
      ->capture_default_str();
  rw->add_option("--drain-seconds", o->drain_seconds, "after the run, for outstanding jobs")
      ->capture_default_str();
  return rw;
}

CLI::App* AddCycle(CLI::App* app, delayq::bench::CycleOptions* o) {
  CLI::App* cycle = app->add_subcommand(
      "cycle",
      "add -> reserve -> finish over the network, `depth` cycles in flight per connection");
  AddTarget(cycle, &o->target, nullptr);
  cycle->add_option("--connections", o->connections, "connections")->capture_default_str();
  cycle->add_option("--depth", o->depth, "cycles in flight per connection")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cycle->add_option("--body", o->body_bytes, "body bytes")->capture_default_str();
  cycle
      ->add_option("--topics", o->topics,
                   "topics the connections share, round robin (0: one per connection)")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  cycle->add_option("--seconds", o->seconds, "timed seconds")->capture_default_str();
  cycle->add_option("--warmup-seconds", o->warmup_seconds, "untimed seconds first")
      ->capture_default_str();
  cycle->add_option("--rate", o->rate, "cycles/s in all, paced (0: unpaced)")
      ->capture_default_str();
  cycle
      ->add_option("--jobs", o->jobs,
                   "run exactly this many cycles, then end (0: --seconds; no warm-up)")
      ->capture_default_str();
  return cycle;
}

CLI::App* AddPut(CLI::App* app, delayq::bench::PutOptions* o) {
  CLI::App* put = app->add_subcommand("put", "adds only over the network");
  AddTarget(put, &o->target, "redis-set");
  put->add_option("--connections", o->connections, "connections")->capture_default_str();
  put->add_option("--depth", o->depth, "adds pipelined per connection")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  put->add_option("--body", o->body_bytes, "body bytes")->capture_default_str();
  put->add_option("--seconds", o->seconds, "timed seconds")->capture_default_str();
  put->add_option("--warmup-seconds", o->warmup_seconds, "untimed seconds first")
      ->capture_default_str();
  put->add_option("--delay-ms", o->delay_ms, "delay of the jobs")->capture_default_str();
  put->add_option("--topic-prefix", o->topic_prefix,
                  "connection i adds to topic PREFIX-i (default: one of the process id's)");
  put->add_option("--jobs", o->jobs,
                  "add exactly this many jobs, then end (0: --seconds; no warm-up)")
      ->capture_default_str();
  return put;
}

CLI::App* AddReserveLatency(CLI::App* app, delayq::bench::ReserveLatencyOptions* o) {
  CLI::App* rl = app->add_subcommand(
      "reservelat",
      "one connection, one request at a time: add -> reserve -> finish; round trip of each");
  AddTarget(rl, &o->target, nullptr);
  rl->add_option("--cycles", o->cycles, "cycles timed")->capture_default_str();
  rl->add_option("--warmup-cycles", o->warmup_cycles, "untimed cycles first")
      ->capture_default_str();
  rl->add_option("--body", o->body_bytes, "body bytes")->capture_default_str();
  return rl;
}

CLI::App* AddLateness(CLI::App* app, delayq::bench::LatenessOptions* o) {
  CLI::App* late = app->add_subcommand(
      "lateness", "delivery time - due time of timed jobs, consumers in long-poll reserves");
  AddTarget(late, &o->target, nullptr);
  late->add_option("--jobs", o->jobs, "timed jobs preloaded")->capture_default_str();
  late->add_option("--far-jobs", o->far_jobs,
                   "jobs due in 1-2 h added first to the same topic (pending ballast)")
      ->capture_default_str();
  late->add_option("--window-seconds", o->window_seconds, "due times spread over this")
      ->capture_default_str();
  late->add_option("--lead-seconds", o->lead_seconds,
                   "first due time after the start (must cover the preload)")
      ->capture_default_str();
  late->add_option("--consumers", o->consumers, "consumer connections")->capture_default_str();
  late->add_option("--consumer-depth", o->consumer_depth,
                   "reserves in flight per consumer connection")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  late->add_option("--load-rate", o->load_rate, "cycles/s on other topics meanwhile (0: none)")
      ->capture_default_str();
  late->add_option("--load-connections", o->load_connections, "connections of the load")
      ->capture_default_str();
  late->add_option("--load-depth", o->load_depth, "load cycles in flight per connection")
      ->capture_default_str();
  late->add_option("--preload-connections", o->preload_connections, "connections adding the jobs")
      ->capture_default_str();
  late->add_option("--preload-depth", o->preload_depth, "adds in flight per connection")
      ->capture_default_str();
  late->add_option("--paced-preload-seconds", o->paced_preload_seconds,
                   "beanstalk: spread the timed adds evenly over this many seconds (0: no)")
      ->capture_default_str();
  late->add_option("--body", o->body_bytes, "body bytes")->capture_default_str();
  late->add_option("--wait-ms", o->wait_ms, "consumers' long-poll wait")->capture_default_str();
  late->add_option("--drain-seconds", o->drain_seconds,
                   "after the last due time, wait this long for missing jobs")
      ->capture_default_str();
  late->add_option("--seed", o->seed, "random seed of the due times")->capture_default_str();
  return late;
}

CLI::App* AddMemory(CLI::App* app, delayq::bench::MemoryOptions* o) {
  CLI::App* mem = app->add_subcommand(
      "memory", "RSS growth of the server process per pending job (jobs delayed 1 h)");
  AddTarget(mem, &o->target, "redis-hashzset");
  mem->add_option("--jobs", o->jobs, "jobs added")->capture_default_str();
  mem->add_option("--body", o->body_bytes, "body bytes")->capture_default_str();
  mem->add_option("--pid", o->pid, "server process whose VmRSS is read")->required();
  mem->add_option("--connections", o->connections, "connections")->capture_default_str();
  mem->add_option("--depth", o->depth, "adds in flight per connection")->capture_default_str();
  return mem;
}

CLI::App* AddFill(CLI::App* app, delayq::bench::FillOptions* o) {
  CLI::App* fill = app->add_subcommand(
      "fill",
      "exactly N jobs due far ahead (uniform over [now + min, now + max]), pipelined; a "
      "sample of their ids to a file");
  AddTarget(fill, &o->target, nullptr);
  fill->add_option("--jobs", o->jobs, "jobs added")->capture_default_str();
  fill->add_option("--body", o->body_bytes, "body bytes")->capture_default_str();
  fill->add_option("--connections", o->connections, "connections")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  fill->add_option("--depth", o->depth, "adds in flight per connection")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  fill->add_option("--min-delay-ms", o->min_delay_ms, "earliest due time, ms from the add")
      ->capture_default_str();
  fill->add_option("--max-delay-ms", o->max_delay_ms, "latest due time, ms from the add")
      ->capture_default_str();
  fill->add_option("--seed", o->seed, "random seed of the due times and the sample")
      ->capture_default_str();
  fill->add_option("--id-bytes", o->id_bytes,
                   "client-chosen ids of exactly this length: --id-prefix, then the job's "
                   "number zero-padded (0: the server's ids)")
      ->capture_default_str();
  fill->add_option("--id-prefix", o->id_prefix,
                   "client ids' prefix (default f<pid>-); give each fill on a server its own");
  fill->add_option("--topic", o->topic, "the topic (default b<pid>-far)");
  fill->add_option("--topics", o->topics, "spread over this many topics, <topic>-<k>")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  fill->add_option("--sample", o->sample, "ids kept, a uniform sample (reservoir)")
      ->capture_default_str();
  fill->add_option("--sample-file", o->sample_file, "where the sampled ids go, one per line");
  return fill;
}

CLI::App* AddProbe(CLI::App* app, delayq::bench::ProbeOptions* o) {
  CLI::App* probe = app->add_subcommand(
      "probe",
      "GET each id of a sample file, then DELETE them (and GET them again: gone), one request "
      "at a time over RESP: latency of each kind");
  AddTarget(probe, &o->target, nullptr);
  probe->add_option("--sample-file", o->sample_file, "ids, one per line (fill --sample-file)")
      ->required();
  probe->add_option("--deletes", o->deletes, "ids deleted after the GETs (-1: all)")
      ->capture_default_str();
  probe->add_option("--warmup", o->warmup, "untimed GETs of a missing id first")
      ->capture_default_str();
  probe->add_option("--seed", o->seed, "shuffles the ids")->capture_default_str();
  return probe;
}

CLI::App* AddSchedules(CLI::App* app, delayq::bench::ScheduleBenchOptions* o) {
  CLI::App* sc = app->add_subcommand(
      "schedules",
      "N schedules created over RESP, then their firings consumed by long-poll reserves: "
      "memory per schedule, every firing once, lateness, server CPU per firing");
  sc->add_option("--servers", o->servers,
                 "RESP addresses host:port[,host:port...]; schedules are created on the first, "
                 "consumers spread over all")
      ->delimiter(',')
      ->capture_default_str();
  sc->add_option("--pids", o->pids, "the servers' process ids (VmRSS, CPU), comma-separated")
      ->delimiter(',');
  sc->add_option("--schedules", o->schedules, "schedules created")->capture_default_str();
  sc->add_option("--cron", o->cron, "each schedule's cron")->capture_default_str();
  sc->add_option("--topic", o->topic, "the topic of their jobs")->capture_default_str();
  sc->add_option("--body", o->body, "each firing's job's body")->capture_default_str();
  sc->add_option("--name-prefix", o->name_prefix, "schedule i is PREFIX-i (default: sb<pid>)");
  sc->add_option("--seconds", o->seconds, "measured whole seconds (0: create only)")
      ->capture_default_str()
      ->check(CLI::Range(0, 86400));
  sc->add_option("--warmup-seconds", o->warmup_seconds, "after the creation, before the window")
      ->capture_default_str()
      ->check(CLI::Range(0, 3600));
  sc->add_option("--drain-seconds", o->drain_seconds, "after the window, for its last firings")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  sc->add_option("--consumers", o->consumers, "consumer connections in all")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  sc->add_option("--count", o->count, "RESERVE COUNT of each consumer (the server's limit: 1000)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  sc->add_option("--wait-ms", o->wait_ms, "RESERVE TIMEOUT")->capture_default_str();
  sc->add_option("--create-connections", o->create_connections,
                 "connections creating (and deleting) the schedules")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  sc->add_option("--create-depth", o->create_depth, "SCHEDULE SETs in flight per connection")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  sc->add_flag("--keep", o->keep, "leave the schedules in place (default: delete them at the end)");
  sc->add_option("--stall-seconds", o->stall_seconds, "fail when a server owes replies this long")
      ->capture_default_str();
  return sc;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"delayq-bench: load generator and benchmarks for delayq"};
  app.require_subcommand(1);
  delayq::bench::EngineBenchOptions engine_opts;
  delayq::bench::CycleOptions cycle_opts;
  delayq::bench::PutOptions put_opts;
  delayq::bench::ReserveLatencyOptions rl_opts;
  delayq::bench::LatenessOptions late_opts;
  delayq::bench::MemoryOptions mem_opts;
  CLI::App* engine = AddEngine(&app, &engine_opts);
  delayq::bench::WorkerBenchOptions worker_opts;
  CLI::App* worker = AddWorker(&app, &worker_opts);
  delayq::bench::RemoteWorkerBenchOptions remote_worker_opts;
  CLI::App* remote_worker = AddRemoteWorker(&app, &remote_worker_opts);
  CLI::App* cycle = AddCycle(&app, &cycle_opts);
  CLI::App* put = AddPut(&app, &put_opts);
  CLI::App* rl = AddReserveLatency(&app, &rl_opts);
  CLI::App* late = AddLateness(&app, &late_opts);
  CLI::App* mem = AddMemory(&app, &mem_opts);
  delayq::bench::FillOptions fill_opts;
  CLI::App* fill = AddFill(&app, &fill_opts);
  delayq::bench::ProbeOptions probe_opts;
  CLI::App* probe = AddProbe(&app, &probe_opts);
  delayq::bench::ReceiveOptions receive_opts;
  CLI::App* receive = app.add_subcommand(
      "receive", "an HTTP receiver for push delivery: requests/s and lateness of what arrives");
  receive->add_option("--port", receive_opts.port, "port on 127.0.0.1")->capture_default_str();
  receive->add_option("--jobs", receive_opts.jobs, "end after this many requests (0: --seconds)")
      ->capture_default_str();
  receive->add_option("--seconds", receive_opts.seconds, "end after this long at most")
      ->capture_default_str();
  receive->add_option("--status", receive_opts.status, "the answer's status code")
      ->capture_default_str();
  delayq::bench::ScheduleBenchOptions sched_opts;
  CLI::App* sched = AddSchedules(&app, &sched_opts);
  CLI11_PARSE(app, argc, argv);
  if (engine->parsed()) return delayq::bench::RunEngineBench(engine_opts);
  if (worker->parsed()) return delayq::bench::RunWorkerBench(worker_opts);
  if (remote_worker->parsed()) return delayq::bench::RunRemoteWorkerBench(remote_worker_opts);
  if (cycle->parsed()) return delayq::bench::RunCycleBench(cycle_opts);
  if (put->parsed()) return delayq::bench::RunPutBench(put_opts);
  if (rl->parsed()) return delayq::bench::RunReserveLatencyBench(rl_opts);
  if (late->parsed()) return delayq::bench::RunLatenessBench(late_opts);
  if (mem->parsed()) return delayq::bench::RunMemoryBench(mem_opts);
  if (fill->parsed()) return delayq::bench::RunFillBench(fill_opts);
  if (probe->parsed()) return delayq::bench::RunProbeBench(probe_opts);
  if (receive->parsed()) return delayq::bench::RunReceive(receive_opts);
  if (sched->parsed()) return delayq::bench::RunScheduleBench(sched_opts);
  return 2;
}
