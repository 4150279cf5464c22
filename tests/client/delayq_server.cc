#include "client/delayq_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "testing/poll.h"

namespace delayq::testing_client {
namespace {

bool Accepts(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

// Whether `pid` has exited (reaped here).
bool Exited(pid_t pid) {
  int status = 0;
  return waitpid(pid, &status, WNOHANG) != 0;
}

}  // namespace

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

Result<std::unique_ptr<DelayqServer>> DelayqServer::Start(std::vector<std::string> args) {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/delayq-client-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) return Internal("mkdtemp " + dir + " failed");
  std::unique_ptr<DelayqServer> server(new DelayqServer());
  server->dir_ = dir;
  Status last;
  for (int attempt = 0; attempt < 5; ++attempt) {
    last = server->Launch(args);
    if (last.ok()) return server;  // else most likely the port was taken meanwhile
  }
  return last;
}

Status DelayqServer::Launch(const std::vector<std::string>& extra) {
  port_ = FreePort();
  std::vector<std::string> args = {DELAYQ_BINARY, "serve", "--resp-port", std::to_string(port_),
                                   "--http-port", "0",     "--data-dir",  dir_ + "/data"};
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string log = dir_ + "/delayq.log";
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return Internal("fork failed");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    int in = open("/dev/null", O_RDONLY);
    int out = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (in >= 0) dup2(in, 0);
    if (out >= 0) {
      dup2(out, 1);
      dup2(out, 2);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  pid_ = pid;
  bool exited = false;
  bool up = PollUntil(
      [&] {
        exited = Exited(pid_);
        return exited || Accepts(port_);
      },
      std::chrono::seconds(10), std::chrono::milliseconds(5));
  if (up && !exited) return Status::Ok();
  if (!exited) Kill();
  pid_ = -1;
  return Internal("delayq serve did not start on port " + std::to_string(port_) + ": " + LogTail());
}

DelayqServer::~DelayqServer() {
  Stop();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

void DelayqServer::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

void DelayqServer::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  const pid_t pid = pid_;
  if (!PollUntil([&] { return Exited(pid); }, std::chrono::seconds(10),
                 std::chrono::milliseconds(5))) {
    Kill();
  }
  pid_ = -1;
}

std::string DelayqServer::LogTail() const {
  std::ifstream in(dir_ + "/delayq.log");
  std::stringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  return text.size() > 2000 ? text.substr(text.size() - 2000) : text;
}

}  // namespace delayq::testing_client
