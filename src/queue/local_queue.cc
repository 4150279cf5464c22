#include "queue/local_queue.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>

namespace delayq {
namespace {

void ArmTimer(int fd, int64_t deadline_ms, bool cancel_on_set) {
  itimerspec spec{};
  if (deadline_ms != engine::kNever) {
    int64_t ms = deadline_ms <= 0 ? 1 : deadline_ms;  // 0 would disarm
    spec.it_value.tv_sec = ms / 1000;
    spec.it_value.tv_nsec = (ms % 1000) * 1'000'000;
  }
  int flags = TFD_TIMER_ABSTIME | (cancel_on_set ? TFD_TIMER_CANCEL_ON_SET : 0);
  timerfd_settime(fd, flags, &spec, nullptr);
}

void Drain(int fd) {
  uint64_t v;
  // A cancelled realtime timerfd reads ECANCELED; either way it is drained.
  while (read(fd, &v, sizeof v) > 0) {
  }
}

}  // namespace

Result<std::unique_ptr<LocalQueue>> LocalQueue::Open(const QueueOptions& options) {
  engine::EngineOptions eo;
  eo.clock = options.clock ? options.clock : SystemClock();
  eo.limits = options.limits;
  auto engine = engine::Engine::Create(eo);
  if (!engine.ok()) return engine.status();
  int wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  int wall = timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK | TFD_CLOEXEC);
  int mono = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (wake < 0 || wall < 0 || mono < 0) {
    for (int fd : {wake, wall, mono}) {
      if (fd >= 0) close(fd);
    }
    return Internal("local queue: cannot create eventfd/timerfd");
  }
  return std::unique_ptr<LocalQueue>(
      new LocalQueue(std::move(engine).value(), eo.clock, wake, wall, mono, options.caller_loop));
}

LocalQueue::LocalQueue(std::unique_ptr<engine::Engine> engine, std::shared_ptr<Clock> clock,
                       int wake_fd, int wall_fd, int mono_fd, bool caller_loop)
    : clock_(std::move(clock)),
      wake_fd_(wake_fd),
      wall_fd_(wall_fd),
      mono_fd_(mono_fd),
      engine_(std::move(engine)) {
  if (!clock_->IsRealTime()) clock_token_ = clock_->Subscribe([this] { Wake(); });
  if (!caller_loop) runner_ = std::thread([this] { RunLoop(); });
}

LocalQueue::~LocalQueue() {
  if (clock_token_ != 0) clock_->Unsubscribe(clock_token_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  Wake();
  if (runner_.joinable()) runner_.join();
  Deferred deferred;
  {
    std::lock_guard<std::mutex> lock(mu_);
    engine_->FailWaiters(Unavailable("queue closed"));
    deferred.swap(deferred_);
  }
  RunCallbacks(deferred);
  close(wake_fd_);
  close(wall_fd_);
  close(mono_fd_);
}

void LocalQueue::Wake() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof one);
}

void LocalQueue::RunCallbacks(Deferred& deferred) {
  for (auto& [done, result] : deferred) done(std::move(result));
  deferred.clear();
}

template <typename F>
auto LocalQueue::WithEngine(F&& fn) {
  Deferred deferred;
  std::unique_lock<std::mutex> lock(mu_);
  auto result = fn(*engine_);
  engine::Engine::Deadlines d = engine_->NextDeadlines();
  bool earlier = d.wall_ms < armed_.wall_ms || d.mono_ms < armed_.mono_ms;
  if (earlier) SetArmed(d);  // the runner re-arms from the engine anyway
  deferred.swap(deferred_);
  lock.unlock();
  if (earlier) Wake();
  RunCallbacks(deferred);
  return result;
}

void LocalQueue::Arm(const engine::Engine::Deadlines& d) {
  if (!clock_->IsRealTime()) return;  // a manual clock wakes us when it moves
  ArmTimer(wall_fd_, d.wall_ms, /*cancel_on_set=*/true);
  ArmTimer(mono_fd_, d.mono_ms, /*cancel_on_set=*/false);
}

bool LocalQueue::RunDueOnce() {
  Deferred deferred;
  engine::Engine::Deadlines d;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    engine_->Tick();
    d = engine_->NextDeadlines();
    SetArmed(d);
    deferred.swap(deferred_);
  }
  RunCallbacks(deferred);
  Arm(d);
  return true;
}

void LocalQueue::RunLoop() {
  pollfd fds[3] = {{wake_fd_, POLLIN, 0}, {wall_fd_, POLLIN, 0}, {mono_fd_, POLLIN, 0}};
  while (RunDueOnce()) {
    while (poll(fds, 3, -1) < 0 && errno == EINTR) {
    }
    for (const pollfd& p : fds) {
      if (p.revents != 0) Drain(p.fd);
    }
  }
}

void LocalQueue::SetArmed(const engine::Engine::Deadlines& d) {
  armed_ = d;
  armed_wall_ms_.store(d.wall_ms, std::memory_order_relaxed);
  armed_mono_ms_.store(d.mono_ms, std::memory_order_relaxed);
}

bool LocalQueue::MaybeDue() const {
  if (!clock_->IsRealTime()) return false;  // a manual clock announces itself on wake_fd_
  return clock_->NowMs() >= armed_wall_ms_.load(std::memory_order_relaxed) ||
         clock_->MonotonicMs() >= armed_mono_ms_.load(std::memory_order_relaxed);
}

void LocalQueue::RunDue() {
  for (int fd : {wake_fd_, wall_fd_, mono_fd_}) Drain(fd);
  RunDueOnce();
}

// --- the Queue operations: each is one engine call ---------------------------

Result<AddResult> LocalQueue::Add(const JobSpec& spec) {
  return WithEngine([&](engine::Engine& e) { return e.Add(spec); });
}

uint64_t LocalQueue::ReserveAsync(const ReserveRequest& req, ReserveCallback done) {
  bool closed = false;
  uint64_t ticket = WithEngine([&](engine::Engine& e) -> uint64_t {
    // A callback run by the destructor may reserve again: answer at once
    // rather than register a waiter nobody would ever answer.
    if (stopping_) {
      closed = true;
      return 0;
    }
    // Runs under mu_ (inside an engine call): only queue the callback.
    return e.Reserve(req, [this, d = std::move(done)](Result<Deliveries> r) mutable {
      deferred_.emplace_back(std::move(d), std::move(r));
    });
  });
  if (closed) done(Unavailable("queue closed"));  // not moved from: the lambda was never made
  return ticket;
}

bool LocalQueue::CancelReserve(uint64_t ticket) {
  return WithEngine([&](engine::Engine& e) { return e.CancelWaiter(ticket); });
}

Status LocalQueue::Finish(std::string_view id, std::string_view receipt) {
  return WithEngine([&](engine::Engine& e) { return e.Finish(id, receipt); });
}

Status LocalQueue::Delete(std::string_view id) {
  return WithEngine([&](engine::Engine& e) { return e.Delete(id); });
}

Status LocalQueue::Release(std::string_view id, std::string_view receipt, int64_t delay_ms,
                           std::string_view error) {
  return WithEngine([&](engine::Engine& e) { return e.Release(id, receipt, delay_ms, error); });
}

Status LocalQueue::Touch(std::string_view id, std::string_view receipt) {
  return WithEngine([&](engine::Engine& e) { return e.Touch(id, receipt); });
}

Status LocalQueue::Bury(std::string_view id, std::string_view receipt, std::string_view reason) {
  return WithEngine([&](engine::Engine& e) { return e.Bury(id, receipt, reason); });
}

Status LocalQueue::Kick(std::string_view id) {
  return WithEngine([&](engine::Engine& e) { return e.Kick(id); });
}

Result<uint64_t> LocalQueue::KickTopic(std::string_view topic, uint64_t n) {
  return WithEngine([&](engine::Engine& e) { return e.KickTopic(topic, n); });
}

Result<JobInfo> LocalQueue::Get(std::string_view id) {
  return WithEngine([&](engine::Engine& e) { return e.Get(id); });
}

Result<JobInfo> LocalQueue::Peek(std::string_view topic, JobState state) {
  return WithEngine([&](engine::Engine& e) { return e.Peek(topic, state); });
}

Status LocalQueue::Pause(std::string_view topic, int64_t duration_ms) {
  return WithEngine([&](engine::Engine& e) { return e.Pause(topic, duration_ms); });
}

Status LocalQueue::Resume(std::string_view topic) {
  return WithEngine([&](engine::Engine& e) { return e.Resume(topic); });
}

Result<std::vector<TopicInfo>> LocalQueue::Topics() {
  return WithEngine([&](engine::Engine& e) { return Result<std::vector<TopicInfo>>(e.Topics()); });
}

Result<TopicInfo> LocalQueue::Topic(std::string_view topic) {
  return WithEngine([&](engine::Engine& e) { return e.Topic(topic); });
}

Result<QueueStats> LocalQueue::Stats() {
  return WithEngine([&](engine::Engine& e) { return Result<QueueStats>(e.Stats()); });
}

}  // namespace delayq
