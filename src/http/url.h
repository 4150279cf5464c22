// Request targets: splitting one into path and query, percent-decoding
// (RFC 3986 2.1), query parameters, and path segments.
//
// Nothing here allocates unless it returns a std::string. Decoding never
// fails silently: a '%' not followed by two hex digits makes the result
// std::nullopt, and the server answers 400.
#ifndef DELAYQ_HTTP_URL_H_
#define DELAYQ_HTTP_URL_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace delayq::http {

// A request target split at its first '?', still percent-encoded.
struct Target {
  std::string path;   // "/v1/jobs/a%2Fb"; "" for an empty target
  std::string query;  // "wait=5000&n=2", without the '?'; "" if none
};

// The same, as views into the target passed in (for the hot path).
struct TargetView {
  std::string_view path;
  std::string_view query;
};

// Splits a raw request target. A fragment ("#...") is dropped. The
// absolute form ("http://host:1/p?q", RFC 9112 3.2.2) is reduced to its path
// and query ("/" when it has no path); "*" stays the path "*".
TargetView SplitTargetView(std::string_view target);
Target SplitTarget(std::string_view target);

// Decodes %XX escapes. '+' stays '+' (in a path it is not a space).
// std::nullopt when a '%' is not followed by two hex digits. Decoded bytes
// may be anything, NUL and invalid UTF-8 included: the caller validates.
std::optional<std::string> PercentDecode(std::string_view s);
// The same for application/x-www-form-urlencoded query keys and values,
// where '+' means a space.
std::optional<std::string> PercentDecodeQuery(std::string_view s);

// The decoded value of the first parameter named `key` (compared after
// decoding) in `query` ("a=1&b=&c"): "1" for a, "" for b and for c (no '='),
// std::nullopt when absent — or when its value is badly encoded; check
// ValidQuery() once first to tell a 400 from a default.
std::optional<std::string> QueryParam(std::string_view query, std::string_view key);
// True when every key and value in `query` decodes.
bool ValidQuery(std::string_view query);

// Splits a path on its raw '/' and decodes each segment, so an encoded
// slash stays inside its segment: "/v1/jobs/a%2Fb" -> {"v1", "jobs", "a/b"}.
// The leading '/' starts the first segment; empty segments are kept
// ("/a//b/" -> {"a", "", "b", ""}); "/" -> {}. std::nullopt when the path
// does not start with '/' or a segment is badly encoded.
std::optional<std::vector<std::string>> PathSegments(std::string_view path);

}  // namespace delayq::http

#endif  // DELAYQ_HTTP_URL_H_
