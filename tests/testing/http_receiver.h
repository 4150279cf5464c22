// HttpReceiver: a real HTTP/1.1 server on 127.0.0.1 (a free port) for the
// push tests and the push benchmark: keep-alive, Content-Length bodies, a
// thread per connection, an answer chosen per request by a function the test
// sets (and may change at any time), every request recorded.
//
// Header-only; include "testing/http_receiver.h".
#ifndef DELAYQ_TESTS_TESTING_HTTP_RECEIVER_H_
#define DELAYQ_TESTS_TESTING_HTTP_RECEIVER_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace delayq::testing {

struct ReceivedRequest {
  std::string method;
  std::string path;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::chrono::steady_clock::time_point at;
};

struct ReceiverAnswer {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // Never answer: hold the connection until the receiver stops (a hung
  // receiver).
  bool hang = false;
  // Close the connection without answering.
  bool close = false;
};

class HttpReceiver {
 public:
  using Answer = std::function<ReceiverAnswer(const ReceivedRequest&)>;

  // record=false keeps only the count (a benchmark).
  explicit HttpReceiver(bool record = true) : record_(record) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::listen(listen_fd_, 1024);
    socklen_t len = sizeof addr;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }

  ~HttpReceiver() {
    stop_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    acceptor_.join();
    ::close(listen_fd_);
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
      threads.swap(threads_);
    }
    for (std::thread& t : threads) t.join();
  }

  int port() const { return port_; }
  std::string url(const std::string& path = "/") const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

  void SetAnswer(Answer answer) {
    std::lock_guard<std::mutex> lock(mu_);
    answer_ = std::move(answer);
  }

  std::vector<ReceivedRequest> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  uint64_t count() const { return count_.load(); }
  uint64_t connections() const { return connections_.load(); }
  // Requests being handled now (read, not yet answered).
  int64_t active() const { return active_.load(); }
  int64_t max_active() const { return max_active_.load(); }

 private:
  void Accept() {
    while (!stop_) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (stop_) return;
        continue;
      }
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      ++connections_;
      std::lock_guard<std::mutex> lock(mu_);
      fds_.push_back(fd);
      threads_.emplace_back([this, fd] { Serve(fd); });
    }
  }

  // Reads requests off one connection and answers each, until it closes.
  void Serve(int fd) {
    std::string in;
    char buf[65536];
    for (;;) {
      size_t head_end;
      while ((head_end = in.find("\r\n\r\n")) == std::string::npos) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n <= 0) return Close(fd);
        in.append(buf, static_cast<size_t>(n));
      }
      ReceivedRequest req;
      req.at = std::chrono::steady_clock::now();
      std::string head = in.substr(0, head_end);
      size_t line_end = head.find("\r\n");
      std::string first = head.substr(0, line_end);
      size_t sp1 = first.find(' ');
      size_t sp2 = first.find(' ', sp1 + 1);
      req.method = first.substr(0, sp1);
      req.path = first.substr(sp1 + 1, sp2 - sp1 - 1);
      size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
      while (pos < head.size()) {
        size_t end = head.find("\r\n", pos);
        if (end == std::string::npos) end = head.size();
        std::string line = head.substr(pos, end - pos);
        size_t colon = line.find(':');
        if (colon != std::string::npos) {
          std::string name = line.substr(0, colon);
          std::transform(name.begin(), name.end(), name.begin(), ::tolower);
          size_t v = line.find_first_not_of(' ', colon + 1);
          req.headers[name] = v == std::string::npos ? "" : line.substr(v);
        }
        pos = end + 2;
      }
      size_t length = 0;
      if (auto it = req.headers.find("content-length"); it != req.headers.end()) {
        length = std::stoul(it->second);
      }
      in.erase(0, head_end + 4);
      while (in.size() < length) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n <= 0) return Close(fd);
        in.append(buf, static_cast<size_t>(n));
      }
      req.body = in.substr(0, length);
      in.erase(0, length);

      int64_t now_active = ++active_;
      int64_t seen = max_active_.load();
      while (now_active > seen && !max_active_.compare_exchange_weak(seen, now_active)) {
      }
      Answer answer;
      {
        std::lock_guard<std::mutex> lock(mu_);
        answer = answer_;
      }
      ReceiverAnswer a = answer ? answer(req) : ReceiverAnswer{};
      if (record_) {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(req);
      }
      ++count_;
      if (a.hang) {
        pollfd p{fd, POLLIN, 0};
        while (!stop_ && ::poll(&p, 1, 50) == 0) {
        }
        --active_;
        return Close(fd);
      }
      if (a.close) {
        --active_;
        return Close(fd);
      }
      std::string out = "HTTP/1.1 " + std::to_string(a.status) +
                        " X\r\nContent-Length: " + std::to_string(a.body.size()) + "\r\n";
      for (const auto& [k, v] : a.headers) out += k + ": " + v + "\r\n";
      out += "\r\n" + a.body;
      --active_;
      size_t off = 0;
      while (off < out.size()) {
        ssize_t n = ::write(fd, out.data() + off, out.size() - off);
        if (n <= 0) return Close(fd);
        off += static_cast<size_t>(n);
      }
    }
  }

  void Close(int fd) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find(fds_.begin(), fds_.end(), fd);
    if (it != fds_.end()) {
      fds_.erase(it);
      ::close(fd);
    }
  }

  const bool record_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> connections_{0};
  std::atomic<int64_t> active_{0};
  std::atomic<int64_t> max_active_{0};
  mutable std::mutex mu_;
  Answer answer_;
  std::vector<ReceivedRequest> requests_;
  std::vector<int> fds_;
  std::vector<std::thread> threads_;
};

}  // namespace delayq::testing

#endif  // DELAYQ_TESTS_TESTING_HTTP_RECEIVER_H_
