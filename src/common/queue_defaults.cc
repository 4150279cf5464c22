// The Queue interface's overridable defaults, here in the leaf layer so that
// every implementation (and the worker, which calls them) links them without
// the factories of src/queue.
#include "delayq/queue.h"

namespace delayq {

std::vector<Status> Queue::Acknowledge(std::span<const Ack> acks) {
  std::vector<Status> out;
  out.reserve(acks.size());
  for (const Ack& a : acks) {
    switch (a.kind) {
      case Ack::Kind::kFinish:
        out.push_back(Finish(a.id, a.receipt));
        break;
      case Ack::Kind::kRelease:
        out.push_back(Release(a.id, a.receipt, a.delay_ms, a.text));
        break;
      case Ack::Kind::kBury:
        out.push_back(Bury(a.id, a.receipt, a.text));
        break;
    }
  }
  return out;
}

}  // namespace delayq
