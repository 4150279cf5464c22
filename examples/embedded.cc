// The smallest embedded use of delayq: open an in-process queue kept in a
// durable log, add a job due in 200 ms, wait for it with a blocking reserve,
// finish it.
//
//   build/bin/delayq-example-embedded [DATA_DIR]     (default: ./example-data)
#include <cstdio>
#include <cstring>
#include <string>

#include "delayq/queue.h"

namespace {

// A data directory is a path; anything starting with '-' is an option this
// program does not have (`--help` would otherwise become a directory).
int Usage(const char* program, const char* complaint) {
  if (complaint != nullptr) std::fprintf(stderr, "%s\n", complaint);
  std::fprintf(stderr, "usage: %s [DATA_DIR]   (default: ./example-data)\n", program);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && (std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0)) {
    Usage(argv[0], nullptr);
    return 0;
  }
  if (argc > 1 && argv[1][0] == '-') {
    std::string complaint = std::string("unknown option '") + argv[1] + "'";
    return Usage(argv[0], complaint.c_str());
  }
  if (argc > 2) {
    std::string complaint = std::string("unexpected argument '") + argv[2] + "'";
    return Usage(argv[0], complaint.c_str());
  }
  delayq::QueueOptions options;
  options.store = delayq::StoreKind::kEmbedded;  // {} alone: kMemory, nothing kept
  options.data_dir = argc > 1 ? argv[1] : "example-data";
  options.fsync = delayq::FsyncPolicy::kAlways;  // each call returns once its change is on disk
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
