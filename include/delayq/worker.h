// Worker: runs a handler per topic over any Queue, with threads, per-topic
// concurrency, retries with backoff, touches before the TTR runs out and a
// graceful stop. A handler is all an application writes:
//
//   auto queue = delayq::OpenQueue(options);             // any store, or a client
//   auto worker = delayq::Worker::Create(**queue, {.threads = 8});
//   (*worker)->Handle("orders.close", [](const delayq::Delivery& job) {
//     CloseOrder(job.body);                              // throw to retry later
//     return delayq::Outcome::Success();
//   });
//   (*worker)->Start();
//   ...
//   (*worker)->Stop(30'000);                             // drain for up to 30 s
//
// How it works. `threads` handler threads share the topics. The worker keeps
// at most one reserve open at a time (Queue::ReserveAsync, long-poll
// `reserve_wait_ms`) over the topics that have room, for as many jobs as it
// has idle slots (at most kMaxReserveCount), so an idle worker holds one
// waiting reserve and no thread polls or sleeps; jobs that become ready reach
// it at once. When a batch brings more jobs of one topic than its
// concurrency has room for, the extra jobs wait in the worker, reserved and
// touched like running ones, until a slot of their topic frees.
//
// Reading ahead. A worker whose handlers are fast also reserves ahead of its
// threads: as many jobs as it handled in the last 10 ms (at most
// kMaxReserveCount), topped up once half of them are gone, so the jobs
// waiting in it are about 10 ms of work at its pace. Slow handlers (under
// ~100 per second) read nothing ahead, and a worker holds no more jobs than
// it has threads. Jobs read ahead are touched like running ones and given
// back by Stop at once (Queue::Unreserve), as are all jobs not yet begun.
// A handler that suddenly turns slow can keep up to that many jobs waiting
// behind it while the worker's other threads are busy too; they keep their
// reservations (touched) and stay this worker's until a thread is free.
//
// Acknowledgments. What a handler returns is sent with Queue::Acknowledge,
// in batches: while one thread waits for the queue to take a batch (a
// round trip, over the network), the other threads go on with their next
// jobs and their outcomes go in the next batch; a slot is free for a new
// job as soon as its handler returns. A fast worker's thread may also let
// up to 16 outcomes wait while it starts the next job it holds, never
// longer than 1 ms. Stats().succeeded and the others count outcomes the
// queue accepted. An ack answered kUnavailable or kInternal (the queue out
// of reach, a connection lost with the answer, a store that failed) is not
// dropped: it is sent again after 100 ms, then 200 ms, ... (at most 5 s
// between tries) until the queue answers otherwise, and its job is touched
// meanwhile (it stays held), so an outage shorter than the drain or the
// worker's life costs no run of the handler. A resend is safe: an ack
// carries its receipt, so one the queue had applied (its answer lost) is
// answered kNotFound or kStaleReceipt, which ends it (counted in `errors`,
// as is each failed try). WorkerOptions::on_acknowledged hears the final
// answer. What the handler returns decides what happens to the job:
//
//   Outcome::Success()          Queue::Finish
//   Outcome::Retry(error)       Queue::Release after the topic's backoff
//                               (BackoffDelayMs), `error` as last_error
//   Outcome::RetryIn(ms, error) Queue::Release after `ms`
//   Outcome::Bury(reason)       Queue::Bury, `reason` as last_error
//   an exception                as Retry(e.what())
//
// A release of a job whose max_attempts are used up buries it instead: the
// queue does that (Queue::Release), with "max_attempts (n) used up" appended
// to its last_error; the worker does not count attempts itself. The delivery
// says beforehand which release will bury (Delivery::max_attempts,
// ReleaseBuries(job)): such a release accepted is counted in both `retried`
// and `exhausted`, and on_acknowledged can tell it the same way.
//
// Touches. A job that has been held for half its TTR (Delivery::ttr_ms) is
// touched (Queue::Touch with its receipt), and again every half TTR while the
// worker holds it, so a long handler keeps its reservation while a worker
// that died loses it after one TTR. Touches go on during Stop's drain.
// Every touch that fails is counted in `errors`. One answered
// kStaleReceipt or kNotFound (its TTR ran out first and another worker got
// it, or the job was deleted; kNotReserved alike) ends the job's touches:
// the handler's own outcome will then be refused too, and the job's other
// holder wins. Any other failure (kUnavailable: the queue out of reach) is
// retried 100 ms later, then after 200 ms, 400 ms, ... (at most half the
// TTR), but never later than half of what is left of the reservation,
// counted from the last touch accepted; past the TTR the retries go on
// until the queue answers.
//
// Time. Touch times and Stop's drain are measured on `options.clock`'s
// monotonic clock. With a ManualClock, they follow it: the worker's timer
// wakes when the clock moves (Clock::Subscribe), never on real time.
// Backoff delays are handed to the queue, which counts them on its own clock.
//
// Restarts. A worker keeps nothing of its own: jobs live in the queue. A
// worker that starts again, or another one, gets every job that fell due
// while none was running at once, in the queue's order (priority, run_at).
//
// Threads. Create, Handle, Start, Stop and the destructor are for one
// thread (the owner's); Stats may be called from any thread at any time.
// Handlers run on the worker's threads, several at once (up to `threads`,
// and a topic's `concurrency`), so a handler must be safe to run
// concurrently with itself and the others. A handler must not call Stop nor
// destroy the worker. The worker's own calls into the queue are made with
// no lock of the worker held, and never inside a reserve's callback (which
// may run on the queue's own thread: the network client's I/O thread).
#ifndef DELAYQ_WORKER_H_
#define DELAYQ_WORKER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "delayq/clock.h"
#include "delayq/job.h"
#include "delayq/queue.h"
#include "delayq/status.h"

namespace delayq {

// What a handler decided about its job.
class Outcome {
 public:
  enum class Kind : unsigned char { kSuccess, kRetry, kBury };

  // Done: the job is finished (gone).
  static Outcome Success() { return Outcome(Kind::kSuccess, -1, {}); }
  // Try again later, after the topic's backoff for this attempt; `error`
  // becomes the job's last_error.
  static Outcome Retry(std::string error = {}) {
    return Outcome(Kind::kRetry, -1, std::move(error));
  }
  // Try again after delay_ms (>= 0; a negative delay means the backoff).
  static Outcome RetryIn(int64_t delay_ms, std::string error = {}) {
    return Outcome(Kind::kRetry, delay_ms < 0 ? -1 : delay_ms, std::move(error));
  }
  // Give up: the job is buried (kept, with `reason` as its last_error, until
  // kicked).
  static Outcome Bury(std::string reason) { return Outcome(Kind::kBury, -1, std::move(reason)); }

  Kind kind() const { return kind_; }
  // kRetry: the delay asked for; -1: the topic's backoff.
  int64_t delay_ms() const { return delay_ms_; }
  // kRetry: the error text; kBury: the reason.
  const std::string& text() const { return text_; }

 private:
  Outcome(Kind kind, int64_t delay_ms, std::string text)
      : kind_(kind), delay_ms_(delay_ms), text_(std::move(text)) {}
  Kind kind_;
  int64_t delay_ms_;
  std::string text_;
};

// A handler gets the delivery (valid for the call) and says what to do.
using Handler = std::function<Outcome(const Delivery&)>;

// Exponential backoff for retries: the n-th attempt (Delivery::attempts,
// 1 on the first delivery) that asks for a retry waits
//   d = min(cap_ms, base_ms * factor^(n-1)),
// jittered uniformly to [d/2, d] but never below base_ms: so the first retry
// waits base_ms exactly, the next ones between half and all of d, and no
// retry waits less than base_ms nor more than cap_ms. A base_ms of 0 waits
// 0 at every attempt.
struct Backoff {
  int64_t base_ms = 1000;    // >= 0. Default: 1 s.
  double factor = 2.0;       // >= 1. Default: 2.
  int64_t cap_ms = 600'000;  // >= base_ms. Default: 10 min.
};

// The delay for attempt `attempts` (0 is read as 1) with `random` in [0, 1]
// (0: the shortest delay, 1: the longest; clamped). REQUIRES: a valid
// Backoff (Worker::Handle checks).
int64_t BackoffDelayMs(const Backoff& backoff, uint32_t attempts, double random);

struct TopicOptions {
  // Handlers of this topic running at once, at most. 0: up to the worker's
  // threads. Default: 0.
  uint32_t concurrency = 0;
  // Default: 1 s, x2, at most 10 min.
  Backoff backoff;
};

struct WorkerOptions {
  // Handler threads: how many handlers run at once, over all topics (the
  // jobs the worker holds, beyond those it reads ahead: see above).
  // 1..1024. Default: 4.
  uint32_t threads = 4;
  // How long one reserve waits for a job before the worker asks again
  // (Queue::ReserveAsync's wait_ms); only an idle worker waits. > 0.
  // Default: 30 s.
  int64_t reserve_wait_ms = 30'000;
  // After a reserve fails (the store unreachable), the worker asks again
  // after this, doubling up to 5 s while it keeps failing. > 0. A wait that
  // a server's shutdown ended (IsShuttingDown) is asked again at once.
  // Default: 100 ms.
  int64_t reserve_retry_ms = 100;
  // Measures touch intervals and Stop's drain. Default: SystemClock().
  std::shared_ptr<Clock> clock;
  // The backoff's jitter: returns a number in [0, 1] (clamped) for each
  // retry. Called from handler threads, one at a time. Default: uniform
  // random from a generator seeded per worker; tests set a constant.
  std::function<double()> random;
  // Called once per handler outcome with the queue's final answer to its
  // ack (see Acknowledgments above): ok; kNotFound or kStaleReceipt (the
  // job was gone or no longer this delivery's: finished by an earlier try
  // whose reply was lost, or its TTR ran out and another worker has it);
  // or, when Stop's drain ended first, the last transient error. `job` is
  // the delivery the handler got (valid for the call), `kind` what the
  // outcome asked (a kRelease answered ok for which ReleaseBuries(job) is
  // true left the job buried, its max_attempts used up). Not called for jobs Stop gave back. Runs
  // on a handler thread, the worker's timer thread or Stop's caller, with no lock of the worker
  // held, possibly on several threads at once; it must be quick (others' acks and touches wait
  // behind it) and must not call Stop nor destroy the worker. Default: none.
  std::function<void(const Delivery& job, Ack::Kind kind, const Status& answer)> on_acknowledged;
};

// Figures since Create, for Stats().
struct WorkerStats {
  uint64_t handled = 0;      // handlers that returned or threw
  uint64_t succeeded = 0;    // ... with Success, and the finish was accepted
  uint64_t retried = 0;      // ... with Retry/RetryIn or an exception, released
                             // (the queue buries those out of attempts)
  uint64_t exhausted = 0;    // ... of those, the ones the queue buried: their
                             // max_attempts were used up (ReleaseBuries)
  uint64_t buried = 0;       // ... with Bury, and buried
  uint64_t touched = 0;      // touches accepted
  uint64_t running = 0;      // handlers running now
  uint64_t held = 0;         // jobs reserved and not yet started
  uint64_t reserves = 0;     // ReserveAsync calls made
  uint64_t ack_batches = 0;  // Acknowledge calls made (each carries 1 or more outcomes)
  uint64_t given_back = 0;   // jobs given back by Stop (Unreserve or Release)
  // Queue calls the worker made that failed (a finish, release, bury, touch
  // with a receipt gone stale; a reserve, touch or ack while the store is
  // unreachable, each try; an ack given up at the end of Stop's drain),
  // and the last one's error.
  uint64_t errors = 0;
  std::string last_error;
};

class Worker {
 public:
  // A worker over `queue`, not started. `queue` must outlive the worker.
  // Errors: kInvalidArgument naming the option.
  static Result<std::unique_ptr<Worker>> Create(Queue& queue, WorkerOptions options = {});

  // Stop(0) if still running, then waits for every handler thread, even
  // those running a handler that Stop abandoned.
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Registers the handler of `topic`. REQUIRES: before Start. Errors:
  // kInvalidArgument for a bad topic name, an empty handler, bad options,
  // a topic that already has a handler, or a worker already started.
  Status Handle(std::string topic, Handler handler, TopicOptions options = {});

  // Starts the threads and the first reserve. Errors: kInvalidArgument
  // without handlers, or when started before; kInternal if a thread cannot
  // be started.
  Status Start();

  // Stops, in this order: no more reserves (the waiting one is cancelled);
  // jobs reserved but not started go back to ready at once, their attempt
  // not counted (Queue::Unreserve); running handlers may finish, and their
  // outcomes are applied, for up to drain_ms on the worker's clock, their
  // jobs touched meanwhile as before the Stop (so a drain longer than the
  // TTR keeps them this worker's); the jobs
  // of handlers still running then are released with delay 0 and the error
  // "worker stopped while the handler ran", so the next worker gets them at
  // once (counted as an attempt: the handler did run). Such a handler's
  // eventual outcome is ignored: it returns into a job no longer its own.
  // Acks that keep failing are sent again until the same deadline, then
  // given up (counted in `errors`; on_acknowledged gets the last error);
  // their jobs come back after their TTR. Every queue call that fails
  // during the drain is counted in Stats().errors and last_error.
  // Returns once nothing is held; handlers abandoned that way may still be
  // running (the destructor waits for them). A second Stop does nothing.
  // REQUIRES: not called from a handler.
  void Stop(int64_t drain_ms);

  WorkerStats Stats() const;

 private:
  class Impl;
  explicit Worker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace delayq

#endif  // DELAYQ_WORKER_H_
