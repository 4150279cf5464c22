#include "net/event_loop.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

namespace delayq::net {

int64_t MonotonicNowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

namespace {

int64_t MonotonicNowUs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

// What an epoll event carries: the fd, and the generation of its
// registration (0 for the loop's own fds).
uint64_t Tag(int fd, uint32_t generation) {
  return (uint64_t{generation} << 32) | static_cast<uint32_t>(fd);
}
int TagFd(uint64_t tag) { return static_cast<int>(static_cast<uint32_t>(tag)); }
uint32_t TagGeneration(uint64_t tag) { return static_cast<uint32_t>(tag >> 32); }

void EpollAdd(int epoll_fd, int fd, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = Tag(fd, 0);
  epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev);
}

}  // namespace

Result<std::unique_ptr<EventLoop>> EventLoop::Create() {
  int ep = epoll_create1(EPOLL_CLOEXEC);
  int urgent = epoll_create1(EPOLL_CLOEXEC);
  int wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  int timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (ep < 0 || urgent < 0 || wake < 0 || timer < 0) {
    for (int fd : {ep, urgent, wake, timer}) {
      if (fd >= 0) close(fd);
    }
    return Internal("event loop: cannot create epoll/eventfd/timerfd");
  }
  auto loop = std::unique_ptr<EventLoop>(new EventLoop(ep, urgent, wake, timer));
  EpollAdd(urgent, wake, EPOLLIN);
  EpollAdd(ep, urgent, EPOLLIN);
  EpollAdd(ep, timer, EPOLLIN);
  return loop;
}

EventLoop::EventLoop(int epoll_fd, int urgent_fd, int wake_fd, int timer_fd)
    : epoll_fd_(epoll_fd), urgent_fd_(urgent_fd), wake_fd_(wake_fd), timer_fd_(timer_fd) {}

EventLoop::~EventLoop() {
  close(epoll_fd_);
  close(urgent_fd_);
  close(wake_fd_);
  close(timer_fd_);
}

Status EventLoop::Add(int fd, uint32_t events, IoHandler handler, bool urgent) {
  // Never 0 (the loop's own fds), even after wrapping.
  uint32_t generation = ++next_generation_ == 0 ? ++next_generation_ : next_generation_;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = Tag(fd, generation);
  if (epoll_ctl(urgent ? urgent_fd_ : epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    return Internal("epoll_ctl ADD failed: errno " + std::to_string(errno));
  }
  handlers_[fd] = Handler{std::make_shared<IoHandler>(std::move(handler)), urgent, generation};
  return Status::Ok();
}

void EventLoop::Modify(int fd, uint32_t events) {
  auto it = handlers_.find(fd);
  if (it == handlers_.end()) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = Tag(fd, it->second.generation);
  epoll_ctl(it->second.urgent ? urgent_fd_ : epoll_fd_, EPOLL_CTL_MOD, fd, &ev);
}

void EventLoop::Remove(int fd) {
  auto it = handlers_.find(fd);
  if (it == handlers_.end()) return;
  epoll_ctl(it->second.urgent ? urgent_fd_ : epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  handlers_.erase(it);
}

uint64_t EventLoop::RunAfter(int64_t ms, Task fn) {
  uint64_t id = next_timer_++;
  auto it =
      timers_.emplace(MonotonicNowMs() + (ms < 0 ? 0 : ms), std::make_pair(id, std::move(fn)));
  timer_index_[id] = it;
  ArmTimer();
  return id;
}

void EventLoop::CancelTimer(uint64_t id) {
  auto it = timer_index_.find(id);
  if (it == timer_index_.end()) return;
  timers_.erase(it->second);
  timer_index_.erase(it);
}

void EventLoop::ArmTimer() {
  int64_t next = timers_.empty() ? -1 : timers_.begin()->first;
  if (next == armed_) return;
  armed_ = next;
  itimerspec spec{};
  if (next >= 0) {
    int64_t at = next <= 0 ? 1 : next;
    spec.it_value.tv_sec = at / 1000;
    spec.it_value.tv_nsec = (at % 1000) * 1'000'000;
  }
  timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &spec, nullptr);
}

void EventLoop::RunTimers() {
  uint64_t expirations;
  while (read(timer_fd_, &expirations, sizeof expirations) > 0) {
  }
  armed_ = -1;
  int64_t now = MonotonicNowMs();
  while (!timers_.empty() && timers_.begin()->first <= now) {
    auto node = timers_.extract(timers_.begin());
    timer_index_.erase(node.mapped().first);
    node.mapped().second();
  }
  ArmTimer();
}

void EventLoop::Post(Task fn) {
  bool first;
  {
    std::lock_guard<std::mutex> lock(mu_);
    first = posted_.empty();
    posted_.push_back(std::move(fn));
    posted_pending_.store(true, std::memory_order_release);
  }
  // One wake-up per batch: a task posted behind others that the loop has not
  // yet taken is run with them (RunPosted takes the list under mu_).
  if (!first) return;
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof one);
}

void EventLoop::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof one);
}

void EventLoop::RunPosted() {
  uint64_t v;
  while (read(wake_fd_, &v, sizeof v) > 0) {
  }
  std::vector<Task> tasks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks.swap(posted_);
    posted_pending_.store(false, std::memory_order_relaxed);
  }
  for (Task& t : tasks) t();
}

void EventLoop::Dispatch(uint64_t tag, uint32_t events) {
  int fd = TagFd(tag);
  if (fd == wake_fd_) {
    RunPosted();
  } else if (fd == timer_fd_) {
    RunTimers();
  } else if (fd == urgent_fd_) {
    RunUrgent();
  } else {
    auto it = handlers_.find(fd);
    if (it == handlers_.end()) return;  // removed earlier in this turn
    // Removed and its number reused (a close, then an accept) earlier in
    // this turn: the event was the old registration's, not this one's.
    if (it->second.generation != TagGeneration(tag)) return;
    std::shared_ptr<IoHandler> h = it->second.fn;  // survives its own Remove
    (*h)(events);
  }
}

void EventLoop::RunUrgent() {
  constexpr int kMaxEvents = 16;
  epoll_event events[kMaxEvents];
  int n = epoll_wait(urgent_fd_, events, kMaxEvents, 0);
  for (int i = 0; i < n; ++i) Dispatch(events[i].data.u64, events[i].events);
}

void EventLoop::Run() {
  constexpr int kMaxEvents = 256;
  epoll_event events[kMaxEvents];
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
    }
    int n = -1;
    if (turn_end_ && tell_idle_) {
      // A look first; when something is ready, its events are this turn's.
      n = epoll_wait(epoll_fd_, events, kMaxEvents, 0);
      turn_end_(n == 0);
    } else if (turn_end_) {
      turn_end_(/*idle=*/false);
    }
    if (n <= 0) n = epoll_wait(epoll_fd_, events, kMaxEvents, -1);
    if (n < 0 && errno != EINTR) return;
    int64_t checked_us = n > 1 ? MonotonicNowUs() : 0;
    int64_t ended_us = checked_us;
    for (int i = 0; i < n; ++i) {
      Dispatch(events[i].data.u64, events[i].events);
      if (n > 1 && i + 1 < n) {
        int64_t now_us = MonotonicNowUs();
        if (now_us - checked_us >= kUrgentCheckUs) {
          checked_us = now_us;
          if (posted_pending_.load(std::memory_order_acquire) ||
              (urgent_probe_ && urgent_probe_())) {
            RunUrgent();
          }
        }
        // A long turn ends early for what waits on its end (replies held
        // for the log): the clients served first need not wait for the last.
        if (turn_end_ && now_us - ended_us >= kTurnEndUs) {
          ended_us = now_us;
          turn_end_(/*idle=*/false);
        }
      }
    }
  }
}

}  // namespace delayq::net
