// The server a client command talks to: `--server host:port`, "host" (port
// 7701) or "[v6addr]:port", as the redis::Endpoint the connection takes.
#ifndef DELAYQ_CLI_SERVER_ADDRESS_H_
#define DELAYQ_CLI_SERVER_ADDRESS_H_

#include <string>

#include "delayq/status.h"
#include "redis/url.h"

namespace delayq::cli {

inline constexpr int kDefaultServerPort = 7701;

// InvalidArgument naming the problem when `text` is not an address.
Result<redis::Endpoint> ParseServerAddress(const std::string& text);

}  // namespace delayq::cli

#endif  // DELAYQ_CLI_SERVER_ADDRESS_H_
