// FrontEndHarness: the real HTTP and RESP front ends (HttpServer,
// RespServer: their parsers, routes and handlers, FrontEnd's waiting
// reserves, TcpServer's framing, output limits and output gate) on a real
// in-process queue, without sockets, in the style of Dragonfly's
// `Run({...})`:
//
//   FrontEndHarness h;
//   EXPECT_EQ(h.Resp({"ADD", "t", "j1", "0", "60000", "body"}), Bulk("j1"));
//   HttpReply r = h.Http("POST", "/v1/reserve", R"({"topics":["t"]})");
//
// How: the servers are made with TcpServerOptions::listen = false, and each
// client connection is a pipe. TcpServer::Adopt serves its write end as an
// accepted connection (replies are written to it by the server's own
// Flush, partial writes and EAGAIN included), the test reads the other end;
// requests are handed over with TcpServer::Deliver, as a read would. The
// event loop runs on a thread of its own, wired as `delayq serve` wires it
// (the queue's timers on the loop, the embedded store's log as the output
// gate); the test thread talks to it through EventLoop::Post and waits for
// replies by polling the pipe up to a deadline. Time is a ManualClock: a
// reserve that waits is answered when the test advances it, never after a
// sleep.
#ifndef DELAYQ_TESTS_SERVER_FRONT_END_HARNESS_H_
#define DELAYQ_TESTS_SERVER_FRONT_END_HARNESS_H_

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "delayq/clock.h"
#include "delayq/options.h"
#include "gtest/gtest.h"
#include "log/file.h"
#include "net/event_loop.h"
#include "push/pusher.h"
#include "schedule/scheduler.h"
#include "server/http_server.h"
#include "server/queue_on_loop.h"
#include "server/resp_server.h"
#include "serving/serving_queue.h"

namespace delayq {
// Test names and messages say "memory", not "4-byte object".
inline void PrintTo(StoreKind k, std::ostream* os) { *os << StoreKindName(k); }
}  // namespace delayq

namespace delayq::server::testing {

// One RESP2 reply, parsed.
struct RespReply {
  enum class Type { kSimple, kError, kInteger, kBulk, kNil, kArray, kNilArray };
  Type type = Type::kNil;
  std::string str;  // kSimple, kError (without the '-'), kBulk
  int64_t integer = 0;
  std::vector<RespReply> elements;  // kArray

  bool operator==(const RespReply&) const = default;
  // RESP text again, for failure messages.
  std::string ToString() const;
};
RespReply Simple(std::string s);
RespReply Error(std::string s);
RespReply Integer(int64_t v);
RespReply Bulk(std::string s);
RespReply Nil();
RespReply NilArray();
RespReply Array(std::vector<RespReply> elements);
void PrintTo(const RespReply& r, std::ostream* os);

// The RESP encoding of a command: an array of bulk strings.
std::string RespCommand(std::initializer_list<std::string_view> args);
// Parses one reply from the front of `buf`: its length, or 0 if incomplete.
size_t ParseRespReply(std::string_view buf, RespReply* out);

// One HTTP response, parsed.
struct HttpReply {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // The value of header `name` (any case), or "" if absent.
  std::string Header(std::string_view name) const;
};
// An HTTP/1.1 request with Content-Length (when there is a body) and
// `extra_headers` (whole "Name: value\r\n" lines).
std::string HttpRequest(std::string_view method, std::string_view target,
                        std::string_view body = {}, std::string_view extra_headers = {});
// Parses one response from the front of `buf` (`head`: no body follows the
// headers): its length, or 0 if incomplete.
size_t ParseHttpReply(std::string_view buf, HttpReply* out, bool head = false);

struct FrontEndHarnessOptions {
  StoreKind store = StoreKind::kMemory;  // or kEmbedded, in a temporary directory,
                                         // or kRedis (the three redis_* below)
  // kRedis: QueueOptions' fields of the same names (a test's redis-server, a
  // fresh prefix). The Redis store runs its own timer thread, so AdvanceMs
  // moves the clock and returns without waiting for it.
  std::string redis_url{};
  std::string redis_prefix{};
  uint32_t redis_buckets = 0;
  FsyncPolicy fsync = FsyncPolicy::kEverySec;
  std::string auth_token{};  // both front ends
  // Given to both front ends' TcpServerOptions.
  size_t max_output_bytes = 64 << 20;
  // How long a reply is waited for before the test fails.
  int64_t reply_deadline_ms = 10'000;
  // kEmbedded: the file system its log is written through (null: the real
  // one), e.g. a HeldSyncFileSystem (held_sync_file_system.h) whose syncs
  // the test holds, to see what waits for them.
  std::shared_ptr<store::FileSystem> file_system{};
  // A push::Pusher on the harness's loop and clock, given to both front ends
  // (the subscription routes and commands), as `delayq serve` has one.
  // False: none, as with push delivery off.
  bool push = true;
  // A schedule::Scheduler on the harness's loop and clock, given to both
  // front ends (the schedule routes and commands), as `delayq serve` has
  // one. False (the default, so the other suites' STATS stay as they were):
  // none, and those answer "schedules are off".
  bool schedule = false;
};

class FrontEndHarness {
 public:
  enum class Protocol { kHttp, kResp };

  // A client connection: what it sends is delivered to the server as a read
  // would; what the server writes to it is read back here.
  class Client {
   public:
    ~Client();
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;

    // Hands `bytes` to the server; returns once it has served them (what
    // it could answer at once is then readable).
    void Send(std::string_view bytes);
    // The client's FIN after `bytes` (a half close: replies are still read).
    void SendAndShutdown(std::string_view bytes = {});
    // The client goes away without reading what is left: the server's
    // next write fails and the connection closes.
    void Disconnect();

    // The next reply, waiting up to the deadline for it (a test failure
    // and an empty reply if it does not come).
    RespReply ReadResp();
    HttpReply ReadHttp(bool head = false);
    // Everything until the server closes the connection.
    std::string ReadToClose();
    // Bytes the server has written that no Read* took yet (after a round
    // trip to the loop, so whatever was to be written at once is there).
    std::string Unread();
    bool closed() const { return closed_; }
    uint64_t id() const { return id_; }

   private:
    friend class FrontEndHarness;
    Client(FrontEndHarness* h, Protocol p, int read_fd, uint64_t id);
    // Reads what is there; with `wait`, first waits up to the deadline for
    // more. False if nothing came.
    bool Pull(bool wait);
    FrontEnd* server() const;

    FrontEndHarness* h_;
    Protocol protocol_;
    int read_fd_;
    uint64_t id_;
    std::string buf_;
    bool closed_ = false;
  };

  explicit FrontEndHarness(FrontEndHarnessOptions options = {});
  ~FrontEndHarness();
  FrontEndHarness(const FrontEndHarness&) = delete;
  FrontEndHarness& operator=(const FrontEndHarness&) = delete;

  // A new connection to one front end.
  std::unique_ptr<Client> Connect(Protocol p);

  // One command or request on the harness's own connection to that front
  // end, and its reply.
  RespReply Resp(std::initializer_list<std::string_view> args);
  HttpReply Http(std::string_view method, std::string_view target, std::string_view body = {},
                 std::string_view extra_headers = {});

  // Moves the queue's clock; returns once the loop has run what fell due.
  void AdvanceMs(int64_t ms);
  ManualClock& clock() { return *clock_; }
  // Runs `fn` on the loop thread and waits for it.
  void RunOnLoop(const std::function<void()>& fn);
  HttpServer& http() { return *http_; }
  RespServer& resp() { return *resp_; }
  push::Pusher* pusher() { return pusher_.get(); }
  schedule::Scheduler* scheduler() { return scheduler_.get(); }

 private:
  FrontEndHarnessOptions options_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::string data_dir_;
  std::unique_ptr<net::EventLoop> loop_;
  std::unique_ptr<ServingQueue> queue_;
  std::unique_ptr<QueueOnLoop> on_loop_;
  std::unique_ptr<push::Pusher> pusher_;
  std::unique_ptr<schedule::Scheduler> scheduler_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<RespServer> resp_;
  std::thread thread_;
  std::unique_ptr<Client> http_client_;
  std::unique_ptr<Client> resp_client_;
};

// A fixture for tests run on each in-process store:
//   class RespFrontEnd : public OnEachStore {};
//   TEST_P(RespFrontEnd, ...) { h.Resp(...); }
//   INSTANTIATE_TEST_SUITE_P(Stores, RespFrontEnd, ::testing::ValuesIn(kInProcessStores));
inline constexpr StoreKind kInProcessStores[] = {StoreKind::kMemory, StoreKind::kEmbedded};
class OnEachStore : public ::testing::TestWithParam<StoreKind> {
 protected:
  FrontEndHarness h{{.store = GetParam()}};
};

}  // namespace delayq::server::testing

#endif  // DELAYQ_TESTS_SERVER_FRONT_END_HARNESS_H_
