// ForwardingQueue: a Queue that passes every call to another one. Tests
// derive from it to count or fault the few calls they care about
// (tests/worker: CountingQueue, FaultyQueue) without repeating the rest.
#ifndef DELAYQ_TESTS_TESTING_FORWARDING_QUEUE_H_
#define DELAYQ_TESTS_TESTING_FORWARDING_QUEUE_H_

#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "delayq/queue.h"

namespace delayq {

class ForwardingQueue : public Queue {
 public:
  // `q` must outlive this queue.
  explicit ForwardingQueue(Queue& q) : q_(q) {}

  Result<AddResult> Add(const JobSpec& spec) override { return q_.Add(spec); }
  uint64_t ReserveAsync(const ReserveRequest& req, ReserveCallback done) override {
    return q_.ReserveAsync(req, std::move(done));
  }
  bool CancelReserve(uint64_t ticket) override { return q_.CancelReserve(ticket); }
  Status Unreserve(std::string_view id, std::string_view receipt) override {
    return q_.Unreserve(id, receipt);
  }
  Status Finish(std::string_view id, std::string_view receipt) override {
    return q_.Finish(id, receipt);
  }
  std::vector<Status> Acknowledge(std::span<const Ack> acks) override {
    return q_.Acknowledge(acks);
  }
  Status Delete(std::string_view id) override { return q_.Delete(id); }
  Status Release(std::string_view id, std::string_view receipt, int64_t delay_ms,
                 std::string_view error) override {
    return q_.Release(id, receipt, delay_ms, error);
  }
  Status Touch(std::string_view id, std::string_view receipt) override {
    return q_.Touch(id, receipt);
  }
  Status Bury(std::string_view id, std::string_view receipt, std::string_view reason) override {
    return q_.Bury(id, receipt, reason);
  }
  Status Kick(std::string_view id) override { return q_.Kick(id); }
  Result<uint64_t> KickTopic(std::string_view topic, uint64_t n) override {
    return q_.KickTopic(topic, n);
  }
  Result<JobInfo> Get(std::string_view id) override { return q_.Get(id); }
  Result<JobInfo> Peek(std::string_view topic, JobState state) override {
    return q_.Peek(topic, state);
  }
  Status Pause(std::string_view topic, int64_t duration_ms) override {
    return q_.Pause(topic, duration_ms);
  }
  Status Resume(std::string_view topic) override { return q_.Resume(topic); }
  Result<std::vector<TopicInfo>> Topics() override { return q_.Topics(); }
  Result<TopicInfo> Topic(std::string_view topic) override { return q_.Topic(topic); }
  Result<QueueStats> Stats() override { return q_.Stats(); }

 protected:
  Queue& target() { return q_; }

 private:
  Queue& q_;
};

}  // namespace delayq

#endif  // DELAYQ_TESTS_TESTING_FORWARDING_QUEUE_H_
