// Plugin mode: handlers on an embedded queue. The program adds a few jobs,
// and a Worker runs the handler of their topic on its threads: success
// finishes a job, a thrown exception retries it later with backoff, Bury
// sets it aside. Jobs kept from an earlier run that stopped early are done
// at once when it starts again.
//
//   build/bin/delayq-example-worker [DATA_DIR]     (default: ./example-worker-data)
#include "delayq/worker.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

#include "delayq/queue.h"

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
  delayq::TopicOptions topic;
  topic.concurrency = 2;        // of this topic, at most 2 at once
  topic.backoff.base_ms = 200;  // retries after 200 ms, then 200-400 ms, ...
  delayq::Status handled = (*worker)->Handle(
      "orders.close",
      [&](const delayq::Delivery& job) {
        if (job.body == "not json") return delayq::Outcome::Bury("cannot parse the order");
        if (job.body == R"({"order":3})" && job.attempts == 1) {
          throw std::runtime_error("payment service busy");  // retried with backoff
        }
        std::printf("closed %s (attempt %u)\n", job.id.c_str(), job.attempts);
        ++closed;
        return delayq::Outcome::Success();
      },
      topic);
  if (!handled.ok() || !(*worker)->Start().ok()) {
    std::fprintf(stderr, "handle: %s\n", handled.ToString().c_str());
    return 1;
  }

  for (int i = 1; i <= 3; ++i) {
    delayq::JobSpec spec;
    spec.topic = "orders.close";
    spec.id = "order-" + std::to_string(i);
    spec.delay_ms = 100 * i;
    spec.body = R"({"order":)" + std::to_string(i) + "}";
    auto added = (*queue)->Add(spec);
    if (!added.ok() && added.status().code() != delayq::Code::kExists) {
      std::fprintf(stderr, "add: %s\n", added.status().ToString().c_str());
      return 1;
    }
  }
  delayq::JobSpec bad;
  bad.topic = "orders.close";
  bad.id = "order-bad";
  bad.body = "not json";
  (void)(*queue)->Add(bad);  // kExists on a second run: it is buried from the first

  // Wait (at most 10 s) for the three orders, then drain for up to 5 s.
  for (int i = 0; i < 1000 && closed < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  (*worker)->Stop(5000);
  delayq::WorkerStats stats = (*worker)->Stats();
  std::printf("succeeded %llu, retried %llu, buried %llu\n",
              static_cast<unsigned long long>(stats.succeeded),
              static_cast<unsigned long long>(stats.retried),
              static_cast<unsigned long long>(stats.buried));
  return closed == 3 ? 0 : 1;
}
