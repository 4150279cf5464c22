// The default asynchronous forms: the blocking call, then `done`. A store
// that answers later (Redis) overrides them all.
#include "serving/serving_queue.h"

namespace delayq {

// `done` is taken by value in the interface, so that an override can keep it
// (the Redis store does); these defaults only call it.
// NOLINTBEGIN(performance-unnecessary-value-param)

void ServingQueue::AddAsync(const JobSpec& spec, AddCallback done) { done(Add(spec)); }
void ServingQueue::FinishAsync(std::string_view id, std::string_view receipt, StatusCallback done) {
  done(Finish(id, receipt));
}
void ServingQueue::DeleteAsync(std::string_view id, StatusCallback done) { done(Delete(id)); }
void ServingQueue::ReleaseAsync(std::string_view id, std::string_view receipt, int64_t delay_ms,
                                std::string_view error, StatusCallback done) {
  done(Release(id, receipt, delay_ms, error));
}
void ServingQueue::TouchAsync(std::string_view id, std::string_view receipt, StatusCallback done) {
  done(Touch(id, receipt));
}
void ServingQueue::BuryAsync(std::string_view id, std::string_view receipt, std::string_view reason,
                             StatusCallback done) {
  done(Bury(id, receipt, reason));
}
void ServingQueue::UnreserveAsync(std::string_view id, std::string_view receipt,
                                  StatusCallback done) {
  done(Unreserve(id, receipt));
}
void ServingQueue::GetAsync(std::string_view id, JobCallback done) { done(Get(id)); }
void ServingQueue::PeekAsync(std::string_view topic, JobState state, JobCallback done) {
  done(Peek(topic, state));
}
void ServingQueue::KickAsync(std::string_view id, StatusCallback done) { done(Kick(id)); }
void ServingQueue::KickTopicAsync(std::string_view topic, uint64_t n, CountCallback done) {
  done(KickTopic(topic, n));
}
void ServingQueue::PauseAsync(std::string_view topic, int64_t duration_ms, StatusCallback done) {
  done(Pause(topic, duration_ms));
}
void ServingQueue::ResumeAsync(std::string_view topic, StatusCallback done) { done(Resume(topic)); }
void ServingQueue::TopicsAsync(TopicsCallback done) { done(Topics()); }
void ServingQueue::TopicAsync(std::string_view topic, TopicCallback done) { done(Topic(topic)); }
void ServingQueue::StatsAsync(StatsCallback done) { done(Stats()); }

namespace {
Status NoSubscriptions() { return Internal("this store keeps no subscriptions"); }
}  // namespace

void ServingQueue::PutSubscriptionAsync(const Subscription& /*s*/, SubscriptionCallback done) {
  done(NoSubscriptions());
}
void ServingQueue::DeleteSubscriptionAsync(std::string_view /*name*/, std::string_view /*url*/,
                                           CountCallback done) {
  done(NoSubscriptions());
}
void ServingQueue::SubscriptionsAsync(std::string_view /*name*/, SubscriptionsCallback done) {
  done(NoSubscriptions());
}

namespace {
Status NoSchedules() { return Internal("this store keeps no schedules"); }
}  // namespace
void ServingQueue::PutScheduleAsync(const Schedule& /*s*/, ScheduleCallback done) {
  done(NoSchedules());
}
void ServingQueue::DeleteScheduleAsync(std::string_view /*name*/, ScheduleCallback done) {
  done(NoSchedules());
}
void ServingQueue::SchedulesAsync(std::string_view /*name*/, SchedulesCallback done) {
  done(NoSchedules());
}
void ServingQueue::FireScheduleAsync(const ScheduleFiring& /*f*/, ScheduleFiredCallback done) {
  done(NoSchedules());
}

// NOLINTEND(performance-unnecessary-value-param)

}  // namespace delayq
