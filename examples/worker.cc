// Plugin mode: handlers on an embedded queue. The program adds a few jobs,
// and a Worker runs the handler of their topic on its threads: success
// finishes a job, a thrown exception retries it later with backoff, Bury
// sets it aside (the handler and the jobs: order_handlers.h, shared with
// remote_worker.cc). Jobs kept from an earlier run that stopped early are
// done at once when it starts again.
//
//   build/bin/delayq-example-worker [DATA_DIR]     (default: ./example-worker-data)
#include "delayq/worker.h"

#include <atomic>
#include <cstdio>
#include <cstring>

#include "delayq/queue.h"
#include "order_handlers.h"

int main(int argc, char** argv) {
  if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {  // one argument, a directory
    bool help = std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0;
    std::fprintf(stderr, "usage: %s [DATA_DIR]   (default: ./example-worker-data)\n", argv[0]);
    return help && argc == 2 ? 0 : 2;
  }
  delayq::QueueOptions options;
  options.store = delayq::StoreKind::kEmbedded;  // durable: a log in options.data_dir
  options.data_dir = argc == 2 ? argv[1] : "example-worker-data";
  auto queue = delayq::OpenQueue(options);
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
    std::fprintf(stderr, "add: %s\n", added.ToString().c_str());
    return 1;
  }
  return orders::WaitStopAndReport(**worker, closed);
}
