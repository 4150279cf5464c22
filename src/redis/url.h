// Where Redis is, as a URL (`--redis redis://...`):
//
//   redis://[[user]:password@]host[:port][,host[:port]…][/db]
//   rediss://[[user]:password@]host[:port][,host[:port]…][/db]      (TLS)
//   redis+sentinel://[[user]:password@]host[:port][,host[:port]…]/MASTER_NAME[/db]
//
//   redis://127.0.0.1:6379                  one server, no password, db 0
//   redis://:s3cret@10.0.0.5:6379/2         password, db 2
//   redis://app:p%40ss@h1:7000,h2:7000      ACL user "app", password "p@ss", two seeds
//   redis://[::1]:6379                      IPv6 in brackets
//
// Several host:port are seeds: Client::Open tries them in order until one
// answers (for a cluster, any one node is enough to learn the rest). The
// port defaults to 6379. user and password are percent-decoded ("%40" is
// '@'). db must be 0..2147483647; a non-zero db is refused later, by
// Client::Open, when the server turns out to be a cluster node (a cluster has
// db 0 only).
//
// `rediss://` is the same over TLS (RedisUrl::tls): every connection, to the
// seeds and to the cluster nodes found through them, verifies the server's
// certificate and its name (connection.h, ConnectionOptions::tls). TLS with
// Sentinel is refused ("rediss+sentinel://"): the sentinels, and the servers
// they name, are reached in plaintext only.
//
// `redis+sentinel://` names Redis Sentinels instead of Redis: the host:port
// list is the sentinels (port 26379 by default), MASTER_NAME (required,
// percent-decoded) the master they watch, as in `sentinel monitor NAME ...`.
// Client::Open asks them where that master is and follows it across
// failovers (client.h). The user and password are the Redis servers' (the
// master's and its replicas'); the sentinels are asked without AUTH.
//
//   redis+sentinel://10.0.0.1,10.0.0.2,10.0.0.3/mymaster
//   redis+sentinel://:pw@10.0.0.1:26379,10.0.0.2:26379/orders/2
//
// Thread-safety: plain values and pure functions.
#ifndef DELAYQ_REDIS_URL_H_
#define DELAYQ_REDIS_URL_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/status.h"

namespace delayq::redis {

// One Redis node's address.
struct Endpoint {
  std::string host;  // name or address, without brackets
  int port = 6379;   // 1..65535 (kDefaultPort)

  // "127.0.0.1:6379", or "[::1]:6379" for an IPv6 address.
  std::string ToString() const;

  friend bool operator==(const Endpoint&, const Endpoint&) = default;
};

struct RedisUrl {
  std::vector<Endpoint> seeds;          // at least one
  std::string user;                     // empty: the default user (AUTH password)
  std::optional<std::string> password;  // decoded; nullopt: no AUTH
  int db = 0;                           // SELECTed on connect when non-zero
  // redis+sentinel://: the master's name; seeds are then the sentinels.
  // Empty for redis://.
  std::string sentinel_master;
  // rediss://: every connection speaks TLS. Never with sentinel_master.
  bool tls = false;

  bool sentinel() const { return !sentinel_master.empty(); }

  // The URL back, with the password as "***": safe for logs and messages.
  std::string ToString() const;
};

// Parses a URL of the form above. InvalidArgument naming what is wrong
// ("redis url: unsupported scheme 'http' ...", "... port '99999' ...",
// "... empty host ...", "... TLS with Sentinel is not supported ...",
// "... no master name after the sentinels ...").
Result<RedisUrl> ParseRedisUrl(std::string_view text);

// Redis's default port, and a sentinel's.
inline constexpr int kDefaultPort = 6379;

// "host:port", "[v6]:port" or "host" (port `default_port`). InvalidArgument
// on an empty host or a bad port. Also reads the addresses in MOVED/ASK replies.
Result<Endpoint> ParseEndpoint(std::string_view text, int default_port = kDefaultPort);

// `url` as messages and logs may show it, parsed or not: whatever stands
// between "://" and the last '@' (user and password) becomes "***".
std::string RedactUrl(std::string_view url);

// Decodes %XX escapes; InvalidArgument on a malformed escape. '+' stays '+'.
Result<std::string> PercentDecode(std::string_view text);

}  // namespace delayq::redis

#endif  // DELAYQ_REDIS_URL_H_
