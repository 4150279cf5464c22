// Placeholder: replaced by the scheduler (src/schedule/scheduler.h).
#include "schedule/scheduler.h"

namespace delayq::schedule {

class Scheduler::Impl {};

Scheduler::Scheduler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Scheduler::~Scheduler() = default;

Result<std::unique_ptr<Scheduler>> Scheduler::Create(net::EventLoop* /*loop*/,
                                                     ServingQueue* /*queue*/,
                                                     SchedulerOptions /*options*/) {
  return std::unique_ptr<Scheduler>(new Scheduler(std::make_unique<Impl>()));
}
void Scheduler::Start() {}
void Scheduler::Stop() {}
void Scheduler::Put(const Schedule& /*s*/, std::function<void(Result<Schedule>)> done) {
  done(Internal("schedules: not built yet"));
}
void Scheduler::Get(std::string_view /*name*/, std::function<void(Result<Schedule>)> done) {
  done(Internal("schedules: not built yet"));
}
void Scheduler::List(std::function<void(Result<std::vector<Schedule>>)> done) {
  done(Internal("schedules: not built yet"));
}
void Scheduler::Delete(std::string_view /*name*/, std::function<void(Result<Schedule>)> done) {
  done(Internal("schedules: not built yet"));
}
void Scheduler::SetPaused(std::string_view /*name*/, bool /*paused*/,
                          std::function<void(Result<Schedule>)> done) {
  done(Internal("schedules: not built yet"));
}
void Scheduler::Backfill(std::string_view /*name*/, int64_t /*from_ms*/, int64_t /*to_ms*/,
                         Overlap /*overlap*/, std::function<void(Result<BackfillResult>)> done) {
  done(Internal("schedules: not built yet"));
}
SchedulerStats Scheduler::stats() const { return {}; }

}  // namespace delayq::schedule
