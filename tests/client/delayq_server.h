// DelayqServer: a real `delayq serve` process for the network client's
// tests, on a free loopback RESP port (HTTP on any port), with a fresh data
// directory removed when the object dies. Started by fork + exec of the
// binary the build names (DELAYQ_BINARY, a compile definition of the test
// target), killed by PID only, and by the kernel too if the test dies
// (PR_SET_PDEATHSIG). Waits poll with a deadline.
//
//   auto server = DelayqServer::Start({"--store", "memory"});
//   ASSERT_TRUE(server.ok()) << server.status().ToString();
//   options.servers = (*server)->address();
//   (*server)->Kill();  // kill -9
//
// Thread-safety: none; drive a server from the thread that started it.
#ifndef DELAYQ_TESTS_CLIENT_DELAYQ_SERVER_H_
#define DELAYQ_TESTS_CLIENT_DELAYQ_SERVER_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "delayq/status.h"

namespace delayq::testing_client {

// A loopback port nothing listens on now.
int FreePort();

class DelayqServer {
 public:
  // `delayq serve --resp-port P --http-port 0 --data-dir <fresh> <args>`,
  // once its RESP port accepts connections. kInternal with its log's tail
  // when it does not within 10 s.
  static Result<std::unique_ptr<DelayqServer>> Start(std::vector<std::string> args);
  // Stop(), and removes the data directory.
  ~DelayqServer();
  DelayqServer(const DelayqServer&) = delete;
  DelayqServer& operator=(const DelayqServer&) = delete;

  // SIGKILL, and waits for the process to go.
  void Kill();
  // SIGTERM, waits up to 10 s for it to exit, then SIGKILL.
  void Stop();

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  pid_t pid() const { return pid_; }
  std::string LogTail() const;

 private:
  DelayqServer() = default;
  Status Launch(const std::vector<std::string>& args);

  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;  // -1: not running
};

}  // namespace delayq::testing_client

#endif  // DELAYQ_TESTS_CLIENT_DELAYQ_SERVER_H_
