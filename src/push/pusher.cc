// Pusher: one reserve per subscription name at a time, for as many jobs as
// its instances have free slots; each job POSTed to one instance; the answer
// decides what becomes of the job. See pusher.h and docs/push.md.
#include "push/pusher.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <unordered_map>

#include "codec/json_writer.h"
#include "common/log.h"
#include "net/on_loop.h"
#include "push/backoff.h"
#include "push/local_ledger.h"
#include "push/signature.h"
#include "wire/encode.h"
#include "wire/fields.h"

namespace delayq::push {
namespace {

// A free slot older than this (beyond the reserve's wait) is given back and
// taken again, so a lease never runs out under a request that started late.
constexpr int64_t kLeaseSlackMs = 5'000;
// A pushed job's reservation lasts its request's timeout and this much more:
// the hop from the reserve's answer to the request's start, and the
// acknowledgment after the timeout, must fit before the job is handed out
// again.
constexpr uint32_t kReservationSlackMs = 1'000;
// Bytes of a receiver's answer kept in a job's last_error.
constexpr size_t kErrorBodyBytes = 200;

// The job as the receiver gets it: a delivery's fields, receipt left out
// (the server acknowledges from the HTTP status).
std::string JobJson(const Delivery& d) {
  codec::JsonWriter w;
  w.BeginObject();
  for (const wire::Field<Delivery>& f : wire::kDeliveryFields) {
    if (f.name == "receipt") continue;
    wire::WriteJsonValue(w, f.name, f.get(d));
  }
  w.EndObject();
  return w.str();
}

std::string Printable(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, kErrorBodyBytes)) {
    out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? ' ' : c;
  }
  if (text.size() > kErrorBodyBytes) out += "...";
  return out;
}

}  // namespace

class Pusher::Impl {
 public:
  Impl(net::EventLoop* loop, ServingQueue* queue, PusherOptions options,
       std::unique_ptr<HttpClient> http)
      : loop_(loop),
        queue_(queue),
        options_(std::move(options)),
        clock_(options_.clock),
        http_(std::move(http)),
        rng_(std::random_device{}()) {
    ledger_ = queue_->push_ledger();
    if (ledger_ == nullptr) {
      local_ledger_ = std::make_unique<LocalLedger>(clock_.get());
      ledger_ = local_ledger_.get();
    }
  }

  ~Impl() {
    *alive_ = false;
    for (auto& [name, g] : groups_) {
      if (g.ticket != 0) queue_->AbandonReserve(g.ticket);
    }
    if (refresh_timer_ != 0) loop_->CancelTimer(refresh_timer_);
    if (stop_timer_ != 0) loop_->CancelTimer(stop_timer_);
  }

  void Start() {
    loop_thread_ = std::this_thread::get_id();
    running_ = true;
    Refresh();
  }

  void Stop(int64_t deadline_ms, std::function<void()> done) {
    stopping_ = true;
    stop_done_ = std::move(done);
    if (refresh_timer_ != 0) loop_->CancelTimer(refresh_timer_);
    refresh_timer_ = 0;
    for (auto& [name, g] : groups_) {
      if (g.ticket != 0) queue_->AbandonReserve(g.ticket);
      g.ticket = 0;
      g.reserving = false;
      for (auto& inst : g.instances) GiveBackFreeSlots(*inst, 0);
    }
    if (requests_.empty()) {
      FinishStop();
      return;
    }
    Log(LogLevel::kInfo, "push: waiting up to %lld ms for %zu requests in flight",
        static_cast<long long>(deadline_ms), requests_.size());
    stop_timer_ = loop_->RunAfter(deadline_ms, [this] {
      stop_timer_ = 0;
      CancelAllRequests();
      FinishStop();
    });
  }

  void Put(const Subscription& s, std::function<void(Result<Subscription>)> done) {
    if (Status v = ValidateSubscription(s); !v.ok()) {
      done(v);
      return;
    }
    if (Result<std::vector<std::string>> keys = DecodeSecrets(s.secrets); !keys.ok()) {
      done(keys.status());
      return;
    }
    queue_->PutSubscriptionAsync(
        s, OnLoop<Result<Subscription>>([this, done = std::move(done)](Result<Subscription> r) {
          if (r.ok()) Refresh();
          done(std::move(r));
        }));
  }

  void Delete(std::string_view name, std::string_view url,
              std::function<void(Result<uint64_t>)> done) {
    queue_->DeleteSubscriptionAsync(
        name, url, OnLoop<Result<uint64_t>>([this, done = std::move(done)](Result<uint64_t> r) {
          if (r.ok() && *r > 0) Refresh();
          done(std::move(r));
        }));
  }

  void Describe(std::string_view name,
                std::function<void(Result<std::vector<InstanceView>>)> done) {
    queue_->SubscriptionsAsync(
        name,
        OnLoop<Result<std::vector<Subscription>>>(
            [this, done = std::move(done)](Result<std::vector<Subscription>> subs) mutable {
              if (!subs.ok()) {
                done(subs.status());
                return;
              }
              auto list = std::make_shared<std::vector<Subscription>>(std::move(*subs));
              ledger_->Figures(
                  *list,
                  OnLoop<Result<std::vector<PushFigures>>>(
                      [this, list,
                       done = std::move(done)](Result<std::vector<PushFigures>> figures) {
                        if (!figures.ok()) {
                          done(figures.status());
                          return;
                        }
                        std::vector<InstanceView> out;
                        out.reserve(list->size());
                        for (size_t i = 0; i < list->size(); ++i) {
                          out.push_back({std::move((*list)[i]),
                                         i < figures->size() ? (*figures)[i] : PushFigures{}});
                          out.back().figures.in_flight = InFlight(out.back().subscription);
                        }
                        done(std::move(out));
                      }));
            }));
  }

  // This server's requests open to an instance.
  uint32_t InFlight(const Subscription& s) const {
    auto g = groups_.find(s.name);
    if (g == groups_.end()) return 0;
    for (const InstancePtr& inst : g->second.instances) {
      if (inst->sub.url == s.url) return inst->in_flight;
    }
    return 0;
  }

  PusherStats stats() const {
    PusherStats s = stats_;
    s.in_flight = requests_.size();
    s.subscriptions = 0;
    for (const auto& [name, g] : groups_) s.subscriptions += g.instances.size();
    return s;
  }

 private:
  struct Instance {
    Subscription sub;
    std::vector<std::string> keys;  // decoded secrets
    // Slots held and not yet used: (lease, monotonic ms taken).
    std::vector<std::pair<std::string, int64_t>> free;
    uint32_t in_flight = 0;  // this server's requests to it
    bool acquiring = false;
    uint64_t rate_timer = 0;  // the rate held slots back: try again then
    bool gone = false;        // no longer registered
  };
  using InstancePtr = std::shared_ptr<Instance>;

  struct Group {
    std::vector<InstancePtr> instances;
    size_t next = 0;  // round-robin position
    bool reserving = false;
    uint64_t ticket = 0;      // the reserve waiting, if any
    uint64_t reserve_id = 0;  // which reserve `reserving` is: an abandoned one's answer is not it
    bool pump_posted = false;
  };

  struct Request {
    std::string name;
    InstancePtr instance;
    Delivery delivery;
    std::string lease;
    uint64_t http_id = 0;
    uint64_t touch_timer = 0;
  };

  // A store callback, run on the loop thread and not after this is gone
  // (net/on_loop.h).
  template <typename T>
  std::function<void(T)> OnLoop(std::function<void(T)> fn) {
    return net::OnLoopThread<T>(loop_, loop_thread_, alive_, std::move(fn));
  }

  // --- the registrations ----------------------------------------------------

  void Refresh() {
    if (stopping_) return;
    if (refresh_timer_ != 0) loop_->CancelTimer(refresh_timer_);
    refresh_timer_ = loop_->RunAfter(options_.refresh_ms, [this] {
      refresh_timer_ = 0;
      Refresh();
    });
    queue_->SubscriptionsAsync(
        "", OnLoop<Result<std::vector<Subscription>>>([this](Result<std::vector<Subscription>> r) {
          if (!r.ok()) {
            if (!refresh_failed_) {
              Log(LogLevel::kWarn, "push: cannot read the subscriptions: %s",
                  r.status().ToString().c_str());
            }
            refresh_failed_ = true;
            return;
          }
          refresh_failed_ = false;
          Apply(*r);
        }));
  }

  // Makes the groups match the store's list: new instances join, changed
  // ones take their new settings, missing ones leave once their requests end.
  void Apply(const std::vector<Subscription>& subs) {
    if (stopping_) return;
    std::map<std::pair<std::string, std::string>, const Subscription*> listed;
    for (const Subscription& s : subs) listed[{s.name, s.url}] = &s;
    for (auto& [name, g] : groups_) {
      for (InstancePtr& inst : g.instances) {
        auto it = listed.find({inst->sub.name, inst->sub.url});
        if (it == listed.end()) {
          inst->gone = true;
          GiveBackFreeSlots(*inst, 0);
          if (inst->rate_timer != 0) loop_->CancelTimer(inst->rate_timer);
          inst->rate_timer = 0;
          continue;
        }
        SetSubscription(*inst, *it->second);
        listed.erase(it);
      }
      std::erase_if(g.instances, [](const InstancePtr& i) { return i->gone; });
    }
    for (const auto& [key, s] : listed) {
      auto inst = std::make_shared<Instance>();
      SetSubscription(*inst, *s);
      groups_[s->name].instances.push_back(std::move(inst));
    }
    for (auto it = groups_.begin(); it != groups_.end();) {
      Group& g = it->second;
      if (g.instances.empty() && !g.reserving && !g.pump_posted) {
        it = groups_.erase(it);
        continue;
      }
      // Nobody free left to push to: stop waiting (jobs it took anyway come
      // back through OnReserved, which gives them back).
      StopWaitingIfNobodyIsFree(it->first);
      Pump(it->first, g);
      ++it;
    }
  }

  static void SetSubscription(Instance& inst, const Subscription& s) {
    inst.sub = s;
    Result<std::vector<std::string>> keys = DecodeSecrets(s.secrets);
    inst.keys = keys.ok() ? std::move(*keys) : std::vector<std::string>{};
  }

  int64_t LeaseMs(const Instance& inst) const {
    return inst.sub.timeout_ms + options_.reserve_wait_ms + kLeaseSlackMs;
  }

  void GiveBackFreeSlots(Instance& inst, int64_t older_than_ms) {
    const int64_t now = clock_->MonotonicMs();
    std::erase_if(inst.free, [&](const std::pair<std::string, int64_t>& slot) {
      if (older_than_ms > 0 && now - slot.second < older_than_ms) return false;
      ledger_->Settle(inst.sub, slot.first, PushLedger::Outcome{});
      return true;
    });
  }

  // --- pushing -------------------------------------------------------------

  bool Usable(const Instance& inst, int64_t now_ms) const {
    return !inst.gone && !Lapsed(inst.sub, now_ms);
  }

  // Takes slots where an instance has room, and reserves for the free ones.
  void Pump(const std::string& name, Group& g) {
    if (stopping_ || !running_) return;
    const int64_t now_ms = clock_->NowMs();
    size_t free = 0;
    uint32_t longest_timeout = 0;
    std::set<std::string> topics;
    for (const InstancePtr& inst : g.instances) {
      if (!Usable(*inst, now_ms)) continue;
      const uint32_t held = inst->in_flight + static_cast<uint32_t>(inst->free.size());
      if (held < inst->sub.concurrency && !inst->acquiring && inst->rate_timer == 0) {
        Acquire(name, inst, inst->sub.concurrency - held);
      }
      if (!inst->free.empty()) {
        free += inst->free.size();
        longest_timeout = std::max(longest_timeout, inst->sub.timeout_ms);
        topics.insert(inst->sub.topics.begin(), inst->sub.topics.end());
      }
    }
    if (free == 0 || g.reserving) return;
    ReserveRequest req;
    req.topics.assign(topics.begin(), topics.end());
    req.count = static_cast<uint32_t>(std::min<size_t>(free, kMaxReserveCount));
    req.wait_ms = options_.reserve_wait_ms;
    // Reserved for as long as a request may run, not the job's TTR (meant
    // for pull workers): a server that dies mid-request frees its jobs after
    // the request's timeout, not minutes later. One reserve serves every instance with a
    // free slot, whichever gets each job, so the longest of their timeouts.
    req.ttr_ms = longest_timeout + kReservationSlackMs;
    g.reserving = true;
    const uint64_t id = ++next_reserve_id_;
    g.reserve_id = id;
    uint64_t ticket = queue_->ReserveAsync(
        req, OnLoop<Result<Deliveries>>([this, name, id](Result<Deliveries> got) {
          OnReserved(name, id, std::move(got));
        }));
    auto it = groups_.find(name);
    if (it != groups_.end() && it->second.reserving) it->second.ticket = ticket;
  }

  void Acquire(const std::string& name, const InstancePtr& inst, uint32_t want) {
    inst->acquiring = true;
    ledger_->Acquire(
        inst->sub, want, LeaseMs(*inst),
        OnLoop<Result<PushLedger::Grant>>([this, name, inst](Result<PushLedger::Grant> grant) {
          inst->acquiring = false;
          if (!grant.ok()) {
            Log(LogLevel::kWarn, "push: %s: cannot count requests to %s: %s", name.c_str(),
                inst->sub.url.c_str(), grant.status().ToString().c_str());
            RetryLater(name, inst, 1000);
            return;
          }
          const int64_t now = clock_->MonotonicMs();
          for (std::string& lease : grant->leases) {
            if (inst->gone || stopping_) {
              ledger_->Settle(inst->sub, lease, PushLedger::Outcome{});
            } else {
              inst->free.emplace_back(std::move(lease), now);
            }
          }
          if (grant->rate_wait_ms > 0) RetryLater(name, inst, grant->rate_wait_ms);
          SchedulePump(name);
        }));
  }

  void RetryLater(const std::string& name, const InstancePtr& inst, int64_t ms) {
    if (inst->rate_timer != 0 || stopping_) return;
    inst->rate_timer = loop_->RunAfter(ms, [this, name, inst] {
      inst->rate_timer = 0;
      SchedulePump(name);
    });
  }

  // Pumps from the loop rather than from inside a store's answer, so a store
  // that answers inside the call does not recurse once per batch.
  void SchedulePump(const std::string& name) {
    auto it = groups_.find(name);
    if (it == groups_.end() || it->second.pump_posted) return;
    it->second.pump_posted = true;
    std::weak_ptr<bool> alive = alive_;
    loop_->Post([this, alive, name] {
      if (auto a = alive.lock(); !a || !*a) return;
      auto g = groups_.find(name);
      if (g == groups_.end()) return;
      g->second.pump_posted = false;
      Pump(name, g->second);
    });
  }

  void OnReserved(const std::string& name, uint64_t id, Result<Deliveries> got) {
    auto it = groups_.find(name);
    Group* g = it == groups_.end() ? nullptr : &it->second;
    if (g == nullptr || !g->reserving || g->reserve_id != id) {
      // A reserve abandoned (its instances left, or the pusher stops) that
      // took jobs after all: they go back at once, their attempt not counted.
      if (got.ok()) {
        for (const Delivery& d : *got) {
          queue_->UnreserveAsync(d.id, d.receipt, [](const Status&) {});
        }
      }
      return;
    }
    g->reserving = false;
    g->ticket = 0;
    if (!got.ok()) {
      if (!IsShuttingDown(got.status()) && !reserve_failed_) {
        Log(LogLevel::kWarn, "push: %s: reserve failed: %s", name.c_str(),
            got.status().ToString().c_str());
      }
      reserve_failed_ = true;
      if (!stopping_) {
        std::weak_ptr<bool> alive = alive_;
        loop_->RunAfter(1000, [this, alive, name] {
          if (auto a = alive.lock(); a && *a) SchedulePump(name);
        });
      }
      return;
    }
    reserve_failed_ = false;
    const int64_t now_ms = clock_->NowMs();
    for (Delivery& d : *got) {
      InstancePtr inst = stopping_ ? nullptr : Pick(*g, d.topic, now_ms);
      if (inst == nullptr) {
        // Nobody free to take it (the instance lapsed or left meanwhile):
        // back to ready at once, the attempt not counted.
        queue_->UnreserveAsync(d.id, d.receipt, [](const Status&) {});
        continue;
      }
      std::string lease = std::move(inst->free.back().first);
      inst->free.pop_back();
      Send(name, inst, std::move(d), std::move(lease));
    }
    for (const InstancePtr& inst : g->instances) {
      GiveBackFreeSlots(*inst, options_.reserve_wait_ms + kLeaseSlackMs / 2);
    }
    SchedulePump(name);
  }

  // A name's waiting reserve is for its free slots: once no usable instance
  // has one (the last left or lapsed), the wait is withdrawn, so a job that
  // falls due meanwhile is not taken only to be given back.
  void StopWaitingIfNobodyIsFree(const std::string& name) {
    auto it = groups_.find(name);
    if (it == groups_.end() || it->second.ticket == 0) return;
    Group& g = it->second;
    const int64_t now_ms = clock_->NowMs();
    for (const InstancePtr& inst : g.instances) {
      if (!inst->free.empty() && Usable(*inst, now_ms)) return;
    }
    queue_->AbandonReserve(g.ticket);
    g.ticket = 0;
    g.reserving = false;
  }

  // The next usable instance, round-robin, with a free slot and the topic.
  InstancePtr Pick(Group& g, std::string_view topic, int64_t now_ms) {
    const size_t n = g.instances.size();
    for (size_t i = 0; i < n; ++i) {
      const InstancePtr& inst = g.instances[(g.next + i) % n];
      if (inst->free.empty() || !Usable(*inst, now_ms)) continue;
      if (std::find(inst->sub.topics.begin(), inst->sub.topics.end(), topic) ==
          inst->sub.topics.end()) {
        continue;
      }
      g.next = (g.next + i + 1) % n;
      return inst;
    }
    return nullptr;
  }

  void Send(const std::string& name, const InstancePtr& inst, Delivery d, std::string lease) {
    HttpRequest req;
    req.url = inst->sub.url;
    req.timeout_ms = inst->sub.timeout_ms;
    req.body = JobJson(d);
    const int64_t now_s = clock_->NowMs() / 1000;
    req.headers.emplace_back("webhook-id", d.id);
    req.headers.emplace_back("webhook-timestamp", std::to_string(now_s));
    if (!inst->keys.empty()) {
      req.headers.emplace_back("webhook-signature",
                               SignatureHeader(inst->keys, d.id, now_s, req.body));
    }
    req.headers.emplace_back("delayq-topic", d.topic);
    req.headers.emplace_back("delayq-attempt", std::to_string(d.attempts));

    const uint64_t number = next_request_++;
    Request& r = requests_[number];
    r.name = name;
    r.instance = inst;
    r.lease = std::move(lease);
    ++inst->in_flight;
    ++stats_.requests;
    // The reservation lasts the longest timeout among the instances that had
    // free slots when the reserve was made (Pump). An instance registered or
    // changed since may allow a longer request: that one keeps it alive as a
    // worker would, touching at half the TTR.
    if (d.ttr_ms > 0 && d.ttr_ms < inst->sub.timeout_ms + kReservationSlackMs) {
      ScheduleTouch(number, d.ttr_ms);
    }
    r.delivery = std::move(d);
    r.http_id = http_->Post(std::move(req),
                            [this, number](const HttpResponse& resp) { OnAnswer(number, resp); });
  }

  void ScheduleTouch(uint64_t number, uint32_t ttr_ms) {
    auto it = requests_.find(number);
    if (it == requests_.end()) return;
    it->second.touch_timer = loop_->RunAfter(std::max<int64_t>(1, ttr_ms / 2), [this, number] {
      auto r = requests_.find(number);
      if (r == requests_.end()) return;
      r->second.touch_timer = 0;
      const Delivery& d = r->second.delivery;
      queue_->TouchAsync(d.id, d.receipt, [](const Status&) {});
      ScheduleTouch(number, d.ttr_ms);
    });
  }

  void OnAnswer(uint64_t number, const HttpResponse& resp) {
    auto it = requests_.find(number);
    if (it == requests_.end()) return;
    Request r = std::move(it->second);
    requests_.erase(it);
    if (r.touch_timer != 0) loop_->CancelTimer(r.touch_timer);
    Instance& inst = *r.instance;
    --inst.in_flight;
    const Delivery& d = r.delivery;
    PushLedger::Outcome outcome;
    outcome.used = true;
    outcome.at_ms = clock_->NowMs();

    if (resp.status >= 200 && resp.status < 300) {
      outcome.ok = true;
      ++stats_.delivered;
      queue_->FinishAsync(d.id, d.receipt, OnLoop<Status>([id = d.id](const Status& s) {
                            if (!s.ok() && s.code() != Code::kNotFound) {
                              Log(LogLevel::kWarn, "push: finishing %s after its 2xx: %s",
                                  id.c_str(), s.ToString().c_str());
                            }
                          }));
    } else if (resp.status == 410) {
      // The instance says it is gone for good: no more requests to it, and
      // the job goes to another at once, this attempt not counted.
      ++stats_.failed;
      outcome.error = "HTTP 410 Gone: the instance was removed";
      queue_->UnreserveAsync(d.id, d.receipt, [](const Status&) {});
      if (!inst.gone) {
        inst.gone = true;
        GiveBackFreeSlots(inst, 0);
        Log(LogLevel::kInfo, "push: %s: %s answered 410 Gone; removing it", r.name.c_str(),
            inst.sub.url.c_str());
        StopWaitingIfNobodyIsFree(r.name);
        queue_->DeleteSubscriptionAsync(
            inst.sub.name, inst.sub.url,
            OnLoop<Result<uint64_t>>([this](const Result<uint64_t>&) { Refresh(); }));
      }
    } else if (resp.status != 0 && resp.outcome == "bury") {
      // The receiver gives up on the job (delayq::Endpoint's Outcome::Bury):
      // set aside at once, its answer as the reason.
      ++stats_.failed;
      outcome.error = "HTTP " + std::to_string(resp.status) + " (buried by the receiver)";
      std::string reason = resp.body.empty() ? outcome.error : Printable(resp.body);
      queue_->BuryAsync(d.id, d.receipt, reason + " (" + inst.sub.url + ")", [](const Status&) {});
    } else {
      ++stats_.failed;
      int64_t delay = -1;
      if (resp.status == 0) {
        outcome.error = resp.error;
      } else {
        outcome.error = "HTTP " + std::to_string(resp.status);
        if (!resp.body.empty()) outcome.error += ": " + Printable(resp.body);
        if ((resp.status == 429 || resp.status == 503) && !resp.retry_after.empty()) {
          if (auto ms = ParseRetryAfterMs(resp.retry_after, outcome.at_ms,
                                          inst.sub.retry.max_backoff_ms)) {
            delay = *ms;
          }
        }
      }
      if (delay < 0) {
        delay = BackoffMs(inst.sub.retry, d.attempts,
                          std::uniform_real_distribution<double>(0.0, 1.0)(rng_));
      }
      std::string error = outcome.error + " (" + inst.sub.url + ")";
      // Release buries the job when this attempt used up its max_attempts.
      queue_->ReleaseAsync(d.id, d.receipt, delay, error, [](const Status&) {});
    }
    ledger_->Settle(inst.sub, r.lease, outcome);
    if (stopping_) {
      if (requests_.empty() && stop_done_) {
        if (stop_timer_ != 0) loop_->CancelTimer(stop_timer_);
        stop_timer_ = 0;
        FinishStop();
      }
      return;
    }
    SchedulePump(r.name);
  }

  void CancelAllRequests() {
    for (auto& [number, r] : requests_) {
      http_->Cancel(r.http_id);
      if (r.touch_timer != 0) loop_->CancelTimer(r.touch_timer);
      queue_->UnreserveAsync(r.delivery.id, r.delivery.receipt, [](const Status&) {});
      ledger_->Settle(r.instance->sub, r.lease, PushLedger::Outcome{});
    }
    if (!requests_.empty()) {
      Log(LogLevel::kInfo,
          "push: %zu requests still in flight at the deadline: cancelled, "
          "their jobs given back",
          requests_.size());
    }
    requests_.clear();
  }

  void FinishStop() {
    if (!stop_done_) return;
    auto done = std::move(stop_done_);
    stop_done_ = nullptr;
    done();
  }

  net::EventLoop* loop_;
  ServingQueue* queue_;
  PusherOptions options_;
  std::shared_ptr<const Clock> clock_;
  std::unique_ptr<HttpClient> http_;
  std::unique_ptr<LocalLedger> local_ledger_;
  PushLedger* ledger_ = nullptr;
  std::mt19937_64 rng_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  std::thread::id loop_thread_ = std::this_thread::get_id();

  std::map<std::string, Group> groups_;
  std::unordered_map<uint64_t, Request> requests_;
  uint64_t next_request_ = 1;
  uint64_t next_reserve_id_ = 0;
  uint64_t refresh_timer_ = 0;
  uint64_t stop_timer_ = 0;
  bool running_ = false;
  bool stopping_ = false;
  bool refresh_failed_ = false;
  bool reserve_failed_ = false;
  std::function<void()> stop_done_;
  PusherStats stats_;
};

Result<std::unique_ptr<Pusher>> Pusher::Create(net::EventLoop* loop, ServingQueue* queue,
                                               PusherOptions options) {
  if (options.clock == nullptr) options.clock = SystemClock();
  // libcurl's per-host cap counts busy connections too: an instance's
  // concurrency must never wait inside libcurl for one of its own.
  options.http.max_idle_per_host =
      std::max<long>(options.http.max_idle_per_host, kMaxSubscriptionConcurrency);
  Result<std::unique_ptr<HttpClient>> http = HttpClient::Create(loop, options.http);
  if (!http.ok()) return http.status();
  return std::unique_ptr<Pusher>(
      new Pusher(std::make_unique<Impl>(loop, queue, std::move(options), std::move(*http))));
}

Pusher::Pusher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Pusher::~Pusher() = default;
void Pusher::Start() { impl_->Start(); }
void Pusher::Stop(int64_t deadline_ms, std::function<void()> done) {
  impl_->Stop(deadline_ms, std::move(done));
}
void Pusher::Put(const Subscription& s, std::function<void(Result<Subscription>)> done) {
  impl_->Put(s, std::move(done));
}
void Pusher::Delete(std::string_view name, std::string_view url,
                    std::function<void(Result<uint64_t>)> done) {
  impl_->Delete(name, url, std::move(done));
}
void Pusher::Describe(std::string_view name,
                      std::function<void(Result<std::vector<InstanceView>>)> done) {
  impl_->Describe(name, std::move(done));
}
PusherStats Pusher::stats() const { return impl_->stats(); }

}  // namespace delayq::push
