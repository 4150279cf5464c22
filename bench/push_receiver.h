// delayq-bench receive: the receiving end of push delivery, as fast as it can
// be (one thread, epoll, keep-alive HTTP/1.1, a fixed answer), measuring what
// arrives: requests/s from the first to the last, and the lateness of each
// request (its arrival on the wall clock - the job's run_at_ms, read from
// the pushed JSON).
#ifndef DELAYQ_BENCH_PUSH_RECEIVER_H_
#define DELAYQ_BENCH_PUSH_RECEIVER_H_

#include <cstdint>

namespace delayq::bench {

struct ReceiveOptions {
  int port = 7790;
  uint64_t jobs = 0;     // end after this many requests (0: only --seconds)
  double seconds = 120;  // end after this long at most
  int status = 200;      // the answer to every request
  // Print "listening" on stderr once the port is open (a script waits for it).
  bool quiet = false;
};

int RunReceive(const ReceiveOptions& o);

}  // namespace delayq::bench

#endif  // DELAYQ_BENCH_PUSH_RECEIVER_H_
