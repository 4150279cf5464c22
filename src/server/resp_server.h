// RespServer: the Redis-protocol front end (SPEC §7) over any Queue.
// Parsing and replies live here; every command is one Queue call, described
// as data in one table (see kCommands in the .cc). Connections, limits and
// waiting reserves are FrontEnd's and net::TcpServer's.
//
// Beside the queue's commands it answers what Redis's own tools and client
// libraries send on connect — HELLO (RESP2 or RESP3, per connection),
// INFO, COMMAND, CLIENT, SELECT 0 — so that they work unchanged. COMMAND's
// descriptions and HELP texts are made from the same table.
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
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/queue.h"
#include "net/event_loop.h"
#include "net/tcp_server.h"
#include "resp/parser.h"
#include "resp/writer.h"
#include "server/front_end.h"

namespace delayq::server {

struct RespServerOptions {
  // Listener and limits. Defaults: 127.0.0.1:7701 (loopback only).
  net::TcpServerOptions tcp = {.name = "RESP", .host = "127.0.0.1", .port = 7701};
  std::string auth_token;  // empty: no AUTH needed
  resp::ParserLimits parser;
  std::string store;  // the store's name, for INFO ("memory", "embedded", "redis")
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

  // A row of the command table: what Execute checks before it calls the
  // handler, and what COMMAND, COMMAND DOCS and HELP tell clients.
  struct CommandSpec {
    std::string_view name;
    int min_args;  // including the name (and a subcommand's own name)
    int max_args;  // -1: any
    bool needs_auth;
    // Null for a command that is only its subcommands (CLIENT).
    void (RespServer::*handler)(Connection&, const Args&);
    std::string_view group;    // "connection", "server" or "queue" (redis-cli's `help @queue`)
    std::string_view syntax;   // its arguments, as HELP and redis-cli's hints show them
    std::string_view summary;  // one line
    std::span<const CommandSpec> subcommands = {};  // CLIENT's and COMMAND's
    std::string_view since = "0.1.0";               // the delayq version that added it
  };

  // INFO's sections, as a mask.
  enum Section : unsigned {
    kServer = 1,
    kClients = 2,
    kStats = 4,
    kDelayq = 8,  // the queue's figures, as STATS gives them
    kKeyspace = 16,
  };
  // INFO's text: the sections in `sections`, in Redis's form ("# Server",
  // "key:value" lines, a blank line between sections). `stats` are the
  // queue's figures, needed by kClients and kDelayq.
  std::string InfoText(unsigned sections, const QueueStats& stats) const;

 private:
  RespServer(net::EventLoop* loop, ServingQueue* queue, RespServerOptions options);

  // net::TcpHandler
  void OnOpen(Connection& c) override;
  void OnInput(Connection& c) override;
  void OnClose(Connection& c) override;
  std::string_view BusyReply() const override;
  std::string_view TimeoutReply() const override;
  std::string_view PlaintextReply() const override;
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
  void CmdUnreserve(Connection& c, const Args& a);
  void CmdKick(Connection& c, const Args& a);
  void CmdKickTopic(Connection& c, const Args& a);
  void CmdGet(Connection& c, const Args& a);
  void CmdPeek(Connection& c, const Args& a);
  void CmdPause(Connection& c, const Args& a);
  void CmdResume(Connection& c, const Args& a);
  void CmdTopics(Connection& c, const Args& a);
  void CmdStats(Connection& c, const Args& a);
  // SUBSCRIPTION's subcommands: push delivery's registrations (not named
  // SUBSCRIBE, which Redis's tools take for pub/sub and never expect a
  // plain reply to).
  void CmdSubscriptionSet(Connection& c, const Args& a);
  void CmdSubscriptionDel(Connection& c, const Args& a);
  void CmdSubscriptionGet(Connection& c, const Args& a);
  void CmdSubscriptionList(Connection& c, const Args& a);
  // SCHEDULE's subcommands: periodic jobs.
  void CmdScheduleSet(Connection& c, const Args& a);
  void CmdScheduleGet(Connection& c, const Args& a);
  void CmdScheduleDel(Connection& c, const Args& a);
  void CmdScheduleList(Connection& c, const Args& a);
  void CmdSchedulePause(Connection& c, const Args& a);
  void CmdScheduleResume(Connection& c, const Args& a);
  void CmdScheduleBackfill(Connection& c, const Args& a);
  // What Redis's tools send (see the header comment).
  void CmdHello(Connection& c, const Args& a);
  void CmdSelect(Connection& c, const Args& a);
  void CmdInfo(Connection& c, const Args& a);
  void CmdCommand(Connection& c, const Args& a);
  void CmdCommandCount(Connection& c, const Args& a);
  void CmdCommandDocs(Connection& c, const Args& a);
  void CmdCommandInfo(Connection& c, const Args& a);
  void CmdCommandList(Connection& c, const Args& a);
  void CmdClientSetName(Connection& c, const Args& a);
  void CmdClientGetName(Connection& c, const Args& a);
  void CmdClientId(Connection& c, const Args& a);
  void CmdClientList(Connection& c, const Args& a);
  void CmdClientInfo(Connection& c, const Args& a);
  void CmdClientSetInfo(Connection& c, const Args& a);
  // CLIENT HELP, COMMAND HELP, SUBSCRIPTION HELP, SCHEDULE HELP
  void CmdHelp(Connection& c, const Args& a);

  static const CommandSpec kCommands[];
  static const CommandSpec kClientCommands[];
  static const CommandSpec kCommandCommands[];
  static const CommandSpec kSubscriptionCommands[];
  static const CommandSpec kScheduleCommands[];
  static const CommandSpec* FindCommand(std::string_view name);
  // A command or a subcommand ("client|list"), by its full name.
  static const CommandSpec* FindFullName(std::string_view name);
  // COMMAND's and COMMAND DOCS's description of one command (parent: the
  // command whose subcommand it is, or null).
  static void AppendCommandInfo(std::string* out, const CommandSpec& cmd, const CommandSpec* parent,
                                resp::Protocol p);
  static void AppendCommandDocs(std::string* out, const CommandSpec& cmd, const CommandSpec* parent,
                                resp::Protocol p);
  // One line of CLIENT LIST and CLIENT INFO, in Redis's "id=.. addr=.." form.
  std::string ClientLine(const Connection& c) const;
  // AUTH's and HELLO AUTH's check: the user must be "default" and the token
  // the server's. kUnauthorized says which is wrong.
  Status CheckCredentials(std::string_view user, std::string_view token) const;

  RespServerOptions options_;
  const int64_t started_ms_;  // monotonic: INFO's uptime
  // The open connections by id, for CLIENT LIST (ids ascend as they open).
  std::map<uint64_t, const Connection*> clients_;
  uint64_t connections_received_ = 0;  // INFO stats, since start
  uint64_t commands_processed_ = 0;
};

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_RESP_SERVER_H_
