// Client: what a Redis-backed queue talks to. One object for a standalone
// Redis, a Redis Cluster, or a master watched by Redis Sentinel; the caller
// names, with every command, the key that routes it, and the Client finds
// the node.
//
// Open connects to the first seed of the URL that answers, asks `INFO
// cluster`, and in cluster mode loads the slot map (`CLUSTER SLOTS`). With a
// redis+sentinel:// URL it asks the sentinels, in order, `SENTINEL
// get-master-addr-by-name`, and takes the first answer whose node says `ROLE`
// master. A command goes to the master serving the slot of its key (slot.h);
// with one master the key is ignored. On the way:
//
//   MOVED slot host:port   the map is stale: the slot's entry is corrected at
//                          once, the whole map is reloaded (at most once per
//                          min_refresh_interval_ms: a reload asked for sooner
//                          is made by the first call after it), the command is
//                          sent again to the node named.
//   ASK slot host:port     the slot is being migrated and this key has moved:
//                          ASKING then the command, on that node, this once;
//                          the map does not change.
//   TRYAGAIN, CLUSTERDOWN, LOADING
//                          sent again after 10, 20, 40, ... ms, up to
//                          retry_attempts times; then kUnavailable.
//   READONLY               the node is a replica now (a failover demoted it):
//                          the master is looked up again (the slot map, or the
//                          sentinels) and the command goes to the new one; if
//                          none is known yet, kUnavailable.
//   NOSCRIPT (a Script)    SCRIPT LOAD on that node, then EVALSHA again, once.
//   a node unreachable     when nothing was written to it, the master is
//                          looked up again (the slot map from any node that
//                          answers, or the sentinels) and, if the slot now has
//                          another owner, the command goes there; otherwise
//                          kUnavailable at once (no waiting on a dead node:
//                          see Connection's backoff). When the command was
//                          written, kUnavailable (it may have run), and the
//                          next command finds the new master.
//
// MOVED, ASK, READONLY and reroutes count as redirections, at most
// max_redirects per command, so a misconfigured cluster cannot bounce a
// command forever. Every resend is of a command Redis refused to run (MOVED,
// ASK, TRYAGAIN, CLUSTERDOWN, LOADING, READONLY, NOSCRIPT) or that was never
// written: nothing runs twice.
//
// Sentinel: besides asking again on READONLY and on a lost master, a
// Subscriber on the sentinels follows `+switch-master` announcements for the
// master's name, and asks again after each (re)connect to a sentinel, so a
// failover is usually known before the first command meets the old master.
//
// Replicas (ClientOptions::wait_replicas > 0): a node's pipeline that holds a
// command marked Command::needs_replicas ends with `WAIT wait_replicas
// wait_timeout_ms` on the same connection, so one WAIT covers every change of
// the pipeline (Redis counts the replicas that acknowledged the connection's
// last write). When it confirms fewer, or its reply is lost, every such
// command that Redis ran is answered kUnavailable ("... WAIT confirmed 0 of
// 1 replicas within 1000 ms ..."): the change is on the master and may or
// may not survive its failure. Commands not so marked (reads) are answered
// as Redis answered them. A batch waits for its slowest node, so after a
// WAIT of the full timeout fell short on a node, that node's WAITs wait a
// tenth of the timeout (at least 10 ms) for the next 2 timeouts (then the
// full timeout once more, as a probe): one master without its replicas does
// not hold every other master's commands for the full timeout in each batch.
// Any WAIT that confirms enough ends this.
//
// A call blocks its thread: at worst about command_timeout_ms per node it
// waits on, plus the retry delays above (and wait_timeout_ms). A pipeline is
// not a transaction: other clients' commands may run between two commands of
// one batch.
//
// What comes back: a Reply for every command Redis answered, error replies
// included ("-WRONGTYPE ...", "-ERR ..." — the caller decides); kUnavailable
// when Redis could not be reached or answered (a command that failed after it
// was written may or may not have run), when the retries above ran out, or
// when WAIT fell short.
//
// Thread-safety: every method may be called from any number of threads at
// once. Each node has a pool of connections; a call takes one connection per
// node it needs, uses it alone (so a pipeline's replies never interleave with
// another thread's) and puts it back. A pool grows to as many connections as
// threads use the node at once and keeps up to max_idle_connections_per_node
// of them open between calls. Connections to one node share one Backoff.
// There are no background threads, except with Sentinel: the Subscriber's.
#ifndef DELAYQ_REDIS_CLIENT_H_
#define DELAYQ_REDIS_CLIENT_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "delayq/status.h"
#include "redis/connection.h"
#include "redis/reply.h"
#include "redis/subscriber.h"
#include "redis/url.h"

namespace delayq::redis {

// A Lua script, named by the SHA-1 of its source, so it runs as EVALSHA
// without a round trip to load it first. The SHA-1 is given, not computed
// here: the Redis store's come from its generated table (computed at build
// time); SCRIPT LOAD answers it too.
class Script {
 public:
  // REQUIRES: sha1 is the SHA-1 of source, 40 lowercase hex digits.
  Script(std::string source, std::string sha1);
  const std::string& source() const { return source_; }
  // 40 lowercase hex digits, as SCRIPT LOAD answers.
  const std::string& sha1() const { return sha1_; }

 private:
  std::string source_;
  std::string sha1_;
};

// One command and the key that routes it.
struct Command {
  // Routes the command: its slot picks the node. Commands that touch keys
  // must route by one of them (all of a command's keys must share a slot in a
  // cluster). Keyless commands (PING, PUBLISH) may use any key: "" goes to
  // the owner of slot 0.
  std::string key;
  Argv argv;  // the command and its arguments, binary-safe
  // Set by Eval: argv is EVALSHA of this script, loaded on NOSCRIPT.
  // The script must outlive the call that runs the command.
  const Script* script = nullptr;
  // Its change counts only once ClientOptions::wait_replicas replicas have
  // it: its node's pipeline ends with a WAIT, and a WAIT that falls short
  // turns its reply into kUnavailable. Default: false (reads, and changes
  // nobody was promised).
  bool needs_replicas = false;

  // EVALSHA script.sha1() len(keys) keys... args..., routed by keys[0]
  // ("" when there are no keys).
  static Command Eval(const Script& script, std::vector<std::string> keys,
                      std::vector<std::string> args);
};

struct ClientOptions {
  // Timeouts and backoff of every connection. Its user, password and db are
  // replaced by the URL's. Its tls: see `tls` below.
  ConnectionOptions connection;
  // rediss:// only: the CA bundle, and the client certificate and key for
  // mutual TLS, of the one TLS context Open makes and every connection (to
  // the seeds, and to each cluster node found later) shares. Not used when
  // connection.tls is given (a context made elsewhere). Given with a
  // redis:// URL, nothing is checked: the caller refuses that (RedisQueue
  // does). Default: the system's trust store, no client certificate.
  net::TlsOptions tls;
  // MOVED and ASK answers followed per command before giving up with
  // kUnavailable. Default: 5.
  int max_redirects = 5;
  // TRYAGAIN / CLUSTERDOWN / LOADING answers retried per command, waiting
  // retry_delay_ms, then twice that, ... between rounds. Defaults: 5, 10
  // (10+20+40+80+160: the command gives up after ~310 ms).
  int retry_attempts = 5;
  int retry_delay_ms = 10;
  // A full reload of the slot map happens at most this often, however many
  // MOVED answers ask for one (each MOVED still fixes its own slot at once).
  // Default: 100.
  int min_refresh_interval_ms = 100;
  // Open connections kept per node between calls. Default: 8.
  int max_idle_connections_per_node = 8;
  // Replicas that must acknowledge a command marked needs_replicas (WAIT),
  // and how long WAIT may wait for them. Each connection's
  // command_timeout_ms is raised to wait_timeout_ms + 1000 if lower.
  // Defaults: 0 (no WAIT), 1000.
  int wait_replicas = 0;
  int wait_timeout_ms = 1000;
};

// What the Client knows of the deployment, for metrics and health checks.
struct Topology {
  enum class Mode { kStandalone, kCluster, kSentinel };
  Mode mode = Mode::kStandalone;
  struct Master {
    Endpoint endpoint;
    // Replicas it reported (CLUSTER SLOTS, or ROLE when it was found); -1:
    // not known.
    int replicas = -1;
    // Replicas the last WAIT on it confirmed; -1: no WAIT yet.
    int acked = -1;
  };
  std::vector<Master> masters;
  // Times a master was replaced by another: a node left the slot map while
  // its slots went to others, or the sentinels named a new master.
  uint64_t failovers = 0;
  // WAITs sent, and those that confirmed fewer than wait_replicas (or whose
  // reply was lost).
  uint64_t waits = 0;
  uint64_t wait_shortfalls = 0;
};

// "standalone", "cluster", "sentinel".
const char* ModeName(Topology::Mode mode);

class Client {
 public:
  // Parses `url` (url.h) and connects. InvalidArgument for a bad URL, or a
  // non-zero db on a cluster; kUnavailable when no address of the URL
  // answers ("redis: none of the Redis addresses given (redis://a:1,b:2)
  // answered: " and each one's error; the password shown as ***), AUTH is
  // refused, or the cluster's slot map cannot be read.
  static Result<std::unique_ptr<Client>> Open(std::string_view url, ClientOptions options = {});
  static Result<std::unique_ptr<Client>> Open(const RedisUrl& url, ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // True when the server is a Redis Cluster node (`cluster_enabled:1`).
  bool cluster() const { return cluster_; }
  // True when the URL was redis+sentinel://.
  bool sentinel() const { return url_.sentinel(); }

  // Runs one command where `cmd.key` routes it.
  Result<Reply> Exec(const Command& cmd);
  Result<Reply> Exec(std::string_view key, std::initializer_list<std::string_view> argv);

  // Runs every command, grouped by node: the commands for one node go out as
  // one pipeline, all nodes' pipelines are written before any is read, so a
  // batch costs about one round trip. Result i belongs to cmds[i]. Each
  // command's redirections and retries are handled on their own (later
  // rounds carry only the commands that need them); commands for one node
  // run in their order in `cmds`, except those a redirection moved.
  std::vector<Result<Reply>> ExecBatch(const std::vector<Command>& cmds);

  // Runs `argv` on every master (SCRIPT LOAD, FLUSHALL, ...), in no
  // particular order; one result per master.
  std::vector<std::pair<Endpoint, Result<Reply>>> ExecOnEachMaster(const Argv& argv);

  // The masters of the current slot map (the one server when standalone).
  std::vector<Endpoint> Masters() const;
  // Where the current map sends `key`. Unavailable when no node serves its slot.
  Result<Endpoint> MasterFor(std::string_view key) const;
  // Reloads the slot map now, or asks the sentinels where the master is
  // (no-op when standalone). kUnavailable when no known node or seed answers
  // CLUSTER SLOTS, or no sentinel names a master that says it is one.
  Status RefreshSlots();
  // The masters, their replicas, and what was observed: a snapshot.
  Topology topology() const;
  // Whether the master `key` routes to fell short of wait_replicas in a
  // full-length WAIT lately (its WAITs are brief now: see "Replicas" above).
  bool ShortOfReplicas(std::string_view key) const;
  // The replicas the sentinels know for the master (their addresses as the
  // sentinels announce them); empty when not sentinel or none answered.
  std::vector<Endpoint> SentinelReplicas();

  // The URL it was opened with, password hidden.
  std::string url() const { return url_.ToString(); }
  // The TLS context every connection uses (rediss://), for others that
  // connect to the same servers (a Subscriber); nullptr for redis://.
  std::shared_ptr<const net::TlsContext> tls_context() const { return options_.connection.tls; }

 private:
  struct Node;
  struct SlotMap;
  struct Op;
  class Round;

  Client(RedisUrl url, ClientOptions options);
  Status Connect();
  // Sentinel: asks the sentinels for the master and installs it.
  Status FindSentinelMaster();
  // Those of the sentinels' connections: no AUTH, no SELECT.
  ConnectionOptions SentinelConnectionOptions() const;
  // Starts following +switch-master (sentinel only).
  Status WatchSentinels();
  // The master can move (cluster, sentinel): unreachable nodes and READONLY
  // send the command where a fresh look finds it.
  bool Rerouting() const { return cluster_ || url_.sentinel(); }
  // The node's replicas as ROLE reports them (-1 when it cannot say).
  static int RoleReplicas(const Reply& role);
  void Run(std::vector<Op>& ops);
  std::shared_ptr<const SlotMap> slot_map() const;
  std::shared_ptr<Node> NodeAt(const Endpoint& endpoint);
  Status Refresh(bool force);
  Status LoadSlots(Node& from);
  // Points each MOVED slot at the node named, at once (one map copy).
  void FixSlots(const std::vector<std::pair<int, std::shared_ptr<Node>>>& moved);

  const RedisUrl url_;
  const ClientOptions options_;  // connection carries the URL's credentials
  bool cluster_ = false;         // set by Connect, then constant

  mutable std::mutex mu_;
  std::shared_ptr<const SlotMap> map_;                  // GUARDED_BY(mu_); never null once open
  std::map<std::string, std::shared_ptr<Node>> nodes_;  // GUARDED_BY(mu_); by Endpoint::ToString

  std::mutex refresh_mu_;                               // one reload at a time
  std::chrono::steady_clock::time_point last_refresh_;  // GUARDED_BY(refresh_mu_)

  // A reload was asked for within min_refresh_interval_ms of the last one:
  // the first call after the interval makes it.
  std::atomic<bool> stale_{false};
  std::atomic<uint64_t> failovers_{0};
  std::atomic<uint64_t> waits_{0};
  std::atomic<uint64_t> wait_shortfalls_{0};
  // Sentinel: follows +switch-master. Last member: stopped first.
  std::unique_ptr<Subscriber> sentinel_watch_;
};

}  // namespace delayq::redis

#endif  // DELAYQ_REDIS_CLIENT_H_
