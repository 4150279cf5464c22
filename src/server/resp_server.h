// RespServer: the Redis-protocol front end (SPEC §7) over any Queue.
// Parsing and replies live here; every command is one Queue call, described
// as data in one table (see kCommands in the .cc). Connections, limits and
// waiting reserves are FrontEnd's and net::TcpServer's.
//
// Pipelining: every complete command in a read is executed and the replies
// leave in one write, in order. With a store that answers later (Redis),
// commands keep running while earlier ones await their answers, except that
// a RESERVE waits for the changes before it and other commands wait for the
// reserves before it (a RESERVE that has to wait holds back what follows, as
// BLPOP does). See FrontEnd, "Pipelining".
//
// Thread-safety: the loop thread owns the server and its connections.
#ifndef DELAYQ_SERVER_RESP_SERVER_H_
#define DELAYQ_SERVER_RESP_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/queue.h"
#include "net/event_loop.h"
#include "net/tcp_server.h"
#include "resp/parser.h"
#include "server/front_end.h"

namespace delayq::server {

struct RespServerOptions {
  // Listener and limits. Defaults: 127.0.0.1:7701 (loopback only).
  net::TcpServerOptions tcp = {.name = "RESP", .host = "127.0.0.1", .port = 7701};
  std::string auth_token;  // empty: no AUTH needed
  resp::ParserLimits parser;
};

class RespServer : public FrontEnd {
 public:
  // Binds and listens. `loop` and `queue` must outlive the server.
  // Errors: kInvalidArgument for a bad address, kUnavailable if it cannot be
  // bound.
  static Result<std::unique_ptr<RespServer>> Create(net::EventLoop* loop, ServingQueue* queue,
                                                    RespServerOptions options);

  using Args = std::vector<std::string_view>;
  using Connection = net::Connection;
  struct RespState;

 private:
  RespServer(net::EventLoop* loop, ServingQueue* queue, RespServerOptions options);

  // net::TcpHandler
  void OnOpen(Connection& c) override;
  void OnInput(Connection& c) override;
  std::string_view BusyReply() const override;
  std::string_view TimeoutReply() const override;
  // FrontEnd
  void AnswerReserve(Connection& c, const Result<Deliveries>& result) override;

  void Execute(Connection& c, const Args& args);

  // Commands (see kCommands).
  void CmdPing(Connection& c, const Args& a);
  void CmdEcho(Connection& c, const Args& a);
  void CmdAuth(Connection& c, const Args& a);
  void CmdQuit(Connection& c, const Args& a);
  void CmdAdd(Connection& c, const Args& a);
  void CmdReserve(Connection& c, const Args& a);
  void CmdFinish(Connection& c, const Args& a);
  // FINISH, TOUCH, BURY: id receipt|FORCE, then `op`.
  using ReceiptCall = void (*)(ServingQueue* q, std::string_view id, std::string_view receipt,
                               ServingQueue::StatusCallback done);
  void ReceiptCommand(Connection& c, const Args& a, ReceiptCall op);
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

  RespServerOptions options_;
};

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_RESP_SERVER_H_
