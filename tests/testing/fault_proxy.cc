// One thread, one poll(2) over the listener, an eventfd and both sockets of
// every connection. Modes are applied on that thread at the top of its loop,
// so no descriptor is ever used by two threads. Sockets are blocking: a test
// moves a few kilobytes, and a write to loopback does not wait long.
#include "testing/fault_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace delayq::faults {
namespace {

sockaddr_in Loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  return a;
}

// A listener on 127.0.0.1:port (0: any free one); -1 on failure.
int OpenListener(int port, int backlog) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a = Loopback(port);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, backlog) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int Connect(int port, bool nonblocking) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0);
  if (fd < 0) return -1;
  sockaddr_in a = Loopback(port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 && errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  return fd;
}

bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

Result<std::unique_ptr<FaultProxy>> FaultProxy::Start(int target_port) {
  int listen_fd = OpenListener(0, 64);
  if (listen_fd < 0) return Internal(std::string("fault proxy: listen: ") + strerror(errno));
  sockaddr_in a{};
  socklen_t len = sizeof a;
  getsockname(listen_fd, reinterpret_cast<sockaddr*>(&a), &len);
  int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    close(listen_fd);
    return Internal(std::string("fault proxy: eventfd: ") + strerror(errno));
  }
  auto p =
      std::unique_ptr<FaultProxy>(new FaultProxy(target_port, listen_fd, ntohs(a.sin_port), wake));
  p->thread_ = std::thread([raw = p.get()] { raw->Run(); });
  return p;
}

FaultProxy::FaultProxy(int target_port, int listen_fd, int port, int wake_fd)
    : target_port_(target_port), port_(port), wake_fd_(wake_fd), listen_fd_(listen_fd) {}

FaultProxy::~FaultProxy() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
  thread_.join();
  close(wake_fd_);
}

void FaultProxy::set_mode(Mode mode) {
  std::unique_lock lock(mu_);
  wanted_ = mode;
  const uint64_t mine = ++generation_;
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
  applied_cv_.wait(lock, [&] { return done_ >= mine || stop_; });
}

uint64_t FaultProxy::replies_lost() const {
  std::lock_guard lock(mu_);
  return replies_lost_;
}

uint64_t FaultProxy::accepted() const {
  std::lock_guard lock(mu_);
  return accepted_;
}

void FaultProxy::Run() {
  uint64_t applied_generation = 0;
  std::vector<pollfd> fds;
  for (;;) {
    Mode wanted;
    uint64_t generation;
    {
      std::lock_guard lock(mu_);
      if (stop_) break;
      wanted = wanted_;
      generation = generation_;
    }
    if (generation != applied_generation) {
      Apply(wanted);
      applied_generation = generation;
      std::lock_guard lock(mu_);
      done_ = generation;
      applied_cv_.notify_all();
    }
    const bool accepting = listen_fd_ >= 0 && applied_ != Mode::kBlackhole;
    fds.assign({{wake_fd_, POLLIN, 0}, {accepting ? listen_fd_ : -1, POLLIN, 0}});
    for (const Pair& p : pairs_) {
      fds.push_back({p.client, POLLIN, 0});
      fds.push_back({p.server, POLLIN, 0});
    }
    if (poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) break;
    if (fds[0].revents != 0) {
      uint64_t n;
      (void)!read(wake_fd_, &n, sizeof n);
    }
    const size_t n = pairs_.size();  // Accept appends; those are polled next time
    for (size_t i = 0; i < n; ++i) {
      Pair& p = pairs_[i];
      const pollfd& c = fds[2 + 2 * i];
      const pollfd& s = fds[3 + 2 * i];
      if (c.revents != 0 && !Forward(p.client, p.server, false)) ClosePair(p);
      if (p.client >= 0 && s.revents != 0 && !Forward(p.server, p.client, true)) ClosePair(p);
    }
    std::erase_if(pairs_, [](const Pair& p) { return p.client < 0; });
    if (fds[1].revents != 0) Accept();
  }
  for (Pair& p : pairs_) ClosePair(p);
  for (int fd : fillers_) close(fd);
  if (listen_fd_ >= 0) close(listen_fd_);
}

void FaultProxy::Apply(Mode mode) {
  for (int fd : fillers_) close(fd);
  fillers_.clear();
  switch (mode) {
    case Mode::kPass:
    case Mode::kDropReplies:
    case Mode::kSwallowReplies:
      Listen(64);
      break;
    case Mode::kRefuse:
      // Connects the kernel already completed are open to their clients:
      // taken, so they pass; only later ones are refused.
      while (listen_fd_ >= 0) {
        pollfd l{listen_fd_, POLLIN, 0};
        if (poll(&l, 1, 0) <= 0) break;
        Accept();
      }
      StopListening();
      break;
    case Mode::kBlackhole: {
      for (Pair& p : pairs_) ClosePair(p);
      pairs_.clear();
      // Backlog 0 holds one connection; with it queued (and never
      // accepted), the kernel drops every further SYN.
      Listen(0);
      int filler = Connect(port_, true);
      if (filler >= 0) {
        pollfd f{filler, POLLOUT, 0};
        (void)poll(&f, 1, 1000);  // loopback: the handshake is done at once
        fillers_.push_back(filler);
      }
      break;
    }
  }
  applied_ = mode;
}

void FaultProxy::Listen(int backlog) {
  if (listen_fd_ < 0) {
    listen_fd_ = OpenListener(port_, backlog);
  } else {
    listen(listen_fd_, backlog);  // Linux: a second listen() sets the backlog
  }
}

void FaultProxy::StopListening() {
  if (listen_fd_ >= 0) close(listen_fd_);
  listen_fd_ = -1;
}

void FaultProxy::Accept() {
  int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (client < 0) return;
  int server = Connect(target_port_, false);
  if (server < 0) {
    close(client);
    return;
  }
  pairs_.push_back({client, server});
  std::lock_guard lock(mu_);
  ++accepted_;
}

bool FaultProxy::Forward(int from, int to, bool reply) {
  char buf[64 * 1024];
  ssize_t n = recv(from, buf, sizeof buf, 0);
  if (n < 0 && errno == EINTR) return true;
  if (n <= 0) return false;
  if (reply && (applied_ == Mode::kDropReplies || applied_ == Mode::kSwallowReplies)) {
    std::lock_guard lock(mu_);
    ++replies_lost_;
    return applied_ == Mode::kSwallowReplies;  // held for ever, or the connection dropped
  }
  return WriteAll(to, buf, static_cast<size_t>(n));
}

void FaultProxy::ClosePair(Pair& p) {
  if (p.client >= 0) close(p.client);
  if (p.server >= 0) close(p.server);
  p.client = -1;
  p.server = -1;
}

}  // namespace delayq::faults
