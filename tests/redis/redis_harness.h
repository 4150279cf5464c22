// Real Redis servers for tests: RedisServer runs one `redis-server` process,
// RedisCluster runs N of them as a Redis Cluster. Never mocks: the Redis
// client layer, the Redis store's conformance suite and the multi-server
// tests all run against these.
//
//   delayq::redis_harness::RedisServerOptions options;
//   options.password = "pw";
//   auto redis = delayq::redis_harness::RedisServer::Start(options);
//   ASSERT_TRUE(redis.ok()) << redis.status().ToString();
//   auto client = delayq::redis::Client::Open((*redis)->url());
//   ...
//   (*redis)->Kill();      // a crash: SIGKILL
//   (*redis)->Restart();   // same port, same directory (AOF/RDB survive)
//
//   auto cluster = delayq::redis_harness::RedisCluster::Start(3);   // 3 masters, all slots
//   auto client = delayq::redis::Client::Open((*cluster)->url());
//
// Each server listens on 127.0.0.1 on a free port (found by binding port 0;
// if redis-server still finds it taken, another port is tried), in a fresh
// directory under $TMPDIR (or /tmp) that is removed when the object dies
// (kept when DELAYQ_KEEP_REDIS_DIRS is set, to read redis.log). Waits poll
// with a deadline: a start returns once the server answers PING. Only
// processes this harness started are signalled, by their PID; they are also
// killed by the kernel if the thread that started them exits
// (PR_SET_PDEATHSIG), so a crashed test leaves no server behind (only its
// directory) — hence
// start and restart servers from the test's main thread. The binaries are
// `redis-server` and `redis-cli` from PATH, or $DELAYQ_REDIS_SERVER and
// $DELAYQ_REDIS_CLI.
//
// Nothing here uses gtest: failures are Status values, so any test
// framework (or a benchmark) can use it. Link the `redis_harness` target
// (tests/CMakeLists.txt; it brings delayq_redis) and include
// "redis/redis_harness.h". The namespace is not `testing`, so code in
// namespace delayq can still write gtest's `testing::` unqualified.
//
// Thread-safety: none; drive a server or cluster from one thread. Command()
// and the cluster queries open their own connection, so they may run while
// other threads use the server.
#ifndef DELAYQ_TESTS_REDIS_REDIS_HARNESS_H_
#define DELAYQ_TESTS_REDIS_REDIS_HARNESS_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "delayq/status.h"
#include "redis/reply.h"

namespace delayq::redis_harness {

// Milliseconds since `since`.
int64_t ElapsedMs(std::chrono::steady_clock::time_point since);
// Polls `done` every 2 ms until it holds or `timeout_ms` passes.
bool WaitFor(const std::function<bool()>& done, int timeout_ms = 10000);

struct RedisServerOptions {
  // --requirepass; also given to AUTH by Command() and to redis-cli. Default: none.
  std::string password;
  // --appendonly yes (appendfsync everysec): a restart keeps the data. Default: off.
  bool append_only = false;
  // --cluster-enabled yes --cluster-config-file nodes.conf, and a second free
  // port for the cluster bus (--cluster-port). Default: off.
  bool cluster = false;
  // A replica of the server on 127.0.0.1:<replica_of> (--replicaof, and
  // --repl-diskless-sync-delay 0 so it syncs at once). 0: a master. Default: 0.
  int replica_of = 0;
  // A Redis Sentinel (redis-server <dir>/sentinel.conf --sentinel) that
  // watches the master on 127.0.0.1:<master_port> under `name`, with a
  // config file of its own (a sentinel rewrites it). Default: none.
  struct Sentinel {
    int master_port = 0;
    std::string name = "mymaster";
    int quorum = 1;
    int down_after_ms = 1000;
    int failover_timeout_ms = 10000;
  };
  std::optional<Sentinel> sentinel;
  // More arguments for redis-server, as on its command line
  // ({"--maxmemory", "10mb"}). Default: none.
  std::vector<std::string> extra_args;
  // How long a start or restart may take to answer PING. Default: 10000.
  int start_timeout_ms = 10000;
  // TLS only: --port 0 --tls-port <port> with the certificates of
  // TlsCertsDir() (server.pem for localhost and 127.0.0.1, signed by
  // ca.pem), and --tls-cluster / --tls-replication yes for a cluster node or
  // a replica. url() is then rediss://, and the harness's own commands
  // (Command(), redis-cli) speak TLS with client.pem. Default: off.
  bool tls = false;
  // With tls: --tls-auth-clients ("no", "optional", "yes": client
  // certificates signed by ca.pem asked for and required). Default: "no".
  std::string tls_auth_clients = "no";
};

// The test certificates TLS servers use (tests/testing/test_certs.h: ca.pem,
// server.pem/.key, client.pem/.key, other-ca.pem, ...), made on first use
// and removed when the process exits. kInternal when openssl fails.
Result<std::string> TlsCertsDir();

class RedisServer {
 public:
  // Starts redis-server with `options` (always --save "" --bind 127.0.0.1)
  // and waits until it answers PING. kInternal with the tail of its log when
  // it does not.
  static Result<std::unique_ptr<RedisServer>> Start(RedisServerOptions options = {});
  // Stops the server if running (SIGTERM, SIGKILL after 5 s) and removes its directory.
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // SIGTERM, wait up to `timeout_ms` for it to exit, then SIGKILL.
  Status Stop(int timeout_ms = 5000);
  // SIGKILL at once (a crash: nothing flushed beyond what the AOF policy did).
  Status Kill();
  // Starts it again on the same port(s) and directory with the same options.
  // REQUIRES: !running().
  Status Restart();
  // SIGSTOP / SIGCONT: a server that hangs without closing its connections.
  Status Pause();
  Status Resume();
  bool running() const { return pid_ > 0; }

  std::string host() const { return "127.0.0.1"; }
  int port() const { return port_; }
  int cluster_port() const { return cluster_port_; }  // 0 unless options.cluster
  std::string address() const;                        // "127.0.0.1:<port>"
  // "redis://127.0.0.1:<port>" (rediss:// with tls), with ":<password>@"
  // (percent-encoded) when there is one.
  std::string url() const;
  const std::string& dir() const { return dir_; }
  const RedisServerOptions& options() const { return options_; }
  pid_t pid() const { return pid_; }

  // Polls until `n` replicas are online and have acknowledged everything
  // this master has (a probe key is written first, so a replica that just
  // finished its first sync has acknowledged something: WAIT is then
  // answered at once, not at its next periodic ack). REQUIRES: a master.
  Status WaitForReplicas(int n, int timeout_ms = 15000) const;

  // Runs one command on a fresh connection (AUTH first when there is a
  // password). An error reply is a Reply of type kError; kUnavailable when
  // the server cannot be reached.
  Result<redis::Reply> Command(const std::vector<std::string>& argv) const;

 private:
  RedisServer(RedisServerOptions options, std::string dir)
      : options_(std::move(options)), dir_(std::move(dir)) {}
  // Spawns redis-server on port_ / cluster_port_ and waits for PING.
  Status Launch();
  Status WaitForPing();
  std::string LogTail() const;

  const RedisServerOptions options_;
  const std::string dir_;
  int port_ = 0;
  int cluster_port_ = 0;
  pid_t pid_ = -1;  // -1: not running
};

// A master and one replica of it (RedisServerOptions::replica_of), started
// and waited for until the replica is online and caught up
// (RedisServer::WaitForReplicas).
struct RedisPair {
  static Result<RedisPair> Start(RedisServerOptions options = {});
  std::unique_ptr<RedisServer> master;
  std::unique_ptr<RedisServer> replica;
};

class RedisCluster {
 public:
  // Starts masters * (1 + replicas) servers with options.cluster set, joins
  // them with `redis-cli --cluster create ... --cluster-replicas <replicas>
  // --cluster-yes` (slots split evenly over the masters; redis-cli picks which
  // servers are masters) and waits until WaitHealthy and, with replicas,
  // until every master has its replicas online.
  static Result<std::unique_ptr<RedisCluster>> Start(int masters = 3,
                                                     RedisServerOptions options = {},
                                                     int replicas = 0);

  size_t size() const { return nodes_.size(); }
  RedisServer& node(size_t i) { return *nodes_[i]; }
  // "redis[s]://[:<password>@]127.0.0.1:<p1>,127.0.0.1:<p2>,..."
  std::string url() const;

  // Polls until every running node reports cluster_state:ok and all of them
  // answer CLUSTER SLOTS identically; kInternal naming what differs after
  // `timeout_ms`.
  Status WaitHealthy(int timeout_ms = 10000);
  // Polls until every running master has `replicas` replicas online
  // (INFO replication: connected_slaves, each state=online).
  Status WaitReplicas(int replicas, int timeout_ms = 15000);
  // Whether node i is a master now (ROLE).
  Result<bool> IsMaster(size_t i);
  // CLUSTER MYID of node i.
  Result<std::string> NodeId(size_t i);
  // The index of the node that serves `slot`, according to node `ask`.
  Result<size_t> OwnerOf(int slot, size_t ask = 0);

  // Live resharding of one slot, in the steps of the Redis Cluster spec:
  // BeginMigration marks it IMPORTING on `to` and MIGRATING on `from`;
  // MigrateKeys moves `keys` (all of the slot's keys on `from` when empty)
  // with MIGRATE; FinishMigration gives the slot to `to` on every node
  // (CLUSTER SETSLOT <slot> NODE <id>). MoveSlot does all three and waits
  // until the nodes agree.
  Status BeginMigration(int slot, size_t from, size_t to);
  Status MigrateKeys(int slot, size_t from, size_t to, const std::vector<std::string>& keys = {});
  Status FinishMigration(int slot, size_t to);
  Status MoveSlot(int slot, size_t from, size_t to);

 private:
  RedisCluster() = default;
  std::vector<std::unique_ptr<RedisServer>> nodes_;
};

}  // namespace delayq::redis_harness

#endif  // DELAYQ_TESTS_REDIS_REDIS_HARNESS_H_
