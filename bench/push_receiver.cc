// See push_receiver.h. Requests are scanned in place: the head's end, its
// Content-Length, and "run_at_ms": in the body; nothing else is parsed.
#include "push_receiver.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace delayq::bench {
namespace {

int64_t WallUs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1'000'000LL + ts.tv_nsec / 1000;
}

int64_t MonoUs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1'000'000LL + ts.tv_nsec / 1000;
}

double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// The value of `key` ("name":) in a JSON text, as a number; -1 if absent.
int64_t NumberAfter(std::string_view body, std::string_view key) {
  size_t at = body.find(key);
  if (at == std::string_view::npos) return -1;
  at += key.size();
  int64_t v = 0;
  bool any = false;
  while (at < body.size() && body[at] >= '0' && body[at] <= '9') {
    v = v * 10 + (body[at++] - '0');
    any = true;
  }
  return any ? v : -1;
}

size_t ContentLength(std::string_view head) {
  for (std::string_view name : {"Content-Length:", "content-length:"}) {
    size_t at = head.find(name);
    if (at == std::string_view::npos) continue;
    at += name.size();
    while (at < head.size() && head[at] == ' ') ++at;
    size_t v = 0;
    while (at < head.size() && head[at] >= '0' && head[at] <= '9') v = v * 10 + (head[at++] - '0');
    return v;
  }
  return 0;
}

}  // namespace

int RunReceive(const ReceiveOptions& o) {
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(o.port));
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      listen(listener, 1024) != 0) {
    std::fprintf(stderr, "receive: cannot listen on 127.0.0.1:%d: %s\n", o.port,
                 std::strerror(errno));
    return 2;
  }
  int ep = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listener;
  epoll_ctl(ep, EPOLL_CTL_ADD, listener, &ev);
  if (!o.quiet) std::fprintf(stderr, "receive: listening on 127.0.0.1:%d\n", o.port);

  const std::string answer =
      "HTTP/1.1 " + std::to_string(o.status) + " X\r\nContent-Length: 0\r\n\r\n";
  std::unordered_map<int, std::string> input;
  std::vector<int64_t> lateness_us;
  lateness_us.reserve(o.jobs > 0 ? o.jobs : 1 << 20);
  uint64_t requests = 0;
  uint64_t connections = 0;
  int64_t first_us = 0;
  int64_t last_us = 0;
  const int64_t end_us = MonoUs() + static_cast<int64_t>(o.seconds * 1e6);
  double cpu_at_first = 0;
  std::vector<char> buf(256 << 10);
  epoll_event events[256];
  std::string out;

  while ((o.jobs == 0 || requests < o.jobs) && MonoUs() < end_us) {
    int n = epoll_wait(ep, events, 256, 100);
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == listener) {
        for (;;) {
          int c = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (c < 0) break;
          setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          epoll_event cev{};
          cev.events = EPOLLIN;
          cev.data.fd = c;
          epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
          ++connections;
        }
        continue;
      }
      std::string& in = input[fd];
      ssize_t got = read(fd, buf.data(), buf.size());
      if (got <= 0) {
        epoll_ctl(ep, EPOLL_CTL_DEL, fd, nullptr);
        close(fd);
        input.erase(fd);
        continue;
      }
      const int64_t now_wall = WallUs();
      in.append(buf.data(), static_cast<size_t>(got));
      out.clear();
      size_t pos = 0;
      for (;;) {
        std::string_view rest(in.data() + pos, in.size() - pos);
        size_t head_end = rest.find("\r\n\r\n");
        if (head_end == std::string_view::npos) break;
        size_t length = ContentLength(rest.substr(0, head_end));
        if (rest.size() < head_end + 4 + length) break;
        std::string_view body = rest.substr(head_end + 4, length);
        int64_t run_at_ms = NumberAfter(body, "\"run_at_ms\":");
        if (run_at_ms >= 0) lateness_us.push_back(now_wall - run_at_ms * 1000);
        if (requests == 0) {
          first_us = MonoUs();
          cpu_at_first = CpuSeconds();
        }
        ++requests;
        last_us = MonoUs();
        out += answer;
        pos += head_end + 4 + length;
      }
      in.erase(0, pos);
      if (!out.empty()) {
        size_t off = 0;
        while (off < out.size()) {
          ssize_t w = write(fd, out.data() + off, out.size() - off);
          if (w <= 0) break;  // loopback with a small answer: never short in practice
          off += static_cast<size_t>(w);
        }
      }
    }
  }
  double cpu = CpuSeconds() - cpu_at_first;
  std::sort(lateness_us.begin(), lateness_us.end());
  auto pct = [&](double p) -> int64_t {
    if (lateness_us.empty()) return 0;
    size_t i = std::min(lateness_us.size() - 1, static_cast<size_t>(p * lateness_us.size()));
    return lateness_us[i];
  };
  uint64_t early = 0;
  for (int64_t l : lateness_us) early += l < 0 ? 1 : 0;
  const double span_s = requests > 1 ? static_cast<double>(last_us - first_us) / 1e6 : 0;
  std::printf("{\"bench\":\"receive\",\"requests\":%" PRIu64 ",\"connections\":%" PRIu64
              ",\"first_to_last_s\":%.3f,\"requests_per_s\":%.0f,\"early\":%" PRIu64
              ",\"lateness_p50_us\":%" PRId64 ",\"lateness_p99_us\":%" PRId64
              ",\"lateness_p999_us\":%" PRId64 ",\"lateness_max_us\":%" PRId64
              ",\"receiver_cpu_s\":%.2f}\n",
              requests, connections, span_s,
              span_s > 0 ? static_cast<double>(requests - 1) / span_s : 0, early, pct(0.5),
              pct(0.99), pct(0.999), lateness_us.empty() ? 0 : lateness_us.back(), cpu);
  return o.jobs > 0 && requests < o.jobs ? 1 : 0;
}

}  // namespace delayq::bench
