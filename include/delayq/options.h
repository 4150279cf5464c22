// QueueOptions: which store keeps the jobs, and how (SPEC §2, §4). Typed:
// a store and an fsync policy are enums, named on the command line and in
// the environment by the strings ParseStoreKind / ParseFsyncPolicy accept.
#ifndef DELAYQ_OPTIONS_H_
#define DELAYQ_OPTIONS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "delayq/clock.h"
#include "delayq/job.h"

namespace delayq {

enum class StoreKind {
  kMemory,    // "memory": in-process, nothing kept across restarts
  kEmbedded,  // "embedded": in-process, kept in a durable log in data_dir
  kRedis,     // "redis": kept in Redis or Redis Cluster at redis_url
  kRemote,    // "remote": kept by one or more `delayq serve` at `servers`,
              // reached over RESP (the network client, src/client)
};
// "memory", "embedded", "redis", "remote"; nullopt for anything else.
std::optional<StoreKind> ParseStoreKind(std::string_view name);
std::string_view StoreKindName(StoreKind store);

// When a change of the embedded store counts as done (SPEC §4).
enum class FsyncPolicy {
  kAlways,    // "always": once an fdatasync covers it (fdatasyncs are shared)
  kEverySec,  // "everysec": once written (survives a killed process); an
              // fdatasync each second bounds what a power loss takes
  kNever,     // "never": once written; the OS syncs when it likes
};
// "always", "everysec", "never"; nullopt for anything else.
std::optional<FsyncPolicy> ParseFsyncPolicy(std::string_view name);
std::string_view FsyncPolicyName(FsyncPolicy policy);

inline constexpr int64_t kDefaultDedupWindowMs = 300'000;
// The most adds with an idempotency key an in-process queue remembers.
inline constexpr size_t kMaxRememberedAdds = 1'000'000;

struct QueueOptions {
  // Where jobs live. kEmbedded: in-process, kept in a durable log in
  // data_dir (SPEC §2). kRedis: kept in Redis or Redis Cluster (redis_url),
  // shared by every server and application that opens the same URL and
  // prefix. kMemory: in-process, nothing kept across restarts.
  // Default: kMemory.
  StoreKind store = StoreKind::kMemory;
  // kRedis: redis://[[user]:password@]host:port[,host:port...][/db]; a
  // cluster is detected. rediss://...: the same over TLS (every connection,
  // to cluster nodes too, verifies the server's certificate and its name:
  // the URL's host, or the address the cluster announces). Or
  // redis+sentinel://[[user]:password@]host:port[,host:port...]/MASTER_NAME[/db]:
  // the sentinels, asked where that master is, followed across failovers.
  // Default: "redis://127.0.0.1:6379".
  std::string redis_url = "redis://127.0.0.1:6379";
  // kRedis: the prefix of every key, so deployments can share one Redis.
  // Default: "delayq".
  std::string redis_prefix = "delayq";
  // kRedis: buckets the jobs are spread over (each one slot of a cluster);
  // fixed when a prefix is first used. 0 (the default): the count the
  // prefix was first used with, or, for a new prefix, 1 on a standalone
  // Redis (every round then costs one script call per kind) and 16 on a
  // cluster (spread over its masters).
  uint32_t redis_buckets = 0;
  // kRedis: a change (an add, a reserve, a finish, a release, ...) is
  // acknowledged only once this many replicas of its master confirm they have
  // it (one WAIT per round and master); when they do not within
  // redis_wait_timeout_ms the call fails with kUnavailable (the change is on
  // the master and may or may not survive its failure: an add may be
  // repeated with the same id). docs/redis-store.md, "What survives a
  // failure". Defaults: 0 (acknowledged once the master has it), 1000.
  uint32_t redis_wait_replicas = 0;
  int64_t redis_wait_timeout_ms = 1000;
  // kRedis with a rediss:// URL only (with redis:// they are an
  // InvalidArgument naming the option): PEM files. The CA bundle that signs
  // Redis's certificate (empty: the system's trust store), and for mutual
  // TLS (Redis's tls-auth-clients) a client certificate and its key, both
  // or neither. Read when the queue opens. Defaults: empty.
  std::string redis_tls_ca_file;    // PEM CA bundle; empty: the system's trust store
  std::string redis_tls_cert_file;  // client certificate (mutual TLS), PEM
  std::string redis_tls_key_file;   // its key
  // kEmbedded: the directory of its log, created if missing; one queue at
  // a time may use it. Default: "data".
  std::string data_dir = "data";
  // kEmbedded: when a change counts as done; calls return then (with
  // kAlways they block until an fdatasync covers them, sharing fdatasyncs).
  // Default: kEverySec.
  FsyncPolicy fsync = FsyncPolicy::kEverySec;
  // kEmbedded: a log segment is closed at this size. Default: 64 MiB.
  uint64_t segment_bytes = 64 << 20;
  // kEmbedded: the memory window. A delayed job due further ahead than this
  // keeps nothing in memory but what finding it by id needs (at most 24
  // bytes); its record stays in the log, read back to answer for it and
  // brought into memory this long before it is due (docs/engine.md,
  // "Far-future jobs"). -1: every job stays in memory. Default: -1.
  int64_t memory_window_ms = -1;
  // kEmbedded with a memory window: entries of the far jobs' time index kept
  // in memory before they are written to a file as a sorted run (24 bytes
  // each). Default: 1,048,576.
  size_t far_index_memory_entries = size_t{1} << 20;
  // kEmbedded with a memory window: while serving, a far-future checkpoint
  // (docs/log-format.md) is written once a crash's restart would replay
  // this many bytes of log (and at least twice what the last one wrote
  // again, and its slots' table), so that the restart replays only what
  // came after it. 0: only at a clean stop. Default: 1 GiB.
  uint64_t far_checkpoint_bytes = uint64_t{1} << 30;
  // kEmbedded with a memory window: a budget for the jobs in memory, in
  // bytes of their records. Past it, jobs beyond the window's start come
  // into memory only when due, and adds not due yet go to the log only,
  // however near. 0: no budget. Default: 0.
  uint64_t memory_window_bytes = 0;
  // kEmbedded: a log damaged amid its records (docs/log-format.md, "Damage").
  // false (the default): opening fails, naming the file, the offset and what
  // to run. true (`delayq serve --repair`): the damaged bytes are dropped,
  // every record that verifies is kept, and a warning says what was dropped.
  bool repair_log = false;
  // kRemote: the servers, "host:port[,host:port...]" (IPv6 as "[::1]:7701";
  // the port defaults to 7701). Every server named must serve the same jobs
  // (one Redis behind them all): a request goes to the first that answers,
  // and moves on to the next when one is down. Default: "127.0.0.1:7701".
  std::string servers = "127.0.0.1:7701";
  // kRemote: sent as `AUTH token` on every connection when not empty (the
  // servers' --auth-token). Default: none.
  std::string auth_token;
  // kRemote: speak TLS to the servers (their --tls-cert-file), checking each
  // one's certificate against tls_ca_file (PEM; empty: the system's trust
  // store) and against the host of its address (a name or an IP address).
  // tls_cert_file and tls_key_file: this client's certificate (PEM) for
  // servers that ask for one (--tls-ca-cert-file); both or neither.
  // Default: off.
  bool tls = false;
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  // kRemote: bound on each TCP connect. Default: 1000.
  int connect_timeout_ms = 1000;
  // kRemote: bound on each request's reply; a waiting reserve gets its wait
  // on top of it. Default: 5000.
  int request_timeout_ms = 5000;
  // kMemory, kEmbedded, kRedis: how long an add made with an idempotency
  // key (JobSpec::idempotency_key) is remembered, from that add: a repeat
  // of it within this time changes nothing (docs/api.md, "Idempotent
  // adds"). kMemory and kEmbedded also remember at most
  // kMaxRememberedAdds such adds, dropping the oldest first. Default: 5
  // minutes (as SQS FIFO's deduplication interval). 0: not remembered.
  int64_t dedup_window_ms = kDefaultDedupWindowMs;
  // Default: SystemClock(). kRemote: time is the servers'; the clock only
  // orders the ids the client generates.
  std::shared_ptr<Clock> clock;
  Limits limits;
};

}  // namespace delayq

#endif  // DELAYQ_OPTIONS_H_
