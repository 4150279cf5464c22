// FaultyQueue: a Queue that forwards every call to a real queue (the memory
// or embedded store) and fails the calls a test's policy picks, as a
// network would: kFail answers kUnavailable without forwarding; kLoseReply
// forwards, so the call takes effect, then answers kUnavailable (the reply
// was lost). Fault injection around the real store, as LevelDB's
// fault-injection Env is around the real file system; not a mock.
//
// It also notes every call the worker makes while inside one of its
// reserve callbacks (which run on the queue's thread: a network client's
// I/O thread), for tests that no blocking call is made there.
#ifndef DELAYQ_TESTS_WORKER_FAULTY_QUEUE_H_
#define DELAYQ_TESTS_WORKER_FAULTY_QUEUE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/queue.h"
#include "testing/forwarding_queue.h"

namespace delayq {

class FaultyQueue final : public ForwardingQueue {
 public:
  enum class Op { kReserve, kTouch, kAck, kUnreserve };
  enum class Fault { kNone, kFail, kLoseReply };
  // Asked before each faultable call (the id is empty for a reserve; one
  // question per ack of a batch). Set before the worker starts. May be
  // called from several threads at once.
  using Policy = std::function<Fault(Op op, std::string_view id)>;

  explicit FaultyQueue(Queue& q) : ForwardingQueue(q) {}
  void set_policy(Policy p) { policy_ = std::move(p); }
  // Runs inside every reserve callback before the worker's own (on the
  // queue's thread); a test may block in it. Set before the worker starts.
  void set_before_callback(std::function<void()> f) { before_callback_ = std::move(f); }

  std::atomic<int> touch_calls{0};
  std::atomic<int> ack_calls{0};          // acks (not batches) asked of this queue
  std::atomic<int> calls_in_callback{0};  // Queue calls made inside a reserve callback
  std::atomic<int> faults{0};             // calls failed or whose reply was lost
  std::atomic<int> cancels{0};            // CancelReserve calls

  uint64_t ReserveAsync(const ReserveRequest& req, ReserveCallback done) override {
    Note();
    const Fault f = Ask(Op::kReserve, "");
    if (f == Fault::kFail) {
      done(Unavailable("injected: the reserve did not reach the queue"));
      return 0;
    }
    return target().ReserveAsync(req, [this, f, done = std::move(done)](Result<Deliveries> r) {
      ++depth_;
      if (before_callback_) before_callback_();
      if (f == Fault::kLoseReply && r.ok() && !r->empty()) {
        done(Unavailable("injected: the reserve's reply was lost"));
      } else {
        done(std::move(r));
      }
      --depth_;
    });
  }
  bool CancelReserve(uint64_t ticket) override {
    Note();
    ++cancels;
    return target().CancelReserve(ticket);
  }
  Status Touch(std::string_view id, std::string_view receipt) override {
    Note();
    ++touch_calls;
    return Apply(Op::kTouch, id, [&] { return target().Touch(id, receipt); });
  }
  Status Unreserve(std::string_view id, std::string_view receipt) override {
    Note();
    return Apply(Op::kUnreserve, id, [&] { return target().Unreserve(id, receipt); });
  }
  std::vector<Status> Acknowledge(std::span<const Ack> acks) override {
    Note();
    std::vector<Status> out(acks.size());
    std::vector<Ack> sent;
    std::vector<size_t> at;
    std::vector<Fault> how(acks.size());
    for (size_t i = 0; i < acks.size(); ++i) {
      ++ack_calls;
      how[i] = Ask(Op::kAck, acks[i].id);
      if (how[i] == Fault::kFail) {
        out[i] = Unavailable("injected: the ack did not reach the queue");
        continue;
      }
      sent.push_back(acks[i]);
      at.push_back(i);
    }
    std::vector<Status> answers = target().Acknowledge(sent);
    for (size_t k = 0; k < at.size(); ++k) {
      out[at[k]] = how[at[k]] == Fault::kLoseReply
                       ? Unavailable("injected: the ack's reply was lost")
                       : answers[k];
    }
    return out;
  }
  Status Finish(std::string_view id, std::string_view receipt) override {
    Ack a{Ack::Kind::kFinish, std::string(id), std::string(receipt), 0, {}};
    return Acknowledge({&a, 1})[0];
  }
  Status Release(std::string_view id, std::string_view receipt, int64_t delay_ms,
                 std::string_view error) override {
    Ack a{Ack::Kind::kRelease, std::string(id), std::string(receipt), delay_ms, std::string(error)};
    return Acknowledge({&a, 1})[0];
  }
  Status Bury(std::string_view id, std::string_view receipt, std::string_view reason) override {
    Ack a{Ack::Kind::kBury, std::string(id), std::string(receipt), 0, std::string(reason)};
    return Acknowledge({&a, 1})[0];
  }

 private:
  // Reserve callbacks this thread is inside (they may nest: an in-process
  // queue runs a callback inside the call that made jobs ready).
  static inline thread_local int depth_ = 0;

  void Note() {
    if (depth_ > 0) ++calls_in_callback;
  }
  Fault Ask(Op op, std::string_view id) {
    const Fault f = policy_ ? policy_(op, id) : Fault::kNone;
    if (f != Fault::kNone) ++faults;
    return f;
  }
  template <typename Call>
  Status Apply(Op op, std::string_view id, Call call) {
    const Fault f = Ask(op, id);
    if (f == Fault::kFail) return Unavailable("injected: the call did not reach the queue");
    Status s = call();
    if (f == Fault::kLoseReply) return Unavailable("injected: the reply was lost");
    return s;
  }

  Policy policy_;
  std::function<void()> before_callback_;
};

}  // namespace delayq

#endif  // DELAYQ_TESTS_WORKER_FAULTY_QUEUE_H_
