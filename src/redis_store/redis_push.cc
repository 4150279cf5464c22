// Subscriptions and the push ledger on Redis: the record codec and the ops
// (redis_push.h). Formats: docs/redis-store.md, "Push delivery".
#include "redis_store/redis_push.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <optional>
#include <tuple>
#include <utility>

#include "redis_store/record_bytes.h"

namespace delayq::rq {
namespace {

using redis::Reply;

// The head subscriptions.lua reads and writes: version (1), created_ms,
// renewed_ms, expires_ms, ttl_ms (6 each).
constexpr size_t kHeadBytes = 25;
// The scripts' bounds (push_ledger.lua): arguments are kept inside them
// here, because one bad operation would fail every operation of its call.
constexpr int64_t kMaxLeaseMs = 86'400'000;
constexpr int64_t kMaxIntervalUs = 3'600'000'000;
constexpr int64_t kMaxNowMs = (int64_t{1} << 43) - 1;
constexpr size_t kMaxErrorBytes = 1024;

// --- subscriptions -------------------------------------------------------------

class PutSubscriptionOp final : public Op {
 public:
  PutSubscriptionOp(const Subscription& s, SubscriptionDone done)
      : instance_(InstanceKey(s)), record_(EncodeSubscription(s)), done_(std::move(done)) {}
  void Plan(Batch& b) override {
    cmd_ = b.Single(Lua::kSubscriptions, 0, {"put", instance_, record_});
  }
  bool Absorb(Batch& b) override {
    auto r = b.ReplyOf(cmd_);
    if (!r.ok()) {
      result_ = r.status();
    } else if (!(*r)->is_string()) {
      result_ = Malformed("subscriptions put", **r);
    } else {
      result_ = DecodeSubscription((*r)->str());
    }
    return true;
  }
  void Fail(Status s) override { result_ = std::move(s); }
  void Complete() override { done_(std::move(result_)); }
  Lua kind() const override { return Lua::kSubscriptions; }
  size_t bytes() const override { return record_.size() + instance_.size() + 64; }

 private:
  const std::string instance_;
  const std::string record_;
  SubscriptionDone done_;
  size_t cmd_ = 0;
  Result<Subscription> result_ = Internal("subscriptions: no result");
};

class DeleteSubscriptionOp final : public Op {
 public:
  DeleteSubscriptionOp(std::string_view name, std::string_view url, CountDone done)
      : name_(name), url_(url), done_(std::move(done)) {}
  void Plan(Batch& b) override { cmd_ = b.Single(Lua::kSubscriptions, 0, {"delete", name_, url_}); }
  bool Absorb(Batch& b) override {
    auto r = b.ReplyOf(cmd_);
    if (!r.ok()) {
      result_ = r.status();
    } else if (auto n = AsInt(**r); !n || *n < 0) {
      result_ = Malformed("subscriptions delete", **r);
    } else {
      result_ = static_cast<uint64_t>(*n);
    }
    return true;
  }
  void Fail(Status s) override { result_ = std::move(s); }
  void Complete() override { done_(std::move(result_)); }
  Lua kind() const override { return Lua::kSubscriptions; }

 private:
  const std::string name_;
  const std::string url_;
  CountDone done_;
  size_t cmd_ = 0;
  Result<uint64_t> result_ = Internal("subscriptions: no result");
};

class ListSubscriptionsOp final : public Op {
 public:
  ListSubscriptionsOp(std::string_view name, SubscriptionsDone done)
      : name_(name), done_(std::move(done)) {}
  void Plan(Batch& b) override {
    cmd_ = b.Single(Lua::kSubscriptions, 0, {"list", name_});
    b.NoWait(cmd_);
  }
  bool Absorb(Batch& b) override {
    auto r = b.ReplyOf(cmd_);
    if (!r.ok()) {
      result_ = r.status();
      return true;
    }
    if (!(*r)->is_array()) {
      result_ = Malformed("subscriptions list", **r);
      return true;
    }
    std::vector<Subscription> out;
    for (const Reply& e : (*r)->elements()) {
      if (!e.is_string()) {
        result_ = Malformed("subscriptions list", **r);
        return true;
      }
      auto s = DecodeSubscription(e.str());
      if (!s.ok()) {
        result_ = s.status();
        return true;
      }
      out.push_back(std::move(s).value());
    }
    std::sort(out.begin(), out.end(), [](const Subscription& x, const Subscription& y) {
      return std::tie(x.name, x.url) < std::tie(y.name, y.url);
    });
    result_ = std::move(out);
    return true;
  }
  void Fail(Status s) override { result_ = std::move(s); }
  void Complete() override { done_(std::move(result_)); }
  Lua kind() const override { return Lua::kSubscriptions; }

 private:
  const std::string name_;
  SubscriptionsDone done_;
  size_t cmd_ = 0;
  Result<std::vector<Subscription>> result_ = Internal("subscriptions: no result");
};

// --- the ledger ----------------------------------------------------------------

// push_ledger.lua's interval_us: the µs between two starts; 0 without a rate.
std::string IntervalUs(const Subscription& s) {
  if (!(s.rate_per_s > 0)) return "0";
  const double us = std::round(1e6 / s.rate_per_s);
  return std::to_string(
      std::clamp<int64_t>(static_cast<int64_t>(std::min(us, 1e12)), 1, kMaxIntervalUs));
}

// Whether push_ledger.lua takes the instance: "<name> <url>" with a valid
// name and a url without spaces. Anything else would fail the whole call.
bool LedgerKeyOk(const Subscription& s) {
  return ValidateSubscriptionName(s.name).ok() && !s.url.empty() &&
         s.url.find_first_of(" \r\n") == std::string::npos;
}

// One ledger call: its operations' fields appended to the round's shared
// push_ledger call, one reply element each.
class LedgerOp final : public Op {
 public:
  using Parse = std::function<void(Result<std::vector<const Reply*>>)>;
  // `ops`: the fields of each operation; `parse` gets their reply elements
  // (on the dispatcher thread, in Absorb; a callback waits for Complete).
  LedgerOp(std::vector<std::vector<std::string>> ops, Parse parse, std::function<void()> complete)
      : ops_(std::move(ops)), parse_(std::move(parse)), complete_(std::move(complete)) {}
  // Planned once: a ledger op always ends in its round.
  void Plan(Batch& b) override {
    slots_.clear();
    for (std::vector<std::string>& fields : ops_) {
      slots_.push_back(b.Append(Lua::kPushLedger, 0, std::move(fields)));
    }
  }
  bool Absorb(Batch& b) override {
    std::vector<const Reply*> elements;
    for (const Batch::Slot& slot : slots_) {
      auto e = b.Element(slot);
      if (!e.ok()) {
        parse_(e.status());
        return true;
      }
      elements.push_back(*e);
    }
    parse_(std::move(elements));
    return true;
  }
  void Fail(Status s) override { parse_(std::move(s)); }
  void Complete() override {
    if (complete_) complete_();
  }
  Lua kind() const override { return Lua::kPushLedger; }
  size_t bytes() const override {
    size_t n = 0;
    for (const auto& fields : ops_) {
      for (const std::string& f : fields) n += f.size() + 16;
    }
    return n;
  }

 private:
  std::vector<std::vector<std::string>> ops_;
  std::vector<Batch::Slot> slots_;
  Parse parse_;
  std::function<void()> complete_;
};

Result<PushLedger::Grant> ParseGrant(const Reply& r) {
  if (!r.is_array() || r.elements().empty() || !AsInt(r.elements()[0])) {
    return Malformed("push_ledger acquire", r);
  }
  PushLedger::Grant g;
  g.rate_wait_ms = *AsInt(r.elements()[0]);
  for (size_t i = 1; i < r.elements().size(); ++i) {
    const Reply& lease = r.elements()[i];
    if (!lease.is_string()) return Malformed("push_ledger acquire", r);
    g.leases.push_back(lease.str());
  }
  return g;
}

Result<PushFigures> ParseFigures(const Reply& r) {
  if (!r.is_array() || r.elements().size() != 6) return Malformed("push_ledger figures", r);
  const auto& f = r.elements();
  PushFigures out;
  for (size_t i = 0; i < 5; ++i) {
    if (!AsInt(f[i]) || *AsInt(f[i]) < 0) return Malformed("push_ledger figures", r);
  }
  if (!f[5].is_string()) return Malformed("push_ledger figures", r);
  out.slots_held = static_cast<uint32_t>(*AsInt(f[0]));
  out.delivered = static_cast<uint64_t>(*AsInt(f[1]));
  out.failed = static_cast<uint64_t>(*AsInt(f[2]));
  out.last_success_ms = *AsInt(f[3]);
  out.last_error_ms = *AsInt(f[4]);
  out.last_error = f[5].str();
  return out;
}

}  // namespace

std::string EncodeSubscription(const Subscription& s) {
  std::string r;
  r.reserve(kHeadBytes + 64 + s.name.size() + s.url.size() + 40 * s.topics.size());
  PutU(r, 1, kSubscriptionRecordVersion);
  PutU(r, 6, 0);  // created_ms  } written by subscriptions.lua,
  PutU(r, 6, 0);  // renewed_ms  } from Redis's clock
  PutU(r, 6, 0);  // expires_ms  }
  PutU(r, 6, static_cast<uint64_t>(s.ttl_ms));
  PutU(r, 4, s.concurrency);
  PutU(r, 4, s.timeout_ms);
  PutU(r, 8, std::bit_cast<uint64_t>(s.rate_per_s));
  PutU(r, 6, static_cast<uint64_t>(s.retry.min_backoff_ms));
  PutU(r, 6, static_cast<uint64_t>(s.retry.max_backoff_ms));
  PutU(r, 1, s.retry.max_doublings);
  PutS(r, 1, s.name);
  PutS(r, 2, s.url);
  PutU(r, 1, s.topics.size());
  for (const std::string& t : s.topics) PutS(r, 1, t);
  PutU(r, 1, s.secrets.size());
  for (const std::string& secret : s.secrets) PutS(r, 2, secret);
  return r;
}

Result<Subscription> DecodeSubscription(std::string_view record) {
  Reader in{record};
  const uint64_t version = in.U(1);
  if (!in.bad && version != kSubscriptionRecordVersion) {
    return Internal("redis store: a subscription record of version " + std::to_string(version) +
                    "; this delayq reads version " + std::to_string(kSubscriptionRecordVersion));
  }
  Subscription s;
  s.created_ms = static_cast<int64_t>(in.U(6));
  s.renewed_ms = static_cast<int64_t>(in.U(6));
  s.expires_ms = static_cast<int64_t>(in.U(6));
  s.ttl_ms = static_cast<int64_t>(in.U(6));
  s.concurrency = static_cast<uint32_t>(in.U(4));
  s.timeout_ms = static_cast<uint32_t>(in.U(4));
  s.rate_per_s = std::bit_cast<double>(in.U(8));
  s.retry.min_backoff_ms = static_cast<int64_t>(in.U(6));
  s.retry.max_backoff_ms = static_cast<int64_t>(in.U(6));
  s.retry.max_doublings = static_cast<uint32_t>(in.U(1));
  s.name = in.S(1);
  s.url = in.S(2);
  for (uint64_t n = in.U(1); n > 0 && !in.bad; --n) s.topics.push_back(in.S(1));
  for (uint64_t n = in.U(1); n > 0 && !in.bad; --n) s.secrets.push_back(in.S(2));
  // Bytes past the secrets are fields of a later build that kept version 1
  // (added at the end, so this reader skips them).
  if (in.bad) {
    return Internal("redis store: a subscription record cut short (" +
                    std::to_string(record.size()) + " bytes)");
  }
  return s;
}

std::string InstanceKey(const Subscription& s) { return s.name + " " + s.url; }

std::unique_ptr<Op> MakePutSubscription(const Subscription& s, SubscriptionDone done) {
  return std::make_unique<PutSubscriptionOp>(s, std::move(done));
}

std::unique_ptr<Op> MakeDeleteSubscription(std::string_view name, std::string_view url,
                                           CountDone done) {
  return std::make_unique<DeleteSubscriptionOp>(name, url, std::move(done));
}

std::unique_ptr<Op> MakeListSubscriptions(std::string_view name, SubscriptionsDone done) {
  return std::make_unique<ListSubscriptionsOp>(name, std::move(done));
}

// --- RedisLedger -----------------------------------------------------------------

void RedisLedger::Acquire(const Subscription& instance, uint32_t want, int64_t lease_ms,
                          std::function<void(Result<Grant>)> done) {
  if (!LedgerKeyOk(instance)) {
    return done(InvalidArgument("instance: a subscription's name and url"));
  }
  const uint32_t concurrency =
      std::clamp<uint32_t>(instance.concurrency, 1, kMaxSubscriptionConcurrency);
  std::vector<std::string> fields = {"a",
                                     InstanceKey(instance),
                                     std::to_string(std::min(want, concurrency)),
                                     std::to_string(std::clamp<int64_t>(lease_ms, 1, kMaxLeaseMs)),
                                     std::to_string(concurrency),
                                     IntervalUs(instance)};
  auto result = std::make_shared<Result<Grant>>(Internal("push_ledger: no result"));
  submit_(std::make_unique<LedgerOp>(
      std::vector<std::vector<std::string>>{std::move(fields)},
      [result](Result<std::vector<const Reply*>> r) {
        *result = r.ok() ? ParseGrant(*r->front()) : Result<Grant>(r.status());
      },
      [result, done = std::move(done)] { done(std::move(*result)); }));
}

void RedisLedger::Settle(const Subscription& instance, std::string_view lease,
                         const Outcome& outcome) {
  if (!LedgerKeyOk(instance)) return;
  std::vector<std::string> fields = {
      "s",
      InstanceKey(instance),
      std::string(lease),
      outcome.used ? "1" : "0",
      outcome.ok ? "1" : "0",
      std::to_string(std::clamp<int64_t>(outcome.at_ms, 0, kMaxNowMs)),
      outcome.error.substr(0, kMaxErrorBytes),
      IntervalUs(instance)};
  submit_(std::make_unique<LedgerOp>(
      std::vector<std::vector<std::string>>{std::move(fields)},
      [](const Result<std::vector<const Reply*>>&) {}, nullptr));
}

void RedisLedger::Figures(const std::vector<Subscription>& instances,
                          std::function<void(Result<std::vector<PushFigures>>)> done) {
  std::vector<std::vector<std::string>> ops;
  std::vector<bool> asked;  // per instance: a key the script takes (else zeros)
  for (const Subscription& s : instances) {
    asked.push_back(LedgerKeyOk(s));
    if (asked.back()) ops.push_back({"f", InstanceKey(s)});
  }
  using Out = Result<std::vector<PushFigures>>;
  auto result = std::make_shared<Out>(Internal("push_ledger: no result"));
  submit_(std::make_unique<LedgerOp>(
      std::move(ops),
      [result, asked](Result<std::vector<const Reply*>> r) {
        if (!r.ok()) {
          *result = r.status();
          return;
        }
        std::vector<PushFigures> out;
        size_t next = 0;
        for (bool a : asked) {
          if (!a) {
            out.emplace_back();
            continue;
          }
          auto f = ParseFigures(*(*r)[next++]);
          if (!f.ok()) {
            *result = f.status();
            return;
          }
          out.push_back(std::move(f).value());
        }
        *result = std::move(out);
      },
      [result, done = std::move(done)] { done(std::move(*result)); }));
}

void RedisLedger::Forget(const Subscription& instance) {
  if (!LedgerKeyOk(instance)) return;
  submit_(std::make_unique<LedgerOp>(
      std::vector<std::vector<std::string>>{{"x", InstanceKey(instance)}},
      [](const Result<std::vector<const Reply*>>&) {}, nullptr));
}

}  // namespace delayq::rq
