// Schedules on Redis: the record and PENDING codecs and the ops
// (redis_schedule.h). Formats: docs/redis-store.md, "Schedules".
//
// A firing (FireOp) is a small state machine over dispatcher rounds: claim,
// then the FIRE entries of its PENDING (appended to the round's shared
// schedule_fire call of each bucket), then clear. When the claim meets
// another's PENDING it runs that one's FIRE and CLEAR instead, then claims
// again, once. A read (ListOp) finishes the PENDINGs older than
// kPendingStaleMs it meets the same way before it answers.
#include "redis_store/redis_schedule.h"

#include <algorithm>
#include <bit>
#include <deque>
#include <optional>
#include <utility>

#include "common/log.h"
#include "redis_store/record_bytes.h"

namespace delayq::rq {
namespace {

using redis::Reply;

constexpr size_t kRecordHeadBytes = 28;   // version, revision, version, created, updated, paused
constexpr size_t kPendingHeadBytes = 14;  // version, revision, at_ms
constexpr size_t kMaxReasonBytes = 65535;

std::string EncodeDefinition(const Schedule& s) {
  std::string d;
  d.reserve(64 + s.name.size() + s.cron.size() + s.topic.size() + s.body.size());
  PutS(d, 1, s.name);  // first: schedules.lua reads the name here
  PutS(d, 2, s.cron);
  PutS(d, 1, s.timezone);
  PutS(d, 1, s.topic);
  PutS(d, 4, s.body);
  PutU(d, 4, s.ttr_ms);
  PutU(d, 4, s.priority);
  PutU(d, 4, s.max_attempts);
  PutU(d, 1, static_cast<uint8_t>(s.catchup));
  PutI(d, s.catchup_window_ms);
  PutU(d, 1, static_cast<uint8_t>(s.overlap));
  PutU(d, 1, s.pause_on_failure ? 1 : 0);
  return d;
}

void DecodeDefinition(std::string_view def, Schedule* s, bool* bad) {
  Reader in{def};
  s->name = in.S(1);
  s->cron = in.S(2);
  s->timezone = in.S(1);
  s->topic = in.S(1);
  s->body = in.S(4);
  s->ttr_ms = static_cast<uint32_t>(in.U(4));
  s->priority = static_cast<uint32_t>(in.U(4));
  s->max_attempts = static_cast<uint32_t>(in.U(4));
  s->catchup = static_cast<Catchup>(in.U(1));
  s->catchup_window_ms = in.I();
  s->overlap = static_cast<Overlap>(in.U(1));
  s->pause_on_failure = in.U(1) != 0;
  // Bytes past the last field are fields of a later build (skipped).
  *bad = *bad || in.bad;
}

void DecodeState(std::string_view state, Schedule* s, bool* bad) {
  Reader in{state};
  s->next_fire_at_ms = in.I();
  s->planned_version = in.U(8);
  s->last_fire_at_ms = in.I();
  s->first_fire_at_ms = in.I();
  s->buffered_fire_at_ms = in.I();
  s->paused_at_ms = in.I();
  s->firings = in.U(8);
  s->skipped = in.U(8);
  s->gaps.clear();
  for (uint64_t n = in.U(2); n > 0 && !in.bad; --n) {
    const int64_t from = in.I();
    const int64_t to = in.I();
    s->gaps.emplace_back(from, to);
  }
  *bad = *bad || in.bad;
}

// A PENDING made of this server's own payload at `revision` (what the claim
// stored, read back without a round trip).
Result<PendingFiring> OwnPending(uint64_t revision, std::string_view payload) {
  std::string pending;
  PutU(pending, 1, kPendingVersion);
  PutU(pending, 7, revision);
  PutU(pending, 6, 0);
  pending += payload;
  return DecodePending(pending);
}

// The FIRE and CLEAR steps of PENDINGs, planned into rounds for an op: one
// round of schedule_fire entries (every PENDING's, shared with the round's
// other firings), then one of clears.
class PendingRunner {
 public:
  void Add(std::string name, PendingFiring p) {
    Run run;
    run.name = std::move(name);
    run.pending = std::move(p);
    runs_.push_back(std::move(run));
  }
  bool empty() const { return runs_.empty(); }

  void PlanFire(Batch& b) {
    Context& c = b.ctx();
    slots_.clear();
    for (Run& run : runs_) {
      // Withdrawals first: a firing that plans a fire time again (a resume,
      // a new definition) withdraws the job planned before, then adds it.
      for (const std::string& id : run.pending.withdraw) {
        const uint32_t bucket = c.BucketOf(id);
        slots_.push_back(
            {&run, nullptr, bucket, b.Append(Lua::kScheduleFire, bucket, {"w", id, ""})});
      }
      for (const JobSpec& job : run.pending.jobs) {
        const uint32_t bucket = c.BucketOf(job.id);
        std::vector<std::string> fields;
        fields.reserve(3);
        fields.emplace_back("a");
        fields.push_back(job.id);
        fields.push_back(NewRecord(job, b.now(), *job.run_at_ms, c.NextSeqFloor(b.now())));
        slots_.push_back(
            {&run, &job, bucket, b.Append(Lua::kScheduleFire, bucket, std::move(fields))});
      }
    }
  }
  // Reads the FIRE round: each run's jobs added, or the first error.
  void AbsorbFire(Batch& b) {
    for (const Slot& s : slots_) {
      auto e = b.Element(s.slot);
      if (!e.ok()) {
        if (s.run->error.ok()) s.run->error = e.status();
        continue;
      }
      const std::string* t = AsText(**e);
      if (t == nullptr) {
        if (s.run->error.ok()) s.run->error = Malformed("schedule_fire", **e);
        continue;
      }
      if (s.job == nullptr) continue;  // a withdrawal: deleted, kept or absent
      if (*t == "ready") {
        ++s.run->added;
        b.NoteReady(s.job->topic, s.bucket);
      } else if (*t == "delayed") {
        ++s.run->added;
        b.NoteDue(s.bucket, *s.job->run_at_ms);
      } else if (*t != "exists" && *t != "fired" && s.run->error.ok()) {
        s.run->error = Malformed("schedule_fire", **e);
      }
    }
  }
  // Clears only the PENDINGs whose jobs were all made.
  void PlanClear(Batch& b) {
    for (Run& run : runs_) {
      if (run.error.ok()) {
        // Shared with the round's other claims and clears: one call.
        b.Append(Lua::kSchedules, 0,
                 {"clear", run.name, std::to_string(run.pending.revision), "", "", "", ""});
      }
    }
  }
  // The first run's outcome (FireOp runs one at a time).
  uint32_t added() const { return runs_.empty() ? 0 : runs_.front().added; }
  Status error() const { return runs_.empty() ? Status::Ok() : runs_.front().error; }
  size_t entries() const {
    size_t n = 0;
    for (const Run& r : runs_) n += r.pending.jobs.size() + r.pending.withdraw.size();
    return n;
  }
  void Reset() {
    runs_.clear();
    slots_.clear();
  }

 private:
  struct Run {
    std::string name;
    PendingFiring pending;
    uint32_t added = 0;
    Status error;
  };
  struct Slot {
    Run* run;
    const JobSpec* job;  // nullptr: a withdrawal
    uint32_t bucket;
    Batch::Slot slot;
  };
  std::deque<Run> runs_;  // stable addresses for slots_
  std::vector<Slot> slots_;
};

// --- put, delete -----------------------------------------------------------------

class PutScheduleOp final : public Op {
 public:
  PutScheduleOp(const Schedule& s, ScheduleDone done)
      : record_(EncodeScheduleRecord(s)), done_(std::move(done)) {}
  void Plan(Batch& b) override { cmd_ = b.Single(Lua::kSchedules, 0, {"put", record_}); }
  bool Absorb(Batch& b) override {
    auto r = b.ReplyOf(cmd_);
    if (!r.ok()) {
      result_ = r.status();
    } else if (!(*r)->is_string()) {
      result_ = Malformed("schedules put", **r);
    } else {
      result_ = DecodeScheduleRecord((*r)->str());
    }
    return true;
  }
  void Fail(Status s) override { result_ = std::move(s); }
  void Complete() override { done_(std::move(result_)); }
  Lua kind() const override { return Lua::kSchedules; }
  size_t bytes() const override { return record_.size() + 64; }

 private:
  const std::string record_;
  ScheduleDone done_;
  size_t cmd_ = 0;
  Result<Schedule> result_ = Internal("schedules: no result");
};

class DeleteScheduleOp final : public Op {
 public:
  DeleteScheduleOp(std::string_view name, ScheduleDone done)
      : name_(name), done_(std::move(done)) {}
  void Plan(Batch& b) override { cmd_ = b.Single(Lua::kSchedules, 0, {"delete", name_}); }
  bool Absorb(Batch& b) override {
    auto r = b.ReplyOf(cmd_);
    if (!r.ok()) {
      result_ = r.status();
    } else if (!(*r)->is_string()) {
      result_ = Malformed("schedules delete", **r);
    } else {
      result_ = DecodeScheduleRecord((*r)->str());
    }
    return true;
  }
  void Fail(Status s) override { result_ = std::move(s); }
  void Complete() override { done_(std::move(result_)); }
  Lua kind() const override { return Lua::kSchedules; }

 private:
  const std::string name_;
  ScheduleDone done_;
  size_t cmd_ = 0;
  Result<Schedule> result_ = Internal("schedules: no result");
};

// --- reads ------------------------------------------------------------------------

// get or list, then the FIRE and CLEAR of every PENDING older than
// kPendingStaleMs that it met (a failure there is not the read's: the next
// read tries again).
class ListSchedulesOp final : public Op {
 public:
  ListSchedulesOp(std::string_view name, SchedulesDone done)
      : name_(name), done_(std::move(done)) {}
  void Plan(Batch& b) override {
    switch (stage_) {
      case Stage::kRead:
        cmd_ = name_.empty() ? b.Single(Lua::kSchedules, 0, {"list"})
                             : b.Single(Lua::kSchedules, 0, {"get", name_});
        b.NoWait(cmd_);  // the PENDINGs it finishes are finished again if lost
        return;
      case Stage::kFire:
        runner_.PlanFire(b);
        return;
      case Stage::kClear:
        runner_.PlanClear(b);
        return;
    }
  }
  bool Absorb(Batch& b) override {
    switch (stage_) {
      case Stage::kRead:
        return AbsorbRead(b);
      case Stage::kFire:
        runner_.AbsorbFire(b);
        stage_ = Stage::kClear;
        return false;
      case Stage::kClear:
        return true;
    }
    return true;
  }
  void Fail(Status s) override { result_ = std::move(s); }
  void Complete() override { done_(std::move(result_)); }
  Lua kind() const override { return Lua::kSchedules; }

 private:
  enum class Stage { kRead, kFire, kClear };

  bool AbsorbRead(Batch& b) {
    auto r = b.ReplyOf(cmd_);
    if (!r.ok()) {
      result_ = r.status();
      return true;
    }
    const Reply& reply = **r;
    // now_ms, then record and pending ("" for none) per schedule.
    if (!reply.is_array() || reply.elements().size() % 2 != 1 ||
        !reply.elements()[0].is_integer()) {
      result_ = Malformed("schedules list", reply);
      return true;
    }
    const auto& f = reply.elements();
    const int64_t now = f[0].integer();
    std::vector<Schedule> out;
    for (size_t i = 1; i < f.size(); i += 2) {
      if (!f[i].is_string() || !f[i + 1].is_string()) {
        result_ = Malformed("schedules list", reply);
        return true;
      }
      auto s = DecodeScheduleRecord(f[i].str());
      if (!s.ok()) {
        result_ = s.status();
        return true;
      }
      if (!f[i + 1].str().empty()) {
        auto p = DecodePending(f[i + 1].str());
        if (!p.ok()) {
          Log(LogLevel::kError, "redis store: schedule %s: %s", s->name.c_str(),
              p.status().message().c_str());
        } else if (p->at_ms < now - kPendingStaleMs) {
          runner_.Add(s->name, std::move(p).value());
        }
      }
      out.push_back(std::move(s).value());
    }
    std::sort(out.begin(), out.end(),
              [](const Schedule& x, const Schedule& y) { return x.name < y.name; });
    result_ = std::move(out);
    if (runner_.empty()) return true;
    stage_ = Stage::kFire;
    return false;
  }

  const std::string name_;
  SchedulesDone done_;
  Stage stage_ = Stage::kRead;
  size_t cmd_ = 0;
  PendingRunner runner_;
  Result<std::vector<Schedule>> result_ = Internal("schedules: no result");
};

// --- the firing -------------------------------------------------------------------

class FireScheduleOp final : public Op {
 public:
  FireScheduleOp(const ScheduleFiring& f, FiredDone done)
      : name_(f.name),
        revision_number_(f.revision),
        revision_(std::to_string(f.revision)),
        paused_(f.state.paused ? "1" : "0"),
        state_(EncodeScheduleState(f.state)),
        reason_(f.state.pause_reason.substr(0, kMaxReasonBytes)),
        jobs_(f.jobs),
        withdraw_(f.withdraw),
        done_(std::move(done)) {}

  void Plan(Batch& b) override {
    switch (stage_) {
      case Stage::kClaim:
        // The payload once, with the first round's clock (a delay_ms
        // becomes a run_at then).
        if (!encoded_) {
          payload_ = EncodeFiringPayload(jobs_, withdraw_, b.now());
          // One bucket: the jobs live with the schedules, so the claim and
          // the jobs are one step (schedule_fire's "c" entry): no PENDING,
          // no clear, no T:fired.
          one_step_ = b.ctx().buckets == 1 && 1 + jobs_.size() + withdraw_.size() <= kMaxBatch;
          if (one_step_ && !payload_.empty()) {
            auto own = OwnPending(0, payload_);
            if (own.ok()) {
              made_ = std::move(own).value();
            } else {
              one_step_ = false;  // cannot happen: the payload was just made
            }
          }
          encoded_ = true;
          jobs_.clear();
          withdraw_.clear();
        }
        if (one_step_) {
          PlanOneStep(b);
          return;
        }
        // Shared with the round's other claims and clears: one call.
        slot_ = b.Append(Lua::kSchedules, 0,
                         {"claim", name_, revision_, paused_, state_, reason_, payload_});
        return;
      case Stage::kFire:
        runner_.PlanFire(b);
        return;
      case Stage::kClear:
        runner_.PlanClear(b);
        return;
    }
  }

  bool Absorb(Batch& b) override {
    switch (stage_) {
      case Stage::kClaim:
        return AbsorbClaim(b);
      case Stage::kFire:
        runner_.AbsorbFire(b);
        if (!runner_.error().ok()) return Done(runner_.error());
        stage_ = Stage::kClear;
        return false;
      case Stage::kClear:
        // The jobs are made: a clear that failed leaves a PENDING that the
        // next claim or read finishes again, adding nothing.
        if (own_) {
          fired_.added = runner_.added();
          return Done(Status::Ok());
        }
        // Another's PENDING is finished: claim again, once.
        runner_.Reset();
        retried_ = true;
        stage_ = Stage::kClaim;
        return false;
    }
    return true;
  }
  void Fail(Status s) override { status_ = std::move(s); }
  void Complete() override {
    if (status_.ok()) {
      done_(std::move(fired_));
    } else {
      done_(std::move(status_));
    }
  }
  Lua kind() const override { return Lua::kSchedules; }
  size_t bytes() const override {
    size_t n = state_.size() + reason_.size() + payload_.size() + 128;
    for (const JobSpec& j : jobs_) n += j.body.size() + j.id.size() + 64;
    return n;
  }

 private:
  enum class Stage { kClaim, kFire, kClear };

  bool Done(Status s) {
    status_ = std::move(s);
    return true;
  }

  // The claim, its withdrawals, then its jobs, in one schedule_fire call on
  // bucket 0 (AppendTogether: never split over two calls).
  void PlanOneStep(Batch& b) {
    std::string claim;
    PutU(claim, 7, revision_number_);
    PutU(claim, 1, paused_ == "1" ? 1 : 0);
    PutU(claim, 2, made_.withdraw.size() + made_.jobs.size());
    PutS(claim, 4, state_);
    PutS(claim, 2, reason_);
    std::vector<std::vector<std::string>> entries;
    entries.reserve(1 + made_.withdraw.size() + made_.jobs.size());
    entries.push_back({"c", name_, std::move(claim)});
    for (const std::string& id : made_.withdraw) entries.push_back({"w", id, ""});
    for (const JobSpec& job : made_.jobs) {
      entries.push_back(
          {"a", job.id, NewRecord(job, b.now(), *job.run_at_ms, b.ctx().NextSeqFloor(b.now()))});
    }
    slot_ = b.AppendTogether(Lua::kScheduleFire, 0, std::move(entries));
  }

  // The statuses of a one-step claim's entries, after its "applied".
  Status AbsorbMade(Batch& b) {
    size_t at = slot_.index + 1 + made_.withdraw.size();
    for (size_t i = 1; i < at - slot_.index; ++i) {
      auto e = b.Element({slot_.cmd, slot_.index + i});
      if (!e.ok()) return e.status();
      if (AsText(**e) == nullptr) return Malformed("schedule_fire", **e);
    }
    for (const JobSpec& job : made_.jobs) {
      auto e = b.Element({slot_.cmd, at++});
      if (!e.ok()) return e.status();
      const std::string* t = AsText(**e);
      if (t == nullptr) return Malformed("schedule_fire", **e);
      if (*t == "ready") {
        ++fired_.added;
        b.NoteReady(job.topic, 0);
      } else if (*t == "delayed") {
        ++fired_.added;
        b.NoteDue(0, *job.run_at_ms);
      } else if (*t != "exists") {
        return Malformed("schedule_fire", **e);
      }
    }
    return Status::Ok();
  }

  bool AbsorbClaim(Batch& b) {
    auto r = b.Element(slot_);
    if (!r.ok()) return Done(r.status());
    const Reply& reply = **r;
    if (reply.is_error()) return Done(ErrorStatus(reply));
    // {"applied"|"stale", record} or {"pending", record, pending}.
    if (!reply.is_array() || reply.elements().size() < 2 || !AsText(reply.elements()[0]) ||
        !reply.elements()[1].is_string()) {
      return Done(Malformed("schedules claim", reply));
    }
    const std::string& what = *AsText(reply.elements()[0]);
    auto s = DecodeScheduleRecord(reply.elements()[1].str());
    if (!s.ok()) return Done(s.status());
    fired_.schedule = std::move(s).value();
    if (what == "stale" || (what == "pending" && retried_)) {
      fired_.applied = false;
      return Done(Status::Ok());
    }
    if (what == "pending") {
      if (reply.elements().size() != 3 || !reply.elements()[2].is_string()) {
        return Done(Malformed("schedules claim", reply));
      }
      auto p = DecodePending(reply.elements()[2].str());
      if (!p.ok()) return Done(p.status());
      own_ = false;
      runner_.Add(name_, std::move(p).value());
      stage_ = Stage::kFire;
      return false;
    }
    if (what != "applied") return Done(Malformed("schedules claim", reply));
    fired_.applied = true;
    if (one_step_) return Done(AbsorbMade(b));
    if (payload_.empty()) return Done(Status::Ok());
    // Our own PENDING: the same payload, made at the new revision.
    auto p = OwnPending(fired_.schedule.revision, payload_);
    if (!p.ok()) return Done(p.status());
    own_ = true;
    runner_.Add(name_, std::move(p).value());
    stage_ = Stage::kFire;
    return false;
  }

  const std::string name_;
  const uint64_t revision_number_;
  const std::string revision_;
  const std::string paused_;
  const std::string state_;
  const std::string reason_;
  std::vector<JobSpec> jobs_;
  std::vector<std::string> withdraw_;
  std::string payload_;
  bool encoded_ = false;
  FiredDone done_;
  Stage stage_ = Stage::kClaim;
  Batch::Slot slot_;
  bool one_step_ = false;  // claimed and made in one schedule_fire call (one bucket)
  PendingFiring made_;     // one step: the jobs and withdrawals, run_at resolved
  bool own_ = false;       // the PENDING being run is this firing's
  bool retried_ = false;   // claimed again after finishing another's PENDING
  PendingRunner runner_;
  ScheduleFired fired_;
  Status status_;
};

}  // namespace

// --- codecs -----------------------------------------------------------------------

std::string EncodeScheduleState(const Schedule& s) {
  std::string st;
  st.reserve(66 + 16 * s.gaps.size());
  PutI(st, s.next_fire_at_ms);
  PutU(st, 8, s.planned_version);
  PutI(st, s.last_fire_at_ms);
  PutI(st, s.first_fire_at_ms);
  PutI(st, s.buffered_fire_at_ms);
  PutI(st, s.paused_at_ms);
  PutU(st, 8, s.firings);
  PutU(st, 8, s.skipped);
  const size_t gaps = std::min<size_t>(s.gaps.size(), 0xffff);
  PutU(st, 2, gaps);
  // The newest are kept when there are more than the count can say.
  for (size_t i = s.gaps.size() - gaps; i < s.gaps.size(); ++i) {
    PutI(st, s.gaps[i].first);
    PutI(st, s.gaps[i].second);
  }
  return st;
}

std::string EncodeScheduleRecord(const Schedule& s) {
  const std::string def = EncodeDefinition(s);
  const std::string state = EncodeScheduleState(s);
  const std::string_view reason = std::string_view(s.pause_reason).substr(0, kMaxReasonBytes);
  std::string r;
  r.reserve(kRecordHeadBytes + 10 + def.size() + state.size() + reason.size());
  PutU(r, 1, kScheduleRecordVersion);
  PutU(r, 7, 0);  // revision    }
  PutU(r, 7, 0);  // version     } written by
  PutU(r, 6, 0);  // created_ms  } schedules.lua
  PutU(r, 6, 0);  // updated_ms  }
  PutU(r, 1, s.paused ? 1 : 0);
  PutS(r, 4, def);
  PutS(r, 4, state);
  PutS(r, 2, reason);
  return r;
}

Result<Schedule> DecodeScheduleRecord(std::string_view record) {
  Reader in{record};
  const uint64_t version = in.U(1);
  if (!in.bad && version != kScheduleRecordVersion) {
    return Internal("redis store: a schedule record of version " + std::to_string(version) +
                    "; this delayq reads version " + std::to_string(kScheduleRecordVersion));
  }
  Schedule s;
  s.revision = in.U(7);
  s.version = in.U(7);
  s.created_ms = static_cast<int64_t>(in.U(6));
  s.updated_ms = static_cast<int64_t>(in.U(6));
  s.paused = in.U(1) != 0;
  const std::string_view def = in.View(4);
  const std::string_view state = in.View(4);
  s.pause_reason = in.S(2);
  bool bad = in.bad;
  if (!bad) DecodeDefinition(def, &s, &bad);
  if (!bad) DecodeState(state, &s, &bad);
  if (bad) {
    return Internal("redis store: a schedule record cut short (" + std::to_string(record.size()) +
                    " bytes)");
  }
  return s;
}

std::string EncodeFiringPayload(const std::vector<JobSpec>& jobs,
                                const std::vector<std::string>& withdraw, int64_t now_ms) {
  if (jobs.empty() && withdraw.empty()) return {};
  std::string p;
  PutU(p, 4, jobs.size());
  for (const JobSpec& j : jobs) {
    const int64_t run_at = j.run_at_ms ? *j.run_at_ms : now_ms + j.delay_ms.value_or(0);
    PutS(p, 2, j.id);
    PutS(p, 1, j.topic);
    PutS(p, 4, j.body);
    PutU(p, 4, j.priority);
    PutU(p, 4, j.ttr_ms);
    PutU(p, 4, j.max_attempts);
    PutI(p, run_at);
  }
  PutU(p, 4, withdraw.size());
  for (const std::string& id : withdraw) PutS(p, 2, id);
  return p;
}

Result<PendingFiring> DecodePending(std::string_view pending) {
  Reader in{pending};
  const uint64_t version = in.U(1);
  if (!in.bad && version != kPendingVersion) {
    return Internal("redis store: a schedule's pending firing of version " +
                    std::to_string(version) + "; this delayq reads version " +
                    std::to_string(kPendingVersion));
  }
  PendingFiring p;
  p.revision = in.U(7);
  p.at_ms = static_cast<int64_t>(in.U(6));
  for (uint64_t n = in.U(4); n > 0 && !in.bad; --n) {
    JobSpec j;
    j.id = in.S(2);
    j.topic = in.S(1);
    j.body = in.S(4);
    j.priority = static_cast<uint32_t>(in.U(4));
    j.ttr_ms = static_cast<uint32_t>(in.U(4));
    j.max_attempts = static_cast<uint32_t>(in.U(4));
    j.run_at_ms = in.I();
    p.jobs.push_back(std::move(j));
  }
  for (uint64_t n = in.U(4); n > 0 && !in.bad; --n) p.withdraw.push_back(in.S(2));
  if (in.bad || pending.size() < kPendingHeadBytes) {
    return Internal("redis store: a schedule's pending firing cut short (" +
                    std::to_string(pending.size()) + " bytes)");
  }
  return p;
}

std::unique_ptr<Op> MakePutSchedule(const Schedule& s, ScheduleDone done) {
  return std::make_unique<PutScheduleOp>(s, std::move(done));
}

std::unique_ptr<Op> MakeDeleteSchedule(std::string_view name, ScheduleDone done) {
  return std::make_unique<DeleteScheduleOp>(name, std::move(done));
}

std::unique_ptr<Op> MakeListSchedules(std::string_view name, SchedulesDone done) {
  return std::make_unique<ListSchedulesOp>(name, std::move(done));
}

std::unique_ptr<Op> MakeFireSchedule(const ScheduleFiring& f, FiredDone done) {
  return std::make_unique<FireScheduleOp>(f, std::move(done));
}

}  // namespace delayq::rq
