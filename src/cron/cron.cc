// Placeholder: replaced by the parser (src/cron/cron.h says what it does).
#include "cron/cron.h"

namespace delayq::cron {

struct Cron::Spec {
  std::string expr;
  std::string timezone;
};

Cron::Cron(std::shared_ptr<const Spec> spec) : spec_(std::move(spec)) {}
Cron::~Cron() = default;

Result<Cron> Cron::Parse(std::string_view /*expr*/, std::string_view /*timezone*/) {
  return InvalidArgument("cron: not built yet");
}
int64_t Cron::Next(int64_t /*after_ms*/) const { return kNever; }
std::vector<int64_t> Cron::Between(int64_t /*from_ms*/, int64_t /*to_ms*/, size_t /*max*/,
                                   uint64_t* total, uint64_t /*count_cap*/) const {
  if (total != nullptr) *total = 0;
  return {};
}
const std::string& Cron::expr() const { return spec_->expr; }
const std::string& Cron::timezone() const { return spec_->timezone; }
int64_t Cron::every_ms() const { return 0; }

}  // namespace delayq::cron
