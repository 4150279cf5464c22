// The Queue interface's overridable defaults, here in the leaf layer so that
// every implementation (and the worker, which calls them) links them without
// the factories of src/queue.
#include "common/ack.h"
#include "delayq/queue.h"

namespace delayq {

std::vector<Status> Queue::Acknowledge(std::span<const Ack> acks) {
  std::vector<Status> out;
  out.reserve(acks.size());
  for (const Ack& a : acks) out.push_back(ApplyAck(*this, a));
  return out;
}

}  // namespace delayq
