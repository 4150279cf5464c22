// The differential test: the same random command sequences against the
// memory store and the Redis store (a real redis-server, 4 buckets), the
// replies and the state compared after every step. A difference is shrunk to
// a minimal sequence (delta debugging: drop chunks of steps, then single
// commands, then split pipelines, while it still fails) and printed as a
// transcript with the seed that found it.
//
// Level: through the RESP front end in-process (server/front_end_harness.h),
// the real RespServer and FrontEnd on each store, wired as `delayq serve`
// wires them, without sockets. Chosen over driving the two ServingQueues
// directly because the front end is where pipelining is real: with the
// Redis store a pipelined command's reply waits in a hole while the commands
// behind it run (FrontEnd's order rules), so a sequence sent as one read is
// exactly what a client's pipeline does, and the argument parsing, error
// wording and reply encoding are compared too. Time is each harness's
// ManualClock, moved by the same amounts on both; the Redis store's timer
// thread acts on it asynchronously, which cannot change a reply: every
// Redis script settles what is due before it acts (docs/redis-store.md,
// "Time").
//
// Normalised before comparing: receipts (r1, r2… in order of first
// appearance, per store), generated ids (g1, g2…), times (@+ms since the
// clocks' common start). Compared after each step: each reply, then a
// snapshot read as one pipeline — GET of every id used so far, STATS (the
// queue's figures, not the stores' own nor the connection count or
// lateness), STATS and PEEK READY/DELAYED/BURIED of each topic, TOPICS.
//
// Defaults: 10 seeds x 200 steps. DELAYQ_DIFF_SEEDS=n runs seeds 1..n,
// DELAYQ_DIFF_SEED=s that seed alone, DELAYQ_DIFF_STEPS=n steps per seed.
// DELAYQ_DIFF_CHECK=<names>|all also checks the known divergences below.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "delayq/clock.h"
#include "differential/sequence.h"
#include "gtest/gtest.h"
#include "redis/redis_harness.h"
#include "server/front_end_harness.h"

namespace delayq::differential {
namespace {

using server::testing::FrontEndHarness;
using server::testing::RespReply;

// --- Known divergences ---------------------------------------------------------------
//
// Each is a difference between the stores, or a broken rule, seen by this
// test and not fixed yet: issue 23 names four (fixes on other branches),
// this test found three more. While its switch is false the test steps
// around it, so that it passes; flip it once the fix is merged.
// DELAYQ_DIFF_CHECK=<name>[,<name>…] (or all) checks them without a
// rebuild: item13, item14-reserves, item14-wording, item5,
// reserve-behind-cut, reads-in-order, reserves-in-order.

// Item 13: a pipelined KICKTOPIC is overtaken on the Redis store by the
// commands behind it (KickTopicOp takes two rounds): `KICKTOPIC c 1 ;
// KICKTOPIC c 1` with two buried jobs answers 1 ; 0 (memory: 1 ; 1). While
// false, KICKTOPIC is sent only in steps of its own, never in a pipeline.
constexpr bool kItem13Fixed = true;
// Item 14: STATS `reserves` counts, on the Redis store, the jobs a batch cut
// to its MAXBYTES budget gave back. While false, `reserves` is not compared.
constexpr bool kItem14ReservesFixed = true;
// Item 14, wording: FINISH/TOUCH (FORCE or not) of a job that is not
// reserved says "is not reserved" on Redis, "is <state>, not reserved" in
// memory. While false, both are compared as "is not reserved".
constexpr bool kItem14WordingFixed = true;
// Item 5: a receipt must name one delivery, never reused; after UNRESERVE
// both stores hand out the same receipt again. While false, the check that
// no RESERVE hands out a receipt seen before is off.
constexpr bool kItem5Fixed = true;

// Not in the issue (found by this test): on the Redis store, a RESERVE
// pipelined behind a RESERVE whose batch was cut to its MAXBYTES budget
// missed the jobs the cut gave back — both ran in one round, the first took
// them, and they were unreserved only after the second had its answer
// (`RESERVE COUNT 4 MAXBYTES 10 FROM c ; RESERVE COUNT 1 FROM c`: memory
// j2 ; j1, Redis j2 ; nil). In memory the second gets them. Fixed: a
// reserve group hands what one attempt's budget leaves to the next, and
// gives back the rest before any is answered (rq::ReserveGroup). While
// false, a pipelined RESERVE carries no MAXBYTES.
constexpr bool kReserveBehindBudgetCutFixed = true;

// Not in the issue (found by this test): on the Redis store, a PEEK, STATS
// or TOPICS pipelined before a change (an ADD, say) could see that change:
// RedisQueue ordered the ops of one round only per job id, so a change
// behind the read joined a shared command opened before it (`ADD c j0 ;
// STATS b ; ADD b j4 REPLACE` answered ready 1 for b; memory 0). Fixed: such
// ops are barriers (rq::Op::Barrier). While false, those reads are sent
// only in steps of their own.
constexpr bool kPipelinedReadsInOrderFixed = true;

// Not in the issue (found by this test): on the Redis store, RESERVEs
// pipelined together on different topic lists that share a topic were not
// served as one after the other: they joined one round as groups whose heads
// picked the same best jobs, so a later group got the next best of a bucket
// instead of the next best overall, or nothing while a RESERVE behind it got
// the job (`RESERVE COUNT 1 FROM b a c ; RESERVE FROM c a ; RESERVE COUNT 3
// FROM b a c` with two jobs in c: memory j3 ; j1 ; nil, Redis j3 ; nil ; j1).
// Fixed: groups that share a topic are never in flight together
// (RedisQueue::TakeAttempts). While false, the RESERVEs of one pipeline all
// name the same topics (one group).
constexpr bool kPipelinedReservesInOrderFixed = true;

struct Checks {
  bool item13 = kItem13Fixed;
  bool item14_reserves = kItem14ReservesFixed;
  bool item14_wording = kItem14WordingFixed;
  bool item5 = kItem5Fixed;
  bool reserve_behind_cut = kReserveBehindBudgetCutFixed;
  bool reads_in_order = kPipelinedReadsInOrderFixed;
  bool reserves_in_order = kPipelinedReservesInOrderFixed;
};

Checks ChecksFromEnv() {
  Checks c;
  const char* env = std::getenv("DELAYQ_DIFF_CHECK");
  std::string s = env ? env : "";
  auto on = [&](const char* name) {
    return s == "all" || ("," + s + ",").find("," + std::string(name) + ",") != std::string::npos;
  };
  c.item13 |= on("item13");
  c.item14_reserves |= on("item14-reserves");
  c.item14_wording |= on("item14-wording");
  c.item5 |= on("item5");
  c.reserve_behind_cut |= on("reserve-behind-cut");
  c.reads_in_order |= on("reads-in-order");
  c.reserves_in_order |= on("reserves-in-order");
  return c;
}

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoll(v) : fallback;
}

// --- The Redis server and the stores ----------------------------------------------

const std::string& RedisUrl() {
  static std::unique_ptr<redis_harness::RedisServer> server = [] {
    auto s = redis_harness::RedisServer::Start();
    if (!s.ok()) ADD_FAILURE() << "redis-server: " << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }();
  static const std::string url = server ? server->url() : "redis://127.0.0.1:1";
  return url;
}

std::string FreshPrefix() {
  static std::atomic<int> next{0};
  return "diff" + std::to_string(getpid()) + "." + std::to_string(next.fetch_add(1));
}

const int64_t kStartMs = ManualClock().NowMs();  // every harness's clock starts here

// Receipts and generated ids of one store, and their normalised names. Kept
// apart: the memory store's generated ids and receipts share a form (its
// seq, then a handle or the attempt count), so a job's id can equal its
// first receipt; receipts are found by their place in a reply instead.
class Names {
 public:
  // `real`, an id ADD generated, is g<n> from now on.
  void NoteGenerated(const std::string& real) {
    if (!ids_.count(real)) Bind(real, "g" + std::to_string(++generated_), &ids_);
  }
  // A receipt's name; a new one gets the next r<n>.
  std::string Receipt(const std::string& real) {
    if (real.empty()) return real;
    if (!receipts_.count(real)) Bind(real, "r" + std::to_string(++receipt_count_), &receipts_);
    return receipts_[real];
  }
  // `s` with every generated id in it (as a whole run of 24 lowercase hex
  // digits: the test's own ids and bodies have none) replaced by its name.
  std::string Ids(const std::string& s) const {
    std::string out;
    size_t i = 0;
    while (i < s.size()) {
      size_t j = i;
      while (j < s.size() && IsHex(s[j])) ++j;
      auto it = j - i == 24 ? ids_.find(s.substr(i, 24)) : ids_.end();
      out += it != ids_.end() ? it->second : s.substr(i, j - i);
      if (j < s.size()) out += s[j];
      i = j + 1;
    }
    return out;
  }
  // The store's bytes for a normalised name (g<n>, r<n>).
  // Anything else (a fixed id, "no-g<n>") is sent as it is.
  std::string Real(const std::string& name) const {
    auto it = to_real_.find(name);
    return it == to_real_.end() ? name : it->second;
  }

 private:
  static bool IsHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }
  void Bind(const std::string& real, const std::string& name,
            std::map<std::string, std::string>* to_name) {
    (*to_name)[real] = name;
    to_real_[name] = real;
  }
  std::map<std::string, std::string> ids_, receipts_, to_real_;
  int generated_ = 0, receipt_count_ = 0;
};

// One store behind its own RESP front end, and one pipelining connection.
class Side {
 public:
  explicit Side(StoreKind store) {
    server::testing::FrontEndHarnessOptions o;
    o.store = store;
    if (store == StoreKind::kRedis) {
      o.redis_url = RedisUrl();
      o.redis_prefix = FreshPrefix();
      o.redis_buckets = 4;  // replies merged across buckets, KICKTOPIC's two rounds
    }
    h_ = std::make_unique<FrontEndHarness>(o);
    conn_ = h_->Connect(FrontEndHarness::Protocol::kResp);
  }
  ~Side() {
    conn_.reset();
    h_.reset();
  }

  // Sends the commands as one pipeline (one read for the server) and
  // returns their replies.
  std::vector<RespReply> Pipeline(const std::vector<std::vector<std::string>>& commands) {
    std::string bytes;
    for (const auto& argv : commands) {
      bytes += "*" + std::to_string(argv.size()) + "\r\n";
      for (const std::string& a : argv)
        bytes += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
    }
    conn_->Send(bytes);
    std::vector<RespReply> replies;
    for (size_t i = 0; i < commands.size(); ++i) replies.push_back(conn_->ReadResp());
    return replies;
  }
  void Advance(int64_t ms) { h_->AdvanceMs(ms); }
  Names& names() { return names_; }

 private:
  std::unique_ptr<FrontEndHarness> h_;
  std::unique_ptr<FrontEndHarness::Client> conn_;
  Names names_;
};

// --- Normalising and printing replies -------------------------------------------------

// A time (Unix ms, after 2001) as @+<ms since the clocks' start>; else as it is.
std::string Number(int64_t v) {
  if (v >= 1'000'000'000'000) return "@+" + std::to_string(v - kStartMs);
  return std::to_string(v);
}

std::string Text(const std::string& s) {
  bool digits = !s.empty() && s.size() < 19 &&
                std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (digits) return Number(std::atoll(s.c_str()));
  return "\"" + s + "\"";
}

std::string Show(const RespReply& r);

// GET's and STATS' flat field/value pairs as {field: value, ...}.
std::string ShowPairs(const RespReply& r) {
  std::string s = "{";
  for (size_t i = 0; i + 1 < r.elements.size(); i += 2) {
    if (i > 0) s += ", ";
    s += r.elements[i].str + ": " + Show(r.elements[i + 1]);
  }
  return s + "}";
}

std::string Show(const RespReply& r) {
  using T = RespReply::Type;
  switch (r.type) {
    case T::kSimple:
      return "+" + r.str;
    case T::kError:
      return "-" + r.str;
    case T::kInteger:
      return Number(r.integer);
    case T::kBulk:
      return Text(r.str);
    case T::kNil:
      return "nil";
    case T::kNilArray:
      return "(nil)";
    case T::kArray: {
      std::string s = "[";
      for (size_t i = 0; i < r.elements.size(); ++i) s += (i ? ", " : "") + Show(r.elements[i]);
      return s + "]";
    }
  }
  return "?";
}

void NormaliseIds(const Names& names, RespReply* r) {
  using T = RespReply::Type;
  if (r->type == T::kSimple || r->type == T::kError || r->type == T::kBulk) {
    r->str = names.Ids(r->str);
  }
  for (RespReply& e : r->elements) NormaliseIds(names, &e);
}

// Receipts by their place: a delivery's 4th element (RESERVE, PEEK), GET's
// `receipt` value.
void NormaliseReceipts(Names& names, const std::string& command, RespReply* r) {
  using T = RespReply::Type;
  if (r->type != T::kArray) return;
  if (command == "GET") {
    for (size_t i = 0; i + 1 < r->elements.size(); i += 2) {
      RespReply& v = r->elements[i + 1];
      if (r->elements[i].str == "receipt") v.str = names.Receipt(v.str);
    }
    return;
  }
  auto delivery = [&](RespReply* d) {
    if (d->type == T::kArray && d->elements.size() >= 4) {
      d->elements[3].str = names.Receipt(d->elements[3].str);
    }
  };
  if (command == "PEEK") delivery(r);
  if (command == "RESERVE") {
    for (RespReply& d : r->elements) delivery(&d);
  }
}

// Both, in place: receipts first, so that a receipt equal to an id (see
// Names) is named as a receipt.
void NormaliseStrings(Names& names, const std::vector<std::string>& argv, RespReply* r) {
  if (argv[0] == "ADD" && argv[2] == "*") {
    using T = RespReply::Type;
    if (r->type == T::kBulk) names.NoteGenerated(r->str);
    if (r->type == T::kArray && !r->elements.empty()) names.NoteGenerated(r->elements[0].str);
  }
  NormaliseReceipts(names, argv[0], r);  // r<n>: no longer 24 hex digits
  NormaliseIds(names, r);
}

// The queue's figures STATS shares across stores; not `connections`, the
// lateness figures (real time) nor the store's own (log_*, redis_*).
const std::set<std::string> kStatsFields = {"jobs",     "delayed",   "ready",        "reserved",
                                            "buried",   "topics",    "waiting",      "added",
                                            "replaced", "reserves",  "finished",     "deleted",
                                            "released", "timed_out", "buried_total", "kicked"};

// One reply of one store, normalised and shown as text. `argv` is the
// command as sent (normalised).
std::string Normalise(Names& names, const Checks& checks, const std::vector<std::string>& argv,
                      RespReply r) {
  using T = RespReply::Type;
  NormaliseStrings(names, argv, &r);
  if (r.type == T::kError && !checks.item14_wording) {
    static const std::regex kWording("' is (delayed|ready|reserved|buried), not reserved");
    r.str = std::regex_replace(r.str, kWording, "' is not reserved");
  }
  if (argv[0] == "STATS" && r.type == T::kArray) {
    RespReply kept;
    kept.type = T::kArray;
    for (size_t i = 0; i + 1 < r.elements.size(); i += 2) {
      const std::string& field = r.elements[i].str;
      if (argv.size() == 1 && !kStatsFields.count(field)) continue;
      if (field == "reserves" && !checks.item14_reserves) continue;
      kept.elements.push_back(r.elements[i]);
      kept.elements.push_back(r.elements[i + 1]);
    }
    return ShowPairs(kept);
  }
  if (argv[0] == "GET" && r.type == T::kArray) return ShowPairs(r);
  return Show(r);
}

// --- One run of a sequence on both stores ---------------------------------------------

struct Failure {
  size_t step = 0;   // index of the step where the stores first differ
  std::string what;  // what differs
};

class Run {
 public:
  // `record`: keep a transcript of every step.
  Run(const Checks& checks, bool record) : checks_(checks), record_(record) {}

  // Runs `steps` on a fresh memory store and a fresh Redis store; the first
  // difference, or nullopt when they agree throughout.
  std::optional<Failure> Execute(const std::vector<Step>& steps) {
    Side memory(StoreKind::kMemory);
    Side redis(StoreKind::kRedis);
    for (size_t i = 0; i < steps.size(); ++i) {
      if (auto why = DoStep(steps[i], i, memory, redis)) return Failure{i, *why};
      if (::testing::Test::HasFatalFailure()) return Failure{i, "harness failure"};
    }
    return std::nullopt;
  }
  const std::string& transcript() const { return transcript_; }

 private:
  using Argvs = std::vector<std::vector<std::string>>;

  std::optional<std::string> DoStep(const Step& step, size_t index, Side& memory, Side& redis) {
    if (step.advance_ms > 0) {
      memory.Advance(step.advance_ms);
      redis.Advance(step.advance_ms);
      Log("#" + std::to_string(index + 1) + " advance the clock " +
          std::to_string(step.advance_ms) + " ms\n");
    } else if (auto why = DoCommands(step, index, memory, redis)) {
      return why;
    }
    return Snapshot(memory, redis);
  }

  // What the store is sent: normalised names replaced by its own bytes.
  static Argvs ForStore(const std::vector<std::vector<Arg>>& commands, const Names& names) {
    Argvs out;
    for (const auto& args : commands) {
      std::vector<std::string> argv;
      for (const Arg& a : args) {
        argv.push_back(a.kind == Arg::Kind::kPlain ? a.text : names.Real(a.text));
      }
      out.push_back(std::move(argv));
    }
    return out;
  }

  // Both stores' replies to one pipeline, normalised.
  std::pair<std::vector<std::string>, std::vector<std::string>> Exchange(
      const Argvs& normalised, const std::vector<std::vector<Arg>>& args, Side& memory,
      Side& redis) {
    std::vector<std::string> shown[2];
    Side* sides[2] = {&memory, &redis};
    for (int s = 0; s < 2; ++s) {
      std::vector<RespReply> replies = sides[s]->Pipeline(ForStore(args, sides[s]->names()));
      for (size_t i = 0; i < replies.size(); ++i) {
        shown[s].push_back(Normalise(sides[s]->names(), checks_, normalised[i], replies[i]));
        if (s == 0) NoteDeliveries(normalised[i], replies[i], sides[s]->names());
      }
    }
    return {shown[0], shown[1]};
  }

  std::optional<std::string> DoCommands(const Step& step, size_t index, Side& memory, Side& redis) {
    std::vector<std::vector<Arg>> args;
    Argvs normalised;
    for (const Command& c : step.commands) {
      args.push_back(history_.Resolve(c));
      normalised.emplace_back();
      for (const Arg& a : args.back()) {
        if (a.kind == Arg::Kind::kId) named_.insert(a.text);
        normalised.back().push_back(a.text);
      }
    }
    auto [m, r] = Exchange(normalised, args, memory, redis);
    std::string log = "#" + std::to_string(index + 1) + (args.size() > 1 ? " pipeline\n" : " ");
    std::optional<std::string> why;
    for (size_t i = 0; i < args.size(); ++i) {
      std::string line = (args.size() > 1 ? "    " : "") + Render(args[i]);
      if (m[i] == r[i]) {
        log += line + "\n      -> " + m[i] + "\n";
      } else {
        log +=
            line + "\n      -> memory: " + m[i] + "\n         redis:  " + r[i] + "   <-- differs\n";
        if (!why) {
          why = "the replies to " + Render(args[i]) + " (command " + std::to_string(i + 1) +
                " of " + std::to_string(args.size()) + ") differ:\n  memory: " + m[i] +
                "\n  redis:  " + r[i];
        }
      }
    }
    Log(log);
    if (!why) why = CheckReceipts();
    return why;
  }

  // Learns the generated ids and the deliveries (the memory store's
  // replies: while the stores agree, the redis store's are the same).
  void NoteDeliveries(const std::vector<std::string>& argv, RespReply r, Names& names) {
    using T = RespReply::Type;
    NormaliseStrings(names, argv, &r);
    if (argv[0] == "ADD" && argv[2] == "*") {
      const RespReply& id = r.type == T::kArray && !r.elements.empty() ? r.elements[0] : r;
      if (id.type == T::kBulk) history_.NoteGenerated(id.str);
    }
    if (argv[0] != "RESERVE" || r.type != T::kArray) return;
    for (const RespReply& d : r.elements) {
      if (d.elements.size() >= 4) {
        history_.NoteDelivery(d.elements[0].str, d.elements[3].str);
        fresh_.push_back(d.elements[3].str);
      }
    }
  }

  // Item 5: no RESERVE hands out a receipt a delivery had before.
  std::optional<std::string> CheckReceipts() {
    std::optional<std::string> why;
    for (const std::string& r : fresh_) {
      if (checks_.item5 && !handed_.insert(r).second && !why) {
        why = "receipt " + r + " was handed out twice (issue 23 item 5)";
      }
      handed_.insert(r);
    }
    fresh_.clear();
    return why;
  }

  // What a snapshot reads: GET of every id so far (a generated id found gone
  // stays gone unless a command names it again), the figures, TOPICS, each
  // topic's counts and heads.
  std::vector<std::vector<Arg>> SnapshotReads() {
    std::vector<std::vector<Arg>> reads;
    const Arg::Kind plain = Arg::Kind::kPlain;
    for (const std::string& id : history_.KnownIds()) {
      if (!gone_.count(id) || named_.count(id)) {
        reads.push_back({{"GET", plain}, {id, Arg::Kind::kId}});
      }
    }
    named_.clear();
    reads.push_back({{"STATS", plain}});
    reads.push_back({{"TOPICS", plain}});
    for (const char* t : kTopics) {
      reads.push_back({{"STATS", plain}, {t, plain}});
      for (const char* s : {"READY", "DELAYED", "BURIED"}) {
        reads.push_back({{"PEEK", plain}, {t, plain}, {s, plain}});
      }
    }
    return reads;
  }

  std::optional<std::string> Snapshot(Side& memory, Side& redis) {
    std::vector<std::vector<Arg>> args = SnapshotReads();
    Argvs reads;
    for (const auto& a : args) {
      std::vector<std::string> argv;
      for (const Arg& x : a) argv.push_back(x.text);
      reads.push_back(std::move(argv));
    }
    auto [m, r] = Exchange(reads, args, memory, redis);
    std::string diff;
    for (size_t i = 0; i < reads.size(); ++i) {
      if (reads[i][0] == "GET" && reads[i][1][0] == 'g') {
        if (m[i] == "(nil)") {
          gone_.insert(reads[i][1]);
        } else {
          gone_.erase(reads[i][1]);
        }
      }
      if (m[i] != r[i]) {
        diff +=
            "    " + Render(args[i]) + "\n      memory: " + m[i] + "\n      redis:  " + r[i] + "\n";
      }
    }
    if (diff.empty()) return std::nullopt;
    Log("  the state differs after it:\n" + diff);
    return "the state differs:\n" + diff;
  }

  void Log(const std::string& s) {
    if (record_) transcript_ += s;
  }

  Checks checks_;
  bool record_;
  History history_;
  std::vector<std::string> fresh_;  // receipts delivered in this step
  std::set<std::string> handed_;    // every receipt delivered so far
  std::set<std::string> gone_;      // generated ids the last snapshot found gone
  std::set<std::string> named_;     // ids the commands since it named
  std::string transcript_;
};

// --- Shrinking ---------------------------------------------------------------------------

// Delta debugging over the steps of a failing sequence: keeps every removal
// after which the stores still differ. Bounded by `budget` runs, so a
// failure that does not always reproduce costs time, not a hang.
class Shrinker {
 public:
  Shrinker(const Checks& checks, int budget) : checks_(checks), budget_(budget) {}

  std::vector<Step> Shrink(std::vector<Step> steps, size_t failed_at) {
    steps.resize(failed_at + 1);
    // Flaky: the sequence itself does not fail every time.
    for (int t = 0; t < 3 && tries_ == 1; ++t) {
      std::vector<Step> again = steps;
      if (!StillFails(&again)) tries_ = 3;
    }
    for (bool changed = true; changed && runs_ < budget_;) {
      changed = DropChunks(&steps);
      changed |= DropCommands(&steps);
      changed |= SplitPipelines(&steps);
    }
    return steps;
  }
  int runs() const { return runs_; }

 private:
  // Whether `candidate` still fails; if so it becomes the sequence up to
  // its failing step.
  // A difference that depends on timing (which ops share a Redis round) is
  // tried `tries` times before a candidate counts as passing.
  bool StillFails(std::vector<Step>* candidate) {
    for (int t = 0; t < tries_ && runs_ < budget_; ++t) {
      ++runs_;
      std::optional<Failure> f = Run(checks_, false).Execute(*candidate);
      if (!f) continue;
      candidate->resize(f->step + 1);
      return true;
    }
    return false;
  }

  bool DropChunks(std::vector<Step>* steps) {
    bool changed = false;
    for (size_t chunk = std::max<size_t>(steps->size() / 2, 1); chunk >= 1; chunk /= 2) {
      for (size_t i = 0; i < steps->size() && steps->size() > 1;) {
        std::vector<Step> c = *steps;
        c.erase(c.begin() + i, c.begin() + std::min(i + chunk, c.size()));
        if (!c.empty() && StillFails(&c)) {
          *steps = std::move(c);
          changed = true;
        } else {
          i += chunk;
        }
      }
      if (chunk == 1) break;
    }
    return changed;
  }

  bool DropCommands(std::vector<Step>* steps) {
    bool changed = false;
    for (size_t i = 0; i < steps->size(); ++i) {
      for (size_t k = 0; (*steps)[i].commands.size() > 1 && k < (*steps)[i].commands.size();) {
        std::vector<Step> c = *steps;
        c[i].commands.erase(c[i].commands.begin() + k);
        if (StillFails(&c) && i < c.size()) {
          *steps = std::move(c);
          changed = true;
        } else {
          ++k;
        }
      }
    }
    return changed;
  }

  // A pipeline that still fails as one command per step was not needed.
  bool SplitPipelines(std::vector<Step>* steps) {
    bool changed = false;
    for (size_t i = 0; i < steps->size(); ++i) {
      if ((*steps)[i].commands.size() < 2) continue;
      std::vector<Step> c(steps->begin(), steps->begin() + i);
      for (const Command& cmd : (*steps)[i].commands) c.push_back(Step{0, {cmd}});
      c.insert(c.end(), steps->begin() + i + 1, steps->end());
      if (StillFails(&c)) {
        *steps = std::move(c);
        changed = true;
      }
    }
    return changed;
  }

  Checks checks_;
  int budget_;
  int runs_ = 0;
  int tries_ = 1;
};

// A recorded replay of `steps` that fails, out of up to 5 tries (a
// difference may depend on timing); "" if none did.
std::string FailingTranscript(const std::vector<Step>& steps, const Checks& checks) {
  for (int t = 0; t < 5; ++t) {
    Run replay(checks, true);
    if (replay.Execute(steps)) return replay.transcript();
  }
  return "";
}

// Runs one seed; on a difference, shrinks it and fails the test with the
// transcript of the shrunk sequence. True if the stores agreed.
bool RunSeed(uint64_t seed, int steps, const Checks& checks) {
  GenerateOptions g;
  g.steps = steps;
  g.kick_topic_in_pipelines = checks.item13;
  g.max_bytes_in_pipelines = checks.reserve_behind_cut;
  g.reads_in_pipelines = checks.reads_in_order;
  g.reserve_topics_vary = checks.reserves_in_order;
  std::vector<Step> sequence = Generate(seed, g);
  std::optional<Failure> f = Run(checks, false).Execute(sequence);
  if (!f) return true;
  sequence.resize(f->step + 1);
  Shrinker shrinker(checks, static_cast<int>(EnvInt("DELAYQ_DIFF_SHRINK_RUNS", 300)));
  std::vector<Step> shrunk = shrinker.Shrink(sequence, f->step);
  std::ostringstream msg;
  msg << "memory and redis stores differ: seed " << seed << " (DELAYQ_DIFF_SEED=" << seed
      << " DELAYQ_DIFF_STEPS=" << steps << "), at step " << f->step + 1 << ": " << f->what;
  std::string transcript = FailingTranscript(shrunk, checks);
  if (!transcript.empty()) {
    msg << "\nshrunk to " << shrunk.size() << " steps (" << shrinker.runs() << " runs)";
  } else {
    transcript = FailingTranscript(sequence, checks);
    msg << "\nnot shrunk (the difference depends on timing)";
  }
  msg << "; transcript (receipts r<n>, generated ids g<n>, times @+ms since the start):\n"
      << transcript;
  ADD_FAILURE() << msg.str();
  return false;
}

TEST(Differential, MemoryAndRedisStoresAgreeThroughResp) {
  ASSERT_NE(RedisUrl(), "redis://127.0.0.1:1");
  const Checks checks = ChecksFromEnv();
  const int steps = static_cast<int>(EnvInt("DELAYQ_DIFF_STEPS", 200));
  std::vector<uint64_t> seeds;
  if (int64_t one = EnvInt("DELAYQ_DIFF_SEED", 0); one > 0) {
    seeds.push_back(static_cast<uint64_t>(one));
  } else {
    for (int64_t s = 1; s <= EnvInt("DELAYQ_DIFF_SEEDS", 10); ++s) seeds.push_back(s);
  }
  for (uint64_t seed : seeds) {
    // One difference is enough to act on: shrinking another would double the time.
    if (!RunSeed(seed, steps, checks)) break;
  }
}

}  // namespace
}  // namespace delayq::differential
