// Logging: one line per event on stderr, "<UTC time> <level> <message>".
// delayq logs start, stop, errors and warnings; nothing per job by default.
//
// Thread-safety: every function may be called from any thread; each line
// leaves in one write(2), so lines from several threads never interleave.
#ifndef DELAYQ_COMMON_LOG_H_
#define DELAYQ_COMMON_LOG_H_

#include <optional>
#include <string_view>

namespace delayq {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

// Lines below `level` are dropped. Default: kInfo.
void SetLogLevel(LogLevel level);
bool LogEnabled(LogLevel level);
// "debug", "info", "warn", "error"; nullopt for anything else.
std::optional<LogLevel> ParseLogLevel(std::string_view name);

// printf-style.
void Log(LogLevel level, const char* format, ...) __attribute__((format(printf, 2, 3)));

}  // namespace delayq

#endif  // DELAYQ_COMMON_LOG_H_
