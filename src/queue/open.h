// OpenServingQueue: a queue for a server or a test, with what only they
// set. Applications use OpenQueue (include/delayq/queue.h).
#ifndef DELAYQ_QUEUE_OPEN_H_
#define DELAYQ_QUEUE_OPEN_H_

#include <memory>

#include "delayq/queue.h"
#include "log/file.h"
#include "serving/serving_queue.h"

namespace delayq {

struct OpenOptions {
  // false: the queue runs its timers on a thread of its own. true: it starts
  // no thread; the caller drives it through ServingQueue::driver() (the
  // Redis store runs its own threads either way).
  bool caller_loop = false;
  // kEmbedded: where files are reached; tests wrap it to inject failures.
  // Null: the real file system.
  std::shared_ptr<store::FileSystem> file_system;
};

// As OpenQueue, with `open`'s choices.
Result<std::unique_ptr<ServingQueue>> OpenServingQueue(const QueueOptions& options,
                                                       const OpenOptions& open = {});

}  // namespace delayq

#endif  // DELAYQ_QUEUE_OPEN_H_
