// How a call runs (Run): the commands are Ops. Each round groups the Ops
// still unanswered by node — the node a redirection named, else the slot
// map's owner of the key's slot — takes one pooled connection per node,
// appends each group's commands (with SCRIPT LOAD and/or ASKING in front
// where a previous round asked for them), flushes every group, then reads
// every group's replies. Each reply either settles its Op or sends it to the
// next round (MOVED, ASK, TRYAGAIN/CLUSTERDOWN/LOADING, NOSCRIPT, an
// unreachable node whose slot moved). Every Op has bounded redirections and
// retries, so the number of rounds is bounded too.
//
// The slot map is immutable and shared (shared_ptr<const SlotMap>): readers
// copy the pointer under mu_ and route without a lock; a reload or a MOVED
// builds a new map and swaps it in. Nodes live in nodes_ across reloads, so
// their connection pools and backoff survive a map change.
#include "redis/client.h"

#include <algorithm>
#include <array>
#include <optional>
#include <thread>

#include "common/log.h"
#include "redis/slot.h"

namespace delayq::redis {

// ---------------------------------------------------------------------------
// Script, Command

Script::Script(std::string source, std::string sha1)
    : source_(std::move(source)), sha1_(std::move(sha1)) {}

Command Command::Eval(const Script& script, std::vector<std::string> keys,
                      std::vector<std::string> args) {
  Command c;
  c.key = keys.empty() ? std::string() : keys[0];
  c.argv.reserve(3 + keys.size() + args.size());
  c.argv.push_back("EVALSHA");
  c.argv.push_back(script.sha1());
  c.argv.push_back(std::to_string(keys.size()));
  for (std::string& k : keys) c.argv.push_back(std::move(k));
  for (std::string& a : args) c.argv.push_back(std::move(a));
  c.script = &script;
  return c;
}

// ---------------------------------------------------------------------------
// Nodes and the slot map

// One master: its address and its pool of connections.
struct Client::Node {
  Node(Endpoint e, const ConnectionOptions& o, int max_idle_connections)
      : endpoint(std::move(e)),
        name("redis " + endpoint.ToString()),
        options(o),
        backoff(std::make_shared<Backoff>(o.backoff_initial_ms, o.backoff_max_ms)),
        max_idle(static_cast<size_t>(std::max(0, max_idle_connections))) {}

  // A connection for this caller alone; connects on first use.
  std::unique_ptr<Connection> Take() {
    {
      std::lock_guard lock(mu);
      if (!idle.empty()) {
        std::unique_ptr<Connection> c = std::move(idle.back());
        idle.pop_back();
        return c;
      }
    }
    return Connection::Create(endpoint, options, backoff);
  }

  // Back to the pool, unless it still owes replies or the pool is full.
  void Give(std::unique_ptr<Connection> c) {
    if (c->pending() > 0) return;
    std::lock_guard lock(mu);
    if (idle.size() < max_idle) idle.push_back(std::move(c));
    // else: c closes here (under the lock: a close(2), cheap)
  }

  const Endpoint endpoint;
  const std::string name;  // "redis host:port", for messages
  const ConnectionOptions options;
  const std::shared_ptr<Backoff> backoff;  // shared by every connection of the pool
  const size_t max_idle;
  std::atomic<int> replicas{-1};  // as it last reported them (Topology::Master)
  std::atomic<int> acked{-1};     // the last WAIT's count
  // After a WAIT of the full timeout fell short, until this steady ms its
  // WAITs wait a tenth of it only (Round::ShortWaitMs): one master without
  // its replicas then holds up every round (and so every other master's
  // calls) for that long, not for the full timeout, until a WAIT confirms
  // enough again. 0: none.
  std::atomic<int64_t> short_until_ms{0};
  std::mutex mu;
  std::vector<std::unique_ptr<Connection>> idle;  // GUARDED_BY(mu)
};

struct Client::SlotMap {
  SlotMap() { owner.fill(-1); }

  // The master serving `slot`; nullptr when none does.
  std::shared_ptr<Node> Owner(int slot) const {
    int16_t i = owner[static_cast<size_t>(slot)];
    return i < 0 ? nullptr : nodes[static_cast<size_t>(i)];
  }
  int16_t IndexOf(const std::shared_ptr<Node>& node) {
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (nodes[i] == node) return static_cast<int16_t>(i);
    }
    nodes.push_back(node);
    return static_cast<int16_t>(nodes.size() - 1);
  }
  // The nodes that serve at least one slot.
  std::vector<std::shared_ptr<Node>> Masters() const {
    std::vector<bool> serving(nodes.size());
    for (int16_t i : owner) {
      if (i >= 0) serving[static_cast<size_t>(i)] = true;
    }
    std::vector<std::shared_ptr<Node>> out;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (serving[i]) out.push_back(nodes[i]);
    }
    return out;
  }

  std::vector<std::shared_ptr<Node>> nodes;
  std::array<int16_t, kClusterSlots> owner;  // index into nodes; -1: no master
};

// One command on its way through Run.
struct Client::Op {
  explicit Op(const Command* c, bool cluster) : cmd(c), slot(cluster ? KeySlot(c->key) : 0) {}

  const Command* cmd;
  int slot;
  std::shared_ptr<Node> target;  // next round goes here, not by the map
  bool asking = false;           // next round sends ASKING first
  bool load = false;             // next round sends SCRIPT LOAD first
  bool loaded = false;           // SCRIPT LOAD was sent once already
  int redirects = 0;             // MOVED, ASK, reroutes after an unreachable node
  int retries = 0;               // TRYAGAIN, CLUSTERDOWN, LOADING
  std::optional<Result<Reply>> result;
  std::optional<Status> unsent;     // this round: its node was unreachable before writing
  std::shared_ptr<Node> unsent_to;  // ... and that node
};

const char* ModeName(Topology::Mode mode) {
  switch (mode) {
    case Topology::Mode::kStandalone:
      return "standalone";
    case Topology::Mode::kCluster:
      return "cluster";
    case Topology::Mode::kSentinel:
      return "sentinel";
  }
  return "?";
}

Client::Client(RedisUrl url, ClientOptions options)
    : url_(std::move(url)), options_([&] {
        ClientOptions o = std::move(options);
        o.connection.user = url_.user;
        o.connection.password = url_.password;
        o.connection.db = url_.db;
        if (o.wait_replicas > 0) {
          // A WAIT holds the reply for up to its timeout: not a dead node.
          o.connection.command_timeout_ms =
              std::max(o.connection.command_timeout_ms, o.wait_timeout_ms + 1000);
        }
        return o;
      }()) {}

Client::~Client() { sentinel_watch_.reset(); }

Result<std::unique_ptr<Client>> Client::Open(std::string_view url, ClientOptions options) {
  Result<RedisUrl> parsed = ParseRedisUrl(url);
  if (!parsed.ok()) return parsed.status();
  return Open(*parsed, std::move(options));
}

Result<std::unique_ptr<Client>> Client::Open(const RedisUrl& url, ClientOptions options) {
  if (url.seeds.empty()) return InvalidArgument("redis url: no host");
  if (options.wait_replicas < 0 || options.wait_timeout_ms < 0) {
    return InvalidArgument("redis: wait_replicas and wait_timeout_ms must be >= 0");
  }
  if (Status s = SetUpTls(url.tls, options.tls, &options.connection); !s.ok()) return s;
  std::unique_ptr<Client> client(new Client(url, std::move(options)));
  if (Status s = client->Connect(); !s.ok()) return s;
  if (Status s = client->WatchSentinels(); !s.ok()) return s;
  return client;
}

// Probes the seeds in order with `INFO cluster` (db 0: SELECT is refused by
// a cluster node, and the URL's db is checked against the mode below).
Status Client::Connect() {
  if (url_.sentinel()) return FindSentinelMaster();
  std::string errors;
  for (const Endpoint& seed : url_.seeds) {
    ConnectionOptions probe_options = options_.connection;
    probe_options.db = 0;
    Result<std::unique_ptr<Connection>> probe = Connection::Open(seed, probe_options);
    Result<Reply> info = probe.ok() ? (*probe)->Exec({"INFO", "cluster"}) : probe.status();
    std::string error;
    if (!info.ok()) {
      error = info.status().message();
    } else if (info->is_error()) {
      error = "redis " + seed.ToString() + ": INFO refused: " + info->str();
      if (info->error_code() == "NOAUTH") error += " (the URL has no password)";
    } else if (!info->is_string() && !info->is_status()) {
      error = "redis " + seed.ToString() + ": unexpected INFO reply " + info->ToString();
    }
    if (!error.empty()) {
      errors += (errors.empty() ? "" : "; ") + error;
      continue;
    }
    cluster_ = info->str().find("cluster_enabled:1") != std::string::npos;
    std::shared_ptr<Node> node = NodeAt(seed);
    if (!cluster_) {
      // One pooled connection with the URL's db now, so a bad db fails Open.
      std::unique_ptr<Connection> conn = node->Take();
      Result<Reply> role = conn->Exec({"ROLE"});
      node->Give(std::move(conn));
      if (!role.ok()) return role.status();
      node->replicas = RoleReplicas(*role);
      auto map = std::make_shared<SlotMap>();
      map->owner.fill(map->IndexOf(node));
      std::lock_guard lock(mu_);
      map_ = std::move(map);
      return Status::Ok();
    }
    if (url_.db != 0) {
      return InvalidArgument("redis url " + url_.ToString() + ": db " + std::to_string(url_.db) +
                             " given, but " + seed.ToString() +
                             " is a Redis Cluster node, which has db 0 only");
    }
    {
      std::lock_guard lock(mu_);
      map_ = std::make_shared<SlotMap>();  // empty until loaded
    }
    return Refresh(/*force=*/true);
  }
  // "Seed" is this file's word for an address of the URL, not the user's.
  return Unavailable("redis: none of the Redis addresses given (" + url_.ToString() +
                     ") answered: " + errors);
}

std::shared_ptr<const Client::SlotMap> Client::slot_map() const {
  std::lock_guard lock(mu_);
  return map_;
}

std::shared_ptr<Client::Node> Client::NodeAt(const Endpoint& endpoint) {
  std::string name = endpoint.ToString();
  std::lock_guard lock(mu_);
  std::shared_ptr<Node>& node = nodes_[name];
  if (!node) {
    node = std::make_shared<Node>(endpoint, options_.connection,
                                  options_.max_idle_connections_per_node);
  }
  return node;
}

void Client::FixSlots(const std::vector<std::pair<int, std::shared_ptr<Node>>>& moved) {
  std::lock_guard lock(mu_);
  auto map = std::make_shared<SlotMap>(*map_);
  for (const auto& [slot, node] : moved) map->owner[static_cast<size_t>(slot)] = map->IndexOf(node);
  map_ = std::move(map);
}

Status Client::RefreshSlots() {
  if (!cluster_ && !url_.sentinel()) return Status::Ok();
  return Refresh(/*force=*/true);
}

// ROLE: ["master", offset, [[host, port, offset], ...]] on a master.
int Client::RoleReplicas(const Reply& role) {
  if (!role.is_array() || role.elements().size() < 3 || !role.elements()[0].is_string() ||
      role.elements()[0].str() != "master" || !role.elements()[2].is_array()) {
    return -1;
  }
  return static_cast<int>(role.elements()[2].elements().size());
}

// Asks each sentinel in turn; the first master that says ROLE master wins.
// A sentinel may still name the old master early in a failover: the node's
// own ROLE settles it.
ConnectionOptions Client::SentinelConnectionOptions() const {
  ConnectionOptions o = options_.connection;
  o.user.clear();
  o.password.reset();
  o.db = 0;
  o.tls.reset();  // sentinels in plaintext (rediss+sentinel:// is refused)
  o.tls_server_name.clear();
  return o;
}

Status Client::FindSentinelMaster() {
  const ConnectionOptions sentinel_options = SentinelConnectionOptions();
  std::string errors;
  for (const Endpoint& sentinel : url_.seeds) {
    auto note = [&](const std::string& e) { errors += (errors.empty() ? "" : "; ") + e; };
    Result<std::unique_ptr<Connection>> conn = Connection::Open(sentinel, sentinel_options);
    Result<Reply> addr =
        conn.ok() ? (*conn)->Exec({"SENTINEL", "get-master-addr-by-name", url_.sentinel_master})
                  : conn.status();
    const std::string name = "sentinel " + sentinel.ToString();
    if (!addr.ok()) {
      note(addr.status().message());
      continue;
    }
    if (addr->is_nil()) {
      note(name + " watches no master named '" + url_.sentinel_master + "'");
      continue;
    }
    if (!addr->is_array() || addr->elements().size() != 2 || !addr->elements()[0].is_string() ||
        !addr->elements()[1].is_string()) {
      note(name + ": unexpected reply " + addr->ToString());
      continue;
    }
    Result<Endpoint> at =
        ParseEndpoint(addr->elements()[0].str() + ":" + addr->elements()[1].str());
    if (!at.ok()) {
      note(name + ": " + at.status().message());
      continue;
    }
    std::shared_ptr<Node> node = NodeAt(*at);
    std::unique_ptr<Connection> data = node->Take();
    Result<Reply> role = data->Exec({"ROLE"});
    node->Give(std::move(data));
    if (!role.ok()) {
      note(name + " names " + at->ToString() + ": " + role.status().message());
      continue;
    }
    int replicas = RoleReplicas(*role);
    if (replicas < 0) {
      note(name + " names " + at->ToString() + ", which is not a master (ROLE " + role->ToString() +
           ")");
      continue;
    }
    node->replicas = replicas;
    auto map = std::make_shared<SlotMap>();
    map->owner.fill(map->IndexOf(node));
    std::lock_guard lock(mu_);
    if (map_ && !map_->nodes.empty() && map_->nodes[0] != node) {
      ++failovers_;
      Log(LogLevel::kWarn, "redis: the sentinels name a new master for '%s': %s (was %s)",
          url_.sentinel_master.c_str(), at->ToString().c_str(),
          map_->nodes[0]->endpoint.ToString().c_str());
    }
    map_ = std::move(map);
    // Only the master stays known: its connections are the only ones used.
    for (auto it = nodes_.begin(); it != nodes_.end();) {
      it = it->second == node ? std::next(it) : nodes_.erase(it);
    }
    return Status::Ok();
  }
  return Unavailable("redis: no sentinel of " + url_.ToString() + " named a master for '" +
                     url_.sentinel_master + "': " + errors);
}

Status Client::WatchSentinels() {
  if (!url_.sentinel()) return Status::Ok();
  RedisUrl sentinels = url_;
  sentinels.user.clear();
  sentinels.password.reset();
  sentinels.sentinel_master.clear();
  SubscriberOptions so;
  so.connection = SentinelConnectionOptions();  // Start puts the URL's (none) in
  // Announced as "<name> <old ip> <old port> <new ip> <new port>".
  auto on_message = [this](std::string_view, std::string_view message) {
    if (message.substr(0, message.find(' ')) == url_.sentinel_master) {
      (void)Refresh(/*force=*/true);
    }
  };
  // A switch announced while it was away is caught by asking again.
  auto on_connect = [this] { (void)Refresh(/*force=*/true); };
  auto watch =
      Subscriber::Start(sentinels, {"+switch-master"}, on_message, on_connect, std::move(so));
  if (!watch.ok()) return watch.status();
  sentinel_watch_ = std::move(watch).value();
  return Status::Ok();
}

std::vector<Endpoint> Client::SentinelReplicas() {
  std::vector<Endpoint> out;
  if (!url_.sentinel()) return out;
  const ConnectionOptions sentinel_options = SentinelConnectionOptions();
  for (const Endpoint& sentinel : url_.seeds) {
    Result<std::unique_ptr<Connection>> conn = Connection::Open(sentinel, sentinel_options);
    if (!conn.ok()) continue;
    Result<Reply> r = (*conn)->Exec({"SENTINEL", "replicas", url_.sentinel_master});
    if (!r.ok() || !r->is_array()) continue;
    for (const Reply& replica : r->elements()) {  // flat field/value arrays
      if (!replica.is_array()) continue;
      std::string ip, port;
      const std::vector<Reply>& f = replica.elements();
      for (size_t i = 0; i + 1 < f.size(); i += 2) {
        if (!f[i].is_string() || !f[i + 1].is_string()) continue;
        if (f[i].str() == "ip") ip = f[i + 1].str();
        if (f[i].str() == "port") port = f[i + 1].str();
      }
      ip += ':';
      ip += port;
      Result<Endpoint> e = ParseEndpoint(ip);
      if (e.ok()) out.push_back(*e);
    }
    return out;
  }
  return out;
}

Topology Client::topology() const {
  Topology t;
  t.mode = url_.sentinel() ? Topology::Mode::kSentinel
           : cluster_      ? Topology::Mode::kCluster
                           : Topology::Mode::kStandalone;
  for (const auto& node : slot_map()->Masters()) {
    t.masters.push_back({node->endpoint, node->replicas.load(), node->acked.load()});
  }
  t.failovers = failovers_.load();
  t.waits = waits_.load();
  t.wait_shortfalls = wait_shortfalls_.load();
  return t;
}

// Tries the current masters, then the seeds, until one answers CLUSTER SLOTS.
// A node waiting out its backoff fails at once, so dead nodes cost nothing.
Status Client::Refresh(bool force) {
  std::lock_guard refresh_lock(refresh_mu_);
  auto now = std::chrono::steady_clock::now();
  if (!force && now - last_refresh_ < std::chrono::milliseconds(options_.min_refresh_interval_ms)) {
    stale_ = true;  // still wanted: the next call after the interval does it
    return Status::Ok();
  }
  last_refresh_ = now;
  stale_ = false;
  if (url_.sentinel()) return FindSentinelMaster();
  std::vector<std::shared_ptr<Node>> candidates = slot_map()->Masters();
  for (const Endpoint& seed : url_.seeds) {
    std::shared_ptr<Node> n = NodeAt(seed);
    if (std::find(candidates.begin(), candidates.end(), n) == candidates.end()) {
      candidates.push_back(n);
    }
  }
  std::string errors;
  for (const std::shared_ptr<Node>& node : candidates) {
    Status s = LoadSlots(*node);
    if (s.ok()) return s;
    errors += (errors.empty() ? "" : "; ") + s.message();
  }
  return Unavailable("redis: cannot load the cluster's slot map: " + errors);
}

// CLUSTER SLOTS: [[start, end, [host, port, id, ...], replica...], ...].
Status Client::LoadSlots(Node& from) {
  std::unique_ptr<Connection> conn = from.Take();
  Result<Reply> reply = conn->Exec({"CLUSTER", "SLOTS"});
  from.Give(std::move(conn));
  if (!reply.ok()) return reply.status();
  const std::string& name = from.name;
  if (!reply->is_array()) return Unavailable(name + ": CLUSTER SLOTS: " + reply->ToString());
  auto map = std::make_shared<SlotMap>();
  for (const Reply& range : reply->elements()) {
    bool well_formed = range.is_array() && range.elements().size() >= 3 &&
                       range.elements()[0].is_integer() && range.elements()[1].is_integer() &&
                       range.elements()[2].is_array() &&
                       range.elements()[2].elements().size() >= 2 &&
                       range.elements()[2].elements()[0].is_string() &&
                       range.elements()[2].elements()[1].is_integer();
    if (!well_formed) {
      return Unavailable(name + ": CLUSTER SLOTS: unexpected entry " + range.ToString());
    }
    int64_t start = range.elements()[0].integer();
    int64_t end = range.elements()[1].integer();
    const std::vector<Reply>& master = range.elements()[2].elements();
    int64_t port = master[1].integer();
    if (start < 0 || end >= kClusterSlots || start > end || port < 1 || port > 65535) {
      return Unavailable(name + ": CLUSTER SLOTS: unexpected entry " + range.ToString());
    }
    // An empty host means "the node you asked" (Redis Cluster spec).
    Endpoint at{master[0].str().empty() ? from.endpoint.host : master[0].str(),
                static_cast<int>(port)};
    std::shared_ptr<Node> node = NodeAt(at);
    node->replicas = static_cast<int>(range.elements().size() - 3);
    int16_t index = map->IndexOf(node);
    std::fill(map->owner.begin() + start, map->owner.begin() + end + 1, index);
  }
  std::lock_guard lock(mu_);
  // A master that left the map while its slots went to others: a failover
  // (or every slot resharded away, which is rare enough to count alike).
  std::vector<std::shared_ptr<Node>> now_masters = map->Masters();
  for (const std::shared_ptr<Node>& was : map_->Masters()) {
    if (std::find(now_masters.begin(), now_masters.end(), was) == now_masters.end()) {
      ++failovers_;
      Log(LogLevel::kWarn, "redis: %s serves no slot any more: its slots have a new master",
          was->endpoint.ToString().c_str());
    }
  }
  map_ = map;
  // Forget nodes that left the map (in-flight calls keep theirs alive);
  // seeds stay, with their backoff.
  for (auto it = nodes_.begin(); it != nodes_.end();) {
    bool keep =
        std::find(map->nodes.begin(), map->nodes.end(), it->second) != map->nodes.end() ||
        std::find(url_.seeds.begin(), url_.seeds.end(), it->second->endpoint) != url_.seeds.end();
    it = keep ? std::next(it) : nodes_.erase(it);
  }
  return Status::Ok();
}

std::vector<Endpoint> Client::Masters() const {
  std::vector<Endpoint> out;
  for (const auto& node : slot_map()->Masters()) out.push_back(node->endpoint);
  return out;
}

Result<Endpoint> Client::MasterFor(std::string_view key) const {
  int slot = cluster_ ? KeySlot(key) : 0;
  std::shared_ptr<Node> node = slot_map()->Owner(slot);
  if (!node) return Unavailable("redis: no master serves slot " + std::to_string(slot));
  return node->endpoint;
}

bool Client::ShortOfReplicas(std::string_view key) const {
  std::shared_ptr<Node> node = slot_map()->Owner(cluster_ ? KeySlot(key) : 0);
  return node != nullptr && node->short_until_ms.load() > SteadyMs();
}

// ---------------------------------------------------------------------------
// Running commands

Result<Reply> Client::Exec(const Command& cmd) {
  std::vector<Op> ops;
  ops.emplace_back(&cmd, cluster_);
  Run(ops);
  return std::move(*ops[0].result);
}

Result<Reply> Client::Exec(std::string_view key, std::initializer_list<std::string_view> argv) {
  Command cmd;
  cmd.key = std::string(key);
  cmd.argv.assign(argv.begin(), argv.end());
  return Exec(cmd);
}

std::vector<Result<Reply>> Client::ExecBatch(const std::vector<Command>& cmds) {
  std::vector<Op> ops;
  ops.reserve(cmds.size());
  for (const Command& c : cmds) ops.emplace_back(&c, cluster_);
  Run(ops);
  std::vector<Result<Reply>> out;
  out.reserve(ops.size());
  for (Op& op : ops) out.push_back(std::move(*op.result));
  return out;
}

std::vector<std::pair<Endpoint, Result<Reply>>> Client::ExecOnEachMaster(const Argv& argv) {
  std::vector<std::pair<Endpoint, Result<Reply>>> out;
  for (const std::shared_ptr<Node>& node : slot_map()->Masters()) {
    std::unique_ptr<Connection> conn = node->Take();
    Result<Reply> r = conn->Exec(argv);
    node->Give(std::move(conn));
    out.emplace_back(node->endpoint, std::move(r));
  }
  return out;
}

// One round of Run: the Ops headed for one node, on one connection.
class Client::Round {
 public:
  // `wait_replicas` > 0: a group holding a command that needs replicas ends
  // with WAIT wait_replicas wait_timeout_ms.
  Round(int wait_replicas, int wait_timeout_ms)
      : wait_replicas_(wait_replicas), wait_timeout_ms_(wait_timeout_ms) {}

  struct Group {
    std::shared_ptr<Node> node;
    std::vector<Op*> ops;
    std::unique_ptr<Connection> conn;
    Status status = Status::Ok();  // the first failure, if any
    bool unsent = false;           // it failed while connecting: nothing was written
    bool waited = false;           // its pipeline ends with a WAIT
    int wait_ms = 0;               // ... of this timeout
    std::vector<Reply> replies;
    size_t conn_pending_at_write = 0;  // replies owed, the WAIT's included
  };

  void Add(Op* op, std::shared_ptr<Node> node) {
    for (Group& g : groups_) {
      if (g.node == node) {
        g.ops.push_back(op);
        return;
      }
    }
    Group g;
    g.node = std::move(node);
    g.ops.push_back(op);
    groups_.push_back(std::move(g));
  }

  // Writes every group's pipeline, then reads every group's replies.
  void Exchange() {
    for (Group& g : groups_) Write(g);
    for (Group& g : groups_) {
      if (g.status.ok()) g.status = g.conn->Receive(g.conn->pending(), &g.replies);
      g.node->Give(std::move(g.conn));
    }
  }

  std::vector<Group>& groups() { return groups_; }

  // Reads the group's WAIT (when it sent one) and keeps what it tells of the
  // node's replicas: the count confirmed, and whether the next WAITs there
  // are brief. Empty when the group's changes count: no WAIT was needed, or
  // its WAIT confirmed enough replicas. Otherwise why they do not (the
  // WAIT's reply fell short, was an error, or was lost with the connection).
  std::string SettleWait(const Group& g) const {
    if (!g.waited) return "";
    const bool answered = g.replies.size() == g.conn_pending_at_write;
    const Reply* r = answered ? &g.replies.back() : nullptr;
    const int confirmed = r != nullptr && r->is_integer() ? static_cast<int>(r->integer()) : 0;
    Node& node = *g.node;
    node.acked = confirmed;
    // Replicas that joined since the master was found count too.
    if (confirmed > node.replicas) node.replicas = confirmed;
    if (confirmed >= wait_replicas_) {
      node.short_until_ms = 0;
      return "";
    }
    if (g.wait_ms >= wait_timeout_ms_) {
      node.short_until_ms = SteadyMs() + int64_t{kShortPeriods} * wait_timeout_ms_;
    }
    const std::string head = node.name + ": WAIT ";
    if (r == nullptr) return head + "not answered (" + g.status.message() + ")";
    if (!r->is_integer()) return head + "refused: " + r->ToString();
    return head + "confirmed " + std::to_string(confirmed) + " of " +
           std::to_string(wait_replicas_) + " replicas within " + std::to_string(g.wait_ms) +
           " ms" +
           (g.wait_ms < wait_timeout_ms_
                ? " (its last WAIT of " + std::to_string(wait_timeout_ms_) + " ms fell short too)"
                : "");
  }

 private:
  void Write(Group& g) {
    g.conn = g.node->Take();
    std::vector<const Script*> loading;  // one SCRIPT LOAD per script and node
    for (Op* op : g.ops) {
      if (op->load) {
        if (std::find(loading.begin(), loading.end(), op->cmd->script) != loading.end()) {
          op->load = false;  // an earlier command of this pipeline loads it
        } else {
          loading.push_back(op->cmd->script);
          g.status = g.conn->Append({"SCRIPT", "LOAD", op->cmd->script->source()});
        }
      }
      if (g.status.ok() && op->asking) g.status = g.conn->Append({"ASKING"});
      if (g.status.ok()) g.status = g.conn->Append(op->cmd->argv);
      if (!g.status.ok()) {
        g.unsent = true;  // Append fails only while connecting
        return;
      }
      g.waited = g.waited || (wait_replicas_ > 0 && op->cmd->needs_replicas);
    }
    if (g.waited) {
      g.wait_ms = wait_timeout_ms_;
      if (g.node->short_until_ms.load() > SteadyMs()) g.wait_ms = ShortWaitMs();
      g.status =
          g.conn->Append({"WAIT", std::to_string(wait_replicas_), std::to_string(g.wait_ms)});
    }
    g.conn_pending_at_write = g.conn->pending();
    if (g.status.ok()) g.status = g.conn->Flush();
  }

  // While a node is short of replicas its WAITs wait a tenth of the timeout
  // (at least 10 ms: a replica that is back answers within it), for this
  // many full timeouts; then one full WAIT probes again.
  int ShortWaitMs() const {
    return std::min(wait_timeout_ms_, std::max(10, wait_timeout_ms_ / 10));
  }
  static constexpr int kShortPeriods = 2;

  const int wait_replicas_;
  const int wait_timeout_ms_;
  std::vector<Group> groups_;
};

namespace {

// "MOVED 3999 127.0.0.1:6381" / "ASK ..." -> slot and endpoint. An empty host
// (":6381") means the host of the node that answered.
bool ParseRedirect(const std::string& text, const Endpoint& from, int* slot, Endpoint* to) {
  size_t a = text.find(' ');
  size_t b = a == std::string::npos ? a : text.find(' ', a + 1);
  if (b == std::string::npos) return false;
  std::string_view slot_text = std::string_view(text).substr(a + 1, b - a - 1);
  std::string address = text.substr(b + 1);
  if (!address.empty() && address[0] == ':') address = from.host + address;
  Result<Endpoint> e = ParseEndpoint(address);
  if (!e.ok() || slot_text.empty()) return false;
  int s = 0;
  for (char c : slot_text) {
    if (c < '0' || c > '9') return false;
    s = s * 10 + (c - '0');
    if (s >= kClusterSlots) return false;
  }
  *slot = s;
  *to = *e;
  return true;
}

}  // namespace

void Client::Run(std::vector<Op>& ops) {
  int delay_ms = options_.retry_delay_ms;
  if (stale_.load(std::memory_order_relaxed)) (void)Refresh(/*force=*/false);
  for (;;) {
    std::vector<Op*> todo;
    for (Op& op : ops) {
      if (!op.result) todo.push_back(&op);
    }
    if (todo.empty()) return;

    // Route. A slot without a master gets one map reload per round to find one.
    std::shared_ptr<const SlotMap> map = slot_map();
    Round round(options_.wait_replicas, options_.wait_timeout_ms);
    bool reloaded = false;
    for (Op* op : todo) {
      if (op->cmd->argv.empty()) {
        op->result = InvalidArgument("redis: empty command (key '" + op->cmd->key + "')");
        continue;
      }
      std::shared_ptr<Node> node = op->target ? op->target : map->Owner(op->slot);
      if (!node && Rerouting() && !reloaded) {
        reloaded = true;
        (void)Refresh(/*force=*/false);
        map = slot_map();
        node = map->Owner(op->slot);
      }
      if (!node) {
        op->result = Unavailable("redis: no master serves slot " + std::to_string(op->slot) +
                                 " (key '" + op->cmd->key + "')");
        continue;
      }
      round.Add(op, std::move(node));
    }

    round.Exchange();

    // Settle or requeue each Op.
    bool refresh = false;
    bool force_refresh = false;  // READONLY: the old master answered, so its map is wrong
    bool wait = false;
    std::vector<std::pair<int, std::shared_ptr<Node>>> moved;  // MOVED slot -> node
    for (Round::Group& g : round.groups()) {
      const std::string& name = g.node->name;
      size_t next = 0;  // index into g.replies
      const std::string shortfall = round.SettleWait(g);
      if (g.waited) {
        ++waits_;
        if (!shortfall.empty()) ++wait_shortfalls_;
      }
      for (Op* op : g.ops) {
        size_t n = 1 + (op->load ? 1 : 0) + (op->asking ? 1 : 0);
        bool was_asking = op->asking;
        op->target = nullptr;
        op->asking = false;
        op->load = false;
        if (next + n > g.replies.size()) {  // no reply: the node failed
          next += n;
          if (g.unsent && Rerouting()) {
            op->unsent = g.status;
            op->unsent_to = g.node;
            refresh = true;
          } else {
            op->result = g.status;
            refresh = refresh || Rerouting();
          }
          continue;
        }
        Reply& reply = g.replies[next + n - 1];
        next += n;
        std::string_view code = reply.error_code();
        if (cluster_ && (code == "MOVED" || code == "ASK")) {
          if (++op->redirects > options_.max_redirects) {
            op->result = Unavailable(name + ": " + reply.str() + ": more than " +
                                     std::to_string(options_.max_redirects) +
                                     " redirections for one command");
            continue;
          }
          int slot = 0;
          Endpoint to;
          if (!ParseRedirect(reply.str(), g.node->endpoint, &slot, &to)) {
            op->result = Unavailable(name + ": cannot read the redirection '" + reply.str() + "'");
            continue;
          }
          op->target = NodeAt(to);
          if (code == "MOVED") {
            moved.emplace_back(slot, op->target);
            refresh = true;
          } else {
            op->asking = true;
          }
        } else if (code == "TRYAGAIN" || code == "CLUSTERDOWN" || code == "LOADING") {
          if (++op->retries > options_.retry_attempts) {
            op->result = Unavailable(name + ": " + reply.str() + " (still, after " +
                                     std::to_string(options_.retry_attempts) + " retries)");
            continue;
          }
          wait = true;
          if (was_asking) {  // mid-migration: the retry must go where ASK said
            op->target = g.node;
            op->asking = true;
          }
        } else if (code == "READONLY") {
          // Refused, not run: the node is a replica now. Sent again where
          // the master is looked up to be, below (as an unreachable node's).
          op->unsent = Unavailable(name + " is a replica now (" + reply.str() +
                                   ") and no other master is known yet");
          op->unsent_to = g.node;
          refresh = true;
          force_refresh = true;
        } else if (code == "NOSCRIPT" && op->cmd->script != nullptr && !op->loaded) {
          op->loaded = true;
          op->load = true;
          op->target = g.node;
          op->asking = was_asking;
        } else if (!shortfall.empty() && op->cmd->needs_replicas && !reply.is_error()) {
          op->result = Unavailable(shortfall +
                                   ": the change is made on the master but not "
                                   "known to have reached its replicas");
        } else {
          op->result = std::move(reply);
        }
      }
    }

    if (!moved.empty()) FixSlots(moved);
    if (refresh) (void)Refresh(force_refresh);
    // Ops whose node was unreachable before anything was written go to the
    // slot's new owner, if the reloaded map names another one.
    map = slot_map();
    for (Op* op : todo) {
      if (!op->unsent) continue;
      Status status = std::move(*op->unsent);
      std::shared_ptr<Node> owner = map->Owner(op->slot);
      bool elsewhere = owner != nullptr && owner != op->unsent_to;
      op->unsent.reset();
      op->unsent_to.reset();
      if (elsewhere && ++op->redirects <= options_.max_redirects) continue;
      op->result = std::move(status);
    }
    if (wait) {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      delay_ms *= 2;
    }
  }
}

}  // namespace delayq::redis
