// The client layer reports a request that no server took as one Status
// listing every server tried ("no delayq server answered: A (why), B
// (why)", client/server_set.h). For one server, the common case, that is
// reworded as the command line always said it; for several, the list stays.
#include "cli/failure.h"

#include <cstdio>
#include <optional>

#include "client/server_set.h"
#include "client/wire_codec.h"
#include "codec/utf8.h"

namespace delayq::cli {
namespace {

// With a single server in `servers`: the reason in "<prefix>NAME (why)";
// nullopt when the message is not of that shape.
std::optional<std::string> SingleReason(const std::string& message, std::string_view prefix,
                                        std::string_view servers, std::string* name) {
  if (!message.starts_with(prefix)) return std::nullopt;
  auto endpoints = client::ParseServers(servers);
  if (!endpoints.ok() || endpoints->size() != 1) return std::nullopt;
  *name = endpoints->front().ToString();
  std::string_view rest = std::string_view(message).substr(prefix.size());
  const std::string head = *name + " (";
  if (!rest.starts_with(head) || !rest.ends_with(")")) return std::nullopt;
  return std::string(rest.substr(head.size(), rest.size() - head.size() - 1));
}

// "NOAUTH invalid token" -> "invalid token": a reply's own prefix dropped.
std::string_view WithoutPrefix(std::string_view reply) {
  const size_t space = reply.find(' ');
  if (space == std::string_view::npos) return reply;
  for (char c : reply.substr(0, space)) {
    if ((c < 'A' || c > 'Z') && c != '_') return reply;
  }
  return reply.substr(space + 1);
}

constexpr std::string_view kHint = " \u2014 is `delayq serve` running?";

// What to do about a failure to connect: the usual hint, unless the reason
// says the two ends disagree about TLS.
std::string HintFor(std::string_view why) {
  if (why.find("this port speaks TLS") != std::string_view::npos) {
    return " \u2014 the server speaks TLS: add --tls (and --cacert CA.pem), or DELAYQ_TLS=1";
  }
  if (why.find("a plaintext server on this port?") != std::string_view::npos) {
    return " \u2014 the server does not speak TLS: leave --tls (DELAYQ_TLS) out";
  }
  return std::string(kHint);
}

}  // namespace

void PrintError(std::string_view line, std::string_view command) {
  std::string out = "delayq";
  if (!command.empty()) out.append(" ").append(command);
  out += ": ";
  out += line;
  out += '\n';
  std::fwrite(out.data(), 1, out.size(), stderr);
}

std::string DescribeFailure(const Status& status, std::string_view servers) {
  const std::string& m = status.message();
  std::string name;
  if (status.code() == Code::kUnavailable) {
    if (auto why = SingleReason(m, client::kNoServerAnswered, servers, &name)) {
      return "cannot connect to " + name + ": " + codec::EscapeForTerminal(*why) + HintFor(*why);
    }
    if (m.starts_with(client::kNoServerAnswered)) {
      return "cannot connect to any server: " +
             codec::EscapeForTerminal(m.substr(client::kNoServerAnswered.size())) + HintFor(m);
    }
  }
  if (status.code() == Code::kUnauthorized) {
    if (auto why = SingleReason(m, client::kNoServerAccepted, servers, &name)) {
      constexpr std::string_view kRefused = "AUTH refused: ";
      std::string_view reply = *why;
      if (reply.starts_with(kRefused)) reply = WithoutPrefix(reply.substr(kRefused.size()));
      return "NOAUTH: " + codec::EscapeForTerminal(reply) + " (" + name + " refused the token)";
    }
  }
  // The server's own error reply that the client could not name
  // ("server error: ERR unknown command ..."): its prefix is its code.
  constexpr std::string_view kServerError = "server error: ";
  if (status.code() == Code::kInternal && m.starts_with(kServerError)) {
    std::string_view reply = std::string_view(m).substr(kServerError.size());
    std::string_view rest = WithoutPrefix(reply);
    if (rest.size() != reply.size()) {
      std::string_view code = reply.substr(0, reply.size() - rest.size() - 1);
      return std::string(code) + ": " + codec::EscapeForTerminal(rest);
    }
  }
  return std::string(client::ErrorPrefix(status.code())) + ": " + codec::EscapeForTerminal(m);
}

int ExitCodeOf(const Status& status) {
  return status.code() == Code::kUnavailable ? kExitUnavailable : kExitServerError;
}

int ReportFailure(const Status& status, std::string_view servers, std::string_view command) {
  PrintError(DescribeFailure(status, servers), command);
  return ExitCodeOf(status);
}

bool EndedByShutdown(const Status& status) { return IsShuttingDown(status); }

bool EndedByShutdown(std::string_view status_text) {
  const std::string prefix = std::string(CodeName(Code::kUnavailable)) + ": ";
  return status_text.starts_with(prefix) &&
         status_text.substr(prefix.size()).starts_with(kShuttingDownPrefix);
}

std::string ReserveFailureLine(const Status& status, std::string_view servers) {
  if (EndedByShutdown(status)) return "delayq reserve: " + std::string(kEndedByShutdownHelp);
  return "delayq reserve: " + DescribeFailure(status, servers);
}

}  // namespace delayq::cli
