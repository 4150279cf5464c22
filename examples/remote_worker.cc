// The handlers of worker.cc (order_handlers.h) against `delayq serve`: the
// same program with the queue's store "remote", so the jobs live in the
// servers and any number of such workers, on any machines, share them.
// Several servers (a comma-separated list) are for failover: they must
// serve the same jobs (`--store redis`, one Redis behind them all).
//
//   build/bin/delayq serve --store memory &           # or make run
//   build/bin/delayq-example-remote-worker [SERVERS]  (default: $DELAYQ_SERVER,
//                                                      else 127.0.0.1:7701)
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "delayq/queue.h"
#include "delayq/worker.h"
#include "order_handlers.h"

int main(int argc, char** argv) {
  if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {  // one argument, the servers
    bool help = std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0;
    std::fprintf(stderr,
                 "usage: %s [HOST:PORT[,HOST:PORT...]]   (default: $DELAYQ_SERVER, "
                 "else 127.0.0.1:7701)\n",
                 argv[0]);
    return help && argc == 2 ? 0 : 2;
  }
  const char* env = std::getenv("DELAYQ_SERVER");
  delayq::QueueOptions options;
  options.store = delayq::StoreKind::kRemote;  // the network client: jobs live in the servers
  options.servers = argc == 2 ? argv[1] : env != nullptr && *env != '\0' ? env : "127.0.0.1:7701";
  auto queue = delayq::OpenQueue(options);  // connects on the first call
  if (!queue.ok()) {
    std::fprintf(stderr, "open: %s\n", queue.status().ToString().c_str());
    return 1;
  }

  delayq::WorkerOptions worker_options;
  worker_options.threads = 4;  // handlers running at once
  auto worker = delayq::Worker::Create(**queue, worker_options);
  if (!worker.ok()) {
    std::fprintf(stderr, "worker: %s\n", worker.status().ToString().c_str());
    return 1;
  }
  std::atomic<int> closed{0};
  delayq::Status handled = orders::HandleOrders(**worker, &closed);
  if (!handled.ok() || !(*worker)->Start().ok()) {
    std::fprintf(stderr, "handle: %s\n", handled.ToString().c_str());
    return 1;
  }
  if (delayq::Status added = orders::AddOrders(**queue); !added.ok()) {
    std::fprintf(stderr, "add: %s\n", added.ToString().c_str());  // e.g. no server answered
    return 1;
  }
  return orders::WaitStopAndReport(**worker, closed);
}
