// LocalQueue: the Queue interface over an in-process Engine, safe to call from
// any number of threads (store "memory"; the embedded store adds its log).
//
// One mutex guards the engine; each call holds it for the engine operation
// only. Reserve callbacks never run under the mutex: the engine's callbacks
// are queued and run by the calling thread after it unlocks, so a callback
// may call the queue again.
//
// Timing: a runner thread sleeps in poll(2) on two timerfds, one armed at the
// engine's next wall-clock deadline (CLOCK_REALTIME, absolute, cancelled when
// the clock is stepped so a step is noticed at once) and one at its next
// monotonic deadline, plus an eventfd that calls use to wake it when they
// create an earlier deadline. No polling loop: with nothing scheduled it
// sleeps until woken. With a manual clock it sleeps until the clock moves.
// With QueueOptions::caller_loop there is no runner: the caller's event loop
// polls the same three descriptors and calls RunDue (QueueDriver).
#ifndef DELAYQ_QUEUE_LOCAL_QUEUE_H_
#define DELAYQ_QUEUE_LOCAL_QUEUE_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "delayq/queue.h"
#include "engine/engine.h"

namespace delayq {

class LocalQueue final : public Queue, private QueueDriver {
 public:
  // Errors: as engine::Engine::Create; kInternal if the runner's file
  // descriptors cannot be made.
  static Result<std::unique_ptr<LocalQueue>> Open(const QueueOptions& options);
  // Stops the runner; reserves still waiting are answered kUnavailable.
  ~LocalQueue() override;

  Result<AddResult> Add(const JobSpec& spec) override;
  uint64_t ReserveAsync(const ReserveRequest& req, ReserveCallback done) override;
  bool CancelReserve(uint64_t ticket) override;
  Status Finish(std::string_view id, std::string_view receipt) override;
  Status Delete(std::string_view id) override;
  Status Release(std::string_view id, std::string_view receipt, int64_t delay_ms,
                 std::string_view error) override;
  Status Touch(std::string_view id, std::string_view receipt) override;
  Status Bury(std::string_view id, std::string_view receipt, std::string_view reason) override;
  Status Kick(std::string_view id) override;
  Result<uint64_t> KickTopic(std::string_view topic, uint64_t n) override;
  Result<JobInfo> Get(std::string_view id) override;
  Result<JobInfo> Peek(std::string_view topic, JobState state) override;
  Status Pause(std::string_view topic, int64_t duration_ms) override;
  Status Resume(std::string_view topic) override;
  Result<std::vector<TopicInfo>> Topics() override;
  Result<TopicInfo> Topic(std::string_view topic) override;
  Result<QueueStats> Stats() override;
  QueueDriver* driver() override { return runner_.joinable() ? nullptr : this; }

 private:
  // QueueDriver (caller_loop only).
  std::vector<int> PollFds() const override { return {wake_fd_, wall_fd_, mono_fd_}; }
  void RunDue() override;
  bool MaybeDue() const override;
  // One turn of the timing work: what is due, then the timers re-armed.
  // False once the queue is stopping.
  bool RunDueOnce();

  using Deferred = std::vector<std::pair<ReserveCallback, Result<Deliveries>>>;

  LocalQueue(std::unique_ptr<engine::Engine> engine, std::shared_ptr<Clock> clock, int wake_fd,
             int wall_fd, int mono_fd, bool caller_loop);

  // Runs fn(engine) under the mutex, wakes the runner if fn made an earlier
  // deadline, then runs the reserve callbacks fn completed, unlocked.
  template <typename F>
  auto WithEngine(F&& fn);
  void RunCallbacks(Deferred& deferred);
  void Wake();
  void RunLoop();
  void Arm(const engine::Engine::Deadlines& d);

  std::shared_ptr<Clock> clock_;
  int clock_token_ = 0;
  const int wake_fd_;  // eventfd
  const int wall_fd_;  // timerfd, CLOCK_REALTIME
  const int mono_fd_;  // timerfd, CLOCK_MONOTONIC

  std::mutex mu_;
  // State below is protected by mu_.
  std::unique_ptr<engine::Engine> engine_;
  Deferred deferred_;                // callbacks completed by the engine
  engine::Engine::Deadlines armed_;  // what the runner sleeps until
  void SetArmed(const engine::Engine::Deadlines& d);
  // Copies of armed_, readable without the mutex (MaybeDue).
  std::atomic<int64_t> armed_wall_ms_{engine::kNever};
  std::atomic<int64_t> armed_mono_ms_{engine::kNever};
  bool stopping_ = false;

  std::thread runner_;  // started last, joined first; none with caller_loop
};

}  // namespace delayq

#endif  // DELAYQ_QUEUE_LOCAL_QUEUE_H_
