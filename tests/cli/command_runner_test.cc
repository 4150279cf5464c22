// CommandRunner with real commands (/bin/sh), real pipes and signals.
#include "cli/command_runner.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <future>
#include <string>
#include <thread>

namespace delayq::cli {
namespace {

std::string TempPath(const char* name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/delayq-runner-" +
         std::to_string(getpid()) + "-" + name;
}

bool Exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

// A run held between its handler taking the job and the spawn while
// `delayq work` stops: the stop must reach it. Before, the stop only sent
// SIGTERM to the commands running, so this one started afterwards, unseen.
TEST(CommandRunner, ARunNotYetSpawnedWhenTheStopBeginsStartsNothing) {
  const std::string marker = TempPath("started");
  unlink(marker.c_str());
  auto runner = CommandRunner::Create({"/bin/sh", "-c", "touch \"$0\"", marker});
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  std::promise<void> in_window;
  std::promise<void> go;
  std::shared_future<void> go_future = go.get_future().share();
  (*runner)->SetBeforeSpawnForTesting([&] {
    in_window.set_value();
    go_future.wait();
  });
  Delivery job;
  job.id = "j1";
  job.topic = "t";
  CommandResult result;
  std::thread run([&] { result = (*runner)->Run(job); });
  in_window.get_future().wait();
  // What `delayq work` does when its stop begins, then at the drain's end.
  (*runner)->StopStarting();
  (*runner)->Signal(SIGTERM);
  go.set_value();
  run.join();
  EXPECT_FALSE(result.spawned);
  EXPECT_EQ(result.error, "not started: delayq work is stopping");
  EXPECT_TRUE(result.stopping);  // delayq work releases it at once, no backoff
  EXPECT_FALSE(Exists(marker));
  EXPECT_TRUE((*runner)->WaitIdle(0));
  unlink(marker.c_str());
}

TEST(CommandRunner, RunsTheCommandBeforeAnyStop) {
  const std::string marker = TempPath("ran");
  unlink(marker.c_str());
  auto runner = CommandRunner::Create({"/bin/sh", "-c", "touch \"$0\"", marker});
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  Delivery job;
  job.id = "j1";
  job.topic = "t";
  CommandResult result = (*runner)->Run(job);
  EXPECT_TRUE(result.ok()) << result.Describe();
  EXPECT_TRUE(Exists(marker));
  unlink(marker.c_str());
}

}  // namespace
}  // namespace delayq::cli
