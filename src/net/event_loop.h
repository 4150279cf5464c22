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
//
// Urgent work does not wait for a busy turn to end. Posted tasks and fds
// added as urgent (a queue's timers) live in an epoll set of their own,
// itself watched by the main one. While a turn works through many
// connections, every kUrgentCheckUs it asks, without a system call, whether
// urgent work is pending (a task was posted, or the urgent probe says a
// deadline passed) and if so serves the urgent set there and then: a job
// falling due during a long turn is handed over within about that long
// rather than after the whole turn.
#ifndef DELAYQ_NET_EVENT_LOOP_H_
#define DELAYQ_NET_EVENT_LOOP_H_

#include <atomic>
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
  // An urgent fd is served first and also in the middle of a long turn. A
  // handler gets only its own registration's events: none that a turn still
  // holds for an fd removed earlier in it, even if the number was reused.
  Status Add(int fd, uint32_t events, IoHandler handler, bool urgent = false);
  void Modify(int fd, uint32_t events);
  void Remove(int fd);

  // Loop thread only. Runs `fn` once, `ms` from now (monotonic). Returns an
  // id for CancelTimer; cancelling a fired or unknown id does nothing.
  uint64_t RunAfter(int64_t ms, Task fn);
  void CancelTimer(uint64_t id);

  // Any thread: runs `fn` on the loop thread soon.
  void Post(Task fn);

  // Loop thread only, before Run. Says, without a system call, whether an
  // urgent fd may be ready (e.g. QueueDriver::MaybeDue).
  void SetUrgentProbe(std::function<bool()> probe) { urgent_probe_ = std::move(probe); }

  // Loop thread only, before Run. Runs at the end of every turn, before the
  // loop waits again (the store writes what the turn changed, then the held
  // replies go out), and every kTurnEndUs within a long turn. With
  // `tell_idle`, a look (epoll_wait with no timeout) first tells `fn`
  // whether anything is ready: idle, the loop would sleep next, so work that
  // blocks briefly costs it nothing then (QueueDriver::FlushIdle). The look
  // costs a system call only when nothing is ready. Without it, and within a
  // long turn, `idle` is false.
  void SetTurnEnd(std::function<void(bool idle)> fn, bool tell_idle = false) {
    turn_end_ = std::move(fn);
    tell_idle_ = tell_idle;
  }

  // Runs until Stop(). Call from the thread that is to own the loop.
  void Run();
  // Any thread: makes Run() return after the current turn.
  void Stop();

 private:
  // How long a turn runs before it looks at the urgent set (microseconds).
  static constexpr int64_t kUrgentCheckUs = 200;
  // How long a turn runs before it calls the turn-end function anyway.
  static constexpr int64_t kTurnEndUs = 500;

  struct Handler {
    std::shared_ptr<IoHandler> fn;
    bool urgent = false;
    // Which Add this is: epoll events carry it beside the fd, so events a
    // batch still holds for an fd removed (and its number reused) earlier
    // in the same batch are dropped, not given to the new handler.
    uint32_t generation = 0;
  };

  EventLoop(int epoll_fd, int urgent_fd, int wake_fd, int timer_fd);
  void RunTimers();
  void ArmTimer();
  void RunPosted();
  // Serves whatever in the urgent set is ready, without blocking.
  void RunUrgent();
  // `tag`: the event's data, the fd and its registration's generation.
  void Dispatch(uint64_t tag, uint32_t events);

  const int epoll_fd_;
  const int urgent_fd_;  // epoll set of the urgent fds and wake_fd_
  const int wake_fd_;
  const int timer_fd_;
  // Loop thread only.
  std::unordered_map<int, Handler> handlers_;
  std::multimap<int64_t, std::pair<uint64_t, Task>> timers_;  // deadline -> (id, task)
  std::unordered_map<uint64_t, std::multimap<int64_t, std::pair<uint64_t, Task>>::iterator>
      timer_index_;
  uint64_t next_timer_ = 1;
  uint32_t next_generation_ = 0;
  int64_t armed_ = -1;

  std::function<bool()> urgent_probe_;
  std::function<void(bool idle)> turn_end_;
  bool tell_idle_ = false;
  std::atomic<bool> posted_pending_{false};

  std::mutex mu_;
  std::vector<Task> posted_;  // GUARDED_BY(mu_)
  bool stop_ = false;         // GUARDED_BY(mu_)
};

// Milliseconds of CLOCK_MONOTONIC.
int64_t MonotonicNowMs();

}  // namespace delayq::net

#endif  // DELAYQ_NET_EVENT_LOOP_H_
