// Service mode from C++: the handler of "order.close" served on a local
// HTTP port, registered with `delayq serve` as subscription "orders", and
// kept registered until SIGTERM or SIGINT. The servers POST due jobs here;
// nothing polls. Run one per instance: they share the jobs.
//
//   build/bin/delayq serve --store memory &              # or make run
//   build/bin/delayq-example-service-endpoint [LISTEN]   (default 127.0.0.1:0)
//   curl -X POST localhost:7700/v1/jobs -d '{"topic":"order.close","body":"{\"order\":1}"}'
//
// The servers' HTTP addresses come from $DELAYQ_HTTP (default
// 127.0.0.1:7700), their token from $DELAYQ_AUTH_TOKEN, and with
// $DELAYQ_SECRET ("whsec_...") every request must be signed with it.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "delayq/endpoint.h"

int main(int argc, char** argv) {
  if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
    bool help = std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0;
    std::fprintf(stderr, "usage: %s [LISTEN_HOST:PORT]   (default 127.0.0.1:0, a free port)\n",
                 argv[0]);
    return help && argc == 2 ? 0 : 2;
  }
  // SIGTERM and SIGINT are taken by sigwait below: blocked here, before the
  // endpoint starts its threads, so that they all inherit the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  delayq::EndpointOptions options;
  options.name = "orders";  // every instance of this service registers under it
  if (argc == 2) options.listen = argv[1];
  if (const char* token = std::getenv("DELAYQ_AUTH_TOKEN"); token != nullptr) {
    options.token = token;
  }
  if (const char* secret = std::getenv("DELAYQ_SECRET"); secret != nullptr && *secret != '\0') {
    options.secrets = {secret};
  }
  options.threads = 4;  // requests handled at once; the servers send no more
  auto endpoint = delayq::Endpoint::Create(options);
  if (!endpoint.ok()) {
    std::fprintf(stderr, "endpoint: %s\n", endpoint.status().ToString().c_str());
    return 1;
  }
  delayq::Status handled = (*endpoint)->Handle("order.close", [](const delayq::Delivery& job) {
    if (job.body == "not json") return delayq::Outcome::Bury("cannot parse the order");
    if (job.body.find("\"busy\"") != std::string::npos && job.attempts == 1) {
      throw std::runtime_error("payment service busy");  // the server retries it
    }
    std::printf("closed %s (attempt %u): %s\n", job.id.c_str(), job.attempts, job.body.c_str());
    std::fflush(stdout);
    return delayq::Outcome::Success();
  });
  if (!handled.ok()) {
    std::fprintf(stderr, "handle: %s\n", handled.ToString().c_str());
    return 1;
  }
  if (delayq::Status started = (*endpoint)->Start(); !started.ok()) {
    std::fprintf(stderr, "start: %s\n", started.ToString().c_str());
    return 1;
  }
  std::printf("serving orders at %s\n", (*endpoint)->url().c_str());
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  (*endpoint)->Stop(10'000);  // deregister, then let running handlers finish
  delayq::EndpointStats stats = (*endpoint)->Stats();
  std::printf("stopped: succeeded %llu, retried %llu, buried %llu\n",
              static_cast<unsigned long long>(stats.succeeded),
              static_cast<unsigned long long>(stats.retried),
              static_cast<unsigned long long>(stats.buried));
  return 0;
}
