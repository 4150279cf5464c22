#include "common/log.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace delayq {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};

constexpr const char* kNames[] = {"debug", "info", "warn", "error"};

}  // namespace

void SetLogLevel(LogLevel level) { g_level = static_cast<int>(level); }

bool LogEnabled(LogLevel level) { return static_cast<int>(level) >= g_level.load(); }

std::optional<LogLevel> ParseLogLevel(std::string_view name) {
  for (int i = 0; i < 4; ++i) {
    if (name == kNames[i]) return static_cast<LogLevel>(i);
  }
  return std::nullopt;
}

void Log(LogLevel level, const char* format, ...) {
  if (!LogEnabled(level)) return;
  char line[2048];
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  tm utc{};
  gmtime_r(&ts.tv_sec, &utc);
  size_t n = strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &utc);
  n += static_cast<size_t>(snprintf(line + n, sizeof line - n, ".%03ldZ %-5s ",
                                    ts.tv_nsec / 1'000'000, kNames[static_cast<int>(level)]));
  va_list args;
  va_start(args, format);
  int m = vsnprintf(line + n, sizeof line - n - 1, format, args);
  va_end(args);
  if (m > 0) n += std::min(static_cast<size_t>(m), sizeof line - n - 2);
  line[n++] = '\n';
  [[maybe_unused]] ssize_t w = write(STDERR_FILENO, line, n);
}

}  // namespace delayq
