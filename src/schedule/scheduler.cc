// Scheduler (scheduler.h): every schedule's next firing kept in the queue,
// catch-up, overlap, pause, backfill. The decisions are in Decide (what the
// schedule's record should become at `now`, given what is known about the
// previous firing's job); the rest is the loop's bookkeeping: a cache of the
// records, a heap of wake-up times, one store call in flight per schedule.
#include "schedule/scheduler.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <queue>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>

#include "common/log.h"
#include "cron/cron.h"
#include "net/on_loop.h"

namespace delayq::schedule {
namespace {

constexpr int64_t kIdle = std::numeric_limits<int64_t>::max();
// After a store call failed: look again this much later.
constexpr int64_t kRetryMs = 1000;
// pause_on_failure: how often the latest firing's job is looked at.
constexpr int64_t kFailureCheckMs = 1000;
// Distinct parsed expressions kept for sharing (then the cache starts over).
constexpr size_t kMaxParsedKept = 10'000;
// Schedules looked at in one loop turn (RunDue).
constexpr int kActsPerTurn = 256;

// What is known of the previous firing's job (the latest whose job was
// added): live (delayed, ready or reserved), buried, or gone.
struct PrevJob {
  bool live = false;
  bool buried = false;
};

JobSpec FiringJob(const Schedule& s, int64_t fire_at_ms) {
  JobSpec job;
  job.topic = s.topic;
  job.id = FiringId(s.name, fire_at_ms);
  job.run_at_ms = fire_at_ms;
  job.ttr_ms = s.ttr_ms;
  job.priority = s.priority;
  job.max_attempts = s.max_attempts;
  job.body = s.body;
  return job;
}

// Records that the fire times in [from, to] were skipped (for backfill's
// "already fired"): merged with the newest range when they touch.
void AddGap(Schedule* s, int64_t from, int64_t to) {
  if (from > to) return;
  if (!s->gaps.empty() && s->gaps.back().second + 1 >= from) {
    s->gaps.back().second = std::max(s->gaps.back().second, to);
    return;
  }
  s->gaps.emplace_back(from, to);
  if (s->gaps.size() > kMaxScheduleGaps) s->gaps.erase(s->gaps.begin());
}

// Takes [from, to] out of the skipped ranges (a backfill filled it).
void RemoveFromGaps(Schedule* s, int64_t from, int64_t to) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& [a, b] : s->gaps) {
    if (b < from || a > to) {
      out.emplace_back(a, b);
      continue;
    }
    if (a < from) out.emplace_back(a, from - 1);
    if (b > to) out.emplace_back(to + 1, b);
  }
  while (out.size() > kMaxScheduleGaps) out.erase(out.begin());
  s->gaps = std::move(out);
}

bool InGap(const Schedule& s, int64_t t) {
  for (const auto& [a, b] : s.gaps) {
    if (a <= t && t <= b) return true;
  }
  return false;
}

// Whether fire time t has had its job (as far as the record remembers).
bool Fired(const Schedule& s, int64_t t) {
  return s.first_fire_at_ms != 0 && s.first_fire_at_ms <= t && t <= s.last_fire_at_ms &&
         !InGap(s, t);
}

// One step for one schedule at `now`.
struct Decision {
  // The previous firing's job must be looked at first (then Decide again).
  std::optional<std::string> need_prev;
  bool write = false;
  Schedule state;
  std::vector<JobSpec> jobs;
  std::vector<std::string> withdraw;
  uint64_t skipped = 0;
  // Nothing to write: look again then (kIdle: only when the record changes).
  int64_t wake_ms = kIdle;
};

// Catch-up: which of the fire times in (after, now] that were missed get a
// job, by the schedule's policy; the rest are counted and remembered as
// skipped. Ascending.
std::vector<int64_t> CatchUp(const cron::Cron& c, int64_t after, int64_t now, Decision* d) {
  Schedule& st = d->state;
  if (after >= now) return {};
  uint64_t total = 0;
  std::vector<int64_t> chosen;
  switch (st.catchup) {
    case Catchup::kNone:
      (void)c.Between(after, now, 0, &total);
      break;
    case Catchup::kLast:
      chosen = c.Between(after, now, 1, &total);
      break;
    case Catchup::kAll: {
      (void)c.Between(after, now, 0, &total);
      int64_t from = std::max(after, now - st.catchup_window_ms);
      chosen = c.Between(from, now, kMaxFiringsPerCatchup, nullptr);
      break;
    }
  }
  if (total == 0) return {};
  d->skipped += total - std::min<uint64_t>(total, chosen.size());
  AddGap(&st, after + 1, chosen.empty() ? now : chosen.front() - 1);
  return chosen;
}

// What the record `s` should become at `now` (see the file comment of
// scheduler.h for the rules). `prev`: the previous firing's job, when the
// last Decide asked for it.
Decision Decide(const Schedule& s, const cron::Cron& c, int64_t now, const PrevJob* prev,
                int64_t check_ms, int64_t plan_after_due_ms) {
  Decision d;
  d.state = s;
  Schedule& st = d.state;
  const std::string prev_id = st.last_fire_at_ms != 0 ? FiringId(st.name, st.last_fire_at_ms) : "";

  // The planned firing goes away (paused or changed): withdrawn when it is
  // not yet due; when it is, it happened (its job was added ahead) with
  // overlap allow, and was missed otherwise.
  auto unplan = [&] {
    if (st.next_fire_at_ms == 0) return;
    if (st.next_fire_at_ms > now) {
      d.withdraw.push_back(FiringId(st.name, st.next_fire_at_ms));
    } else if (st.overlap == Overlap::kAllow && st.planned_version == s.version) {
      st.last_fire_at_ms = std::max(st.last_fire_at_ms, st.next_fire_at_ms);
    } else {
      d.skipped++;
      AddGap(&st, st.next_fire_at_ms, st.next_fire_at_ms);
    }
    st.next_fire_at_ms = 0;
    st.planned_version = 0;
    d.write = true;
  };

  // Firings due now, `candidates` ascending: with overlap allow each gets
  // its job; otherwise only the latest is considered, and only when the
  // previous job is not live (kSkip skips it then, kBufferOne holds it).
  // Returns false when the previous job must be looked at first.
  auto fire = [&](const std::vector<int64_t>& candidates) {
    if (candidates.empty()) return true;
    if (st.overlap == Overlap::kAllow) {
      for (int64_t t : candidates) d.jobs.push_back(FiringJob(st, t));
      st.last_fire_at_ms = std::max(st.last_fire_at_ms, candidates.back());
      return true;
    }
    if (!prev_id.empty() && prev == nullptr) return false;
    const int64_t latest = candidates.back();
    d.skipped += candidates.size() - 1;
    if (candidates.size() > 1) AddGap(&st, candidates.front(), latest - 1);
    if (prev != nullptr && prev->live) {
      if (st.overlap == Overlap::kBufferOne && st.buffered_fire_at_ms == 0) {
        st.buffered_fire_at_ms = latest;
      } else {
        d.skipped++;
        AddGap(&st, latest, latest);
      }
      return true;
    }
    d.jobs.push_back(FiringJob(st, latest));
    st.last_fire_at_ms = latest;
    return true;
  };

  // The next fire time after now, planned under the current definition;
  // with overlap allow its job is added now, ahead.
  auto plan = [&] {
    int64_t next = c.Next(now);
    if (next == cron::kNever) next = 0;
    st.next_fire_at_ms = next;
    st.planned_version = next != 0 ? st.version : 0;
    if (st.first_fire_at_ms == 0) st.first_fire_at_ms = next;
    if (next != 0 && st.overlap == Overlap::kAllow) d.jobs.push_back(FiringJob(st, next));
    d.write = true;
  };

  if (st.paused) {
    unplan();
    if (st.buffered_fire_at_ms != 0) {
      d.skipped++;
      AddGap(&st, st.buffered_fire_at_ms, st.buffered_fire_at_ms);
      st.buffered_fire_at_ms = 0;
      d.write = true;
    }
    if (st.paused_at_ms == 0) {
      st.paused_at_ms = now;
      d.write = true;
    }
    return d;
  }

  if (st.next_fire_at_ms != 0 && st.planned_version != st.version) {
    // The definition changed: what was planned under the old one goes, and
    // the new one starts from now (no catch-up for a change).
    unplan();
    st.first_fire_at_ms = 0;
    st.gaps.clear();
    st.paused_at_ms = 0;
    plan();
    return d;
  }

  if (st.next_fire_at_ms == 0) {
    if (st.paused_at_ms != 0) {
      // Resumed: the fire times passed while paused, by `catchup`.
      const int64_t after = std::max(st.paused_at_ms, st.last_fire_at_ms);
      Decision probe = d;
      std::vector<int64_t> due = CatchUp(c, after, now, &probe);
      if (st.overlap != Overlap::kAllow && !due.empty() && !prev_id.empty() && prev == nullptr) {
        d.need_prev = prev_id;
        return d;
      }
      d = std::move(probe);
      (void)fire(due);
      d.state.paused_at_ms = 0;
    } else {
      // New, or changed while not planned: no catch-up.
      d.state.first_fire_at_ms = 0;
      d.state.gaps.clear();
    }
    plan();
    return d;
  }

  if (st.next_fire_at_ms <= now) {
    // The planned firing has fallen due.
    const int64_t due_at = st.next_fire_at_ms;
    Decision probe = d;
    std::vector<int64_t> missed = CatchUp(c, due_at, now, &probe);
    if (st.overlap == Overlap::kAllow) {
      d = std::move(probe);
      d.state.last_fire_at_ms = std::max(d.state.last_fire_at_ms, due_at);  // added ahead
      (void)fire(missed);
    } else {
      if (!prev_id.empty() && prev == nullptr) {
        d.need_prev = prev_id;
        return d;
      }
      d = std::move(probe);
      missed.insert(missed.begin(), due_at);
      (void)fire(missed);
    }
    plan();
    return d;
  }

  // Planned, not yet due. With overlap allow its job is in the queue: the
  // next one is planned a little after it falls due, not on the instant
  // when the queue hands out the jobs of every schedule due then.
  d.wake_ms = st.next_fire_at_ms + (st.overlap == Overlap::kAllow ? plan_after_due_ms : 0);
  if (st.buffered_fire_at_ms != 0) {
    if (!prev_id.empty() && prev == nullptr) {
      d.need_prev = prev_id;
      return d;
    }
    if (prev == nullptr || !prev->live) {
      d.jobs.push_back(FiringJob(st, st.buffered_fire_at_ms));
      st.last_fire_at_ms = std::max(st.last_fire_at_ms, st.buffered_fire_at_ms);
      st.buffered_fire_at_ms = 0;
      d.write = true;
      return d;
    }
    d.wake_ms = std::min(d.wake_ms, now + check_ms);
  }
  // Only a firing after the latest put counts: resuming (or changing) the
  // schedule accepts the failures before it.
  if (st.pause_on_failure && !prev_id.empty() && st.last_fire_at_ms > st.updated_ms) {
    if (prev == nullptr) {
      d.need_prev = prev_id;
      return d;
    }
    if (prev->buried) {
      st.paused = true;
      st.pause_reason = "job " + prev_id + " was buried";
      d.write = true;
      return d;
    }
    if (prev->live) d.wake_ms = std::min(d.wake_ms, now + kFailureCheckMs);
  }
  return d;
}

}  // namespace

class Scheduler::Impl {
 public:
  Impl(net::EventLoop* loop, ServingQueue* queue, SchedulerOptions options)
      : loop_(loop), queue_(queue), options_(std::move(options)) {
    if (options_.clock == nullptr) options_.clock = SystemClock();
    // A store only this process writes (memory, embedded) changes only
    // through this scheduler: no need to read it again and again.
    shared_store_ = queue_->push_ledger() != nullptr;
  }

  ~Impl() {
    *alive_ = false;
    if (clock_token_ != 0) options_.clock->Unsubscribe(clock_token_);
    if (timer_ != 0) loop_->CancelTimer(timer_);
    if (refresh_timer_ != 0) loop_->CancelTimer(refresh_timer_);
  }

  void Start() {
    loop_thread_ = std::this_thread::get_id();
    started_ = true;
    if (!options_.clock->IsRealTime()) {
      // Time moves when the test moves it: look at the heap then.
      std::weak_ptr<bool> alive = alive_;
      net::EventLoop* loop = loop_;
      clock_token_ = options_.clock->Subscribe([loop, alive, this] {
        loop->Post([alive, this] {
          if (auto a = alive.lock(); a && *a) RunDue();
        });
      });
    }
    Refresh();
  }

  void Stop() {
    stopped_ = true;
    for (auto& [name, e] : entries_) Settled(e);
    if (timer_ != 0) loop_->CancelTimer(timer_);
    if (refresh_timer_ != 0) loop_->CancelTimer(refresh_timer_);
    timer_ = refresh_timer_ = 0;
  }

  void Put(const Schedule& s, std::function<void(Result<Schedule>)> done) {
    auto parsed = cron::Cron::Parse(s.cron, s.timezone);
    if (!parsed.ok()) return done(parsed.status());
    if (Status v = ValidateScheduleDefinition(s); !v.ok()) return done(v);
    queue_->PutScheduleAsync(
        s, OnLoop<Result<Schedule>>([this, done = std::move(done)](Result<Schedule> r) mutable {
          if (!r.ok()) return done(std::move(r));
          // Answered once the scheduler has planned it (next_fire_at_ms set, or
          // the firing ahead withdrawn on a pause), so the caller sees that.
          const std::string name = r->name;
          Learn(*r);
          auto it = entries_.find(name);
          if (it == entries_.end()) return done(std::move(r));
          if (!it->second.busy) return done(it->second.s);  // planned inside the call
          it->second.waiters.emplace_back(
              [done = std::move(done)](const Schedule& planned) { done(planned); });
        }));
  }

  void Get(std::string_view name, std::function<void(Result<Schedule>)> done) {
    queue_->SchedulesAsync(
        name, OnLoop<Result<std::vector<Schedule>>>(
                  [done = std::move(done), n = std::string(name)](Result<std::vector<Schedule>> r) {
                    if (!r.ok()) return done(r.status());
                    if (r->empty()) return done(NotFound("schedule \"" + n + "\" not found"));
                    done(std::move(r->front()));
                  }));
  }

  void List(std::function<void(Result<std::vector<Schedule>>)> done) {
    queue_->SchedulesAsync("", OnLoop<Result<std::vector<Schedule>>>(std::move(done)));
  }

  void Delete(std::string_view name, std::function<void(Result<Schedule>)> done) {
    queue_->DeleteScheduleAsync(
        name, OnLoop<Result<Schedule>>([this, done = std::move(done)](Result<Schedule> r) {
          if (r.ok()) {
            Forget(r->name);
            if (r->next_fire_at_ms > Now())
              WithdrawIfDelayed(FiringId(r->name, r->next_fire_at_ms));
          }
          done(std::move(r));
        }));
  }

  void SetPaused(std::string_view name, bool paused, std::function<void(Result<Schedule>)> done) {
    Get(name, [this, paused, done = std::move(done)](Result<Schedule> r) mutable {
      if (!r.ok()) return done(r.status());
      if (r->paused == paused && (paused || r->pause_reason.empty())) return done(std::move(*r));
      Schedule s = std::move(*r);
      s.paused = paused;
      Put(s, std::move(done));
    });
  }

  void Backfill(std::string_view name, int64_t from_ms, int64_t to_ms, Overlap overlap,
                std::function<void(Result<BackfillResult>)> done) {
    if (overlap == Overlap::kBufferOne) {
      return done(InvalidArgument("overlap: a backfill takes allow or skip, not buffer_one"));
    }
    const int64_t now = Now();
    if (from_ms > to_ms) return done(InvalidArgument("from_ms: must not be after to_ms"));
    if (to_ms > now) {
      return done(InvalidArgument("to_ms: a backfill covers the past; " + std::to_string(to_ms) +
                                  " is " + std::to_string(to_ms - now) + " ms ahead"));
    }
    Get(name, [this, from_ms, to_ms, overlap, done = std::move(done)](Result<Schedule> r) mutable {
      if (!r.ok()) return done(r.status());
      BackfillOnce(*r, from_ms, to_ms, overlap, std::move(done), /*tries=*/3);
    });
  }

  SchedulerStats stats() const {
    SchedulerStats s = stats_;
    s.schedules = entries_.size();
    for (const auto& [name, e] : entries_) {
      const int64_t next = e.s.next_fire_at_ms;
      if (next != 0 && !e.s.paused && (s.next_fire_at_ms == 0 || next < s.next_fire_at_ms)) {
        s.next_fire_at_ms = next;
      }
    }
    return s;
  }

 private:
  struct Entry {
    Schedule s;
    std::optional<cron::Cron> cron;  // none: the stored expression does not parse here
    bool busy = false;               // a store call for it is in flight
    // Puts answered when the store calls in flight end (Put).
    std::vector<std::function<void(const Schedule&)>> waiters;
    int64_t wake_ms = kIdle;
  };

  int64_t Now() const { return options_.clock->NowMs(); }

  template <typename T>
  std::function<void(T)> OnLoop(std::function<void(T)> fn) {
    return net::OnLoopThread<T>(loop_, loop_thread_, alive_, std::move(fn));
  }

  // A record read from or written to the store: cached, and looked at.
  void Learn(const Schedule& s) {
    Entry& e = entries_[s.name];
    // Older than what we have (the same schedule, not one made again since).
    if (e.s.created_ms == s.created_ms && e.s.revision > s.revision) return;
    if (!e.cron.has_value() || e.s.cron != s.cron || e.s.timezone != s.timezone) {
      std::string key = s.timezone + "\n" + s.cron;
      auto known = parsed_.find(key);
      if (known != parsed_.end()) {
        e.cron = known->second;
      } else if (auto parsed = cron::Cron::Parse(s.cron, s.timezone); parsed.ok()) {
        if (parsed_.size() >= kMaxParsedKept) parsed_.clear();
        e.cron = *parsed;
        parsed_.emplace(std::move(key), std::move(*parsed));
      } else {
        e.cron.reset();
        Log(LogLevel::kWarn, "schedule %s: %s; not firing it", s.name.c_str(),
            parsed.status().message().c_str());
      }
    }
    e.s = s;
    Act(s.name);
  }

  void Forget(const std::string& name) { entries_.erase(name); }

  // Nothing more to do for `e` now: the puts waiting for it are answered.
  static void Settled(Entry& e) {
    auto waiters = std::move(e.waiters);
    e.waiters.clear();
    for (auto& w : waiters) w(e.s);
  }

  void Act(const std::string& name, const PrevJob* prev = nullptr) {
    if (stopped_ || !started_) return;
    auto it = entries_.find(name);
    if (it == entries_.end()) return;
    Entry& e = it->second;
    if (e.busy) return;  // its store call's answer looks at it again
    if (!e.cron.has_value()) return Settled(e);
    const int64_t now = Now();
    Decision d = Decide(e.s, *e.cron, now, prev, options_.check_ms, options_.plan_after_due_ms);
    if (d.need_prev.has_value()) {
      e.busy = true;
      queue_->GetAsync(*d.need_prev, OnLoop<Result<JobInfo>>([this, name](Result<JobInfo> j) {
        auto it = entries_.find(name);
        if (it == entries_.end()) return;
        it->second.busy = false;
        if (!j.ok() && j.status().code() != Code::kNotFound) {
          Wake(name, Now() + kRetryMs);
          Settled(it->second);
          return;
        }
        PrevJob p;
        p.live = j.ok() && j->state != JobState::kBuried;
        p.buried = j.ok() && j->state == JobState::kBuried;
        Act(name, &p);
      }));
      return;
    }
    if (!d.write) {
      Wake(name, d.wake_ms);
      Settled(e);
      return;
    }
    ScheduleFiring f;
    f.name = name;
    f.revision = e.s.revision;
    f.state = std::move(d.state);
    f.jobs = std::move(d.jobs);
    f.withdraw = std::move(d.withdraw);
    f.state.firings += f.jobs.size();
    f.state.skipped += d.skipped;
    const uint64_t skipped = d.skipped;
    e.busy = true;
    queue_->FireScheduleAsync(
        f, OnLoop<Result<ScheduleFired>>([this, name, skipped](Result<ScheduleFired> r) {
          auto it = entries_.find(name);
          if (it == entries_.end()) return;
          Entry& e = it->second;
          e.busy = false;
          if (!r.ok()) {
            if (r.status().code() == Code::kNotFound) {
              Settled(e);
              entries_.erase(it);
              return;
            }
            Log(LogLevel::kWarn, "schedule %s: %s; trying again", name.c_str(),
                r.status().message().c_str());
            Wake(name, Now() + kRetryMs);
            Settled(e);
            return;
          }
          if (r->applied) {
            stats_.firings += r->added;
            stats_.skipped += skipped;
          } else {
            stats_.conflicts++;
          }
          e.s = std::move(r->schedule);
          Act(name);
        }));
  }

  // Looks at `name` again at wake_ms (kIdle: not until its record changes).
  void Wake(const std::string& name, int64_t wake_ms) {
    auto it = entries_.find(name);
    if (it == entries_.end()) return;
    it->second.wake_ms = wake_ms;
    if (wake_ms == kIdle) return;
    heap_.emplace(wake_ms, name);
    if (wake_ms < armed_for_) Arm();
  }

  void Arm() {
    if (stopped_) return;
    if (timer_ != 0) loop_->CancelTimer(timer_);
    timer_ = 0;
    armed_for_ = kIdle;
    if (heap_.empty()) return;
    armed_for_ = heap_.top().first;
    const int64_t delay = std::max<int64_t>(0, armed_for_ - Now());
    timer_ = loop_->RunAfter(delay, [this] {
      timer_ = 0;
      armed_for_ = kIdle;
      RunDue();
    });
  }

  // Looks at the schedules whose time has come, at most kActsPerTurn in one
  // loop turn: ten thousand schedules due on the same second must not hold
  // the loop while their (earlier added) jobs wait to be handed out.
  void RunDue() {
    if (stopped_) return;
    const int64_t now = Now();
    int acts = 0;
    while (!heap_.empty() && heap_.top().first <= now) {
      if (++acts > kActsPerTurn) {
        if (!continuing_) {
          continuing_ = true;
          std::weak_ptr<bool> alive = alive_;
          loop_->Post([this, alive] {
            if (auto a = alive.lock(); !a || !*a) return;
            continuing_ = false;
            RunDue();
          });
        }
        return;
      }
      auto [at, name] = heap_.top();
      heap_.pop();
      auto it = entries_.find(name);
      if (it == entries_.end() || it->second.wake_ms != at) continue;  // superseded
      it->second.wake_ms = kIdle;
      Act(name);
    }
    Arm();
  }

  // Reads every schedule from the store: at start, and every refresh_ms on a
  // store other servers write too.
  void Refresh() {
    if (stopped_) return;
    queue_->SchedulesAsync(
        "", OnLoop<Result<std::vector<Schedule>>>([this](Result<std::vector<Schedule>> r) {
          if (r.ok()) {
            std::unordered_map<std::string, bool> seen;
            for (const Schedule& s : *r) {
              seen[s.name] = true;
              auto it = entries_.find(s.name);
              if (it == entries_.end() ||
                  (!it->second.busy && it->second.s.revision != s.revision)) {
                Learn(s);
              }
            }
            for (auto it = entries_.begin(); it != entries_.end();) {
              if (!seen.count(it->first) && !it->second.busy) {
                it = entries_.erase(it);
              } else {
                ++it;
              }
            }
          } else {
            Log(LogLevel::kWarn, "schedules: reading them failed: %s",
                r.status().message().c_str());
          }
          if (shared_store_ || !r.ok()) {
            refresh_timer_ = loop_->RunAfter(r.ok() ? options_.refresh_ms : kRetryMs, [this] {
              refresh_timer_ = 0;
              Refresh();
            });
          }
        }));
  }

  void WithdrawIfDelayed(const std::string& id) {
    queue_->GetAsync(id, OnLoop<Result<JobInfo>>([this, id](Result<JobInfo> j) {
                       if (j.ok() && j->state == JobState::kDelayed) {
                         queue_->DeleteAsync(id, [](const Status&) {});
                       }
                     }));
  }

  void BackfillOnce(const Schedule& s, int64_t from_ms, int64_t to_ms, Overlap overlap,
                    std::function<void(Result<BackfillResult>)> done, int tries) {
    auto parsed = cron::Cron::Parse(s.cron, s.timezone);
    if (!parsed.ok()) return done(parsed.status());
    // Never into what the scheduler still plans: stop before the next firing.
    if (s.next_fire_at_ms != 0) to_ms = std::min(to_ms, s.next_fire_at_ms - 1);
    BackfillResult out;
    std::vector<int64_t> times;
    if (from_ms <= to_ms) {
      times = parsed->Between(from_ms - 1, to_ms, kMaxFiringsPerCatchup, &out.in_range);
    }
    if (out.in_range > kMaxFiringsPerCatchup) {
      return done(InvalidArgument("from_ms..to_ms: " + std::to_string(out.in_range) +
                                  " fire times, at most " + std::to_string(kMaxFiringsPerCatchup) +
                                  " per backfill; split the range"));
    }
    std::vector<int64_t> todo;
    for (int64_t t : times) {
      if (Fired(s, t)) {
        out.already++;
      } else {
        todo.push_back(t);
      }
    }
    auto finish = [this, s, todo, overlap, out, from_ms, to_ms, tries,
                   done = std::move(done)](bool prev_live) mutable {
      std::vector<int64_t> add = todo;
      if (overlap == Overlap::kSkip) {
        if (prev_live || add.empty()) {
          add.clear();
        } else {
          add = {add.back()};
        }
      }
      if (add.empty()) return done(out);
      ScheduleFiring f;
      f.name = s.name;
      f.revision = s.revision;
      f.state = s;
      Schedule& st = f.state;
      const uint64_t asked = add.size();
      st.firings += asked;
      for (int64_t t : add) {
        f.jobs.push_back(FiringJob(s, t));
        RemoveFromGaps(&st, t, t);
      }
      if (st.first_fire_at_ms == 0 || add.front() < st.first_fire_at_ms) {
        // The fired range now starts earlier; what lies between the jobs
        // added and the old start did not fire (with skip, all but the
        // latest; past the range, none): remembered as skipped.
        const int64_t gap_from = overlap == Overlap::kAllow ? to_ms + 1 : add.front() + 1;
        if (st.first_fire_at_ms != 0 && gap_from <= st.first_fire_at_ms - 1) {
          st.gaps.insert(st.gaps.begin(), {gap_from, st.first_fire_at_ms - 1});
          while (st.gaps.size() > kMaxScheduleGaps) st.gaps.erase(st.gaps.begin());
        }
        st.first_fire_at_ms = add.front();
      }
      if (overlap == Overlap::kAllow) RemoveFromGaps(&st, from_ms, to_ms);
      if (st.last_fire_at_ms == 0) st.last_fire_at_ms = add.back();
      queue_->FireScheduleAsync(
          f,
          OnLoop<Result<ScheduleFired>>([this, out, from_ms, to_ms, overlap, tries, asked,
                                         done = std::move(done)](Result<ScheduleFired> r) mutable {
            if (!r.ok()) return done(r.status());
            if (!r->applied) {
              stats_.conflicts++;
              if (tries <= 1) return done(Unavailable("schedule kept changing; try again"));
              return BackfillOnce(r->schedule, from_ms, to_ms, overlap, std::move(done), tries - 1);
            }
            out.added = r->added;
            out.already += asked - r->added;  // their ids were there: not made again
            stats_.firings += r->added;
            Learn(r->schedule);
            done(out);
          }));
    };
    if (overlap == Overlap::kSkip && s.last_fire_at_ms != 0 && !todo.empty()) {
      queue_->GetAsync(
          FiringId(s.name, s.last_fire_at_ms),
          OnLoop<Result<JobInfo>>([finish = std::move(finish)](Result<JobInfo> j) mutable {
            finish(j.ok() && j->state != JobState::kBuried);
          }));
      return;
    }
    finish(false);
  }

  net::EventLoop* loop_;
  ServingQueue* queue_;
  SchedulerOptions options_;
  bool shared_store_ = false;
  bool started_ = false;
  bool stopped_ = false;
  bool continuing_ = false;  // a RunDue is posted for the rest of what is due
  // Parsed expressions by time zone and text: a million schedules with the
  // same cron share one.
  std::unordered_map<std::string, cron::Cron> parsed_;
  std::thread::id loop_thread_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  int clock_token_ = 0;
  uint64_t timer_ = 0;
  int64_t armed_for_ = kIdle;
  uint64_t refresh_timer_ = 0;
  std::unordered_map<std::string, Entry> entries_;
  using Wakeup = std::pair<int64_t, std::string>;
  std::priority_queue<Wakeup, std::vector<Wakeup>, std::greater<>> heap_;
  SchedulerStats stats_;
};

Scheduler::Scheduler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Scheduler::~Scheduler() = default;

Result<std::unique_ptr<Scheduler>> Scheduler::Create(net::EventLoop* loop, ServingQueue* queue,
                                                     SchedulerOptions options) {
  if (loop == nullptr || queue == nullptr) return InvalidArgument("scheduler: no loop or queue");
  if (options.refresh_ms <= 0 || options.check_ms <= 0) {
    return InvalidArgument("scheduler: refresh_ms and check_ms must be > 0");
  }
  return std::unique_ptr<Scheduler>(
      new Scheduler(std::make_unique<Impl>(loop, queue, std::move(options))));
}

void Scheduler::Start() { impl_->Start(); }
void Scheduler::Stop() { impl_->Stop(); }
void Scheduler::Put(const Schedule& s, std::function<void(Result<Schedule>)> done) {
  impl_->Put(s, std::move(done));
}
void Scheduler::Get(std::string_view name, std::function<void(Result<Schedule>)> done) {
  impl_->Get(name, std::move(done));
}
void Scheduler::List(std::function<void(Result<std::vector<Schedule>>)> done) {
  impl_->List(std::move(done));
}
void Scheduler::Delete(std::string_view name, std::function<void(Result<Schedule>)> done) {
  impl_->Delete(name, std::move(done));
}
void Scheduler::SetPaused(std::string_view name, bool paused,
                          std::function<void(Result<Schedule>)> done) {
  impl_->SetPaused(name, paused, std::move(done));
}
void Scheduler::Backfill(std::string_view name, int64_t from_ms, int64_t to_ms, Overlap overlap,
                         std::function<void(Result<BackfillResult>)> done) {
  impl_->Backfill(name, from_ms, to_ms, overlap, std::move(done));
}
SchedulerStats Scheduler::stats() const { return impl_->stats(); }

}  // namespace delayq::schedule
