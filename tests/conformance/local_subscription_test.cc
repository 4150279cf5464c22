// Runs the subscription conformance suite on the in-process stores: memory,
// and embedded (each queue in a fresh data directory) with fsync never and
// always, on a ManualClock.
#include <stdlib.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "conformance/subscription_conformance.h"
#include "delayq/clock.h"
#include "queue/open.h"

namespace delayq::conformance {
namespace {

class LocalSubscriptionHarness final : public SubscriptionHarness {
 public:
  LocalSubscriptionHarness(StoreKind store, FsyncPolicy fsync) : store_(store), fsync_(fsync) {
    if (store_ == StoreKind::kEmbedded) {
      const char* base = getenv("TMPDIR");
      std::string tmpl = std::string(base ? base : "/tmp") + "/delayq-subscriptions.XXXXXX";
      if (mkdtemp(tmpl.data()) != nullptr) dir_ = tmpl;
    }
  }
  ~LocalSubscriptionHarness() override {
    if (!dir_.empty()) std::system(("rm -rf '" + dir_ + "'").c_str());
  }

  std::unique_ptr<ServingQueue> Open() override {
    QueueOptions o;
    o.store = store_;
    o.fsync = fsync_;
    o.clock = clock_;
    if (store_ == StoreKind::kEmbedded) o.data_dir = dir_ + "/q" + std::to_string(next_++);
    auto q = OpenServingQueue(o);
    if (!q.ok()) {
      ADD_FAILURE() << "OpenServingQueue: " << q.status().ToString();
      return nullptr;
    }
    return std::move(q).value();
  }
  void AdvanceMs(int64_t ms) override { clock_->Advance(ms); }
  int64_t NowMs() override { return clock_->NowMs(); }

 private:
  StoreKind store_;
  FsyncPolicy fsync_;
  std::string dir_;
  int next_ = 0;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
};

SubscriptionImpl Local(std::string name, StoreKind store, FsyncPolicy fsync) {
  return SubscriptionImpl{.name = std::move(name), .make = [store, fsync] {
                            return std::make_unique<LocalSubscriptionHarness>(store, fsync);
                          }};
}

INSTANTIATE_TEST_SUITE_P(
    Local, SubscriptionConformance,
    testing::Values(Local("Memory", StoreKind::kMemory, FsyncPolicy::kNever),
                    Local("EmbeddedFsyncNever", StoreKind::kEmbedded, FsyncPolicy::kNever),
                    Local("EmbeddedFsyncAlways", StoreKind::kEmbedded, FsyncPolicy::kAlways)),
    SubscriptionImplName);

}  // namespace
}  // namespace delayq::conformance
