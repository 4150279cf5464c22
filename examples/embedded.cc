// The smallest embedded use of delayq: open an in-process queue kept in a
// durable log, add a job due in 200 ms, wait for it with a blocking reserve,
// finish it.
//
//   build/bin/delayq-example-embedded [DATA_DIR]     (default: ./example-data)
#include <cstdio>

#include "delayq/queue.h"

int main(int argc, char** argv) {
  delayq::QueueOptions options;
  options.store = "embedded";  // {} alone: store "memory", nothing kept
  options.data_dir = argc > 1 ? argv[1] : "example-data";
  options.fsync = "always";  // each call returns once its change is on disk
  auto queue = delayq::OpenQueue(options);
  if (!queue.ok()) {
    std::fprintf(stderr, "open: %s\n", queue.status().ToString().c_str());
    return 1;
  }
  delayq::JobSpec spec;
  spec.topic = "orders.close";
  spec.id = "order-42";
  spec.delay_ms = 200;
  spec.body = R"({"order":42})";
  spec.replace = true;  // a run that died before finishing left it there: start it over
  auto added = (*queue)->Add(spec);
  if (!added.ok()) {
    std::fprintf(stderr, "add: %s\n", added.status().ToString().c_str());
    return 1;
  }
  std::printf("added %s, %s, due at %lld\n", added->id.c_str(),
              std::string(delayq::StateName(added->state)).c_str(),
              static_cast<long long>(added->run_at_ms));

  auto jobs = (*queue)->Reserve({{"orders.close"}, 1, /*wait_ms=*/5000});
  if (!jobs.ok() || jobs->empty()) {
    std::fprintf(stderr, "reserve: nothing arrived\n");
    return 1;
  }
  const delayq::Delivery& job = jobs->front();
  std::printf("reserved %s: %s (attempt %u)\n", job.id.c_str(), job.body.c_str(), job.attempts);
  delayq::Status done = (*queue)->Finish(job.id, job.receipt);
  std::printf("finish: %s\n", done.ToString().c_str());
  return done.ok() ? 0 : 1;
}
