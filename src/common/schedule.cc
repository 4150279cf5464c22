// The one check of a schedule's definition, and the names of its options
// (include/delayq/schedule.h). Cron expressions and time zones are checked
// by src/cron.
#include "delayq/schedule.h"

#include <string>

#include "common/name_chars.h"

namespace delayq {

std::string_view CatchupName(Catchup c) {
  switch (c) {
    case Catchup::kNone:
      return "none";
    case Catchup::kLast:
      return "last";
    case Catchup::kAll:
      return "all";
  }
  return "last";
}

std::string_view OverlapName(Overlap o) {
  switch (o) {
    case Overlap::kAllow:
      return "allow";
    case Overlap::kSkip:
      return "skip";
    case Overlap::kBufferOne:
      return "buffer_one";
  }
  return "allow";
}

bool ParseCatchup(std::string_view s, Catchup* out) {
  for (Catchup c : {Catchup::kNone, Catchup::kLast, Catchup::kAll}) {
    if (s == CatchupName(c)) {
      *out = c;
      return true;
    }
  }
  return false;
}

bool ParseOverlap(std::string_view s, Overlap* out) {
  for (Overlap o : {Overlap::kAllow, Overlap::kSkip, Overlap::kBufferOne}) {
    if (s == OverlapName(o)) {
      *out = o;
      return true;
    }
  }
  return false;
}

std::string FiringId(std::string_view schedule, int64_t fire_at_ms) {
  std::string id(schedule);
  id += '@';
  id += std::to_string(fire_at_ms);
  return id;
}

Status ValidateScheduleName(std::string_view name) {
  if (name.empty() || name.size() > kMaxScheduleNameBytes) {
    return InvalidArgument("name: 1.." + std::to_string(kMaxScheduleNameBytes) +
                           " bytes of [A-Za-z0-9._:-]");
  }
  for (unsigned char c : name) {
    if (!IsNameChar(c)) {
      if (c == '@') {
        return InvalidArgument(
            "name: '@' is not allowed (it separates a schedule's name from the fire time in its "
            "jobs' ids)");
      }
      return InvalidArgument("name: only [A-Za-z0-9._:-] allowed");
    }
  }
  return Status::Ok();
}

Status ValidateScheduleDefinition(const Schedule& s) {
  if (Status st = ValidateScheduleName(s.name); !st.ok()) return st;
  if (s.cron.empty()) {
    return InvalidArgument("cron: required, e.g. \"*/5 * * * *\", \"@hourly\" or \"@every 30s\"");
  }
  if (s.cron.size() > kMaxCronBytes) {
    return InvalidArgument("cron: at most " + std::to_string(kMaxCronBytes) + " bytes");
  }
  if (s.timezone.size() > kMaxTimezoneBytes) {
    return InvalidArgument("timezone: at most " + std::to_string(kMaxTimezoneBytes) + " bytes");
  }
  if (s.topic.empty())
    return InvalidArgument("topic: required, the topic each firing's job goes to");
  if (Status st = ValidateTopic(s.topic); !st.ok()) return st;
  // The job each firing adds must itself be valid: id and run_at are the
  // longest and latest a firing can make.
  JobSpec job;
  job.topic = s.topic;
  job.id = FiringId(s.name, kMaxRunAtMs);
  job.run_at_ms = kMaxRunAtMs;
  job.ttr_ms = s.ttr_ms;
  job.priority = s.priority;
  job.max_attempts = s.max_attempts;
  job.body = s.body;
  if (Status st = ValidateJobSpec(job, Limits{}); !st.ok()) return st;
  if (s.catchup_window_ms < 1 || s.catchup_window_ms > kMaxCatchupWindowMs) {
    return InvalidArgument("catchup_window_ms: must be 1.." + std::to_string(kMaxCatchupWindowMs) +
                           " (366 days)");
  }
  return Status::Ok();
}

}  // namespace delayq
