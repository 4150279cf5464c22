// delayq inside a program: a queue kept on disk, one job added, then handed
// out when due and finished with its receipt. README.md shows this file whole.
//
//   build/bin/delayq-example-embedded [DATA_DIR]     (default: ./example-data)
#include <cstdio>
#include <cstring>

#include "delayq/queue.h"

int main(int argc, char** argv) {
  if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {  // one argument, a directory
    bool help = std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0;
    std::fprintf(stderr, "usage: %s [DATA_DIR]   (default: ./example-data)\n", argv[0]);
    return help && argc == 2 ? 0 : 2;
  }
  delayq::QueueOptions options;                  // {} alone: in memory, nothing kept
  options.store = delayq::StoreKind::kEmbedded;  // durable: a log in options.data_dir
  options.data_dir = argc == 2 ? argv[1] : "example-data";
  options.fsync = delayq::FsyncPolicy::kAlways;  // calls return once their change is on disk
  auto queue = delayq::OpenQueue(options);
  if (!queue.ok()) {
    std::fprintf(stderr, "open: %s\n", queue.status().ToString().c_str());
    return 1;
  }

  delayq::JobSpec spec;
  spec.topic = "orders.close";
  spec.id = "order-42";           // yours; empty: delayq makes one
  spec.delay_ms = 2 * 1000;       // due in 2 s; 30 * 60 * 1000 is half an hour
  spec.body = R"({"order":42})";  // any bytes
  auto added = (*queue)->Add(spec);
  if (added.ok()) {
    std::printf("added %s, due at %lld ms\n", added->id.c_str(),
                static_cast<long long>(added->run_at_ms));
  } else if (added.status().code() == delayq::Code::kExists) {
    std::printf("order-42 was kept from a run that stopped before finishing it\n");
  } else {
    std::fprintf(stderr, "add: %s\n", added.status().ToString().c_str());
    return 1;
  }

  // A worker: wait up to 5 s for a due job, then acknowledge it with its receipt.
  auto jobs = (*queue)->Reserve({{"orders.close"}, /*count=*/1, /*wait_ms=*/5000});
  if (!jobs.ok() || jobs->empty()) {
    std::fprintf(stderr, "reserve: nothing due within 5 s\n");
    return 1;
  }
  for (const delayq::Delivery& job : *jobs) {
    std::printf("reserved %s: %s (attempt %u)\n", job.id.c_str(), job.body.c_str(), job.attempts);
    // ... do the work within job.ttr_ms, or Touch() to extend it ...
    delayq::Status done = (*queue)->Finish(job.id, job.receipt);
    std::printf("finished %s: %s\n", job.id.c_str(), done.ToString().c_str());
    if (!done.ok()) return 1;
  }
  return 0;
}
