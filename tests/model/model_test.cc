// Randomized model test of engine::Engine.
//
// How it works: a generator draws long random sequences of operations (add,
// reserve, finish, release, touch, bury, delete, kick, kick a topic, peek,
// pause, resume, cancel a waiting reserve) and clock moves (Advance, and now
// and then StepWall), and each is applied both to an Engine on a ManualClock
// and to Model, a reference written as plainly as possible (a std::map of
// jobs and linear scans) from the contract: delayq/queue.h, delayq/job.h and
// SPEC §3-§5. After every step the two must agree on the operation's answer
// (status code, AddResult, the jobs a reserve hands out and their order), on
// every job the model knows (Get), on every topic (Topic, Topics) and on
// Stats. The first disagreement fails the run with its seed, step, operation
// and both views; the run's operation log is then shrunk (delta debugging
// over concrete operations) to a short sequence that shows the same
// disagreement, and that sequence is printed too. The tests at the end replay
// such sequences, one per disagreement found, named after what broke.
//
// Long-poll waiters: a reserve with wait_ms > 0 waits on one to three topics
// for up to `count` jobs. When jobs become ready, waiters are served oldest
// first across all topics, each taking up to its count of the best ready jobs
// of its topics; the checks cover which waiter gets which ids, in which order
// waiters are served, and the ids' order within each answer. Within one
// engine call waiters are served before waits that ran out are ended.
//
// Two owners drive the clock. The punctual one (LocalQueue's way): while
// anyone waits, a clock move steps through every deadline on the way and
// calls Tick() there. The late one (the second random test): a clock move
// may jump past several deadlines and call Tick() once at the end. The
// contract for that: a job that fell due during a wait still goes to the
// waiter, and a wait whose deadline passed answers empty only if nothing is
// there for it at the late tick; so the model, at the new time, serves
// everything servable (oldest waiter first) and only then ends waits that
// ran out. Without waiters the clock always jumps and the engine catches up
// on its next call.
//
// Where the contract is silent the model follows the engine; each such choice
// is marked "Silent:" below. Where the contract speaks, the model follows the
// contract even if the engine does otherwise.
//
// With a memory window (the third and fourth random tests), the engine keeps
// delayed jobs due beyond it in a real log in a temporary directory (Log,
// RecordReader: the embedded store's far-future path) and reads them back;
// the model knows nothing of it, so every answer must be the same.
//
// Environment: DELAYQ_MODEL_SEED=<n> replays one seed; DELAYQ_MODEL_RUNS
// (default 20) and DELAYQ_MODEL_STEPS (default 2000) set the amount of work.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "delayq/clock.h"
#include "delayq/job.h"
#include "delayq/queue.h"
#include "delayq/status.h"
#include "engine/engine.h"
#include "far/index_files.h"
#include "log/log.h"
#include "log/record_reader.h"

namespace delayq {
namespace {

using engine::Engine;

constexpr int64_t kForever = std::numeric_limits<int64_t>::max();
constexpr int64_t kBaseWallMs = 1'700'000'000'000;  // ManualClock's default start

// Jobs live in these topics; "idle" is valid but never gets a job, and the
// bad name is there for invalid-argument checks.
const std::vector<std::string>& JobTopics() {
  static const std::vector<std::string> topics = {"mail", "orders.close", "hook:retry"};
  return topics;
}
constexpr char kIdleTopic[] = "idle";
constexpr char kBadTopic[] = "no spaces";
constexpr char kGhostId[] = "ghost";  // never added; Get must always say not_found

// --- configuration -----------------------------------------------------------

struct Config {
  std::optional<uint64_t> seed;
  int runs = 20;
  int steps = 2000;
};

std::optional<uint64_t> EnvNumber(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return std::nullopt;
  char* end = nullptr;
  uint64_t value = std::strtoull(text, &end, 10);
  if (*end != '\0') {
    ADD_FAILURE() << name << "=" << text << " is not a number; ignored";
    return std::nullopt;
  }
  return value;
}

Config ReadConfig() {
  Config config;
  config.seed = EnvNumber("DELAYQ_MODEL_SEED");
  if (auto runs = EnvNumber("DELAYQ_MODEL_RUNS")) config.runs = static_cast<int>(*runs);
  if (auto steps = EnvNumber("DELAYQ_MODEL_STEPS")) config.steps = static_cast<int>(*steps);
  if (config.seed) config.runs = 1;
  return config;
}

// SplitMix64: tiny, and the same sequence on every platform (the standard
// distributions are not), so a seed replays anywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  int64_t Uniform(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(Next() % static_cast<uint64_t>(hi - lo + 1));
  }
  bool Chance(int percent) { return Uniform(0, 99) < percent; }

 private:
  uint64_t state_;
};

// --- operations ----------------------------------------------------------------

enum class OpKind : uint8_t {
  kAdd,
  kReserve,
  kFinish,
  kRelease,
  kTouch,
  kBury,
  kDelete,
  kKick,
  kKickTopic,
  kPeek,
  kPause,
  kResume,
  kCancel,
  kAdvance,
  kStepWall
};

// Also the prefix of divergence kinds ("finish.code").
const char* OpName(OpKind kind) {
  static const char* const kNames[] = {"add",   "reserve", "finish", "release",    "touch",
                                       "bury",  "delete",  "kick",   "kick_topic", "peek",
                                       "pause", "resume",  "cancel", "advance",    "step_wall"};
  return kNames[static_cast<size_t>(kind)];
}

enum class Timing : uint8_t { kNow, kDelay, kRunAt, kBoth };
enum class ReceiptChoice : uint8_t { kCurrent, kStale, kNone };

// One step of a run, concrete enough to replay without the generator: a job id
// is literal, or "@k" for the k-th generated id of the run (literal if that
// add is gone), and a receipt is chosen by role and resolved when applied.
struct Op {
  OpKind kind = OpKind::kAdvance;
  std::string id = "";                   // job operations; add with a client id
  int gen = -1;                          // add with a generated id: its k
  std::vector<std::string> topics = {};  // one; reserve: one or more
  Timing timing = Timing::kNow;          // add
  // add: delay, or run_at relative to the wall clock; release: delay;
  // reserve: wait; pause: duration; Advance / StepWall: how far.
  int64_t ms = 0;
  bool replace = false;
  uint32_t priority = kDefaultPriority;
  uint32_t ttr_ms = kDefaultTtrMs;
  uint32_t max_attempts = 0;
  uint32_t count = 1;     // reserve count, kick-topic n
  std::string text = "";  // add body, release error, bury reason
  ReceiptChoice receipt = ReceiptChoice::kNone;
  uint32_t pick = 0;                  // which stale receipt; which waiter to cancel
  JobState state = JobState::kReady;  // peek
  bool late = false;                  // advance: one Tick() at the end, past deadlines
};

std::string Wall(int64_t ms) { return "w+" + std::to_string(ms - kBaseWallMs); }

std::string Quoted(const std::string& s) {
  if (s.size() <= 24) return "'" + s + "'";
  return "'" + s.substr(0, 12) + "...'(" + std::to_string(s.size()) + " bytes)";
}

std::string Join(const std::vector<std::string>& v, const char* sep = ",") {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// "release(j1, current receipt, delay_ms=0, error='')".
std::string Describe(const Op& op) {
  OpKind k = op.kind;
  std::vector<std::string> args;
  if (k == OpKind::kAdd) {
    args.push_back(op.gen >= 0 ? "<generated @" + std::to_string(op.gen) + ">" : op.id);
  } else if (!op.id.empty()) {
    args.push_back(op.id);
  }
  if (!op.topics.empty()) args.push_back(Join(op.topics));
  if (k >= OpKind::kFinish && k <= OpKind::kBury) {
    args.push_back(op.receipt == ReceiptChoice::kCurrent ? "current receipt"
                   : op.receipt == ReceiptChoice::kNone
                       ? "no receipt"
                       : "stale receipt #" + std::to_string(op.pick));
  }
  if (k == OpKind::kReserve || k == OpKind::kKickTopic)
    args.push_back("n=" + std::to_string(op.count));
  if (k == OpKind::kPeek) args.push_back(std::string(StateName(op.state)));
  if (k == OpKind::kCancel) args.push_back("#" + std::to_string(op.pick) + " from the newest");
  std::string ms = std::to_string(op.ms);
  if (k == OpKind::kAdd && (op.timing == Timing::kDelay || op.timing == Timing::kBoth)) {
    args.push_back("delay_ms=" + ms);
  }
  if (k == OpKind::kAdd && (op.timing == Timing::kRunAt || op.timing == Timing::kBoth)) {
    args.push_back("run_at_ms=now" + std::string(op.ms >= 0 ? "+" : "") + ms);
  }
  if (k == OpKind::kReserve) args.push_back("wait_ms=" + ms);
  if (k == OpKind::kRelease) args.push_back("delay_ms=" + ms);
  if (k == OpKind::kPause || k >= OpKind::kAdvance) args.push_back(ms + " ms");
  if (k == OpKind::kAdvance && op.late) args.push_back("one late tick");
  if (k == OpKind::kAdd) {
    args.push_back("priority=" + std::to_string(op.priority) + " ttr_ms=" +
                   std::to_string(op.ttr_ms) + " max_attempts=" + std::to_string(op.max_attempts));
  }
  if (k == OpKind::kAdd || k == OpKind::kRelease || k == OpKind::kBury)
    args.push_back(Quoted(op.text));
  if (op.replace && k == OpKind::kAdd) args.push_back("replace");
  return std::string(OpName(k)) + "(" + Join(args, ", ") + ")";
}

// --- the reference model -----------------------------------------------------

struct ModelJob {
  std::string topic;
  JobState state = JobState::kDelayed;
  uint64_t order = 0;  // order of adding
  uint32_t priority = 0;
  uint32_t ttr_ms = 0;
  uint32_t max_attempts = 0;
  uint32_t attempts = 0;
  int64_t run_at_ms = 0;       // wall clock
  int64_t reserved_until = 0;  // monotonic; while reserved
  std::string receipt;         // while reserved; as the engine made it
  std::string body;
  bool has_error = false;                // last_error is not empty
  std::optional<std::string> error;      // its text, where the contract fixes it
  std::optional<int64_t> created_at_ms;  // as first read back; must not change
};

struct ModelWaiter {
  uint64_t ticket = 0;
  std::vector<std::string> topics;
  uint32_t count = 1;
  int64_t deadline = 0;  // monotonic
};

// What one reserve is answered with: jobs in order (receipts left empty, the
// engine makes them), or none when the wait ran out.
struct Answer {
  uint64_t ticket = 0;  // 0: answered inside the reserve call
  std::vector<Delivery> deliveries;
};

bool ValidTopicName(std::string_view topic) {
  if (topic.empty() || topic.size() > kMaxTopicBytes) return false;
  return std::all_of(topic.begin(), topic.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == ':' ||
           c == '-';
  });
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// "Order within a topic: priority, then run_at, then order of adding" (SPEC §4),
// and across the topics of one reserve (queue.h).
bool ServedBefore(const ModelJob& a, const ModelJob& b) {
  return std::tie(a.priority, a.run_at_ms, a.order) < std::tie(b.priority, b.run_at_ms, b.order);
}

class Model {
 public:
  Model(int64_t wall, int64_t mono) : wall_(wall), mono_(mono) {}

  int64_t wall() const { return wall_; }
  const std::map<std::string, ModelJob>& jobs() const { return jobs_; }
  const std::vector<ModelWaiter>& waiters() const { return waiters_; }
  ModelJob* Find(const std::string& id) {
    auto it = jobs_.find(id);
    return it == jobs_.end() ? nullptr : &it->second;
  }

  std::vector<Answer> SetTime(int64_t wall, int64_t mono);
  int64_t MsToNextEvent() const;
  std::vector<Answer> Serve();

  Code Add(const JobSpec& spec, const std::string& id, AddResult* result);
  Code Reserve(const ReserveRequest& req, uint64_t ticket, std::optional<Answer>* now);
  Code Finish(const std::string& id, const std::string& receipt);
  Code Release(const std::string& id, const std::string& receipt, int64_t delay_ms,
               const std::string& error);
  Code Touch(const std::string& id, const std::string& receipt);
  Code Bury(const std::string& id, const std::string& receipt, const std::string& reason);
  Code Delete(const std::string& id);
  Code Kick(const std::string& id);
  Code KickTopic(const std::string& topic, uint64_t n, uint64_t* kicked);
  Code Peek(const std::string& topic, JobState state, std::string* id) const;
  Code Pause(const std::string& topic, int64_t duration_ms);
  Code Resume(const std::string& topic);
  bool Cancel(uint64_t ticket);
  void AdoptReceipt(const std::string& id, const std::string& receipt);

  JobInfo Info(const std::string& id, const ModelJob& job) const;
  QueueStats Stats() const;
  TopicInfo Topic(const std::string& name) const;
  std::vector<std::string> TopicNames() const;

 private:
  enum class Cause { kRelease, kTtr };

  bool Paused(const std::string& topic) const {
    auto it = pause_until_.find(topic);
    return it != pause_until_.end() && it->second > mono_;
  }
  Code CheckReservation(const std::string& id, const std::string& receipt, ModelJob** job);
  void EndAttempt(ModelJob& job, int64_t run_at, Cause cause, const std::string& error);
  // The id of the job that `match`es and comes first by `less`; "" for none.
  template <typename Match, typename Less>
  std::string First(Match match, Less less) const;
  std::string BestReady(const std::vector<std::string>& topics, bool skip_paused) const;
  std::vector<Delivery> TakeBest(const std::vector<std::string>& topics, uint32_t count);
  Delivery Deliver(const std::string& id, ModelJob& job);

  int64_t wall_;
  int64_t mono_;
  uint64_t last_order_ = 0;
  std::map<std::string, ModelJob> jobs_;
  std::map<std::string, int64_t> pause_until_;  // monotonic; kForever: until resumed
  std::vector<ModelWaiter> waiters_;            // oldest first
  QueueStats counters_;                         // only the counters are kept here
};

std::vector<Answer> Model::SetTime(int64_t wall, int64_t mono) {
  wall_ = wall;
  mono_ = std::max(mono_, mono);
  // Never early: due when run_at <= now. Silent: "now" includes the boundary.
  for (auto& [id, job] : jobs_) {
    if (job.state == JobState::kDelayed && job.run_at_ms <= wall_) job.state = JobState::kReady;
  }
  // Silent: a reservation of ttr_ms is over when exactly ttr_ms have passed.
  for (auto& [id, job] : jobs_) {
    if (job.state == JobState::kReserved && job.reserved_until <= mono_) {
      ++counters_.timed_out;
      EndAttempt(job, job.run_at_ms, Cause::kTtr, "");
    }
  }
  // Serve first, then end waits that ran out (see the top): a job that fell
  // due during a wait goes to the waiter even when this comes late, and a
  // wait that runs out at the very moment a job becomes ready gets the job.
  std::vector<Answer> out = Serve();
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->deadline <= mono_) {
      out.push_back(Answer{it->ticket, {}});
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

int64_t Model::MsToNextEvent() const {
  int64_t next = kForever;
  for (const auto& [id, job] : jobs_) {
    if (job.state == JobState::kDelayed) next = std::min(next, job.run_at_ms - wall_);
    if (job.state == JobState::kReserved) next = std::min(next, job.reserved_until - mono_);
  }
  for (const auto& [topic, until] : pause_until_) {
    if (until != kForever && until > mono_) next = std::min(next, until - mono_);
  }
  for (const ModelWaiter& w : waiters_) next = std::min(next, w.deadline - mono_);
  return next;
}

// The oldest waiter with a ready job in one of its (unpaused) topics takes up
// to its count of the best ones; repeat.
std::vector<Answer> Model::Serve() {
  std::vector<Answer> out;
  for (size_t i = 0; i < waiters_.size();) {
    if (BestReady(waiters_[i].topics, true).empty()) {
      ++i;
      continue;
    }
    ModelWaiter w = waiters_[i];
    waiters_.erase(waiters_.begin() + static_cast<ptrdiff_t>(i));
    out.push_back(Answer{w.ticket, TakeBest(w.topics, w.count)});
  }
  return out;
}

Code Model::Add(const JobSpec& spec, const std::string& id, AddResult* result) {
  if (spec.ttr_ms == 0 || (spec.delay_ms && spec.run_at_ms) ||
      (spec.delay_ms && *spec.delay_ms < 0) || !ValidTopicName(spec.topic)) {
    return Code::kInvalidArgument;
  }
  int64_t run_at = wall_;
  if (spec.delay_ms) run_at = wall_ + *spec.delay_ms;
  if (spec.run_at_ms) run_at = *spec.run_at_ms;  // Silent: a past run_at is kept as given
  if (jobs_.count(id) != 0) {
    if (!spec.replace) return Code::kExists;
    // Silent: replace is a fresh add of the id. Besides what the contract
    // lists (body, priority, TTR, max_attempts, due time) it takes the new
    // topic, a new place in the order of adding, attempts 0, no last_error,
    // and ends any reservation (its receipt goes stale).
    jobs_.erase(id);
    ++counters_.replaced;
  }
  ModelJob job;
  job.topic = spec.topic;
  job.order = ++last_order_;
  job.priority = spec.priority;
  job.ttr_ms = spec.ttr_ms;
  job.max_attempts = spec.max_attempts;
  job.run_at_ms = run_at;
  job.body = spec.body;
  job.state = run_at <= wall_ ? JobState::kReady : JobState::kDelayed;
  jobs_[id] = job;
  ++counters_.added;  // Silent: a replacing add counts as added, and as replaced
  *result = AddResult{id, job.state, run_at};
  return Code::kOk;
}

Code Model::Reserve(const ReserveRequest& req, uint64_t ticket, std::optional<Answer>* now) {
  if (req.topics.empty() || req.count == 0 || req.count > kMaxReserveCount || req.wait_ms < 0) {
    return Code::kInvalidArgument;
  }
  std::vector<std::string> topics;  // Silent: a topic named twice counts once
  for (const std::string& t : req.topics) {
    if (!ValidTopicName(t)) return Code::kInvalidArgument;
    if (!Contains(topics, t)) topics.push_back(t);
  }
  std::vector<Delivery> got = TakeBest(topics, req.count);
  if (!got.empty() || req.wait_ms == 0) {
    *now = Answer{0, std::move(got)};
    return Code::kOk;
  }
  waiters_.push_back(ModelWaiter{ticket, topics, req.count, mono_ + req.wait_ms});
  return Code::kOk;
}

// queue.h, Finish: kNotFound; kNotReserved when not reserved and no receipt
// was given; kStaleReceipt when a receipt is given and is not the current one.
Code Model::CheckReservation(const std::string& id, const std::string& receipt, ModelJob** job) {
  *job = Find(id);
  if (*job == nullptr) return Code::kNotFound;
  bool reserved = (*job)->state == JobState::kReserved;
  if (receipt.empty()) return reserved ? Code::kOk : Code::kNotReserved;
  return reserved && receipt == (*job)->receipt ? Code::kOk : Code::kStaleReceipt;
}

Code Model::Finish(const std::string& id, const std::string& receipt) {
  ModelJob* job;
  Code code = CheckReservation(id, receipt, &job);
  if (code != Code::kOk) return code;
  jobs_.erase(id);
  ++counters_.finished;
  return Code::kOk;
}

Code Model::Release(const std::string& id, const std::string& receipt, int64_t delay_ms,
                    const std::string& error) {
  if (delay_ms < 0) return Code::kInvalidArgument;  // Silent: checked before the job
  ModelJob* job;
  Code code = CheckReservation(id, receipt, &job);
  if (code != Code::kOk) return code;
  ++counters_.released;  // Silent: also when max_attempts turns it into a bury
  EndAttempt(*job, wall_ + delay_ms, Cause::kRelease, error);
  return Code::kOk;
}

// A reservation ended without success. job.h: "back to ready when its TTR runs
// out"; queue.h, Release: "due again after delay_ms ... with `error` kept as
// its last_error. Buried instead if max_attempts are used up."
void Model::EndAttempt(ModelJob& job, int64_t run_at, Cause cause, const std::string& error) {
  job.receipt.clear();
  job.reserved_until = 0;
  if (job.max_attempts != 0 && job.attempts >= job.max_attempts) {
    job.state = JobState::kBuried;  // Silent: run_at is left as it was
    job.has_error = true;           // "why it was buried"; the text is the engine's
    job.error.reset();
    ++counters_.buried_total;
    return;
  }
  if (cause == Cause::kRelease) {
    job.has_error = !error.empty();
    job.error = error;
  } else {
    job.has_error = true;  // Silent: the engine notes that the TTR ran out
    job.error.reset();
  }
  job.run_at_ms = run_at;  // a TTR that runs out keeps the job's place (run_at)
  job.state = cause == Cause::kTtr || run_at <= wall_ ? JobState::kReady : JobState::kDelayed;
}

Code Model::Touch(const std::string& id, const std::string& receipt) {
  ModelJob* job;
  Code code = CheckReservation(id, receipt, &job);
  if (code == Code::kOk) job->reserved_until = mono_ + job->ttr_ms;
  return code;
}

Code Model::Bury(const std::string& id, const std::string& receipt, const std::string& reason) {
  ModelJob* job;
  Code code = CheckReservation(id, receipt, &job);
  if (code != Code::kOk) return code;
  job->state = JobState::kBuried;
  job->receipt.clear();
  job->reserved_until = 0;
  job->has_error = !reason.empty();  // queue.h: "with `reason` as its last_error"
  job->error = reason;
  ++counters_.buried_total;
  return Code::kOk;
}

Code Model::Delete(const std::string& id) {
  if (jobs_.erase(id) == 0) return Code::kNotFound;
  ++counters_.deleted;
  return Code::kOk;
}

Code Model::Kick(const std::string& id) {
  ModelJob* job = Find(id);
  if (job == nullptr) return Code::kNotFound;
  if (job->state == JobState::kReady || job->state == JobState::kReserved) {
    return Code::kInvalidArgument;
  }
  // "Makes a buried or delayed job ready now." Silent: a kicked delayed job's
  // run_at becomes now; a kicked buried job keeps its run_at (its place).
  if (job->state == JobState::kDelayed) job->run_at_ms = wall_;
  job->state = JobState::kReady;
  ++counters_.kicked;
  return Code::kOk;
}

Code Model::KickTopic(const std::string& topic, uint64_t n, uint64_t* kicked) {
  if (!ValidTopicName(topic)) return Code::kInvalidArgument;
  std::vector<ModelJob*> buried;
  for (auto& [id, job] : jobs_) {
    if (job.topic == topic && job.state == JobState::kBuried) buried.push_back(&job);
  }
  // "oldest first". Silent: oldest by order of adding, not by time of burial.
  std::sort(buried.begin(), buried.end(),
            [](const ModelJob* a, const ModelJob* b) { return a->order < b->order; });
  *kicked = std::min<uint64_t>(n, buried.size());
  for (uint64_t i = 0; i < *kicked; ++i) buried[i]->state = JobState::kReady;
  counters_.kicked += *kicked;  // Silent: kicked counts jobs kicked either way
  return Code::kOk;
}

Code Model::Peek(const std::string& topic, JobState state, std::string* id) const {
  if (!ValidTopicName(topic) || state == JobState::kReserved) return Code::kInvalidArgument;
  auto in_state = [&](const ModelJob& job) { return job.topic == topic && job.state == state; };
  if (state == JobState::kReady) {
    *id = BestReady({topic}, false);  // Silent: a paused topic still shows its next job
  } else if (state == JobState::kDelayed) {
    // The next to fall due. Silent: ties go by order of adding.
    *id = First(in_state, [](const ModelJob& a, const ModelJob& b) {
      return std::tie(a.run_at_ms, a.order) < std::tie(b.run_at_ms, b.order);
    });
  } else {
    // The next KickTopic takes.
    *id = First(in_state, [](const ModelJob& a, const ModelJob& b) { return a.order < b.order; });
  }
  return id->empty() ? Code::kNotFound : Code::kOk;
}

Code Model::Pause(const std::string& topic, int64_t duration_ms) {
  if (!ValidTopicName(topic) || duration_ms < 0) return Code::kInvalidArgument;
  // Silent: a second pause replaces the first, shorter or longer.
  pause_until_[topic] = duration_ms == 0 ? kForever : mono_ + duration_ms;
  return Code::kOk;
}

Code Model::Resume(const std::string& topic) {
  if (!ValidTopicName(topic)) return Code::kInvalidArgument;
  pause_until_.erase(topic);  // Silent: resuming a running topic is fine
  return Code::kOk;
}

bool Model::Cancel(uint64_t ticket) {
  auto it = std::find_if(waiters_.begin(), waiters_.end(),
                         [ticket](const ModelWaiter& w) { return w.ticket == ticket; });
  if (it == waiters_.end()) return false;
  waiters_.erase(it);
  return true;
}

void Model::AdoptReceipt(const std::string& id, const std::string& receipt) {
  if (ModelJob* job = Find(id)) job->receipt = receipt;
}

template <typename Match, typename Less>
std::string Model::First(Match match, Less less) const {
  const ModelJob* best = nullptr;
  std::string best_id;
  for (const auto& [id, job] : jobs_) {
    if (match(job) && (best == nullptr || less(job, *best))) {
      best = &job;
      best_id = id;
    }
  }
  return best_id;
}

std::string Model::BestReady(const std::vector<std::string>& topics, bool skip_paused) const {
  return First(
      [&](const ModelJob& job) {
        return job.state == JobState::kReady && Contains(topics, job.topic) &&
               !(skip_paused && Paused(job.topic));
      },
      ServedBefore);
}

std::vector<Delivery> Model::TakeBest(const std::vector<std::string>& topics, uint32_t count) {
  std::vector<Delivery> out;
  while (out.size() < count) {
    std::string id = BestReady(topics, true);
    if (id.empty()) break;
    out.push_back(Deliver(id, jobs_.at(id)));
  }
  return out;
}

Delivery Model::Deliver(const std::string& id, ModelJob& job) {
  ++job.attempts;  // Silent: a job kicked after max_attempts is delivered again
  ++counters_.reserves;
  job.state = JobState::kReserved;
  job.reserved_until = mono_ + job.ttr_ms;
  job.receipt.clear();  // filled in from the engine's delivery
  return Delivery{id,
                  job.topic,
                  job.body,
                  "",
                  job.attempts,
                  job.ttr_ms,
                  job.priority,
                  job.run_at_ms,
                  wall_ + job.ttr_ms,
                  job.max_attempts};
}

JobInfo Model::Info(const std::string& id, const ModelJob& job) const {
  bool reserved = job.state == JobState::kReserved;
  // Silent: the wall-clock estimate of a reservation's end is now + the
  // monotonic time left.
  int64_t until = reserved ? wall_ + (job.reserved_until - mono_) : 0;
  return JobInfo{id,
                 job.topic,
                 job.state,
                 job.body,
                 job.priority,
                 job.ttr_ms,
                 job.max_attempts,
                 job.attempts,
                 /*created_at_ms=*/0,
                 job.run_at_ms,
                 until,
                 reserved ? job.receipt : "",
                 job.error.value_or(job.has_error ? "<some error>" : "")};
}

QueueStats Model::Stats() const {
  QueueStats s = counters_;
  s.jobs = jobs_.size();
  for (const std::string& name : TopicNames()) {
    TopicInfo t = Topic(name);
    s.delayed += t.delayed;
    s.ready += t.ready;
    s.reserved += t.reserved;
    s.buried += t.buried;
    s.topics += 1;
  }
  s.waiting = waiters_.size();
  return s;
}

TopicInfo Model::Topic(const std::string& name) const {
  TopicInfo t;
  t.name = name;
  for (const auto& [id, job] : jobs_) {
    if (job.topic != name) continue;
    t.delayed += job.state == JobState::kDelayed ? 1 : 0;
    t.ready += job.state == JobState::kReady ? 1 : 0;
    t.reserved += job.state == JobState::kReserved ? 1 : 0;
    t.buried += job.state == JobState::kBuried ? 1 : 0;
  }
  for (const ModelWaiter& w : waiters_) t.waiting += Contains(w.topics, name) ? 1 : 0;
  t.paused = Paused(name);
  if (t.paused) {
    int64_t until = pause_until_.at(name);
    t.paused_for_ms = until == kForever ? -1 : until - mono_;
  }
  return t;
}

// queue.h, Topics: "Topics that have jobs, waiting reserves or a pause, by name."
std::vector<std::string> Model::TopicNames() const {
  std::set<std::string> names;
  for (const auto& [id, job] : jobs_) names.insert(job.topic);
  for (const ModelWaiter& w : waiters_) names.insert(w.topics.begin(), w.topics.end());
  for (const auto& [topic, until] : pause_until_) {
    if (Paused(topic)) names.insert(topic);
  }
  return {names.begin(), names.end()};
}

// --- views, for failure messages ---------------------------------------------------

std::string Format(const JobInfo& j) {
  std::string s = "{id=" + j.id + " topic=" + j.topic + " state=" + std::string(StateName(j.state));
  s += " priority=" + std::to_string(j.priority) + " run_at=" + Wall(j.run_at_ms);
  s += " attempts=" + std::to_string(j.attempts) + "/" + std::to_string(j.max_attempts);
  s += " ttr_ms=" + std::to_string(j.ttr_ms);
  if (j.reserved_until_ms != 0) s += " reserved_until=" + Wall(j.reserved_until_ms);
  if (!j.receipt.empty()) s += " receipt=" + j.receipt;
  s += " last_error=" + Quoted(j.last_error) + " body=" + Quoted(j.body) + "}";
  return s;
}

// A delivery reads as the reserved job it makes.
JobInfo AsInfo(const Delivery& d) {
  return JobInfo{d.id,       d.topic,     JobState::kReserved, d.body,
                 d.priority, d.ttr_ms,    d.max_attempts,      d.attempts,
                 0,          d.run_at_ms, d.reserved_until_ms, d.receipt,
                 ""};
}

std::string Format(const std::vector<Delivery>& ds) {
  std::string s = "[";
  for (const Delivery& d : ds) s += (s.size() > 1 ? ", " : "") + d.id;
  return s + "]";
}

std::string Format(const TopicInfo& t) {
  return "{delayed=" + std::to_string(t.delayed) + " ready=" + std::to_string(t.ready) +
         " reserved=" + std::to_string(t.reserved) + " buried=" + std::to_string(t.buried) +
         " waiting=" + std::to_string(t.waiting) + " paused=" + (t.paused ? "yes" : "no") +
         " paused_for_ms=" + std::to_string(t.paused_for_ms) + "}";
}

// Names of the fields in which the engine's job differs from the model's
// (`job`: the model's record, for what JobInfo cannot say; none for a delivery).
std::vector<std::string> InfoDiff(const JobInfo& e, const JobInfo& m, const ModelJob* job) {
  std::vector<std::string> diff;
  auto check = [&diff](bool same, const char* field) {
    if (!same) diff.push_back(field);
  };
#define DELAYQ_SAME(f) \
  { e.f == m.f, #f }
  for (auto [same, field] : std::initializer_list<std::pair<bool, const char*>>{
           DELAYQ_SAME(id), DELAYQ_SAME(topic), DELAYQ_SAME(state), DELAYQ_SAME(body),
           DELAYQ_SAME(priority), DELAYQ_SAME(ttr_ms), DELAYQ_SAME(max_attempts),
           DELAYQ_SAME(attempts), DELAYQ_SAME(run_at_ms), DELAYQ_SAME(reserved_until_ms)}) {
    check(same, field);
  }
#undef DELAYQ_SAME
  if (job == nullptr) return diff;  // a delivery: its receipt is checked apart
  check(e.receipt == m.receipt, "receipt");
  check(!e.last_error.empty() == job->has_error && (!job->error || e.last_error == *job->error),
        "last_error");
  if (job->created_at_ms) check(e.created_at_ms == *job->created_at_ms, "created_at_ms");
  return diff;
}

// --- the harness: one engine, one model, in step ---------------------------------

struct Divergence {
  std::string kind;    // what disagreed, e.g. "get.state"; shrinking keeps it
  std::string detail;  // both views
  int step = 0;
  std::string op;
};

// The memory window of the engines the harnesses make (-1: none), and its
// byte budget (0: none; 1: past it whenever a job is in memory).
int64_t g_window_ms = -1;
uint64_t g_window_bytes = 0;

// The embedded store's far-future path for one engine: a real log in a
// temporary directory, which the engine journals to and reads far jobs
// back from.
class FarLog final : public engine::Journal, public engine::FarStore {
 public:
  FarLog() : reader_(Dir(), nullptr) {
    store::LogOptions o;
    o.dir = dir_;
    o.fsync = FsyncPolicy::kNever;
    o.segment_bytes = 64 << 10;
    store::RecoveryReport report;
    auto log = store::Log::Open(
        o, [](const store::Record&) { return Status::Ok(); }, &report);
    if (log.ok()) log_ = std::move(log).value();
    auto files = far::IndexFiles::Open(dir_ + "/far", nullptr);
    if (files.ok()) files_ = std::move(files).value();
  }
  ~FarLog() override {
    log_.reset();
    std::system(("rm -rf '" + dir_ + "'").c_str());
  }
  bool ok() const { return log_ != nullptr && files_ != nullptr; }
  far::IndexFiles* files() { return files_.get(); }

  uint64_t JobPut(const engine::JobImage& job) override { return log_->AppendPut(job); }
  void JobUpdate(const engine::JobImage& job) override { log_->AppendUpdate(job); }
  void JobRemoved(const engine::JobImage& job) override { log_->AppendRemove(job); }
  void TopicPause(std::string_view topic, int64_t until) override {
    log_->AppendPause(topic, until);
  }
  Status ReadJob(uint64_t location, engine::StoredJob* out) override {
    if (!log_->Written(location)) {
      if (Status s = log_->WriteOut(); !s.ok()) return s;
    }
    return reader_.ReadPut(location, out);
  }
  uint64_t StoreJob(const engine::JobImage& job) override { return log_->AppendPut(job); }

 private:
  const std::string& Dir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base ? base : "/tmp") + "/delayq-model.XXXXXX";
    dir_ = mkdtemp(tmpl.data());
    return dir_;
  }
  std::string dir_;
  store::RecordReader reader_;
  std::unique_ptr<store::Log> log_;
  std::unique_ptr<far::IndexFiles> files_;
};

class Harness {
 public:
  Harness();
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;

  // Applies `op` to the engine and to the model and compares everything;
  // false once they have disagreed (see divergence()).
  bool Step(const Op& op);
  const std::optional<Divergence>& divergence() const { return divergence_; }

  const Model& model() const { return model_; }
  // With a memory window: what went through the far path.
  engine::Engine::FarFigures far_figures() const {
    return engine_ ? engine_->far_figures() : engine::Engine::FarFigures{};
  }
  // How an Op names a live job: "@k" for the k-th generated id.
  std::string OpId(const std::string& job_id) const {
    auto it = generated_index_.find(job_id);
    return it == generated_index_.end() ? job_id : "@" + std::to_string(it->second);
  }

 private:
  // Where a reserve's callback puts what the engine handed over.
  struct Slot {
    uint64_t ticket = 0;
    int calls = 0;
    std::optional<Result<Deliveries>> result;
  };

  bool Fail(const std::string& kind, const std::string& detail) {
    if (!divergence_) divergence_ = Divergence{kind, detail, step_, op_text_};
    return false;
  }
  bool FailCode(const std::string& kind, const Status& got, Code want,
                const std::string& more = "") {
    return Fail(kind,
                "engine: " + got.ToString() + "; model: " + std::string(CodeName(want)) + more);
  }
  std::string Resolve(const std::string& op_id) const;
  std::string ReceiptFor(const Op& op, const std::string& id);
  ReserveCallback Callback(const std::shared_ptr<Slot>& slot);
  std::string Views(const std::string& id);

  void ApplyAdd(const Op& op);
  void ApplyReserve(const Op& op);
  void ApplyJobOp(const Op& op);
  void ApplyTopicOp(const Op& op);
  void ApplyPeek(const Op& op);
  void ApplyCancel(const Op& op);
  void ApplyClock(const Op& op);

  bool CheckAnswers(const std::vector<Answer>& expected);
  bool CheckDeliveries(const std::string& where, const Deliveries& got,
                       const std::vector<Delivery>& want);
  bool CheckInfo(const std::string& where, const JobInfo& got, const std::string& id);
  bool CheckAll();
  bool CheckStats();
  bool CheckTopics();
  bool CheckJobs();

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::unique_ptr<FarLog> far_;  // with a memory window: outlives the engine
  std::unique_ptr<Engine> engine_;
  Model model_;
  std::map<int, std::string> generated_;                    // k -> the id "@k" stands for
  std::map<std::string, int> generated_index_;              // and back
  std::string last_generated_;                              // generated ids are time-ordered
  std::map<std::string, std::vector<std::string>> issued_;  // every receipt, per id
  std::vector<std::shared_ptr<Slot>> fired_;                // callbacks run during this step
  std::vector<uint64_t> tickets_;                           // every waiter registered
  std::set<std::string> touched_;                           // ids this step named
  int step_ = 0;
  std::string op_text_;
  std::optional<Divergence> divergence_;
};

Harness::Harness() : model_(clock_->NowMs(), clock_->MonotonicMs()) {
  engine::EngineOptions options;
  options.clock = clock_;
  auto engine = Engine::Create(options);
  if (engine.ok()) {
    engine_ = std::move(engine).value();
  } else {
    Fail("setup", engine.status().ToString());
    return;
  }
  if (g_window_ms >= 0) {
    far_ = std::make_unique<FarLog>();
    if (!far_->ok()) {
      Fail("setup", "the far log did not open");
      return;
    }
    engine_->SetJournal(far_.get());
    // A small mutable part: the time index's runs are sealed and read back
    // all through a run.
    engine_->SetFarStore(far_.get(), g_window_ms, far_->files(), /*max_mutable=*/2, g_window_bytes);
    engine_->EndRestore();  // nothing to replay
  }
}

bool Harness::Step(const Op& op) {
  // By OpKind.
  static constexpr void (Harness::*kApply[])(const Op&) = {
      &Harness::ApplyAdd,    &Harness::ApplyReserve, &Harness::ApplyJobOp,
      &Harness::ApplyJobOp,  &Harness::ApplyJobOp,   &Harness::ApplyJobOp,
      &Harness::ApplyJobOp,  &Harness::ApplyJobOp,   &Harness::ApplyTopicOp,
      &Harness::ApplyPeek,   &Harness::ApplyTopicOp, &Harness::ApplyTopicOp,
      &Harness::ApplyCancel, &Harness::ApplyClock,   &Harness::ApplyClock};
  if (divergence_) return false;
  ++step_;
  op_text_ = Describe(op);
  touched_ = {kGhostId};
  (this->*kApply[static_cast<size_t>(op.kind)])(op);
  // What LocalQueue's timing turn does: jobs that went beyond the window
  // while in memory are written in full and let go.
  if (far_ != nullptr) {
    while (engine_->SettleFar(1 << 20)) {
    }
  }
  // Jobs that became ready go to waiting reserves at the end of the call.
  if (!divergence_) CheckAnswers(model_.Serve());
  if (!divergence_) CheckAll();
  return !divergence_;
}

std::string Harness::Resolve(const std::string& op_id) const {
  if (op_id.size() < 2 || op_id[0] != '@') return op_id;
  auto it = generated_.find(std::atoi(op_id.c_str() + 1));
  return it == generated_.end() ? op_id : it->second;
}

std::string Harness::ReceiptFor(const Op& op, const std::string& id) {
  // Well formed (a malformed one is refused before the job is looked at),
  // but no delivery's: no seq is that large.
  const std::string kNoones(24, 'f');
  const ModelJob* job = model_.Find(id);
  std::string current = job != nullptr && job->state == JobState::kReserved ? job->receipt : "";
  const std::vector<std::string>& past = issued_[id];
  if (op.receipt == ReceiptChoice::kNone) return "";
  if (op.receipt == ReceiptChoice::kCurrent && !current.empty()) return current;
  if (op.receipt == ReceiptChoice::kCurrent) return past.empty() ? kNoones : past.back();
  std::vector<std::string> stale;
  for (const std::string& r : past) {
    if (r != current) stale.push_back(r);
  }
  return stale.empty() ? kNoones : stale[op.pick % stale.size()];
}

ReserveCallback Harness::Callback(const std::shared_ptr<Slot>& slot) {
  return [this, slot](Result<Deliveries> result) {
    ++slot->calls;
    slot->result.emplace(std::move(result));
    fired_.push_back(slot);
  };
}

// Both views of one job, for messages.
std::string Harness::Views(const std::string& id) {
  Result<JobInfo> got = engine_->Get(id);
  std::string s = "\n  engine: " + (got.ok() ? Format(*got) : got.status().ToString());
  ModelJob* job = model_.Find(id);
  return s + "\n  model:  " + (job != nullptr ? Format(model_.Info(id, *job)) : "not_found");
}

void Harness::ApplyAdd(const Op& op) {
  JobSpec spec{op.topics[0],    op.gen >= 0 ? "" : Resolve(op.id),
               std::nullopt,    std::nullopt,
               op.ttr_ms,       op.priority,
               op.max_attempts, op.text,
               op.replace,      {}};
  if (op.timing == Timing::kDelay || op.timing == Timing::kBoth) spec.delay_ms = op.ms;
  if (op.timing == Timing::kRunAt || op.timing == Timing::kBoth) {
    spec.run_at_ms = model_.wall() + op.ms;
  }
  std::string before = spec.id.empty() ? "" : Views(spec.id);
  Result<AddResult> got = engine_->Add(spec);
  std::string id = spec.id;
  if (op.gen >= 0 && got.ok()) {
    // SPEC §3: generated ids are unique among live jobs and time-ordered.
    if (got->id.empty() || model_.Find(got->id) != nullptr || got->id <= last_generated_) {
      Fail("add.generated_id",
           "'" + got->id + "' is taken, or not after '" + last_generated_ + "'");
      return;
    }
    id = last_generated_ = got->id;
    generated_[op.gen] = id;
    generated_index_[id] = op.gen;
  }
  AddResult want;
  Code code = model_.Add(spec, id.empty() ? "<generated>" : id, &want);
  touched_.insert(id);
  if (got.status().code() != code) {
    FailCode("add.code", got.status(), code, "; before:" + before);
    return;
  }
  if (code == Code::kOk &&
      (got->id != want.id || got->state != want.state || got->run_at_ms != want.run_at_ms)) {
    Fail("add.result", "engine: {" + got->id + " " + std::string(StateName(got->state)) + " " +
                           Wall(got->run_at_ms) + "}; model: {" + want.id + " " +
                           std::string(StateName(want.state)) + " " + Wall(want.run_at_ms) + "}");
  }
}

void Harness::ApplyReserve(const Op& op) {
  ReserveRequest req{op.topics, op.count, op.ms};
  auto slot = std::make_shared<Slot>();
  uint64_t ticket = engine_->Reserve(req, Callback(slot));
  std::optional<Answer> now;
  Code code = model_.Reserve(req, ticket, &now);
  if (ticket != 0) {
    slot->ticket = ticket;
    tickets_.push_back(ticket);
    if (slot->calls != 0) Fail("reserve.callback", "ticket returned, yet done already ran");
    if (code != Code::kOk || now) {
      Fail("reserve.waits", "engine waits; model answers at once: " +
                                (now ? Format(now->deliveries) : std::string(CodeName(code))));
    }
    return;
  }
  if (slot->calls != 1) {
    Fail("reserve.callback", "ticket 0, done ran " + std::to_string(slot->calls) + " times");
    return;
  }
  std::erase(fired_, slot);
  const Result<Deliveries>& got = *slot->result;
  if (got.status().code() != code) {
    FailCode("reserve.code", got.status(), code);
  } else if (code == Code::kOk && !now) {
    Fail("reserve.waits", "engine answers at once " + Format(*got) + "; model waits");
  } else if (code == Code::kOk) {
    CheckDeliveries("reserve", *got, now->deliveries);
  }
}

void Harness::ApplyJobOp(const Op& op) {
  std::string id = Resolve(op.id);
  touched_.insert(id);
  std::string receipt = ReceiptFor(op, id);
  std::string before = Views(id);
  // Braced lists evaluate left to right: the engine first, then the model.
  auto [got, want] = [&]() -> std::pair<Status, Code> {
    switch (op.kind) {
      case OpKind::kFinish:
        return {engine_->Finish(id, receipt), model_.Finish(id, receipt)};
      case OpKind::kRelease:
        return {engine_->Release(id, receipt, op.ms, op.text),
                model_.Release(id, receipt, op.ms, op.text)};
      case OpKind::kTouch:
        return {engine_->Touch(id, receipt), model_.Touch(id, receipt)};
      case OpKind::kBury:
        return {engine_->Bury(id, receipt, op.text), model_.Bury(id, receipt, op.text)};
      case OpKind::kDelete:
        return {engine_->Delete(id), model_.Delete(id)};
      default:
        return {engine_->Kick(id), model_.Kick(id)};
    }
  }();
  if (got.code() != want) {
    FailCode(std::string(OpName(op.kind)) + ".code", got, want,
             "; receipt '" + receipt + "'; before:" + before);
  }
}

void Harness::ApplyTopicOp(const Op& op) {
  const std::string& topic = op.topics[0];
  if (op.kind == OpKind::kKickTopic) {
    Result<uint64_t> got = engine_->KickTopic(topic, op.count);
    uint64_t kicked = 0;
    Code want = model_.KickTopic(topic, op.count, &kicked);
    if (got.status().code() != want) {
      FailCode("kick_topic.code", got.status(), want);
    } else if (got.ok() && *got != kicked) {
      Fail("kick_topic.count",
           "engine kicked " + std::to_string(*got) + "; model " + std::to_string(kicked));
    }
    return;
  }
  bool pause = op.kind == OpKind::kPause;
  Status got = pause ? engine_->Pause(topic, op.ms) : engine_->Resume(topic);
  Code want = pause ? model_.Pause(topic, op.ms) : model_.Resume(topic);
  if (got.code() != want) {
    FailCode(std::string(OpName(op.kind)) + ".code", got, want);
  }
}

void Harness::ApplyPeek(const Op& op) {
  Result<JobInfo> got = engine_->Peek(op.topics[0], op.state);
  std::string id;
  Code want = model_.Peek(op.topics[0], op.state, &id);
  if (got.status().code() != want) {
    FailCode("peek.code", got.status(), want, id.empty() ? "" : Views(id));
  } else if (got.ok() && got->id != id) {
    Fail("peek.id", "engine peeks " + got->id + ", model " + id + Views(got->id) + Views(id));
  } else if (got.ok()) {
    CheckInfo("peek", *got, id);
  }
}

void Harness::ApplyCancel(const Op& op) {
  uint64_t ticket = 999'999;  // no such waiter
  if (!tickets_.empty()) {
    size_t back = std::min<size_t>(op.pick, tickets_.size() - 1);
    ticket = tickets_[tickets_.size() - 1 - back];
  }
  bool got = engine_->CancelWaiter(ticket);
  bool want = model_.Cancel(ticket);
  if (got != want) {
    Fail("cancel", "waiter " + std::to_string(ticket) + ": engine " + (got ? "true" : "false") +
                       ", model " + (want ? "true" : "false"));
  }
}

// While reserves wait, a punctual owner stops the clock at every deadline on
// the way and ticks the engine there; a late one (op.late) jumps and ticks
// once at the end.
void Harness::ApplyClock(const Op& op) {
  if (op.kind == OpKind::kStepWall) clock_->StepWall(op.ms);
  int64_t left = op.kind == OpKind::kAdvance ? op.ms : 0;
  do {
    int64_t step = left;
    if (!op.late && !model_.waiters().empty()) {
      step = std::clamp<int64_t>(model_.MsToNextEvent(), 0, left);
    }
    clock_->Advance(step);
    left -= step;
    engine_->Tick();
    if (!CheckAnswers(model_.SetTime(clock_->NowMs(), clock_->MonotonicMs()))) return;
  } while (left > 0);
}

// The model's answers to waiting reserves against the callbacks the engine ran.
// Waiters that get jobs must be answered in the model's order (oldest first);
// the order among waits that ran out is left open.
bool Harness::CheckAnswers(const std::vector<Answer>& expected) {
  std::map<uint64_t, const Answer*> want;
  std::vector<uint64_t> want_served, got_served;
  for (const Answer& a : expected) {
    want[a.ticket] = &a;
    if (!a.deliveries.empty()) want_served.push_back(a.ticket);
  }
  std::vector<std::shared_ptr<Slot>> fired;
  fired.swap(fired_);
  for (const std::shared_ptr<Slot>& slot : fired) {
    const Result<Deliveries>& r = *slot->result;
    if (r.ok() && !r->empty()) got_served.push_back(slot->ticket);
  }
  for (const std::shared_ptr<Slot>& slot : fired) {
    std::string waiter = "waiter " + std::to_string(slot->ticket);
    if (slot->calls > 1) return Fail("waiter.twice", waiter + ": done ran twice");
    auto it = want.find(slot->ticket);
    if (it == want.end()) {
      const Result<Deliveries>& r = *slot->result;
      return Fail("waiter.unexpected", waiter + ": engine answered " +
                                           (r.ok() ? Format(*r) : r.status().ToString()) +
                                           "; model: still waiting, or cancelled");
    }
    if (!slot->result->ok()) return Fail("waiter.error", slot->result->status().ToString());
    if (!CheckDeliveries("waiter", slot->result->value(), it->second->deliveries)) return false;
    want.erase(it);
  }
  if (!want.empty()) {
    const Answer& a = *want.begin()->second;
    return Fail("waiter.missing", "waiter " + std::to_string(a.ticket) +
                                      ": engine did not answer; model answers " +
                                      Format(a.deliveries));
  }
  if (got_served != want_served) {
    auto list = [](const std::vector<uint64_t>& v) {
      std::string s;
      for (uint64_t t : v) s += (s.empty() ? "" : ",") + std::to_string(t);
      return "[" + s + "]";
    };
    return Fail("waiter.order",
                "waiters served: engine " + list(got_served) + ", model " + list(want_served));
  }
  return true;
}

bool Harness::CheckDeliveries(const std::string& where, const Deliveries& got,
                              const std::vector<Delivery>& want) {
  bool same_ids = got.size() == want.size();
  for (size_t i = 0; same_ids && i < got.size(); ++i) same_ids = got[i].id == want[i].id;
  if (!same_ids) {
    std::string detail = "engine hands out " + Format(got) + ", model " + Format(want);
    for (const Delivery& d : got) detail += "\n  engine: " + Format(AsInfo(d));
    for (const Delivery& d : want) detail += "\n  model:  " + Format(AsInfo(d));
    return Fail(where + ".ids", detail);
  }
  for (size_t i = 0; i < got.size(); ++i) {
    std::vector<std::string> diff = InfoDiff(AsInfo(got[i]), AsInfo(want[i]), nullptr);
    if (!diff.empty()) {
      return Fail(where + ".delivery", Join(diff) + " differ\n  engine: " + Format(AsInfo(got[i])) +
                                           "\n  model:  " + Format(AsInfo(want[i])));
    }
    // A receipt proves one delivery: a new one for every delivery of an id.
    std::vector<std::string>& past = issued_[got[i].id];
    if (got[i].receipt.empty() ||
        std::find(past.begin(), past.end(), got[i].receipt) != past.end()) {
      return Fail(where + ".receipt", "receipt '" + got[i].receipt + "' of " + got[i].id +
                                          " is empty or was handed out before");
    }
    past.push_back(got[i].receipt);
    model_.AdoptReceipt(got[i].id, got[i].receipt);
    touched_.insert(got[i].id);
  }
  return true;
}

bool Harness::CheckInfo(const std::string& where, const JobInfo& got, const std::string& id) {
  ModelJob* job = model_.Find(id);
  std::vector<std::string> diff = InfoDiff(got, model_.Info(id, *job), job);
  if (!diff.empty()) {
    return Fail(where + "." + diff[0], id + ": " + Join(diff) +
                                           " differ\n  engine: " + Format(got) +
                                           "\n  model:  " + Format(model_.Info(id, *job)));
  }
  if (!job->created_at_ms) job->created_at_ms = got.created_at_ms;
  return true;
}

bool Harness::CheckAll() { return CheckJobs() && CheckTopics() && CheckStats(); }

bool Harness::CheckStats() {
#define DELAYQ_FIELD(f) \
  { #f, &QueueStats::f }
  static const std::pair<const char*, uint64_t QueueStats::*> kFields[] = {
      DELAYQ_FIELD(jobs),     DELAYQ_FIELD(delayed),   DELAYQ_FIELD(ready),
      DELAYQ_FIELD(reserved), DELAYQ_FIELD(buried),    DELAYQ_FIELD(topics),
      DELAYQ_FIELD(waiting),  DELAYQ_FIELD(added),     DELAYQ_FIELD(replaced),
      DELAYQ_FIELD(reserves), DELAYQ_FIELD(finished),  DELAYQ_FIELD(deleted),
      DELAYQ_FIELD(released), DELAYQ_FIELD(timed_out), DELAYQ_FIELD(buried_total),
      DELAYQ_FIELD(kicked)};
#undef DELAYQ_FIELD
  QueueStats got = engine_->Stats();
  QueueStats want = model_.Stats();
  for (const auto& [name, field] : kFields) {
    if (got.*field != want.*field) {
      return Fail(std::string("stats.") + name, std::string(name) + ": engine " +
                                                    std::to_string(got.*field) + ", model " +
                                                    std::to_string(want.*field));
    }
  }
  return true;
}

bool Harness::CheckTopics() {
  std::vector<std::string> got;
  for (const TopicInfo& t : engine_->Topics()) got.push_back(t.name);
  if (got != model_.TopicNames()) {
    return Fail("topics.names",
                "engine [" + Join(got) + "], model [" + Join(model_.TopicNames()) + "]");
  }
  std::vector<std::string> names = JobTopics();
  names.push_back(kIdleTopic);
  for (const std::string& name : names) {
    Result<TopicInfo> e = engine_->Topic(name);
    TopicInfo m = model_.Topic(name);
    if (!e.ok()) return Fail("topic.code", name + ": " + e.status().ToString());
    if (std::tie(e->delayed, e->ready, e->reserved, e->buried, e->waiting, e->paused,
                 e->paused_for_ms) !=
        std::tie(m.delayed, m.ready, m.reserved, m.buried, m.waiting, m.paused, m.paused_for_ms)) {
      return Fail("topic.counts", name + "\n  engine: " + Format(*e) + "\n  model:  " + Format(m));
    }
  }
  return true;
}

// Every job the model holds, and every id this step named that it does not.
bool Harness::CheckJobs() {
  for (const auto& [id, job] : model_.jobs()) {
    Result<JobInfo> got = engine_->Get(id);
    if (!got.ok()) return Fail("get.missing", id + ":" + Views(id));
    if (!CheckInfo("get", *got, id)) return false;
  }
  for (const std::string& id : touched_) {
    if (model_.Find(id) != nullptr) continue;
    Result<JobInfo> got = engine_->Get(id);
    if (got.status().code() != Code::kNotFound) return Fail("get.extra", id + ":" + Views(id));
  }
  return true;
}

// --- the generator ---------------------------------------------------------------

class Generator {
 public:
  // late_ticks: clock moves may jump past deadlines with one late Tick().
  Generator(uint64_t seed, bool late_ticks) : rng_(seed), late_ticks_(late_ticks) {}
  Op Next(const Harness& h);

 private:
  Op MakeAdd(const Harness& h);
  Op MakeReserve(const Harness& h);
  std::vector<std::string> QuietTopics(const Harness& h);
  void Shuffle(std::vector<std::string>& v) {
    for (size_t i = v.size(); i > 1; --i) {
      std::swap(v[i - 1], v[rng_.Uniform(0, static_cast<int64_t>(i) - 1)]);
    }
  }
  Op MakeJobOp(const Harness& h, OpKind kind);
  Op MakeTopicOp(OpKind kind);
  std::string PickId(const Harness& h, std::optional<JobState> want);
  std::string PickTopic() { return JobTopics()[rng_.Uniform(0, 2)]; }
  std::string Text(const char* prefix) { return prefix + std::to_string(rng_.Uniform(0, 999)); }

  Rng rng_;
  bool late_ticks_;
  int generated_ = 0;  // generated-id adds so far
};

Op Generator::Next(const Harness& h) {
  // The mix, by OpKind: add, reserve, finish, release, touch, bury, delete,
  // kick, kick_topic, peek, pause, resume, cancel, advance, step_wall.
  static const int kWeights[] = {22, 16, 8, 7, 3, 3, 3, 3, 2, 5, 2, 2, 1, 20, 2};
  int total = 0;
  for (int weight : kWeights) total += weight;
  int roll = static_cast<int>(rng_.Uniform(0, total - 1));
  size_t i = 0;
  while (roll >= kWeights[i]) roll -= kWeights[i++];
  Op op;
  op.kind = static_cast<OpKind>(i);
  if (op.kind == OpKind::kAdd) return MakeAdd(h);
  if (op.kind == OpKind::kReserve) return MakeReserve(h);
  if (op.kind == OpKind::kCancel) op.pick = static_cast<uint32_t>(rng_.Uniform(0, 3));
  if (op.kind == OpKind::kAdvance) op.ms = rng_.Uniform(0, 30);
  if (op.kind == OpKind::kAdvance && late_ticks_ && rng_.Chance(60)) {
    op.late = true;
    if (rng_.Chance(50)) op.ms = rng_.Uniform(20, 120);  // past several deadlines
  }
  if (op.kind == OpKind::kStepWall) op.ms = rng_.Uniform(1, 20) * (rng_.Chance(50) ? 1 : -1);
  if (op.kind >= OpKind::kCancel) return op;
  if (op.kind >= OpKind::kKickTopic) return MakeTopicOp(op.kind);
  return MakeJobOp(h, op.kind);
}

Op Generator::MakeAdd(const Harness& h) {
  static const uint32_t kPriorities[] = {0, 7, 7, 1024, 4'294'967'295U};
  Op op;
  op.kind = OpKind::kAdd;
  op.topics = {PickTopic()};
  if (rng_.Chance(30)) {
    op.gen = generated_++;
  } else if (generated_ > 0 && rng_.Chance(10)) {
    op.id = "@" + std::to_string(rng_.Uniform(std::max(0, generated_ - 10), generated_ - 1));
  } else {
    op.id = "j" + std::to_string(rng_.Uniform(0, 9));
  }
  op.replace = rng_.Chance(40);
  // Due now, after a delay, at a run_at near now or long overdue; and, now and
  // then, invalid: a negative delay, or both a delay and a run_at.
  static const struct {
    int percent;
    Timing timing;
    int64_t lo, hi;
  } kTimings[] = {{35, Timing::kNow, 0, 0},      {40, Timing::kDelay, 0, 50},
                  {20, Timing::kRunAt, -50, 50}, {2, Timing::kRunAt, -100'000, -1'000},
                  {1, Timing::kDelay, -5, -1},   {2, Timing::kBoth, 0, 10}};
  int64_t roll = rng_.Uniform(0, 99);
  size_t t = 0;
  while (roll >= kTimings[t].percent) roll -= kTimings[t++].percent;
  op.timing = kTimings[t].timing;
  op.ms = rng_.Uniform(kTimings[t].lo, kTimings[t].hi);
  op.priority = kPriorities[rng_.Uniform(0, 4)];
  op.ttr_ms = static_cast<uint32_t>(rng_.Chance(1) ? 0 : rng_.Uniform(5, 40));  // 0: invalid
  op.max_attempts = static_cast<uint32_t>(rng_.Uniform(0, 3));
  if (rng_.Chance(3)) {
    op.text = std::string(5000, 'x') + Text("big");  // kept outside the record
  } else if (!rng_.Chance(30)) {
    op.text = Text("b");
  }
  return op;
}

Op Generator::MakeReserve(const Harness& h) {
  Op op;
  op.kind = OpKind::kReserve;
  std::vector<std::string> topics = JobTopics();
  Shuffle(topics);
  topics.resize(rng_.Uniform(1, 3));
  if (rng_.Chance(30)) {
    op.ms = rng_.Uniform(1, 60);  // a waiting reserve, on 1-3 topics
    // Mostly topics with nothing to hand out now, so that it has to wait.
    std::vector<std::string> quiet = QuietTopics(h);
    if (!quiet.empty() && rng_.Chance(70)) {
      Shuffle(quiet);
      quiet.resize(std::min<size_t>(quiet.size(), topics.size()));
      topics = quiet;
    }
  }
  if (rng_.Chance(5)) topics.push_back(topics[0]);
  if (rng_.Chance(3)) topics.push_back(kIdleTopic);
  op.count = static_cast<uint32_t>(rng_.Uniform(1, 3));
  if (rng_.Chance(1)) op.count = 0;  // invalid
  if (rng_.Chance(1)) topics = {kBadTopic};
  op.topics = topics;
  return op;
}

// The topics with nothing to hand out now (empty or paused).
std::vector<std::string> Generator::QuietTopics(const Harness& h) {
  std::vector<std::string> quiet;
  for (const std::string& topic : JobTopics()) {
    TopicInfo t = h.model().Topic(topic);
    if (t.ready == 0 || t.paused) quiet.push_back(topic);
  }
  return quiet;
}

Op Generator::MakeJobOp(const Harness& h, OpKind kind) {
  Op op;
  op.kind = kind;
  std::optional<JobState> want;
  if (kind == OpKind::kKick) want = rng_.Chance(50) ? JobState::kBuried : JobState::kDelayed;
  if (kind != OpKind::kKick && kind != OpKind::kDelete) want = JobState::kReserved;
  op.id = PickId(h, want);
  int64_t roll = rng_.Uniform(0, 99);
  op.receipt = roll < 75 ? ReceiptChoice::kCurrent
                         : (roll < 88 ? ReceiptChoice::kStale : ReceiptChoice::kNone);
  op.pick = static_cast<uint32_t>(rng_.Uniform(0, 7));
  if (kind == OpKind::kRelease) {
    op.ms = rng_.Chance(50) ? 0 : rng_.Uniform(1, 30);
    if (rng_.Chance(2)) op.ms = -1;  // invalid
    op.text = rng_.Chance(50) ? "" : Text("e");
  }
  if (kind == OpKind::kBury) op.text = rng_.Chance(50) ? "" : Text("r");
  return op;
}

Op Generator::MakeTopicOp(OpKind kind) {
  Op op;
  op.kind = kind;
  op.topics = {rng_.Chance(5) ? kIdleTopic : PickTopic()};
  if (rng_.Chance(1)) op.topics = {kBadTopic};
  static const JobState kStates[] = {JobState::kReady, JobState::kDelayed, JobState::kBuried};
  if (kind == OpKind::kKickTopic) op.count = static_cast<uint32_t>(rng_.Uniform(0, 3));
  if (kind == OpKind::kPeek) op.state = kStates[rng_.Uniform(0, 2)];
  if (kind == OpKind::kPeek && rng_.Chance(2)) op.state = JobState::kReserved;  // invalid
  if (kind == OpKind::kPause) op.ms = rng_.Chance(25) ? 0 : rng_.Uniform(1, 40);
  if (kind == OpKind::kPause && rng_.Chance(2)) op.ms = -1;  // invalid
  return op;
}

// Mostly a live job in the state the operation wants; sometimes any id of the
// pool, live or not.
std::string Generator::PickId(const Harness& h, std::optional<JobState> want) {
  std::vector<std::string> ids;
  if (want && rng_.Chance(85)) {
    for (const auto& [id, job] : h.model().jobs()) {
      if (job.state == *want) ids.push_back(id);
    }
  }
  if (ids.empty() && rng_.Chance(60)) {
    for (const auto& [id, job] : h.model().jobs()) ids.push_back(id);
  }
  if (!ids.empty()) return h.OpId(ids[rng_.Uniform(0, static_cast<int64_t>(ids.size()) - 1)]);
  int64_t roll = rng_.Uniform(0, 11);
  if (roll < 10) return "j" + std::to_string(roll);
  if (roll == 10 && generated_ > 0) return "@" + std::to_string(rng_.Uniform(0, generated_ - 1));
  return kGhostId;
}

// --- runs, replays, shrinking ----------------------------------------------------

struct RunResult {
  engine::Engine::FarFigures far;
  std::vector<Op> ops;  // as applied, up to and including the failing one
  std::optional<Divergence> divergence;
};

RunResult RunSeed(uint64_t seed, int steps, bool late_ticks) {
  RunResult out;
  Harness harness;
  Generator generator(seed, late_ticks);
  for (int i = 0; i < steps; ++i) {
    out.ops.push_back(generator.Next(harness));
    if (!harness.Step(out.ops.back())) {
      out.divergence = harness.divergence();
      break;
    }
  }
  out.far = harness.far_figures();
  return out;
}

std::optional<Divergence> Replay(const std::vector<Op>& ops) {
  Harness harness;
  for (const Op& op : ops) {
    if (!harness.Step(op)) return harness.divergence();
  }
  return std::nullopt;
}

// Delta debugging: drops chunks of operations while the replay still shows a
// divergence of the same kind. Bounded in time; the result is a replay.
std::vector<Op> Shrink(std::vector<Op> ops, const std::string& kind) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  size_t chunks = 2;
  while (ops.size() >= 2 && std::chrono::steady_clock::now() < deadline) {
    size_t size = (ops.size() + chunks - 1) / chunks;
    bool reduced = false;
    for (size_t start = 0; start < ops.size() && std::chrono::steady_clock::now() < deadline;
         start += size) {
      std::vector<Op> candidate(ops.begin(), ops.begin() + static_cast<ptrdiff_t>(start));
      candidate.insert(candidate.end(),
                       ops.begin() + static_cast<ptrdiff_t>(std::min(start + size, ops.size())),
                       ops.end());
      std::optional<Divergence> d = Replay(candidate);
      if (d && d->kind == kind) {
        ops = std::move(candidate);
        chunks = std::max<size_t>(chunks - 1, 2);
        reduced = true;
        break;
      }
    }
    if (!reduced) {
      if (chunks >= ops.size()) break;
      chunks = std::min(ops.size(), chunks * 2);
    }
  }
  return ops;
}

std::string Report(uint64_t seed, const Divergence& d, const std::vector<Op>& small,
                   const std::string& replay) {
  std::string s = "engine and model disagree (" + d.kind + ")\n  seed " + std::to_string(seed) +
                  ", step " + std::to_string(d.step) + ": " + d.op + "\n  " + d.detail +
                  "\n  replay: " + replay + "\n";
  std::optional<Divergence> again = Replay(small);
  s += "shortest sequence found (" + std::to_string(small.size()) + " steps):\n";
  for (size_t i = 0; i < small.size(); ++i) {
    s += "  " + std::to_string(i + 1) + ". " + Describe(small[i]) + "\n";
  }
  if (again) s += "  -> at step " + std::to_string(again->step) + ": " + again->detail + "\n";
  return s;
}

uint64_t SeedOfRun(const Config& config, uint64_t base, int run) {
  if (config.seed) return *config.seed;
  return Rng(base + static_cast<uint64_t>(run)).Next() % 1'000'000'000'000ULL;
}

// `test`: the test's name, for the replay line.
// window_ms: the engines' memory window (-1: none); with two, runs alternate.
void RunRandom(bool late_ticks, const char* test, std::vector<int64_t> windows = {-1}) {
  Config config = ReadConfig();
  uint64_t base = std::random_device{}();
  for (int run = 0; run < config.runs; ++run) {
    uint64_t seed = SeedOfRun(config, base, run);
    std::string replay = "DELAYQ_MODEL_SEED=" + std::to_string(seed) +
                         " model_test --gtest_filter=EngineModel." + test;
    std::cout << "[ model    ] run " << run + 1 << "/" << config.runs << ": seed " << seed << ", "
              << config.steps << " steps" << (late_ticks ? ", late ticks" : "")
              << " (replay: " << replay << ")" << std::endl;
    ::testing::Test::RecordProperty("seed" + std::to_string(run + 1), std::to_string(seed));
    uint64_t pick = config.seed ? seed : static_cast<uint64_t>(run);
    g_window_ms = windows[pick % windows.size()];
    g_window_bytes = (pick / windows.size()) % 2;
    if (g_window_ms >= 0) {
      std::cout << "[ model    ] memory window " << g_window_ms << " ms"
                << (g_window_bytes != 0 ? ", byte budget 1" : "") << std::endl;
    }
    RunResult result = RunSeed(seed, config.steps, late_ticks);
    if (g_window_ms >= 0 && !result.divergence) {
      std::cout << "[ model    ] far path: " << result.far.loads << " brought back, "
                << result.far.stores << " written in full, " << result.far.reads << " reads, "
                << result.far.seals << " index runs sealed" << std::endl;
      // Whole runs must take it, or the test proves nothing about it.
      EXPECT_GT(result.far.loads, 0u) << "seed " << seed;
      EXPECT_EQ(result.far.read_errors, 0u) << "seed " << seed;
      EXPECT_GT(result.far.seals, 0u) << "seed " << seed;
      EXPECT_EQ(result.far.index_errors, 0u) << "seed " << seed;
    }
    if (result.divergence) {
      std::vector<Op> small = Shrink(result.ops, result.divergence->kind);
      FAIL() << Report(seed, *result.divergence, small, replay);
    }
  }
}

TEST(EngineModel, RandomOperationsAgreeWithReferenceModel) {
  RunRandom(false, "RandomOperationsAgreeWithReferenceModel");
}

// The owner ticks late: clock moves jump past deadlines with one Tick().
TEST(EngineModel, RandomOperationsWithLateTicksAgreeWithReferenceModel) {
  RunRandom(true, "RandomOperationsWithLateTicksAgreeWithReferenceModel");
}

// Delayed jobs beyond a memory window live in a real log until they near:
// every delayed job (0 ms), or those due over 20 ms ahead.
TEST(EngineModel, RandomOperationsWithAMemoryWindowAgreeWithReferenceModel) {
  RunRandom(false, "RandomOperationsWithAMemoryWindowAgreeWithReferenceModel", {0, 20});
  g_window_ms = -1;
}

TEST(EngineModel, RandomOperationsWithAMemoryWindowAndLateTicksAgreeWithReferenceModel) {
  RunRandom(true, "RandomOperationsWithAMemoryWindowAndLateTicksAgreeWithReferenceModel", {0, 20});
  g_window_ms = -1;
}

// --- regressions: fixed sequences, named after what broke --------------------------

void ExpectAgreement(const std::vector<Op>& ops) {
  if (std::optional<Divergence> d = Replay(ops)) {
    ADD_FAILURE() << "step " << d->step << ": " << d->op << "\n  " << d->kind << ": " << d->detail;
  }
}

// j1 reserved, released with an error, and reserved again; then `last`.
std::vector<Op> AfterFailedAttempt(Op last) {
  Op reserve{.kind = OpKind::kReserve, .topics = {"mail"}};
  return {
      {.kind = OpKind::kAdd, .id = "j1", .topics = {"mail"}, .ttr_ms = 30},
      reserve,
      {.kind = OpKind::kRelease, .id = "j1", .text = "boom", .receipt = ReceiptChoice::kCurrent},
      reserve,
      last};
}

// queue.h, Release: "with `error` kept as its last_error": with no error, none
// is kept, rather than the error of an earlier attempt.
TEST(EngineModel, ReleaseWithoutErrorLeavesNoLastError) {
  ExpectAgreement(AfterFailedAttempt(
      {.kind = OpKind::kRelease, .id = "j1", .receipt = ReceiptChoice::kCurrent}));
}

// queue.h, Bury: "with `reason` as its last_error", likewise.
TEST(EngineModel, BuryWithoutReasonLeavesNoLastError) {
  ExpectAgreement(
      AfterFailedAttempt({.kind = OpKind::kBury, .id = "j1", .receipt = ReceiptChoice::kCurrent}));
}

// job.h: a reserved job goes "back to ready when its TTR runs out", and a TTR
// runs on the monotonic clock (clock.h). With the wall clock stepped back
// meanwhile, the job must not wait for its run_at a second time.
TEST(EngineModel, TtrRunningOutAfterWallStepBackMakesJobReady) {
  ExpectAgreement({
      {.kind = OpKind::kAdd, .id = "j1", .topics = {"mail"}, .ttr_ms = 10},
      {.kind = OpKind::kReserve, .topics = {"mail"}},
      {.kind = OpKind::kStepWall, .ms = -20},
      {.kind = OpKind::kAdvance, .ms = 10},
  });
}

// Waiters on several topics, served oldest first across all of them: each
// takes up to its count of the best ready jobs of its topics (by order of
// adding here), whichever topic made them ready.
TEST(EngineModel, MultiTopicWaitersAreServedOldestFirst) {
  auto add = [](const char* id, const char* topic) {
    return Op{
        .kind = OpKind::kAdd, .id = id, .topics = {topic}, .timing = Timing::kDelay, .ms = 10};
  };
  ExpectAgreement({
      {.kind = OpKind::kReserve, .topics = {"mail", "orders.close"}, .ms = 50, .count = 2},
      {.kind = OpKind::kReserve, .topics = {"orders.close"}, .ms = 50, .count = 1},
      {.kind = OpKind::kReserve, .topics = {"hook:retry", "mail", "idle"}, .ms = 50, .count = 3},
      add("j1", "orders.close"),
      add("j2", "mail"),
      add("j3", "orders.close"),
      add("j4", "mail"),
      {.kind = OpKind::kAdvance, .ms = 10},
  });
}

// One late Tick() past several deadlines: jobs that fell due during the waits
// (one by delay, one by a TTR running out) go to the waiters, oldest first;
// a wait with nothing for it answers empty.
TEST(EngineModel, LateTickServesJobsThatFellDueDuringTheWait) {
  ExpectAgreement({
      {.kind = OpKind::kAdd, .id = "j1", .topics = {"mail"}, .ttr_ms = 10},
      {.kind = OpKind::kReserve, .topics = {"mail"}},
      {.kind = OpKind::kReserve, .topics = {"hook:retry"}, .ms = 5},
      {.kind = OpKind::kReserve, .topics = {"orders.close", "mail"}, .ms = 20, .count = 3},
      {.kind = OpKind::kReserve, .topics = {"mail"}, .ms = 40},
      {.kind = OpKind::kAdd,
       .id = "j2",
       .topics = {"orders.close"},
       .timing = Timing::kDelay,
       .ms = 15},
      {.kind = OpKind::kAdvance, .ms = 60, .late = true},
  });
}

}  // namespace
}  // namespace delayq
