#include "server/queue_on_loop.h"

#include <sys/epoll.h>

#include <utility>

namespace delayq::server {

// Replies wait for the store's log (QueueDriver) under the fsync policy.
class QueueOnLoop::LogGate final : public net::OutputGate {
 public:
  explicit LogGate(QueueDriver* d) : d_(d) {}
  uint64_t Mark() const override { return d_->Mark(); }
  uint64_t Released() const override { return d_->Released(); }
  bool Failed() const override { return d_->Failed(); }

 private:
  QueueDriver* d_;
};

Result<std::unique_ptr<QueueOnLoop>> QueueOnLoop::Attach(net::EventLoop* loop,
                                                         ServingQueue* queue) {
  QueueDriver* driver = queue->driver();
  std::unique_ptr<QueueOnLoop> on(new QueueOnLoop(loop, driver));
  if (driver == nullptr) return on;
  for (int fd : driver->PollFds()) {
    Status st = loop->Add(
        fd, EPOLLIN, [driver](uint32_t) { driver->RunDue(); }, /*urgent=*/true);
    if (!st.ok()) return st;
    on->fds_.push_back(fd);
  }
  driver->RunDue();
  loop->SetUrgentProbe([driver] { return driver->MaybeDue(); });
  return on;
}

void QueueOnLoop::HoldReplies(const std::vector<FrontEnd*>& fronts, bool sync_when_idle) {
  if (driver_ == nullptr) return;
  gate_ = std::make_unique<LogGate>(driver_);
  for (FrontEnd* f : fronts) f->tcp()->SetOutputGate(gate_.get());
  loop_->SetTurnEnd(
      [driver = driver_, fronts](bool idle) {
        if (idle) {
          driver->FlushIdle();
        } else {
          driver->Flush();
        }
        for (FrontEnd* f : fronts) f->tcp()->ReleaseHeld();
      },
      /*tell_idle=*/sync_when_idle);
}

QueueOnLoop::QueueOnLoop(net::EventLoop* loop, QueueDriver* driver)
    : loop_(loop), driver_(driver) {}

QueueOnLoop::~QueueOnLoop() { Detach(); }

void QueueOnLoop::Detach() {
  for (int fd : fds_) loop_->Remove(fd);
  fds_.clear();
}

}  // namespace delayq::server
