// The Redis store's schedules (periodic jobs, include/delayq/schedule.h):
// records in one hash under bucket 0's tag, changed only by schedules.lua
// (on Redis's clock, as subscriptions are), and the firing, which crosses
// slots (its jobs live in their own buckets) and so takes three steps, each
// one script call: CLAIM (schedules.lua, bucket 0: the compare-and-set on
// the revision, which leaves a PENDING entry naming the jobs to make), FIRE
// (schedule_fire.lua in each job bucket: adds what is not there yet and was
// not added within 10 minutes, withdraws what is still delayed), CLEAR
// (schedules.lua: drops the PENDING). A claim that meets another's PENDING
// (a server between its steps, or one that died there) finishes that one
// first, then claims again once; a read finishes any PENDING older than 2 s.
// Keys, formats and the scripts' contracts: docs/redis-store.md, "Schedules".
//
// The calls are ops of RedisQueue's dispatcher (redis_queue_ops.h): a put,
// delete or read is one call (a read that finishes PENDINGs two more
// rounds); a firing one to three rounds (six when it finishes another's
// first). The FIRE steps of every firing of a round share one
// schedule_fire call per bucket. Callbacks run on the dispatcher thread.
#ifndef DELAYQ_REDIS_STORE_REDIS_SCHEDULE_H_
#define DELAYQ_REDIS_STORE_REDIS_SCHEDULE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/job.h"
#include "delayq/schedule.h"
#include "redis_store/redis_queue_ops.h"

namespace delayq::rq {

// The versions of the schedule record and of a PENDING (their first byte);
// a reader refuses another.
inline constexpr uint8_t kScheduleRecordVersion = 1;
inline constexpr uint8_t kPendingVersion = 1;
// A PENDING older than this (by Redis's clock) is finished by any read.
inline constexpr int64_t kPendingStaleMs = 2000;

// The record of `s` as schedules.lua's put takes it: the head's revision,
// version and times 0 (the script writes them), then the definition, the
// firing state and pause_reason (cut at 65535 bytes).
std::string EncodeScheduleRecord(const Schedule& s);
// A stored record: every field. kInternal naming what is wrong when it is
// not one.
Result<Schedule> DecodeScheduleRecord(std::string_view record);
// The firing state of `s` (the fields under "Firing state", without
// pause_reason) as claim takes it.
std::string EncodeScheduleState(const Schedule& s);

// What a claimed firing still has to do.
struct PendingFiring {
  uint64_t revision = 0;      // the revision the claim made
  int64_t at_ms = 0;          // when it was claimed (Redis's clock)
  std::vector<JobSpec> jobs;  // id, topic, body, priority, ttr_ms, max_attempts, run_at_ms
  std::vector<std::string> withdraw;
};
// The payload claim keeps in the PENDING: the jobs (run_at_ms absolute: a
// job with delay_ms gets now_ms + delay_ms) and the ids to withdraw. ""
// when there are neither (the claim then leaves no PENDING).
std::string EncodeFiringPayload(const std::vector<JobSpec>& jobs,
                                const std::vector<std::string>& withdraw, int64_t now_ms);
// A PENDING as stored (head and payload).
Result<PendingFiring> DecodePending(std::string_view pending);

using ScheduleDone = std::function<void(Result<Schedule>)>;
using SchedulesDone = std::function<void(Result<std::vector<Schedule>>)>;
using FiredDone = std::function<void(Result<ScheduleFired>)>;

// REQUIRES (all): arguments validated (ValidateScheduleDefinition,
// ValidateScheduleName; a firing's jobs by ValidateJobSpec, with ids).
std::unique_ptr<Op> MakePutSchedule(const Schedule& s, ScheduleDone done);
std::unique_ptr<Op> MakeDeleteSchedule(std::string_view name, ScheduleDone done);
// name empty: every schedule, by name; else the one (kNotFound when none).
std::unique_ptr<Op> MakeListSchedules(std::string_view name, SchedulesDone done);
std::unique_ptr<Op> MakeFireSchedule(const ScheduleFiring& f, FiredDone done);

}  // namespace delayq::rq

#endif  // DELAYQ_REDIS_STORE_REDIS_SCHEDULE_H_
