// `delayq work`: the CLI of it (arguments, checks), and its life: open the
// network client, check that a server answers, start a delayq::Worker whose
// handler for every topic is one CommandRunner::Run, then wait for SIGTERM
// or SIGINT (blocked in every thread, taken with sigtimedwait) and stop: no
// command starts any more (CommandRunner::StopStarting), Worker::Stop(drain),
// then the commands still running (their jobs already released by Stop) are
// sent SIGTERM, and SIGKILL after kKillGraceMs.
#include "cli/work_command.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "cli/command_runner.h"
#include "cli/failure.h"
#include "common/duration.h"
#include "common/log.h"
#include "delayq/queue.h"
#include "delayq/worker.h"

namespace delayq::cli {
namespace {

// How long the commands a stop abandoned get between SIGTERM and SIGKILL.
constexpr int64_t kKillGraceMs = 2000;
// How often a running `delayq work` looks at the worker's errors (a server
// gone, a finish refused) to log them.
constexpr int kReportEveryMs = 5000;

struct WorkInvocation {
  std::string topics;                // "a,b"
  std::vector<std::string> command;  // after `--`
  uint32_t concurrency = 1;
  std::string drain = "30s";
  std::string backoff = "1s";
  std::string log_level = "info";
};

Status SplitTopics(const std::string& text, std::vector<std::string>* out) {
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string topic = text.substr(start, comma - start);
    start = comma + 1;
    if (Status s = ValidateTopic(topic); !s.ok()) {
      return InvalidArgument("topic '" + topic + "': " + s.message());
    }
    for (const std::string& t : *out) {
      if (t == topic) return InvalidArgument("topic '" + topic + "' is named twice");
    }
    out->push_back(std::move(topic));
  }
  return Status::Ok();
}

Result<int64_t> Duration(const std::string& text, const char* name, int64_t least) {
  Result<int64_t> ms = ParseDurationMs(text, name);
  if (!ms.ok()) return ms.status();
  if (*ms < least) {
    return InvalidArgument(std::string(name) + ": '" + text + "' is shorter than the least " +
                           "allowed, " + FormatDurationMs(least));
  }
  return ms;
}

std::string Joined(const std::vector<std::string>& words, const char* sep) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : sep) + w;
  return out;
}

// What the command's result makes of the job, logged one line per job;
// what became of it is logged once the server has answered (Acknowledged).
Outcome Decide(const Delivery& job, const CommandResult& r) {
  if (r.ok()) {
    Log(LogLevel::kInfo, "job %s (%s, attempt %u): exit 0 in %lld ms", job.id.c_str(),
        job.topic.c_str(), job.attempts, static_cast<long long>(r.ms));
    return Outcome::Success();
  }
  std::string why = r.Describe();
  Log(r.spawned ? LogLevel::kInfo : LogLevel::kWarn, "job %s (%s, attempt %u): %s in %lld ms",
      job.id.c_str(), job.topic.c_str(), job.attempts,
      r.spawned ? (r.exited ? ("exit " + std::to_string(r.code)).c_str() : "killed") : why.c_str(),
      static_cast<long long>(r.ms));
  // Stopped before it started: back at once, for another worker (the
  // attempt counts, as a release does; there is no outcome "give back").
  if (r.stopping) return Outcome::RetryIn(0, std::move(why));
  return Outcome::Retry(std::move(why));
}

// The server's answer to a job's outcome (WorkerOptions::on_acknowledged):
// "finished" only once the server took the finish, and what the server did
// with a release: a job whose max_attempts this delivery used up is buried,
// not retried (ReleaseBuries: the queue's rule, Queue::Release).
void Acknowledged(const Delivery& job, Ack::Kind kind, const Status& answer) {
  const char* what = kind == Ack::Kind::kFinish    ? "finished"
                     : kind == Ack::Kind::kRelease ? "released"
                                                   : "buried";
  if (answer.ok() && kind == Ack::Kind::kRelease && ReleaseBuries(job)) {
    Log(LogLevel::kInfo, "job %s (%s, attempt %u): buried (max_attempts %u used up)",
        job.id.c_str(), job.topic.c_str(), job.attempts, job.max_attempts);
  } else if (answer.ok()) {
    Log(LogLevel::kInfo, "job %s (%s, attempt %u): %s", job.id.c_str(), job.topic.c_str(),
        job.attempts, what);
  } else {
    Log(LogLevel::kWarn, "job %s (%s, attempt %u): not %s: %s", job.id.c_str(), job.topic.c_str(),
        job.attempts, what, answer.ToString().c_str());
  }
}

// `delayq work --help`'s usage line as people type it (CLI11 would list the
// positionals by name: "topics [command...]", without the `--`).
class WorkUsage final : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* /*app*/, std::string name) const override {
    return get_label("Usage") + ": " + name + " TOPIC[,TOPIC...] [OPTIONS] -- COMMAND [ARGS...]\n";
  }
};

class WorkCommandImpl final : public WorkCommand {
 public:
  WorkCommandImpl(CLI::App* app, const char* footer) {
    sub_ = app->add_subcommand(
        "work", "run a command once per job: the body on its stdin; exit 0 finishes the job");
    sub_->footer(
        std::string("The command gets DELAYQ_JOB_ID, DELAYQ_TOPIC, DELAYQ_ATTEMPTS (1 on the "
                    "first delivery)\nand DELAYQ_RECEIPT; its stdout is delayq work's. Any "
                    "other exit, or a signal,\nreleases the job after the backoff, with the "
                    "tail of its stderr as last_error.\nA command running past half its TTR "
                    "is touched. SIGTERM/SIGINT: no more jobs;\nrunning commands may finish "
                    "within --drain, then their jobs are released. A second\nSIGTERM/SIGINT "
                    "ends the drain: running commands get SIGTERM at once.\n\n") +
        footer);
    sub_->fallthrough();
    sub_->formatter(std::make_shared<WorkUsage>());
    sub_->add_option("topics", inv_.topics, "the topics, comma-separated: a,b")->required();
    sub_->add_option("command", inv_.command, "after --: the command and its arguments");
    sub_->add_option("--concurrency", inv_.concurrency, "commands running at once, at most")
        ->capture_default_str()
        ->check(CLI::Range(1, 1024));
    sub_->add_option("--drain", inv_.drain,
                     "on SIGTERM/SIGINT, how long running commands may take to finish")
        ->capture_default_str();
    sub_->add_option("--backoff", inv_.backoff,
                     "the first retry's delay; doubled (jittered) each attempt up to 10m")
        ->capture_default_str();
    sub_->add_option("--log-level", inv_.log_level,
                     "info: a line per job on stderr; warn: failures to run or reach servers")
        ->capture_default_str()
        ->check(CLI::IsMember({"debug", "info", "warn", "error"}));
  }

  bool Parsed() const override { return sub_->parsed(); }

  int Run(const QueueOptions& options) override {
    auto usage = [](const std::string& m) {
      std::string line = "delayq work: " + m + "\n";
      std::fwrite(line.data(), 1, line.size(), stderr);
      return kExitUsage;
    };
    // CLI11 keeps the `--` it saw among what it did not place.
    const std::vector<std::string> rest = sub_->remaining();
    const bool separated = std::find(rest.begin(), rest.end(), "--") != rest.end();
    if (inv_.command.empty() || !separated) {
      return usage(
          "the command goes after '--': delayq work " + inv_.topics + " -- COMMAND [ARGS...]" +
          (inv_.command.empty() ? "" : " (got '" + Joined(inv_.command, " ") + "' before '--')"));
    }
    std::vector<std::string> topics;
    if (Status s = SplitTopics(inv_.topics, &topics); !s.ok()) return usage(s.message());
    Result<int64_t> drain_ms = Duration(inv_.drain, "--drain", 0);
    if (!drain_ms.ok()) return usage(drain_ms.status().message());
    Result<int64_t> backoff_ms = Duration(inv_.backoff, "--backoff", 1);
    if (!backoff_ms.ok()) return usage(backoff_ms.status().message());
    Result<std::unique_ptr<CommandRunner>> runner = CommandRunner::Create(inv_.command);
    if (!runner.ok()) return usage(runner.status().message());
    if (auto level = ParseLogLevel(inv_.log_level)) SetLogLevel(*level);

    // Blocked before any thread starts, so every thread inherits the mask
    // and the signals wait for sigtimedwait below. Commands get none of it.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    signal(SIGPIPE, SIG_IGN);  // a command that does not read its body

    Result<std::unique_ptr<Queue>> queue = OpenQueue(options);
    if (!queue.ok()) return ReportFailure(queue.status(), options.servers, "work");
    // Nothing is reserved before a server is known to answer (and to
    // accept the token): a wrong --server is an error now, not a silent retry.
    if (Result<QueueStats> st = (*queue)->Stats(); !st.ok()) {
      return ReportFailure(st.status(), options.servers, "work");
    }
    WorkerOptions wo;
    wo.threads = inv_.concurrency;
    wo.on_acknowledged = Acknowledged;
    Result<std::unique_ptr<Worker>> worker = Worker::Create(**queue, wo);
    if (!worker.ok()) return usage(worker.status().message());
    TopicOptions to;
    to.backoff.base_ms = *backoff_ms;
    to.backoff.cap_ms = std::max(to.backoff.cap_ms, *backoff_ms);
    CommandRunner* run = runner->get();
    for (const std::string& topic : topics) {
      Status s = (*worker)->Handle(
          topic, [run](const Delivery& job) { return Decide(job, run->Run(job)); }, to);
      if (!s.ok()) return usage(s.message());
    }
    if (Status s = (*worker)->Start(); !s.ok()) return ReportFailure(s, options.servers, "work");
    Log(LogLevel::kInfo, "delayq work: %s from %s, %u at a time: %s", Joined(topics, ",").c_str(),
        options.servers.c_str(), inv_.concurrency, Joined(inv_.command, " ").c_str());

    uint64_t reported = 0;  // the worker's errors logged so far
    const int sig = AwaitStop(**worker, stop_signals, &reported);
    // A handler that took its job but has not spawned yet starts nothing
    // now: its job is released, and every command that runs is one the
    // signals below reach.
    (*runner)->StopStarting();
    Log(LogLevel::kInfo, "delayq work: SIG%s: no more jobs; waiting up to %s for %llu running",
        sigabbrev_np(sig), FormatDurationMs(*drain_ms).c_str(),
        static_cast<unsigned long long>((*worker)->Stats().running));
    StopDraining(**worker, **runner, *drain_ms, stop_signals, &reported);
    // What still runs was abandoned by Stop, its job released: end it, so
    // the worker's threads (joined by its destructor) return.
    if (!(*runner)->WaitIdle(0)) {
      (*runner)->Signal(SIGTERM);
      if (!(*runner)->WaitIdle(kKillGraceMs)) (*runner)->Signal(SIGKILL);
    }
    ReportErrors(**worker, &reported);
    WorkerStats ws = (*worker)->Stats();
    worker->reset();
    // Released jobs the server buried (max_attempts used up) are not
    // "for a retry": they wait for a kick.
    Log(LogLevel::kInfo,
        "delayq work: stopped: %llu finished, %llu released for a retry, %llu buried "
        "(max_attempts used up), %llu given back",
        static_cast<unsigned long long>(ws.succeeded),
        static_cast<unsigned long long>(ws.retried - ws.exhausted),
        static_cast<unsigned long long>(ws.exhausted),
        static_cast<unsigned long long>(ws.given_back));
    return kExitOk;
  }

 private:
  // Worker::Stop(drain_ms), on a thread of its own so that a second SIGTERM
  // or SIGINT meanwhile can end the drain: the running commands get SIGTERM
  // then, and their handlers' outcomes (a retry, "killed by SIGTERM") end it.
  // Meanwhile, and once Stop returns, logs the worker's new errors: those of
  // a drain matter most (a finish the server refused or could not take).
  static void StopDraining(Worker& worker, CommandRunner& runner, int64_t drain_ms,
                           const sigset_t& stop_signals, uint64_t* reported) {
    std::atomic<bool> stopped{false};
    std::thread stopper([&] {
      worker.Stop(drain_ms);
      stopped = true;
    });
    bool cut = false;
    while (!stopped) {
      timespec tick{0, 50'000'000};  // how soon the end of Stop is seen
      const int sig = sigtimedwait(&stop_signals, nullptr, &tick);
      if (sig > 0 && !cut) {
        cut = true;
        Log(LogLevel::kInfo,
            "delayq work: SIG%s again: the drain ends; running commands get SIGTERM",
            sigabbrev_np(sig));
        runner.Signal(SIGTERM);
      }
      ReportErrors(worker, reported);
    }
    stopper.join();
    ReportErrors(worker, reported);
  }

  // Waits for SIGTERM or SIGINT; meanwhile logs each new error of the worker
  // (a server gone, a finish refused as stale), once.
  static int AwaitStop(const Worker& worker, const sigset_t& stop_signals, uint64_t* reported) {
    for (;;) {
      timespec every{kReportEveryMs / 1000, 0};
      int sig = sigtimedwait(&stop_signals, nullptr, &every);
      if (sig > 0) return sig;
      ReportErrors(worker, reported);
    }
  }

  // Logs the errors the worker counted since *reported, once.
  static void ReportErrors(const Worker& worker, uint64_t* reported) {
    WorkerStats ws = worker.Stats();
    if (ws.errors <= *reported) return;
    if (EndedByShutdown(ws.last_error)) {
      // Not a fault to chase: the worker reserves again at once, from the
      // next server of --server that answers, or this one once restarted.
      Log(LogLevel::kWarn,
          "delayq work: the server is shutting down and ended the wait; reserving again (from "
          "another server if --server names several)");
      *reported = ws.errors;
      return;
    }
    Log(LogLevel::kWarn, "delayq work: %llu error(s); the last: %s",
        static_cast<unsigned long long>(ws.errors - *reported), ws.last_error.c_str());
    *reported = ws.errors;
  }

  CLI::App* sub_ = nullptr;
  WorkInvocation inv_;
};

}  // namespace

std::unique_ptr<WorkCommand> AddWorkCommand(CLI::App* app, const char* footer) {
  return std::make_unique<WorkCommandImpl>(app, footer);
}

}  // namespace delayq::cli
