// libFuzzer target for cron expressions (src/cron): a schedule's "cron" and
// "timezone" come from a PUT body, so no expression may crash the server or
// make it loop. The first input byte picks a time zone (or, past the list,
// the bytes after the first newline are the zone's name); the rest is the
// expression. Besides "never crash, never read out of bounds" (ASan, UBSan),
// it checks that a refusal is an InvalidArgument naming cron or timezone,
// and that an accepted expression's fire times move forward: Next(t) > t,
// Next of the instant before a fire time is that fire time, and Between
// gives increasing times within its range.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cron/cron.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

constexpr std::string_view kZones[] = {"",
                                       "UTC",
                                       "America/New_York",
                                       "Europe/London",
                                       "Australia/Lord_Howe",
                                       "Asia/Kolkata",
                                       "Pacific/Chatham",
                                       "America/Santiago"};
constexpr size_t kZoneCount = sizeof(kZones) / sizeof(kZones[0]);

// Instants the checks start from: the epoch, a DST change in New York, a leap
// day, late in year 9999's range.
constexpr int64_t kFrom[] = {0, 1710053999000, 1709164800000, 253402300000000};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string_view zone;
  if (data[0] < kZoneCount) {
    zone = kZones[data[0]];
  } else if (size_t nl = in.find('\n'); nl != std::string_view::npos) {
    zone = in.substr(nl + 1);
    in = in.substr(0, nl);
  }
  auto parsed = delayq::cron::Cron::Parse(in, zone);
  if (!parsed.ok()) {
    Check(parsed.status().code() == delayq::Code::kInvalidArgument);
    const std::string& m = parsed.status().message();
    Check(m.starts_with("cron: ") || m.starts_with("timezone: "));
    return 0;
  }
  const delayq::cron::Cron& c = *parsed;
  for (int64_t from : kFrom) {
    const int64_t next = c.Next(from);
    if (next == delayq::cron::kNever) continue;
    Check(next > from);
    Check(c.Next(next - 1) == next);
    const int64_t after = c.Next(next);
    Check(after == delayq::cron::kNever || after > next);
    uint64_t total = 0;
    const auto times = c.Between(from, from + 86'400'000, 64, &total, 100'000);
    Check(times.size() <= 64 && times.size() <= total);
    for (size_t i = 0; i < times.size(); ++i) {
      Check(times[i] > from && times[i] <= from + 86'400'000);
      if (i > 0) Check(times[i] > times[i - 1]);
    }
  }
  return 0;
}
