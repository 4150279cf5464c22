// ApplyAck: one Ack as the call it stands for, on anything with Queue's
// Finish, Release and Bury (a Queue, the engine), so each Acknowledge that
// loops over its acks reads them in one place.
#ifndef DELAYQ_COMMON_ACK_H_
#define DELAYQ_COMMON_ACK_H_

#include "delayq/queue.h"
#include "delayq/status.h"

namespace delayq {

template <typename Target>
Status ApplyAck(Target& target, const Ack& a) {
  switch (a.kind) {
    case Ack::Kind::kFinish:
      return target.Finish(a.id, a.receipt);
    case Ack::Kind::kRelease:
      return target.Release(a.id, a.receipt, a.delay_ms, a.text);
    case Ack::Kind::kBury:
      return target.Bury(a.id, a.receipt, a.text);
  }
  return InvalidArgument("ack: unknown kind");
}

}  // namespace delayq

#endif  // DELAYQ_COMMON_ACK_H_
