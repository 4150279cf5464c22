// Durations as people type them: "30m", "5s", "1500ms", "1h30m", "2d".
//
// The one parser behind every place that takes a human duration — the
// command line's --delay/--ttr/--wait, the HTTP API's "delay"/"ttr" beside
// delay_ms/ttr_ms, the Redis protocol's ADD — so that "30m" means the same
// everywhere and a mistake is reported the same way.
//
// Thread-safety: pure functions.
#ifndef DELAYQ_COMMON_DURATION_H_
#define DELAYQ_COMMON_DURATION_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "delayq/status.h"

namespace delayq {

// Parses one or more <whole number><unit> groups, largest unit first or in
// any order ("1h30m", "90s", "250ms"); units are ms, s, m, h and d. "0" alone
// needs no unit. Anything else — a bare number, a negative, a fraction, an
// unknown unit, a sum past kMaxDurationMs — is kInvalidArgument with a
// message that starts with `what` ("delay: ...") and says what was expected.
Result<int64_t> ParseDurationMs(std::string_view text, std::string_view what);

// ParseDurationMs, then least_ms..most_ms: one outside is kInvalidArgument
// ("request-timeout: '2d' is longer than the longest allowed, 1d"). The one
// range check of the command line's durations, the client commands' and
// `delayq serve`'s alike.
Result<int64_t> ParseDurationMsWithin(std::string_view text, std::string_view what,
                                      int64_t least_ms, int64_t most_ms);

// The longest duration the parser accepts: 100 years, as kMaxDelayMs.
inline constexpr int64_t kMaxDurationMs = 100LL * 365 * 24 * 3600 * 1000;

// The shortest text ParseDurationMs reads back as `ms` ("30m", "1h30m",
// "1500ms", "0"), for messages and help.
std::string FormatDurationMs(int64_t ms);

}  // namespace delayq

#endif  // DELAYQ_COMMON_DURATION_H_
