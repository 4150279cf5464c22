// The parts of the Queue interface that every implementation shares: the
// blocking Reserve built on ReserveAsync, and the OpenQueue factory.
#include "delayq/queue.h"

#include <future>

#include "queue/local_queue.h"

namespace delayq {

Result<Deliveries> Queue::Reserve(const ReserveRequest& req) {
  auto promise = std::make_shared<std::promise<Result<Deliveries>>>();
  std::future<Result<Deliveries>> future = promise->get_future();
  ReserveAsync(req, [promise](Result<Deliveries> r) { promise->set_value(std::move(r)); });
  return future.get();
}

Result<std::unique_ptr<Queue>> OpenQueue(const QueueOptions& options) {
  if (options.store == "memory" || options.store == "embedded") {
    auto q = LocalQueue::Open(options);
    if (!q.ok()) return q.status();
    return std::unique_ptr<Queue>(std::move(q).value());
  }
  return InvalidArgument("store: '" + options.store + "' is not supported (use \"embedded\" or \"memory\")");
}

}  // namespace delayq
