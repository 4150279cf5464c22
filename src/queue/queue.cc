// The parts of the Queue interface that every implementation shares: the
// blocking Reserve built on ReserveAsync, and the factories over every store.
#include "delayq/queue.h"

#include <future>

#include "client/remote_queue.h"
#include "local/local_queue.h"
#include "queue/open.h"
#include "redis_store/redis_queue.h"

namespace delayq {

Result<Deliveries> Queue::Reserve(const ReserveRequest& req) {
  auto promise = std::make_shared<std::promise<Result<Deliveries>>>();
  std::future<Result<Deliveries>> future = promise->get_future();
  ReserveAsync(req, [promise](Result<Deliveries> r) { promise->set_value(std::move(r)); });
  return future.get();
}

Result<std::unique_ptr<ServingQueue>> OpenServingQueue(const QueueOptions& options,
                                                       const OpenOptions& open) {
  switch (options.store) {
    case StoreKind::kMemory:
    case StoreKind::kEmbedded: {
      auto q = LocalQueue::Open(options, open.caller_loop, open.file_system);
      if (!q.ok()) return q.status();
      return std::unique_ptr<ServingQueue>(std::move(q).value());
    }
    case StoreKind::kRedis: {
      auto q = RedisQueue::Open(options);
      if (!q.ok()) return q.status();
      return std::unique_ptr<ServingQueue>(std::move(q).value());
    }
    case StoreKind::kRemote:
      return InvalidArgument(
          "store: a server cannot serve store remote (another server's jobs); use embedded, "
          "memory or redis");
  }
  return InvalidArgument("store: not one of embedded, memory, redis");
}

Result<std::unique_ptr<Queue>> OpenQueue(const QueueOptions& options) {
  if (options.store == StoreKind::kRemote) {
    auto q = client::RemoteQueue::Open(options);
    if (!q.ok()) return q.status();
    return std::unique_ptr<Queue>(std::move(q).value());
  }
  auto q = OpenServingQueue(options);
  if (!q.ok()) return q.status();
  return std::unique_ptr<Queue>(std::move(q).value());
}

}  // namespace delayq
