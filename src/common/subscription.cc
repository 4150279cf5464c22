// ValidateSubscription: the one check of a subscription's fields, used by
// every store and front end (include/delayq/subscription.h).
#include "delayq/subscription.h"

#include <cctype>
#include <cmath>
#include <string>

#include "common/name_chars.h"
#include "delayq/job.h"

namespace delayq {
namespace {

bool IsBase64Char(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '+' ||
         c == '/';
}

// "http://host[:port][/path...]" or https; no credentials, no fragment, no
// spaces or control characters. The HTTP client checks the rest when it
// connects; this catches what is certainly wrong at registration.
Status ValidateUrl(std::string_view url) {
  if (url.empty()) return InvalidArgument("url: required, an http:// or https:// url");
  if (url.size() > kMaxSubscriptionUrlBytes) {
    return InvalidArgument("url: " + std::to_string(url.size()) + " bytes, at most " +
                           std::to_string(kMaxSubscriptionUrlBytes) + " allowed");
  }
  for (unsigned char c : url) {
    if (c <= 0x20 || c >= 0x7f) {
      return InvalidArgument(
          "url: spaces, control characters and non-ASCII bytes are not "
          "allowed (percent-encode them)");
    }
  }
  size_t colon = url.find("://");
  if (colon == std::string_view::npos) {
    return InvalidArgument("url: \"" + std::string(url.substr(0, 40)) +
                           "\" has no scheme; give http://host:port/path or https://...");
  }
  std::string scheme(url.substr(0, colon));
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (scheme != "http" && scheme != "https") {
    return InvalidArgument("url: scheme must be http or https, not \"" + scheme + "\"");
  }
  std::string_view rest = url.substr(colon + 3);
  std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
  if (rest.find('#') != std::string_view::npos) {
    return InvalidArgument("url: a fragment (#...) is never sent; leave it out");
  }
  if (authority.find('@') != std::string_view::npos) {
    return InvalidArgument(
        "url: credentials in the url are not allowed; sign requests with "
        "\"secret\" instead");
  }
  std::string_view host = authority;
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {  // [v6]
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return InvalidArgument("url: unclosed [ in the host");
    host = authority.substr(0, close + 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return InvalidArgument("url: bad characters after the host");
      port = after.substr(1);
    }
  } else if (size_t c = authority.rfind(':'); c != std::string_view::npos) {
    host = authority.substr(0, c);
    port = authority.substr(c + 1);
  }
  if (host.empty() || host == "[]") return InvalidArgument("url: no host");
  if (authority.find(':') != std::string_view::npos && authority.front() != '[' && port.empty()) {
    return InvalidArgument("url: empty port");
  }
  if (!port.empty()) {
    if (port.size() > 5) return InvalidArgument("url: port must be 1-65535");
    int p = 0;
    for (char c : port) {
      if (c < '0' || c > '9') return InvalidArgument("url: port must be a number, 1-65535");
      p = p * 10 + (c - '0');
    }
    if (p < 1 || p > 65535) return InvalidArgument("url: port must be 1-65535");
  }
  return Status::Ok();
}

Status ValidateSecret(std::string_view secret, std::string_view field) {
  constexpr std::string_view kPrefix = "whsec_";
  if (secret.substr(0, kPrefix.size()) != kPrefix) {
    return InvalidArgument(std::string(field) +
                           ": must be \"whsec_\" followed by the base64 of the key "
                           "(Standard Webhooks)");
  }
  std::string_view b64 = secret.substr(kPrefix.size());
  size_t pad = 0;
  while (!b64.empty() && b64.back() == '=' && pad < 2) {
    b64.remove_suffix(1);
    ++pad;
  }
  for (unsigned char c : b64) {
    if (!IsBase64Char(c)) {
      return InvalidArgument(std::string(field) + ": the key after \"whsec_\" is not base64");
    }
  }
  if ((b64.size() + pad) % 4 != 0 || b64.size() % 4 == 1) {
    return InvalidArgument(std::string(field) +
                           ": the key after \"whsec_\" is not base64 "
                           "(its length is not a multiple of 4)");
  }
  size_t key_bytes = b64.size() * 3 / 4;
  if (key_bytes < 24 || key_bytes > 64) {
    return InvalidArgument(std::string(field) + ": the key must be 24-64 bytes, this one is " +
                           std::to_string(key_bytes));
  }
  return Status::Ok();
}

}  // namespace

Status ValidateSubscriptionName(std::string_view name) {
  if (name.empty()) return InvalidArgument("name: required, 1-100 bytes of [A-Za-z0-9._:-]");
  if (name.size() > kMaxSubscriptionNameBytes) {
    return InvalidArgument("name: " + std::to_string(name.size()) + " bytes, at most 100 allowed");
  }
  for (unsigned char c : name) {
    if (!IsNameChar(c)) return InvalidArgument("name: only [A-Za-z0-9._:-] allowed");
  }
  return Status::Ok();
}

Status ValidateSubscription(const Subscription& s) {
  if (Status st = ValidateSubscriptionName(s.name); !st.ok()) return st;
  if (Status st = ValidateUrl(s.url); !st.ok()) return st;
  if (s.topics.empty()) return InvalidArgument("topics: required, 1-100 topic names");
  if (s.topics.size() > kMaxSubscriptionTopics) {
    return InvalidArgument("topics: " + std::to_string(s.topics.size()) +
                           " given, at most 100 allowed");
  }
  for (const std::string& t : s.topics) {
    if (Status st = ValidateTopic(t); !st.ok()) return InvalidArgument("topics: " + st.message());
  }
  if (s.concurrency < 1 || s.concurrency > kMaxSubscriptionConcurrency) {
    return InvalidArgument("concurrency: must be 1-10000 (requests in flight to this url)");
  }
  if (s.timeout_ms < 1 || s.timeout_ms > kMaxPushTimeoutMs) {
    return InvalidArgument("timeout_ms: must be 1-1800000 (30 minutes)");
  }
  if (s.ttl_ms != 0 && (s.ttl_ms < 1000 || s.ttl_ms > kMaxSubscriptionTtlMs)) {
    return InvalidArgument("ttl_ms: must be 1000-604800000 (7 days), or 0 to stay until deleted");
  }
  if (s.secrets.size() > kMaxSubscriptionSecrets) {
    return InvalidArgument("secrets: at most 10 allowed");
  }
  for (size_t i = 0; i < s.secrets.size(); ++i) {
    std::string field = s.secrets.size() == 1 ? "secret" : "secrets[" + std::to_string(i) + "]";
    if (Status st = ValidateSecret(s.secrets[i], field); !st.ok()) return st;
  }
  const RetryPolicy& r = s.retry;
  if (r.min_backoff_ms < 0 || r.min_backoff_ms > kMaxPushBackoffMs) {
    return InvalidArgument("retry.min_backoff_ms: must be 0-86400000 (a day)");
  }
  if (r.max_backoff_ms < r.min_backoff_ms || r.max_backoff_ms > kMaxPushBackoffMs) {
    return InvalidArgument(
        "retry.max_backoff_ms: must be at least retry.min_backoff_ms and at "
        "most 86400000 (a day)");
  }
  if (r.max_doublings > 62) return InvalidArgument("retry.max_doublings: must be 0-62");
  if (!std::isfinite(s.rate_per_s) || s.rate_per_s < 0 || s.rate_per_s > 1e6) {
    return InvalidArgument("rate_per_s: must be 0-1000000 (0: no limit)");
  }
  return Status::Ok();
}

}  // namespace delayq
