// Failover over blocking connections: each request takes a connection of
// one server from its pool, writes, reads, and gives it back. A server is
// "down" exactly while its shared redis::Backoff says so: connects to it
// fail fast until the backoff lets one attempt through, so a dead server
// costs one refused connect per backoff period, not one per request.
#include "client/server_set.h"

#include <utility>

#include "net/tls.h"

namespace delayq::client {
namespace {

// A Connection's message without its "redis host:port: " prefix.
std::string Reason(const redis::Connection& conn, const Status& s) {
  const std::string prefix = conn.name() + ": ";
  if (s.message().starts_with(prefix)) return s.message().substr(prefix.size());
  return s.message();
}

bool IsUnavailableReply(const std::vector<redis::Reply>& replies) {
  for (const redis::Reply& r : replies) {
    if (r.is_error() && r.error_code() == "UNAVAILABLE") return true;
  }
  return false;
}

}  // namespace

Result<std::vector<redis::Endpoint>> ParseServers(std::string_view servers) {
  std::vector<redis::Endpoint> out;
  size_t start = 0;
  while (start <= servers.size()) {
    size_t comma = servers.find(',', start);
    if (comma == std::string_view::npos) comma = servers.size();
    std::string part(servers.substr(start, comma - start));
    start = comma + 1;
    if (part.empty()) {
      return InvalidArgument("servers: empty address in '" + std::string(servers) +
                             "' (expected host:port[,host:port...])");
    }
    // "host" or "[v6]" without a port: delayq's RESP port, not Redis's.
    if (part.back() == ']' || part.find(':') == std::string::npos) {
      part += ":" + std::to_string(kDefaultPort);
    }
    auto endpoint = redis::ParseEndpoint(part);
    if (!endpoint.ok()) {
      return InvalidArgument("servers: bad address '" + part + "': " + endpoint.status().message());
    }
    out.push_back(std::move(endpoint).value());
  }
  return out;
}

Result<std::unique_ptr<ServerSet>> ServerSet::Create(const QueueOptions& options) {
  auto endpoints = ParseServers(options.servers);
  if (!endpoints.ok()) return endpoints.status();
  if (options.connect_timeout_ms <= 0) {
    return InvalidArgument("connect_timeout_ms: must be > 0, got " +
                           std::to_string(options.connect_timeout_ms));
  }
  if (options.request_timeout_ms <= 0) {
    return InvalidArgument("request_timeout_ms: must be > 0, got " +
                           std::to_string(options.request_timeout_ms));
  }
  redis::ConnectionOptions c;
  c.connect_timeout_ms = options.connect_timeout_ms;
  c.command_timeout_ms = options.request_timeout_ms;
  if (!options.auth_token.empty()) c.password = options.auth_token;
  if (!options.tls) {
    for (const auto& [value, name] : {std::pair{&options.tls_ca_file, "tls_ca_file"},
                                      std::pair{&options.tls_cert_file, "tls_cert_file"},
                                      std::pair{&options.tls_key_file, "tls_key_file"}}) {
      if (!value->empty()) return InvalidArgument(std::string(name) + " given, but tls is off");
    }
  } else {
    // One context for every connection to every server; each checks the
    // certificate against the host of its own address.
    net::TlsOptions t;
    t.ca_file = options.tls_ca_file;
    t.cert_file = options.tls_cert_file;
    t.key_file = options.tls_key_file;
    auto ctx = net::TlsContext::Create(net::TlsContext::Role::kClient, t);
    if (!ctx.ok()) return ctx.status();
    c.tls = std::move(ctx).value();
  }
  return std::unique_ptr<ServerSet>(
      new ServerSet(std::move(endpoints).value(), std::move(c), options.request_timeout_ms));
}

ServerSet::ServerSet(std::vector<redis::Endpoint> endpoints, redis::ConnectionOptions options,
                     int request_timeout_ms)
    : options_(std::move(options)), request_timeout_ms_(request_timeout_ms) {
  for (redis::Endpoint& e : endpoints) {
    auto s = std::make_unique<Server>();
    s->name = e.ToString();
    s->endpoint = std::move(e);
    s->backoff =
        std::make_shared<redis::Backoff>(options_.backoff_initial_ms, options_.backoff_max_ms);
    servers_.push_back(std::move(s));
  }
}

ServerSet::~ServerSet() = default;

std::string ServerSet::Name(size_t server) const { return servers_[server]->name; }

std::unique_ptr<redis::Connection> ServerSet::Acquire(size_t server) {
  Server& s = *servers_[server];
  {
    std::lock_guard lock(s.mu);
    if (!s.idle.empty()) {
      std::unique_ptr<redis::Connection> conn = std::move(s.idle.back());
      s.idle.pop_back();
      return conn;
    }
  }
  return redis::Connection::Create(s.endpoint, options_, s.backoff);
}

void ServerSet::Release(size_t server, std::unique_ptr<redis::Connection> conn) {
  if (!conn->connected() || conn->pending() > 0) return;
  Server& s = *servers_[server];
  std::lock_guard lock(s.mu);
  if (s.idle.size() < kMaxIdlePerServer) s.idle.push_back(std::move(conn));
}

void ServerSet::Broken(size_t server, std::unique_ptr<redis::Connection> conn,
                       const std::string& reason) {
  conn.reset();
  servers_[server]->backoff->Failed(reason);
}

void ServerSet::GoingAway(size_t server, std::unique_ptr<redis::Connection> conn) {
  conn.reset();
  Server& s = *servers_[server];
  std::vector<std::unique_ptr<redis::Connection>> idle;
  {
    std::lock_guard lock(s.mu);
    idle.swap(s.idle);
  }
  idle.clear();  // closed outside the lock
  s.backoff->Failed("shutting down");
}

Status ServerSet::Run(std::span<const redis::Argv> cmds, Retry retry, const Take& take) {
  std::string tried;
  bool unauthorized = false;
  bool repeated = false;  // an earlier attempt was sent and its reply lost
  auto note = [&](size_t i, const std::string& why) {
    if (!tried.empty()) tried += ", ";
    tried += Name(i) + " (" + why + ")";
    unauthorized = unauthorized || why.starts_with("AUTH refused");
  };
  const size_t n = servers_.size();
  const size_t first = preferred_.load();
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (first + k) % n;
    std::unique_ptr<redis::Connection> conn = Acquire(i);
    Status st;
    for (const redis::Argv& cmd : cmds) {
      if (st = conn->Append(cmd); !st.ok()) break;  // fails only while connecting
    }
    if (!st.ok()) {
      note(i, Reason(*conn, st));
      continue;
    }
    std::vector<redis::Reply> replies;
    if (st = conn->Receive(cmds.size(), &replies); !st.ok()) {
      std::string why = Reason(*conn, st);
      Broken(i, std::move(conn), why);
      if (retry == Retry::kUntilSent) {
        return Unavailable("delayq server " + Name(i) + ": " + why +
                           "; the request was sent and may have run");
      }
      note(i, why);
      repeated = true;
      continue;
    }
    if (retry == Retry::kAlways && k + 1 < n && IsUnavailableReply(replies)) {
      Release(i, std::move(conn));
      note(i, "answered UNAVAILABLE");
      repeated = true;
      continue;
    }
    Status out = take(replies, repeated);
    if (out.code() == Code::kUnavailable) {
      conn.reset();  // a malformed reply: this connection cannot be trusted
    } else {
      Release(i, std::move(conn));
    }
    preferred_.store(i);
    return out;
  }
  if (unauthorized) return Status(Code::kUnauthorized, std::string(kNoServerAccepted) + tried);
  return Unavailable(std::string(kNoServerAnswered) + tried);
}

Result<ServerSet::Sent> ServerSet::Send(const redis::Argv& cmd) {
  std::string tried;
  const size_t n = servers_.size();
  const size_t first = preferred_.load();
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (first + k) % n;
    std::unique_ptr<redis::Connection> conn = Acquire(i);
    if (Status st = conn->Append(cmd); !st.ok()) {
      if (!tried.empty()) tried += ", ";
      tried += Name(i) + " (" + Reason(*conn, st) + ")";
      continue;
    }
    if (Status st = conn->Flush(); !st.ok()) {
      std::string why = Reason(*conn, st);
      Broken(i, std::move(conn), why);
      return Unavailable("delayq server " + Name(i) + ": " + why +
                         "; the request was sent and may have run");
    }
    preferred_.store(i);
    return Sent{i, std::move(conn)};
  }
  return Unavailable(std::string(kNoServerAnswered) + tried);
}

}  // namespace delayq::client
