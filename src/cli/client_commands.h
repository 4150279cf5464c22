// The client half of the `delayq` command line: `delayq add|reserve|finish|
// delete|release|touch|bury|kick|kicktopic|get|peek|topics|stats|pause|
// resume|ping ...` talk to a running server over the Redis protocol
// (src/redis's Connection). Readable output by default, `--json` for scripts; a clear
// message on stderr and a non-zero exit code on failure.
//
// Exit codes of Run() (also in every subcommand's --help and src/cli/README.md):
//   0  success
//   1  the server answered an error ("delayq: NOTFOUND: ..." on stderr)
//   2  usage error found by delayq itself (e.g. a bad --server address)
//   3  nothing there: reserve got no job, get or peek found none
//   4  could not talk to the server: cannot connect, no reply in time, lost
// Errors CLI11 finds while parsing never reach Run(): main() decides their code.
//
// Thread-safety: used from main()'s thread only.
#ifndef DELAYQ_CLI_CLIENT_COMMANDS_H_
#define DELAYQ_CLI_CLIENT_COMMANDS_H_

#include <memory>
#include <string>

namespace CLI {
class App;
}

namespace delayq::cli {

class ClientCommands {
 public:
  virtual ~ClientCommands() = default;
  // Runs the client subcommand the command line chose; returns the exit
  // code. REQUIRES: Parsed() is true.
  virtual int Run() = 0;
  // Whether one of the client subcommands was on the command line.
  virtual bool Parsed() const = 0;
  // The first of the client commands' own options (--server, --auth-token,
  // --json) given on the command line, "" if none: `delayq serve` refuses
  // them, since its own --auth-token goes after `serve`.
  virtual std::string OptionGiven() const = 0;
};

// Adds every client subcommand (and their options) to `app`, and the
// options they share to `app` itself: they work before or after the
// subcommand's name.
std::unique_ptr<ClientCommands> AddClientCommands(CLI::App* app);

}  // namespace delayq::cli

#endif  // DELAYQ_CLI_CLIENT_COMMANDS_H_
