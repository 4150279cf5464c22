// RespServer: the Redis-protocol front end (SPEC §7) on an EventLoop, over
// any Queue. Connections, parsing and replies live here; every command is one
// Queue call, described as data in one table (see kCommands in the .cc).
//
// Pipelining: every complete command in a read is executed and the replies
// leave in one write. A RESERVE that has to wait parks its connection (later
// pipelined commands wait behind it, as with BLPOP) without holding a thread:
// the Queue calls back, the reply is posted to the loop.
//
// Thread-safety: the loop thread owns the server and its connections.
#ifndef DELAYQ_SERVER_RESP_SERVER_H_
#define DELAYQ_SERVER_RESP_SERVER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "delayq/queue.h"
#include "net/event_loop.h"
#include "resp/parser.h"

namespace delayq::server {

struct RespServerOptions {
  std::string host = "127.0.0.1";  // Default: loopback only.
  int port = 7701;                 // 0: any free port (see RespServer::port()).
  std::string auth_token;          // empty: no AUTH needed
  size_t max_connections = 10'000;
  size_t max_output_bytes = 64 << 20;  // a client that reads no replies is dropped
  resp::ParserLimits parser;
};

class RespServer {
 public:
  // Binds and listens. `loop` and `queue` must outlive the server.
  // Errors: kUnavailable if the address cannot be bound.
  static Result<std::unique_ptr<RespServer>> Create(net::EventLoop* loop, Queue* queue,
                                                    RespServerOptions options);
  // Loop thread only: closes every connection and the listener.
  ~RespServer();

  int port() const { return port_; }

  struct Connection;
  using Args = std::vector<std::string_view>;

 private:
  RespServer(net::EventLoop* loop, Queue* queue, RespServerOptions options, int listen_fd,
             int port);
  void OnAccept();
  void OnEvents(uint64_t id, uint32_t events);
  void ReadFrom(Connection& c);
  void Process(Connection& c);
  void Execute(Connection& c, const Args& args);
  void Flush(Connection& c);
  void Close(uint64_t id);
  void FinishReserve(uint64_t conn_id, Result<Deliveries> result);

  // Commands (see kCommands).
  void CmdPing(Connection& c, const Args& a);
  void CmdAuth(Connection& c, const Args& a);
  void CmdQuit(Connection& c, const Args& a);
  void CmdAdd(Connection& c, const Args& a);
  void CmdReserve(Connection& c, const Args& a);
  void CmdFinish(Connection& c, const Args& a);
  void CmdDelete(Connection& c, const Args& a);
  void CmdRelease(Connection& c, const Args& a);
  void CmdTouch(Connection& c, const Args& a);
  void CmdBury(Connection& c, const Args& a);
  void CmdKick(Connection& c, const Args& a);
  void CmdKickTopic(Connection& c, const Args& a);
  void CmdGet(Connection& c, const Args& a);
  void CmdPeek(Connection& c, const Args& a);
  void CmdPause(Connection& c, const Args& a);
  void CmdResume(Connection& c, const Args& a);
  void CmdTopics(Connection& c, const Args& a);
  void CmdStats(Connection& c, const Args& a);

  struct CommandSpec {
    std::string_view name;
    int min_args;  // including the name
    int max_args;  // -1: any
    bool needs_auth;
    void (RespServer::*handler)(Connection&, const Args&);
  };
  static const CommandSpec kCommands[];
  static const CommandSpec* FindCommand(std::string_view name);

  net::EventLoop* loop_;
  Queue* queue_;
  RespServerOptions options_;
  int listen_fd_;
  int port_;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> conns_;
  // Set while a RESERVE calls the queue, so an answer given inside that call
  // is written at once instead of taking a trip through Post.
  std::atomic<uint64_t> reserving_conn_{0};
  std::shared_ptr<bool> alive_;  // posted tasks check it: false once destroyed
};

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_RESP_SERVER_H_
