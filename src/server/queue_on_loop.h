// QueueOnLoop: how a server puts its queue on its event loop — the same for
// `delayq serve` and the in-process front-end tests.
//
// The queue's timers run on the loop: its descriptors (QueueDriver::PollFds)
// are polled there, urgent, and a busy loop asks MaybeDue between
// connections. For a store with a log, replies wait for their change to be
// durable: each turn ends with one write of the log (Flush; with fsync
// always and nothing else to do, FlushIdle runs the fdatasync right there),
// then every front end's held replies that it covered are released.
//
// Thread-safety: the loop thread's, like the front ends.
#ifndef DELAYQ_SERVER_QUEUE_ON_LOOP_H_
#define DELAYQ_SERVER_QUEUE_ON_LOOP_H_

#include <memory>
#include <vector>

#include "delayq/status.h"
#include "net/event_loop.h"
#include "net/tcp_server.h"
#include "server/front_end.h"
#include "serving/serving_queue.h"

namespace delayq::server {

class QueueOnLoop {
 public:
  // Polls `queue`'s timers on `loop` and runs what is due once. A queue
  // without a driver (not opened with caller_loop) runs its own timers:
  // nothing to do. Errors: a descriptor the loop cannot watch.
  static Result<std::unique_ptr<QueueOnLoop>> Attach(net::EventLoop* loop, ServingQueue* queue);
  ~QueueOnLoop();  // Detach()
  QueueOnLoop(const QueueOnLoop&) = delete;
  QueueOnLoop& operator=(const QueueOnLoop&) = delete;

  // Group commit for a store with a log: the replies of `fronts` wait until
  // their change is released under the fsync policy, and each loop turn
  // ends by writing the log and releasing them. sync_when_idle (fsync
  // always): a turn with nothing else ready runs the fdatasync itself.
  void HoldReplies(const std::vector<FrontEnd*>& fronts, bool sync_when_idle);

  // Stops polling the queue's descriptors. Call before the queue goes (the
  // destructor does too).
  void Detach();

 private:
  class LogGate;
  QueueOnLoop(net::EventLoop* loop, QueueDriver* driver);

  net::EventLoop* loop_;
  QueueDriver* driver_;  // null: the queue runs its own timers
  std::vector<int> fds_;
  std::unique_ptr<LogGate> gate_;
};

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_QUEUE_ON_LOOP_H_
