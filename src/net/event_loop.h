// EventLoop: one thread's epoll loop — file descriptors, timers on the
// monotonic clock, and tasks posted from other threads.
//
// The loop thread owns everything registered with it; handlers run on it.
// Post() is the only method other threads may call (plus Stop()): it queues
// a task and wakes the loop through an eventfd.
//
// Timers are a multimap of monotonic deadlines behind one timerfd, armed at
// the earliest; a loop turn runs the due ones. No polling: with nothing due
// the loop sleeps in epoll_wait until an fd, a timer or a Post wakes it.
#ifndef DELAYQ_NET_EVENT_LOOP_H_
#define DELAYQ_NET_EVENT_LOOP_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "delayq/status.h"

namespace delayq::net {

class EventLoop {
 public:
  using IoHandler = std::function<void(uint32_t epoll_events)>;
  using Task = std::function<void()>;

  // Errors: kInternal if epoll/eventfd/timerfd cannot be created.
  static Result<std::unique_ptr<EventLoop>> Create();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Loop thread only. `fd` stays owned by the caller; Remove before closing.
  Status Add(int fd, uint32_t events, IoHandler handler);
  void Modify(int fd, uint32_t events);
  void Remove(int fd);

  // Loop thread only. Runs `fn` once, `ms` from now (monotonic). Returns an
  // id for CancelTimer; cancelling a fired or unknown id does nothing.
  uint64_t RunAfter(int64_t ms, Task fn);
  void CancelTimer(uint64_t id);

  // Any thread: runs `fn` on the loop thread soon.
  void Post(Task fn);

  // Runs until Stop(). Call from the thread that is to own the loop.
  void Run();
  // Any thread: makes Run() return after the current turn.
  void Stop();

 private:
  EventLoop(int epoll_fd, int wake_fd, int timer_fd);
  void RunTimers();
  void ArmTimer();
  void RunPosted();

  const int epoll_fd_;
  const int wake_fd_;
  const int timer_fd_;
  // Loop thread only.
  std::unordered_map<int, std::shared_ptr<IoHandler>> handlers_;
  std::multimap<int64_t, std::pair<uint64_t, Task>> timers_;  // deadline -> (id, task)
  std::unordered_map<uint64_t, std::multimap<int64_t, std::pair<uint64_t, Task>>::iterator>
      timer_index_;
  uint64_t next_timer_ = 1;
  int64_t armed_ = -1;

  std::mutex mu_;
  std::vector<Task> posted_;  // GUARDED_BY(mu_)
  bool stop_ = false;         // GUARDED_BY(mu_)
};

// Milliseconds of CLOCK_MONOTONIC.
int64_t MonotonicNowMs();

}  // namespace delayq::net

#endif  // DELAYQ_NET_EVENT_LOOP_H_
