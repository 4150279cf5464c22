// What the `delayq` client commands and `delayq work` print for a failed
// call, and the exit code it maps to. One place, so that every command says
// a server's refusal and an unreachable server the same way.
//
// Exit codes (src/cli/README.md, and every subcommand's --help):
//   0  success
//   1  the server refused the request: "delayq finish: NOTFOUND: ..." (the RESP
//      error prefix of the Status's code: NOTFOUND, EXISTS, STALE,
//      NOTRESERVED, INVALID, TOOLARGE, NOAUTH, ERR)
//   2  usage error found by delayq itself
//   3  nothing there: reserve got no job, get or peek found none
//   4  no server could serve it (kUnavailable): none could be reached, a
//      reply was lost or not understood, or the server answered UNAVAILABLE
//      (its store unreachable, or it is shutting down; a reserve's wait that
//      the shutdown ended says so: ReserveFailureLine)
//
// Thread-safety: stateless functions; each message leaves in one write.
#ifndef DELAYQ_CLI_FAILURE_H_
#define DELAYQ_CLI_FAILURE_H_

#include <string>
#include <string_view>

#include "delayq/status.h"

namespace delayq::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitServerError = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitEmpty = 3;
inline constexpr int kExitUnavailable = 4;

// Writes "delayq <command>: <line>\n" to stderr ("delayq: <line>" when
// `command` is empty): every message names the command it is about.
void PrintError(std::string_view line, std::string_view command = {});

// The line (without "delayq: ") that says why `status` failed, for a
// command sent to `servers` (the --server list as given). A request no
// server took reads "cannot connect to 127.0.0.1:7701: Connection refused —
// is `delayq serve` running?" (several servers: each with its reason); an
// AUTH refused, "NOAUTH: invalid token (127.0.0.1:7701 refused the
// token)"; anything else "CODE: message". Control characters are escaped.
// REQUIRES: !status.ok().
std::string DescribeFailure(const Status& status, std::string_view servers);

// The exit code of a failed call: 4 for kUnavailable, else 1.
int ExitCodeOf(const Status& status);

// PrintError(DescribeFailure(...)); returns ExitCodeOf(status).
int ReportFailure(const Status& status, std::string_view servers, std::string_view command);

// Whether `status` is a waiting reserve that the server ended because it is
// shutting down (IsShuttingDown, include/delayq/status.h): not "no job".
bool EndedByShutdown(const Status& status);
// The same for a Status already turned to text (Status::ToString, as
// WorkerStats::last_error holds it: "unavailable: shutting down ...").
bool EndedByShutdown(std::string_view status_text);

// What `delayq reserve` says then, after "delayq reserve: " (exit 4: no
// server could serve it; another may, or the same one once restarted).
inline constexpr std::string_view kEndedByShutdownHelp =
    "the server is shutting down and ended the wait; run it again, or give another server "
    "(--server a,b)";

// The line `delayq reserve` prints for a failed reserve, without the
// newline: "delayq reserve: " + kEndedByShutdownHelp when EndedByShutdown,
// else "delayq: " + DescribeFailure(...). Its exit code is ExitCodeOf.
std::string ReserveFailureLine(const Status& status, std::string_view servers);

}  // namespace delayq::cli

#endif  // DELAYQ_CLI_FAILURE_H_
