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

Result<std::unique_ptr<EventLoop>> EventLoop::Create() {
  int ep = epoll_create1(EPOLL_CLOEXEC);
  int wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  int timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (ep < 0 || wake < 0 || timer < 0) {
    for (int fd : {ep, wake, timer}) {
      if (fd >= 0) close(fd);
    }
    return Internal("event loop: cannot create epoll/eventfd/timerfd");
  }
  auto loop = std::unique_ptr<EventLoop>(new EventLoop(ep, wake, timer));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake;
  epoll_ctl(ep, EPOLL_CTL_ADD, wake, &ev);
  ev.data.fd = timer;
  epoll_ctl(ep, EPOLL_CTL_ADD, timer, &ev);
  return loop;
}

EventLoop::EventLoop(int epoll_fd, int wake_fd, int timer_fd)
    : epoll_fd_(epoll_fd), wake_fd_(wake_fd), timer_fd_(timer_fd) {}

EventLoop::~EventLoop() {
  close(epoll_fd_);
  close(wake_fd_);
  close(timer_fd_);
}

Status EventLoop::Add(int fd, uint32_t events, IoHandler handler) {
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = fd;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    return Internal("epoll_ctl ADD failed: errno " + std::to_string(errno));
  }
  handlers_[fd] = std::make_shared<IoHandler>(std::move(handler));
  return Status::Ok();
}

void EventLoop::Modify(int fd, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev);
}

void EventLoop::Remove(int fd) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  handlers_.erase(fd);
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
  {
    std::lock_guard<std::mutex> lock(mu_);
    posted_.push_back(std::move(fn));
  }
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
  }
  for (Task& t : tasks) t();
}

void EventLoop::Run() {
  constexpr int kMaxEvents = 256;
  epoll_event events[kMaxEvents];
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
    }
    int n = epoll_wait(epoll_fd_, events, kMaxEvents, -1);
    if (n < 0 && errno != EINTR) return;
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == wake_fd_) {
        RunPosted();
      } else if (fd == timer_fd_) {
        RunTimers();
      } else {
        auto it = handlers_.find(fd);
        if (it == handlers_.end()) continue;        // removed earlier in this turn
        std::shared_ptr<IoHandler> h = it->second;  // survives its own Remove
        (*h)(events[i].events);
      }
    }
  }
}

}  // namespace delayq::net
