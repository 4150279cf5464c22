// One run: two pipes (stdin, stderr; O_CLOEXEC, so commands spawned by other
// threads at the same moment never hold them), posix_spawn with every
// descriptor above 2 closed in the child, then one poll(2)
// loop that writes the body, reads stderr and watches a pidfd for the exit,
// so a body larger than a pipe and a command that writes much to stderr
// before reading stdin cannot deadlock each other. The loop ends when the
// command exits (not when stderr closes: a daemon the command started may
// keep it open).
#include "cli/command_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <utility>

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX, in no header

namespace delayq::cli {
namespace {

constexpr const char* kJobVariables[] = {
    "DELAYQ_JOB_ID=", "DELAYQ_TOPIC=", "DELAYQ_ATTEMPTS=", "DELAYQ_RECEIPT="};

bool IsExecutable(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

// The file `name` runs, as execvp would find it.
Result<std::string> FindCommand(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    if (IsExecutable(name)) return name;
    return InvalidArgument("command '" + name + "': not an executable file");
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr && *path != '\0' ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t colon = dirs.find(':', start);
    if (colon == std::string::npos) colon = dirs.size();
    std::string dir = dirs.substr(start, colon - start);
    start = colon + 1;
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (IsExecutable(candidate)) return candidate;
  }
  return InvalidArgument("command '" + name + "': not found in $PATH");
}

void CloseFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

// Keeps the last `limit` bytes, starting on a UTF-8 character, without
// trailing newlines.
std::string Tail(std::string s, size_t limit) {
  if (s.size() > limit) {
    size_t cut = s.size() - limit;
    while (cut < s.size() && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) ++cut;
    s.erase(0, cut);
  }
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

// Feeds `body` to `in` and collects `err` until the process behind `pidfd`
// exits (or, without a pidfd, until both pipes are closed). Owns and closes
// both fds.
std::string Exchange(std::string_view body, int in, int err, int pidfd) {
  fcntl(in, F_SETFL, fcntl(in, F_GETFL) | O_NONBLOCK);
  fcntl(err, F_SETFL, fcntl(err, F_GETFL) | O_NONBLOCK);
  if (body.empty()) CloseFd(&in);
  std::string tail;  // bounded: trimmed to the limit whenever it doubles
  size_t written = 0;
  bool exited = false;
  char buf[16 * 1024];
  auto drain = [&] {  // reads what err holds now; false at EOF or error
    for (;;) {
      ssize_t n = read(err, buf, sizeof buf);
      if (n > 0) {
        tail.append(buf, static_cast<size_t>(n));
        if (tail.size() > 2 * CommandRunner::kStderrTailBytes) {
          tail.erase(0, tail.size() - CommandRunner::kStderrTailBytes);
        }
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
  };
  // stdin is fed until written whole or refused (EPIPE), whatever became of
  // stderr: a command may close its stderr and still read its body. Without
  // a pidfd, the exit is seen as both pipes closing.
  while (pidfd >= 0 ? !exited : (err >= 0 || in >= 0)) {
    pollfd fds[3];
    nfds_t n = 0;
    if (err >= 0) fds[n++] = {err, POLLIN, 0};
    if (pidfd >= 0) fds[n++] = {pidfd, POLLIN, 0};
    if (in >= 0) fds[n++] = {in, POLLOUT, 0};
    if (poll(fds, n, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (nfds_t i = 0; i < n; ++i) {
      if (fds[i].revents == 0) continue;
      if (fds[i].fd == err && !drain()) CloseFd(&err);
      if (fds[i].fd == pidfd) exited = true;
      if (fds[i].fd == in) {
        ssize_t w = write(in, body.data() + written, body.size() - written);
        if (w > 0) written += static_cast<size_t>(w);
        // EPIPE: the command stopped reading; what it did not read is its business.
        if ((w < 0 && errno != EAGAIN && errno != EINTR) || written == body.size()) CloseFd(&in);
      }
    }
  }
  if (err >= 0) drain();  // what it wrote just before exiting
  CloseFd(&in);
  CloseFd(&err);
  return tail;
}

}  // namespace

std::string CommandResult::Describe() const {
  std::string head;
  if (!spawned) return error;
  if (exited) {
    head = "exit " + std::to_string(code);
  } else {
    const char* abbrev = sigabbrev_np(signal);
    head = "killed by signal " + std::to_string(signal);
    if (abbrev != nullptr) head += " (SIG" + std::string(abbrev) + ")";
  }
  if (stderr_tail.empty()) return head;
  head += ": ";
  return head +
         Tail(stderr_tail, kLastErrorBytes > head.size() ? kLastErrorBytes - head.size() : 0);
}

Result<std::unique_ptr<CommandRunner>> CommandRunner::Create(std::vector<std::string> argv) {
  if (argv.empty() || argv[0].empty()) return InvalidArgument("no command to run");
  Result<std::string> path = FindCommand(argv[0]);
  if (!path.ok()) return path.status();
  return std::unique_ptr<CommandRunner>(new CommandRunner(std::move(*path), std::move(argv)));
}

CommandRunner::CommandRunner(std::string path, std::vector<std::string> argv)
    : path_(std::move(path)), argv_(std::move(argv)) {
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view var = *e;
    bool ours = false;
    for (const char* prefix : kJobVariables) ours = ours || var.starts_with(prefix);
    if (!ours) base_env_.emplace_back(var);
  }
}

std::vector<std::string> CommandRunner::Environment(const Delivery& job) const {
  std::vector<std::string> env = base_env_;
  env.push_back(std::string(kJobVariables[0]) + job.id);
  env.push_back(std::string(kJobVariables[1]) + job.topic);
  env.push_back(std::string(kJobVariables[2]) + std::to_string(job.attempts));
  env.push_back(std::string(kJobVariables[3]) + job.receipt);
  return env;
}

CommandResult CommandRunner::Run(const Delivery& job) {
  CommandResult result;
  const auto start = std::chrono::steady_clock::now();
  int in[2] = {-1, -1};
  int err[2] = {-1, -1};
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    result.error = "cannot run '" + argv_[0] + "': pipe: " + std::strerror(errno);
    for (int* fd : {&in[0], &in[1], &err[0], &err[1]}) CloseFd(fd);
    return result;
  }
  std::vector<std::string> env = Environment(job);
  // posix_spawn's arrays: pointers into argv_ and env, null-terminated.
  std::vector<char*> argvp;
  std::vector<char*> envp;
  argvp.reserve(argv_.size() + 1);
  envp.reserve(env.size() + 1);
  for (const std::string& a : argv_) argvp.push_back(const_cast<char*>(a.c_str()));
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  argvp.push_back(nullptr);
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
  // Nothing but 0, 1 and 2 reaches the command, whatever this process holds
  // without FD_CLOEXEC: a socket a library opened without it (hiredis), or
  // one another thread opened a moment ago. (glibc >= 2.34: close_range.)
  posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigset_t all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  pid_t pid = -1;
  int rc;
  bool stopped;
  if (before_spawn_) before_spawn_();
  {
    // Registered under the lock it was spawned under, and not spawned once
    // StopStarting was called, so Signal never misses a command that runs.
    std::lock_guard lock(mu_);
    stopped = stopped_;
    rc = stopped ? 0 : posix_spawn(&pid, path_.c_str(), &actions, &attr, argvp.data(), envp.data());
    if (rc == 0 && !stopped) running_.insert(pid);
  }
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  CloseFd(&in[0]);
  CloseFd(&err[1]);
  if (stopped || rc != 0) {
    result.stopping = stopped;
    result.error = stopped ? "not started: delayq work is stopping"
                           : "cannot run '" + argv_[0] + "': " + std::strerror(rc);
    CloseFd(&in[1]);
    CloseFd(&err[0]);
    return result;
  }
  result.spawned = true;
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  result.stderr_tail = Tail(Exchange(job.body, in[1], err[0], pidfd), kStderrTailBytes);
  if (pidfd >= 0) close(pidfd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  {
    std::lock_guard lock(mu_);
    running_.erase(pid);
    if (running_.empty()) idle_.notify_all();
  }
  result.exited = WIFEXITED(status);
  result.code = result.exited ? WEXITSTATUS(status) : 0;
  result.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  result.ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::steady_clock::now() - start)
                  .count();
  return result;
}

void CommandRunner::StopStarting() {
  std::lock_guard lock(mu_);
  stopped_ = true;
}

void CommandRunner::Signal(int sig) {
  std::lock_guard lock(mu_);
  for (pid_t pid : running_) kill(-pid, sig);
}

bool CommandRunner::WaitIdle(int64_t timeout_ms) {
  std::unique_lock lock(mu_);
  return idle_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                        [&] { return running_.empty(); });
}

}  // namespace delayq::cli
