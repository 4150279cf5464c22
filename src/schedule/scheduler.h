// Scheduler: periodic jobs (SPEC §9, docs/schedules.md). Every server runs
// one, for every schedule in its store, on its event loop. For each schedule
// it keeps the next firing's job in the queue ahead of time (overlap
// "allow"), or adds it when it falls due (overlap "skip"/"buffer_one", which
// depend on the previous job at that moment); applies `catchup` to fire
// times missed while no server ran it or while it was paused; withdraws the
// firing added ahead when a schedule is paused, changed or deleted; pauses a
// schedule whose firing's job was buried (pause_on_failure).
//
// Every change to a schedule's firing state is one compare-and-set on its
// revision in the store (ServingQueue::FireScheduleAsync), planned from the
// record as last read: when two servers plan the same firing, one applies
// and the other reads the record again. So a fire time is added once, with
// no leader, across restarts and any number of servers on one Redis.
//
// It is also what the front ends call to create, read, change and remove
// schedules: Put parses the cron and the time zone, stores, and plans at
// once; every server also re-reads the store every `refresh_ms`, so one on
// the same Redis sees another's changes within that.
//
// Loop thread only (every method, every callback).
#ifndef DELAYQ_SCHEDULE_SCHEDULER_H_
#define DELAYQ_SCHEDULE_SCHEDULER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "delayq/clock.h"
#include "delayq/schedule.h"
#include "delayq/status.h"
#include "net/event_loop.h"
#include "serving/serving_queue.h"

namespace delayq::schedule {

struct SchedulerOptions {
  // default: SystemClock(). A clock that is not real time (ManualClock) is
  // subscribed to: the scheduler looks at its schedules when it moves.
  std::shared_ptr<Clock> clock;
  // How often the schedules are read again from the store (another server's
  // changes; a firing a server that died had planned).
  int64_t refresh_ms = 1000;
  // How often the previous firing's job is looked at, for a schedule that
  // holds a firing (buffer_one) or pauses on failure.
  int64_t check_ms = 200;
  // With overlap allow, how long after a firing falls due the one after it
  // is planned (its job added ahead). Not at once: every schedule due on the
  // same second would be planned while the queue hands out their jobs.
  int64_t plan_after_due_ms = 250;
};

struct BackfillResult {
  uint32_t added = 0;     // jobs added
  uint64_t already = 0;   // fire times in the range that had fired (or whose job was there)
  uint64_t in_range = 0;  // fire times in the range
};

struct SchedulerStats {
  uint64_t schedules = 0;  // known to this server
  uint64_t firings = 0;    // jobs this server added for firings
  uint64_t skipped = 0;    // fire times this server decided to skip
  uint64_t conflicts = 0;  // compare-and-sets another server (or a put) won
  // The earliest next fire time (Unix ms) among the schedules this server
  // runs, 0 when none is planned: an alert on it lying far in the past
  // finds a scheduler that stopped.
  int64_t next_fire_at_ms = 0;
};

class Scheduler {
 public:
  static Result<std::unique_ptr<Scheduler>> Create(net::EventLoop* loop, ServingQueue* queue,
                                                   SchedulerOptions options);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Reads the schedules and starts firing.
  void Start();
  // No further firing or store call; answers nothing more. Idempotent.
  void Stop();

  // The front ends' calls. Put: cron and time zone parsed (kInvalidArgument
  // naming the position), ValidateScheduleDefinition, store, plan.
  void Put(const Schedule& s, std::function<void(Result<Schedule>)> done);
  // kNotFound when there is no such schedule.
  void Get(std::string_view name, std::function<void(Result<Schedule>)> done);
  void List(std::function<void(Result<std::vector<Schedule>>)> done);
  // Removes it and withdraws the firing added ahead; answers it as it was.
  void Delete(std::string_view name, std::function<void(Result<Schedule>)> done);
  // Pause or resume (a put of the stored definition with `paused` changed).
  void SetPaused(std::string_view name, bool paused, std::function<void(Result<Schedule>)> done);
  // Adds the firings of the past range [from_ms, to_ms] (to_ms <= now) as if
  // they had happened, except those that did: same ids. overlap kAllow adds
  // every one; kSkip adds none while a firing's job is live, else the latest
  // only; kBufferOne is refused (kInvalidArgument).
  void Backfill(std::string_view name, int64_t from_ms, int64_t to_ms, Overlap overlap,
                std::function<void(Result<BackfillResult>)> done);

  SchedulerStats stats() const;

 private:
  class Impl;
  explicit Scheduler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace delayq::schedule

#endif  // DELAYQ_SCHEDULE_SCHEDULER_H_
