// `delayq work TOPIC[,TOPIC...] [--concurrency N] [--drain D] [--backoff D]
// -- COMMAND [ARGS...]`: a worker without writing code. Runs COMMAND once
// per job through delayq::Worker over the network client: the body on its
// stdin; DELAYQ_JOB_ID, DELAYQ_TOPIC, DELAYQ_ATTEMPTS, DELAYQ_RECEIPT in its
// environment; its stdout passed through. Exit 0 finishes the job; any other
// exit, or death by a signal, releases it after the backoff with the tail of
// its stderr as the job's last_error. The Worker touches a job whose command
// runs past half its TTR. SIGTERM or SIGINT stops reserving, lets running
// commands finish for up to the drain, releases what is left, and exits 0.
//
// Thread-safety: used from main()'s thread only.
#ifndef DELAYQ_CLI_WORK_COMMAND_H_
#define DELAYQ_CLI_WORK_COMMAND_H_

#include <memory>

#include "delayq/options.h"

namespace CLI {
class App;
}

namespace delayq::cli {

class WorkCommand {
 public:
  virtual ~WorkCommand() = default;
  // Whether `work` was on the command line.
  virtual bool Parsed() const = 0;
  // Runs until SIGTERM or SIGINT; returns the exit code (cli/failure.h):
  // 0 after a signal, 2 for a usage error, 1 or 4 when the servers refuse
  // or cannot be reached at start. `options`: the network client's, from
  // the shared --server and --auth-token. REQUIRES: Parsed().
  virtual int Run(const QueueOptions& options) = 0;
};

// Adds the `work` subcommand to `app`, with `footer` under its help.
std::unique_ptr<WorkCommand> AddWorkCommand(CLI::App* app, const char* footer);

}  // namespace delayq::cli

#endif  // DELAYQ_CLI_WORK_COMMAND_H_
