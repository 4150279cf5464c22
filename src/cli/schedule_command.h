// `delayq schedule set|get|list|delete|pause|resume|backfill`: periodic
// jobs' schedules (SPEC §9) on a running server, through SCHEDULE over the
// network client's --server list (tried in turn, as every client command).
// Prints a schedule as `key: value` lines, or with --json the object HTTP
// answers; exit codes as the other client commands (cli/failure.h), 3 when
// get or delete finds no such schedule.
//
// Thread-safety: used from main()'s thread only.
#ifndef DELAYQ_CLI_SCHEDULE_COMMAND_H_
#define DELAYQ_CLI_SCHEDULE_COMMAND_H_

#include <memory>

#include "delayq/options.h"

namespace CLI {
class App;
}

namespace delayq::cli {

class ScheduleCommand {
 public:
  virtual ~ScheduleCommand() = default;
  // Whether `schedule` (and so one of its subcommands) was on the command line.
  virtual bool Parsed() const = 0;
  // Runs the subcommand given; returns the exit code. `options`: the network
  // client's, from the shared --server and --auth-token; `json`: --json.
  // REQUIRES: Parsed().
  virtual int Run(const QueueOptions& options, bool json) = 0;
};

// Adds `schedule` and its subcommands to `app`, with `footer` under their help.
std::unique_ptr<ScheduleCommand> AddScheduleCommand(CLI::App* app, const char* footer);

}  // namespace delayq::cli

#endif  // DELAYQ_CLI_SCHEDULE_COMMAND_H_
