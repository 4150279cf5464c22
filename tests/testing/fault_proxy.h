// FaultProxy: a TCP proxy on a free loopback port in front of a real server
// (a `delayq serve`), whose faults the test switches while it runs: the
// network client's fault tier. What the client sees is what a real network
// does to it — a reply lost after the server acted, replies that never come,
// connections refused, connects that hang — while the server behind runs
// unchanged.
//
//   auto proxy = FaultProxy::Start(server->port());
//   options.servers = proxy->address() + "," + server->address();
//   proxy->set_mode(FaultProxy::Mode::kDropReplies);  // the next reply is lost
//
// One thread of its own forwards every connection (poll(2), a pair of
// sockets each); set_mode returns once that thread has applied the mode, so
// what follows it in the test meets the new mode. Every descriptor is
// O_CLOEXEC and closed by the destructor.
//
// Thread-safety: every method may be called from any thread.
#ifndef DELAYQ_TESTS_TESTING_FAULT_PROXY_H_
#define DELAYQ_TESTS_TESTING_FAULT_PROXY_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "delayq/status.h"

namespace delayq::faults {

class FaultProxy {
 public:
  enum class Mode {
    // Forwards both ways.
    kPass,
    // Forwards requests; when a reply comes back, closes both sides of that
    // connection instead of delivering it: the server acted, the client
    // lost the reply.
    kDropReplies,
    // Forwards requests; reads replies and never delivers them, keeping the
    // connection open: a reply the client waits for until its timeout.
    kSwallowReplies,
    // New connections are refused (the listener is closed: ECONNREFUSED);
    // connections already open pass.
    kRefuse,
    // New connections hang: the listener's accept queue is filled and never
    // accepted from, so SYNs are dropped and a connect runs into its
    // timeout (a host gone dark). Connections already open are closed.
    kBlackhole,
  };

  // Listens on 127.0.0.1, a free port, forwarding to 127.0.0.1:target_port.
  // Errors: kInternal when a socket or the thread cannot be made.
  static Result<std::unique_ptr<FaultProxy>> Start(int target_port);
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  // Switches the mode; returns once the proxy's thread applies it.
  void set_mode(Mode mode);

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  // Replies dropped (kDropReplies) or swallowed (kSwallowReplies) so far,
  // counted once per read that held reply bytes.
  uint64_t replies_lost() const;
  // Connections accepted so far.
  uint64_t accepted() const;

 private:
  struct Pair {
    int client = -1;
    int server = -1;
  };

  FaultProxy(int target_port, int listen_fd, int port, int wake_fd);
  void Run();
  void Apply(Mode mode);  // on the proxy's thread
  void Accept();
  // Moves what `from` holds to `to`; false when the pair must close.
  bool Forward(int from, int to, bool reply);
  void ClosePair(Pair& p);
  void Listen(int backlog);
  void StopListening();

  const int target_port_;
  const int port_;
  const int wake_fd_;  // eventfd: a mode to apply, or the end

  // Owned by the proxy's thread.
  int listen_fd_;
  std::vector<int> fillers_;  // kBlackhole: connections that fill the accept queue
  std::vector<Pair> pairs_;
  Mode applied_ = Mode::kPass;

  mutable std::mutex mu_;
  std::condition_variable applied_cv_;
  Mode wanted_ = Mode::kPass;  // GUARDED_BY(mu_)
  uint64_t generation_ = 0;    // GUARDED_BY(mu_): set_mode calls
  uint64_t done_ = 0;          // GUARDED_BY(mu_): those applied
  bool stop_ = false;          // GUARDED_BY(mu_)
  uint64_t replies_lost_ = 0;  // GUARDED_BY(mu_)
  uint64_t accepted_ = 0;      // GUARDED_BY(mu_)

  std::thread thread_;  // started last
};

}  // namespace delayq::faults

#endif  // DELAYQ_TESTS_TESTING_FAULT_PROXY_H_
