// The parts of the Queue interface that every implementation shares: the
// blocking Reserve built on ReserveAsync, and the OpenQueue factory.
#include "delayq/queue.h"

#include <future>

#include "local/local_queue.h"
#include "redis_store/redis_queue.h"

namespace delayq {

Result<Deliveries> Queue::Reserve(const ReserveRequest& req) {
  auto promise = std::make_shared<std::promise<Result<Deliveries>>>();
  std::future<Result<Deliveries>> future = promise->get_future();
  ReserveAsync(req, [promise](Result<Deliveries> r) { promise->set_value(std::move(r)); });
  return future.get();
}

void Queue::AddAsync(const JobSpec& spec, AddCallback done) { done(Add(spec)); }
void Queue::FinishAsync(std::string_view id, std::string_view receipt, StatusCallback done) {
  done(Finish(id, receipt));
}
void Queue::DeleteAsync(std::string_view id, StatusCallback done) { done(Delete(id)); }
void Queue::ReleaseAsync(std::string_view id, std::string_view receipt, int64_t delay_ms,
                         std::string_view error, StatusCallback done) {
  done(Release(id, receipt, delay_ms, error));
}
void Queue::TouchAsync(std::string_view id, std::string_view receipt, StatusCallback done) {
  done(Touch(id, receipt));
}
void Queue::BuryAsync(std::string_view id, std::string_view receipt, std::string_view reason,
                      StatusCallback done) {
  done(Bury(id, receipt, reason));
}
void Queue::UnreserveAsync(std::string_view id, std::string_view receipt, StatusCallback done) {
  done(Unreserve(id, receipt));
}
void Queue::GetAsync(std::string_view id, JobCallback done) { done(Get(id)); }
void Queue::PeekAsync(std::string_view topic, JobState state, JobCallback done) {
  done(Peek(topic, state));
}
void Queue::KickAsync(std::string_view id, StatusCallback done) { done(Kick(id)); }
void Queue::KickTopicAsync(std::string_view topic, uint64_t n, CountCallback done) {
  done(KickTopic(topic, n));
}
void Queue::PauseAsync(std::string_view topic, int64_t duration_ms, StatusCallback done) {
  done(Pause(topic, duration_ms));
}
void Queue::ResumeAsync(std::string_view topic, StatusCallback done) { done(Resume(topic)); }
void Queue::TopicsAsync(TopicsCallback done) { done(Topics()); }
void Queue::TopicAsync(std::string_view topic, TopicCallback done) { done(Topic(topic)); }
void Queue::StatsAsync(StatsCallback done) { done(Stats()); }

Result<std::unique_ptr<Queue>> OpenQueue(const QueueOptions& options) {
  if (options.store == "memory" || options.store == "embedded") {
    auto q = LocalQueue::Open(options);
    if (!q.ok()) return q.status();
    return std::unique_ptr<Queue>(std::move(q).value());
  }
  if (options.store == "redis") {
    auto q = RedisQueue::Open(options);
    if (!q.ok()) return q.status();
    return std::unique_ptr<Queue>(std::move(q).value());
  }
  return InvalidArgument("store: '" + options.store +
                         "' is not supported (use \"embedded\", \"memory\" or \"redis\")");
}

}  // namespace delayq
