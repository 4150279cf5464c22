// CommandRunner: runs one command per job for `delayq work` and says what
// became of it. No shell: the command is spawned (posix_spawn) from its argv,
// in a process group of its own, so a Ctrl-C meant for `delayq work` (which
// drains) does not kill the commands it lets finish.
//
// Per run: the job's body is written to the command's stdin (a pipe, closed
// once written; a command that never reads it is not waited for), its
// stderr is read into a bounded tail (the last kStderrTailBytes), its stdout
// is this process's; no other descriptor of this process reaches it (all
// above 2 are closed in the child, close-on-exec or not). The environment is this process's at
// construction, with DELAYQ_JOB_ID, DELAYQ_TOPIC, DELAYQ_ATTEMPTS and DELAYQ_RECEIPT set to the
// delivery's. Signals are at their defaults in the command, and none is blocked, whatever this
// process blocks or ignores.
//
// Thread-safety: Run may be called from any number of threads at once;
// StopStarting, Signal and WaitIdle from any other thread meanwhile.
#ifndef DELAYQ_CLI_COMMAND_RUNNER_H_
#define DELAYQ_CLI_COMMAND_RUNNER_H_

#include <sys/types.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "delayq/job.h"
#include "delayq/status.h"

namespace delayq::cli {

// How a run ended.
struct CommandResult {
  bool spawned = false;     // false: it never started (`error` says why)
  bool exited = false;      // it exited (`code`), else a signal killed it
  int code = 0;             // exit status, when exited
  int signal = 0;           // the signal that killed it, when !exited
  std::string stderr_tail;  // the last kStderrTailBytes of its stderr
  std::string error;        // why it never started
  bool stopping = false;    // it never started because the stop had begun
  int64_t ms = 0;           // how long it ran

  bool ok() const { return spawned && exited && code == 0; }
  // "exit 3: <stderr tail>", "killed by signal 9 (SIGKILL): <tail>",
  // "cannot run 'x': No such file or directory": the job's last_error, the
  // tail cut (from the front) so the whole fits in kLastErrorBytes.
  std::string Describe() const;
};

// What a queue keeps of a job's last_error: its first 1 KiB (the engine
// cuts longer ones), so a description is cut to fit, keeping the end of
// stderr, where the error usually is.
inline constexpr size_t kLastErrorBytes = 1024;

class CommandRunner {
 public:
  static constexpr size_t kStderrTailBytes = kLastErrorBytes;

  // `argv[0]` is found in $PATH unless it holds a '/'. Errors:
  // kInvalidArgument for an empty argv or a command that cannot be found or
  // run (naming it).
  static Result<std::unique_ptr<CommandRunner>> Create(std::vector<std::string> argv);

  // Runs the command for `job` and waits for it to exit.
  CommandResult Run(const Delivery& job);

  // From now on Run starts no command: it returns at once, not spawned,
  // saying so ("not started: delayq work is stopping"). Checked under the
  // lock a spawn registers under, so after this returns every command that
  // will ever run is one Signal reaches: none slips through between its
  // handler taking the job and the spawn. Idempotent.
  void StopStarting();
  // Sends `sig` to the process group of every command running now.
  void Signal(int sig);

  // Runs `hook` in every Run just before it spawns (tests: to hold a run in
  // that window). Set before any Run.
  void SetBeforeSpawnForTesting(std::function<void()> hook) { before_spawn_ = std::move(hook); }
  // Waits up to timeout_ms for no command to be running; true if none is.
  bool WaitIdle(int64_t timeout_ms);

 private:
  CommandRunner(std::string path, std::vector<std::string> argv);
  // The environment of one run: the base one and the job's variables.
  std::vector<std::string> Environment(const Delivery& job) const;

  const std::string path_;               // the executable argv_[0] names
  const std::vector<std::string> argv_;  // as given
  std::vector<std::string> base_env_;    // environ at Create, less DELAYQ_JOB_*

  std::mutex mu_;
  std::condition_variable idle_;  // notified when running_ empties
  std::set<pid_t> running_;       // GUARDED_BY(mu_): commands running now
  bool stopped_ = false;          // GUARDED_BY(mu_): StopStarting was called
  std::function<void()> before_spawn_;
};

}  // namespace delayq::cli

#endif  // DELAYQ_CLI_COMMAND_RUNNER_H_
