// One blocking connection to a delayq server over the Redis protocol, for
// the command line. A thin wrapper over hiredis that keeps hiredis out of
// every other file: replies come back as plain `Reply` values.
//
// Failures to talk to the server (cannot connect, timed out, connection
// lost, malformed reply) are a non-OK Status with Code::kUnavailable; an
// error the server answered (`-NOTFOUND ...`) is a successful Reply of type
// kError. The two lead to different exit codes.
//
// Thread-safety: one thread at a time.
#ifndef DELAYQ_CLI_RESP_CONNECTION_H_
#define DELAYQ_CLI_RESP_CONNECTION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "delayq/status.h"

struct redisContext;  // hiredis

namespace delayq::cli {

// "host:port", "host" (port 7701) or "[v6addr]:port".
struct ServerAddress {
  std::string host;
  int port = 7701;

  // "127.0.0.1:7701", as given back in messages.
  std::string ToString() const;
};

// InvalidArgument naming the problem when `text` is not an address.
Result<ServerAddress> ParseServerAddress(const std::string& text);

// One RESP2 reply, owned.
struct Reply {
  enum class Type { kString, kStatus, kError, kInteger, kNil, kArray };
  Type type = Type::kNil;
  std::string str;              // kString, kStatus, kError (the whole line)
  int64_t integer = 0;          // kInteger
  std::vector<Reply> elements;  // kArray
};

class RespConnection {
 public:
  ~RespConnection();
  RespConnection(const RespConnection&) = delete;
  RespConnection& operator=(const RespConnection&) = delete;

  // Connects within `connect_timeout_ms`. Unavailable, with a message that
  // names the address and the system's reason, when it cannot.
  static Result<std::unique_ptr<RespConnection>> Connect(const ServerAddress& address,
                                                         int connect_timeout_ms);

  // Sends `args` as one command and waits up to `timeout_ms` for its reply.
  // Unavailable when the reply does not arrive or the connection breaks;
  // the connection is unusable afterwards.
  Result<Reply> Command(const std::vector<std::string>& args, int timeout_ms);

 private:
  RespConnection(ServerAddress address, redisContext* context)
      : address_(std::move(address)), context_(context) {}

  ServerAddress address_;
  redisContext* context_;  // owned; redisFree in the destructor
};

}  // namespace delayq::cli

#endif  // DELAYQ_CLI_RESP_CONNECTION_H_
