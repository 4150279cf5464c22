// The URL is split from the outside in: scheme, then userinfo at the last
// '@' (an unescaped '@' or '/' in a password still works), then the db after
// the first '/' of what is left, then the comma-separated hosts.
#include "redis/url.h"

#include <charconv>

namespace delayq::redis {
namespace {

constexpr std::string_view kScheme = "redis://";
constexpr std::string_view kTlsScheme = "rediss://";
constexpr std::string_view kSentinelScheme = "redis+sentinel://";
constexpr int kSentinelPort = 26379;

Status Bad(std::string_view url, const std::string& what) {
  return InvalidArgument("redis url '" + RedactUrl(url) + "': " + what);
}

// A decimal integer in [lo, hi], all of `text`.
std::optional<int> ParseInt(std::string_view text, int lo, int hi) {
  int value = 0;
  if (text.empty()) return std::nullopt;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < lo || value > hi) {
    return std::nullopt;
  }
  return value;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string RedactUrl(std::string_view url) {
  size_t scheme = url.find("://");
  size_t at = url.rfind('@');
  if (scheme == std::string_view::npos || at == std::string_view::npos || at < scheme + 3) {
    return std::string(url);
  }
  return std::string(url.substr(0, scheme + 3)) + "***" + std::string(url.substr(at));
}

std::string Endpoint::ToString() const {
  std::string h = host.find(':') == std::string::npos ? host : "[" + host + "]";
  return h + ":" + std::to_string(port);
}

std::string RedisUrl::ToString() const {
  std::string out(sentinel() ? kSentinelScheme : tls ? kTlsScheme : kScheme);
  if (password) out += user + ":***@";
  for (size_t i = 0; i < seeds.size(); ++i) {
    if (i > 0) out += ',';
    out += seeds[i].ToString();
  }
  if (sentinel()) out += "/" + sentinel_master;
  if (db != 0) out += "/" + std::to_string(db);
  return out;
}

Result<std::string> PercentDecode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    int hi = i + 1 < text.size() ? HexValue(text[i + 1]) : -1;
    int lo = i + 2 < text.size() ? HexValue(text[i + 2]) : -1;
    if (hi < 0 || lo < 0) {
      return InvalidArgument("bad percent escape at offset " + std::to_string(i) +
                             " (expected %XX with two hex digits)");
    }
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

Result<Endpoint> ParseEndpoint(std::string_view text, int default_port) {
  Endpoint e;
  e.port = default_port;
  std::string_view port;
  bool has_port = false;
  if (!text.empty() && text[0] == '[') {  // [v6] or [v6]:port
    size_t close = text.find(']');
    if (close == std::string_view::npos) {
      return InvalidArgument("address '" + std::string(text) + "': no ']' after '['");
    }
    e.host = std::string(text.substr(1, close - 1));
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') {
        return InvalidArgument("address '" + std::string(text) + "': expected ':port' after ']'");
      }
      port = rest.substr(1);
      has_port = true;
    }
  } else {
    size_t colon = text.rfind(':');
    if (colon != std::string_view::npos && text.find(':') != colon) {
      return InvalidArgument("address '" + std::string(text) +
                             "': an IPv6 address needs brackets, as in [::1]:6379");
    }
    e.host = std::string(text.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = text.substr(colon + 1);
      has_port = true;
    }
  }
  if (e.host.empty()) return InvalidArgument("address '" + std::string(text) + "': empty host");
  if (has_port) {
    std::optional<int> p = ParseInt(port, 1, 65535);
    if (!p) {
      return InvalidArgument("address '" + std::string(text) + "': port '" + std::string(port) +
                             "' is not a number in 1..65535");
    }
    e.port = *p;
  }
  return e;
}

Result<RedisUrl> ParseRedisUrl(std::string_view text) {
  if (text.starts_with("rediss+sentinel://") || text.starts_with("redis+sentinels://")) {
    return Bad(text,
               "TLS with Sentinel is not supported (rediss:// is for one Redis or a Redis "
               "Cluster); use redis+sentinel://");
  }
  const bool sentinel = text.starts_with(kSentinelScheme);
  const bool tls = text.starts_with(kTlsScheme);
  if (!sentinel && !tls && !text.starts_with(kScheme)) {
    size_t sep = text.find("://");
    if (sep == std::string_view::npos) return Bad(text, "expected it to start with redis://");
    return Bad(text, "unsupported scheme '" + std::string(text.substr(0, sep)) +
                         "' (expected redis://, rediss:// or redis+sentinel://)");
  }
  RedisUrl url;
  url.tls = tls;
  std::string_view rest = text.substr(sentinel ? kSentinelScheme.size()
                                      : tls    ? kTlsScheme.size()
                                               : kScheme.size());

  if (size_t at = rest.rfind('@'); at != std::string_view::npos) {
    std::string_view userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    size_t colon = userinfo.find(':');
    if (colon == std::string_view::npos) {
      return Bad(text, "expected [user]:password@ before the host (no ':' in '" +
                           std::string(userinfo) + "@')");
    }
    Result<std::string> user = PercentDecode(userinfo.substr(0, colon));
    if (!user.ok()) return Bad(text, "user: " + user.status().message());
    Result<std::string> password = PercentDecode(userinfo.substr(colon + 1));
    if (!password.ok()) return Bad(text, "password: " + password.status().message());
    url.user = std::move(*user);
    url.password = std::move(*password);
  }

  if (rest.find_first_of("?#") != std::string_view::npos) {
    return Bad(text, "query strings and fragments are not supported");
  }
  if (sentinel) {  // hosts/MASTER_NAME[/db]
    size_t slash = rest.find('/');
    std::string_view name =
        slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
    std::string_view db;
    if (size_t second = name.find('/'); second != std::string_view::npos) {
      db = name.substr(second + 1);
      name = name.substr(0, second);
    }
    if (name.empty()) {
      return Bad(text,
                 "no master name after the sentinels (redis+sentinel://host:port,.../MASTER_NAME)");
    }
    Result<std::string> decoded = PercentDecode(name);
    if (!decoded.ok()) return Bad(text, "master name: " + decoded.status().message());
    url.sentinel_master = std::move(*decoded);
    rest = rest.substr(0, slash);
    if (!db.empty()) {
      std::optional<int> n = ParseInt(db, 0, 2147483647);
      if (!n) return Bad(text, "db '" + std::string(db) + "' is not a number in 0..2147483647");
      url.db = *n;
    }
  } else if (size_t slash = rest.find('/'); slash != std::string_view::npos) {
    std::string_view db = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    if (!db.empty()) {
      std::optional<int> n = ParseInt(db, 0, 2147483647);
      if (!n) return Bad(text, "db '" + std::string(db) + "' is not a number in 0..2147483647");
      url.db = *n;
    }
  }

  if (rest.empty()) return Bad(text, "empty host");
  while (true) {
    size_t comma = rest.find(',');
    std::string_view one = rest.substr(0, comma);
    if (one.empty()) return Bad(text, "empty host in the host list");
    Result<Endpoint> e = ParseEndpoint(one, sentinel ? kSentinelPort : kDefaultPort);
    if (!e.ok()) return Bad(text, e.status().message());
    url.seeds.push_back(std::move(*e));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return url;
}

}  // namespace delayq::redis
