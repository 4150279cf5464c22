#include "differential/sequence.h"

#include <algorithm>

namespace delayq::differential {
namespace {

// Draws from a small weighted table.
template <typename T>
T Pick(std::mt19937_64& rng, const std::vector<std::pair<T, int>>& table) {
  int total = 0;
  for (const auto& [v, w] : table) total += w;
  int x = static_cast<int>(rng() % static_cast<uint64_t>(total));
  for (const auto& [v, w] : table) {
    if (x < w) return v;
    x -= w;
  }
  return table.back().first;
}

int Uniform(std::mt19937_64& rng, int lo, int hi) {  // [lo, hi]
  return lo + static_cast<int>(rng() % static_cast<uint64_t>(hi - lo + 1));
}

bool Chance(std::mt19937_64& rng, int percent) { return Uniform(rng, 1, 100) <= percent; }

// Weights: adds and reserves keep jobs flowing; the acks mostly name a job
// just delivered, so that the right receipt, a stale one and FORCE all meet
// reserved jobs often.
const std::vector<std::pair<Op, int>> kOps = {
    {Op::kAdd, 22},   {Op::kReserve, 16},  {Op::kFinish, 8},    {Op::kRelease, 6},
    {Op::kTouch, 5},  {Op::kBury, 5},      {Op::kUnreserve, 3}, {Op::kDelete, 4},
    {Op::kKick, 4},   {Op::kKickTopic, 4}, {Op::kGet, 3},       {Op::kPeek, 4},
    {Op::kPause, 2},  {Op::kResume, 3},    {Op::kStats, 2},     {Op::kStatsTopic, 2},
    {Op::kTopics, 2},
};

bool Acks(Op op) {
  return op == Op::kFinish || op == Op::kRelease || op == Op::kTouch || op == Op::kBury ||
         op == Op::kUnreserve;
}

int PickJob(std::mt19937_64& rng, int generated, bool ack) {
  if (ack && Chance(rng, 75)) return kRecent - Uniform(rng, 0, 2);
  if (generated > 0 && Chance(rng, 20)) return kFixedIds + Uniform(rng, 0, generated - 1);
  return Uniform(rng, 0, kFixedIds - 1);
}

void FillAdd(std::mt19937_64& rng, int* generated, Command* c) {
  if (Chance(rng, 15)) {
    c->job = kGenerate;
    ++*generated;
  }
  c->delay_ms = Pick<int64_t>(rng, {{0, 6}, {500, 1}, {1000, 2}, {3000, 1}});
  c->ttr_ms = Pick<int64_t>(rng, {{1000, 2}, {2000, 2}, {5000, 1}});
  if (Chance(rng, 50)) c->priority = Uniform(rng, 0, 3);
  if (Chance(rng, 30)) c->max_attempts = Uniform(rng, 1, 3);
  c->replace = Chance(rng, 25);
  c->with_state = Chance(rng, 10);
  // Bodies of 1..12 bytes, so MAXBYTES 5, 10 and 20 cut batches.
  c->body = std::string(static_cast<size_t>(Uniform(rng, 1, 12)), "xyzw"[Uniform(rng, 0, 3)]);
}

void FillReserve(std::mt19937_64& rng, Command* c) {
  if (Chance(rng, 60)) c->count = Uniform(rng, 1, 4);
  if (Chance(rng, 30)) c->max_bytes = Pick<int64_t>(rng, {{5, 1}, {10, 1}, {20, 1}});
  std::vector<int> topics = {0, 1, 2};
  std::shuffle(topics.begin(), topics.end(), rng);
  topics.resize(static_cast<size_t>(Pick<int>(rng, {{1, 3}, {2, 2}, {3, 1}})));
  c->from = topics;
}

// One command; `pipelined`: for a step of several, as `options` allow.
Command MakeCommand(std::mt19937_64& rng, int* generated, bool pipelined,
                    const GenerateOptions& options) {
  Command c;
  auto allowed = [&](Op op) {
    if (!pipelined) return true;
    if (op == Op::kKickTopic) return options.kick_topic_in_pipelines;
    if (op == Op::kPeek || op == Op::kStats || op == Op::kStatsTopic || op == Op::kTopics) {
      return options.reads_in_pipelines;
    }
    return true;
  };
  do {
    c.op = Pick(rng, kOps);
  } while (!allowed(c.op));
  c.job = PickJob(rng, *generated, Acks(c.op));
  c.topic = Uniform(rng, 0, kTopicCount - 1);
  switch (c.op) {
    case Op::kAdd:
      FillAdd(rng, generated, &c);
      break;
    case Op::kReserve:
      FillReserve(rng, &c);
      if (pipelined && !options.max_bytes_in_pipelines) c.max_bytes = 0;
      break;
    case Op::kRelease:
      c.delay_ms = Pick<int64_t>(rng, {{0, 2}, {1000, 1}});
      [[fallthrough]];
    case Op::kBury:
      if (Chance(rng, 40)) c.error = "oops";
      [[fallthrough]];
    case Op::kFinish:
    case Op::kTouch:
      c.receipt = Pick<ReceiptRef>(rng, {{ReceiptRef::kLatest, 12},
                                         {ReceiptRef::kOlder, 4},
                                         {ReceiptRef::kForce, 3},
                                         {ReceiptRef::kNone, 1}});
      break;
    case Op::kUnreserve:
      c.receipt = Chance(rng, 80) ? ReceiptRef::kLatest : ReceiptRef::kOlder;
      break;
    case Op::kPeek:
      c.state = Uniform(rng, 0, 2);
      break;
    case Op::kKickTopic:
      c.n = Pick<int64_t>(rng, {{0, 1}, {1, 2}, {2, 1}, {100, 2}});
      break;
    case Op::kPause:
      c.pause_ms = Pick<int64_t>(rng, {{0, 1}, {1000, 1}, {3000, 1}});
      break;
    default:
      break;
  }
  return c;
}

}  // namespace

std::vector<Step> Generate(uint64_t seed, const GenerateOptions& options) {
  std::mt19937_64 rng(seed);
  std::vector<Step> steps;
  int generated = 0;
  for (int i = 0; i < options.steps; ++i) {
    Step s;
    int kind = Uniform(rng, 1, 100);
    if (kind <= 15) {
      s.advance_ms = Pick<int64_t>(rng, {{1, 1}, {499, 1}, {500, 2}, {1000, 3}, {2000, 2}});
    } else if (kind <= 65) {
      s.commands.push_back(MakeCommand(rng, &generated, false, options));
    } else {
      int n = Uniform(rng, 2, 6);
      std::vector<int> first_from;  // of the pipeline's first RESERVE
      for (int k = 0; k < n; ++k) {
        Command c = MakeCommand(rng, &generated, true, options);
        if (c.op == Op::kReserve) {
          if (first_from.empty()) first_from = c.from;
          if (!options.reserve_topics_vary) c.from = first_from;
        }
        s.commands.push_back(std::move(c));
      }
    }
    steps.push_back(std::move(s));
  }
  return steps;
}

// --- History -----------------------------------------------------------------------

void History::NoteDelivery(const std::string& id, const std::string& receipt) {
  delivered_.push_back(id);
  receipts_[id].push_back(receipt);
  all_receipts_.push_back(receipt);
}

std::string History::IdOf(int job) const {
  if (job >= 0 && job < kFixedIds) return "j" + std::to_string(job);
  if (job >= kFixedIds) {
    // A generated id not handed out (yet, or at all in a shrunk sequence):
    // an id no job has, never to be confused with a later g<n>.
    size_t k = static_cast<size_t>(job - kFixedIds);
    return k < generated_.size() ? generated_[k] : "no-g" + std::to_string(k + 1);
  }
  size_t back = static_cast<size_t>(kRecent - job);
  if (back < delivered_.size()) return delivered_[delivered_.size() - 1 - back];
  return "j0";  // nothing delivered yet
}

std::vector<std::string> History::KnownIds() const {
  std::vector<std::string> ids;
  for (int i = 0; i < kFixedIds; ++i) ids.push_back(IdOf(i));
  ids.insert(ids.end(), generated_.begin(), generated_.end());
  return ids;
}

std::string History::ReceiptFor(const std::string& id, ReceiptRef ref) const {
  // Well-formed (24 lowercase hex digits), and no delivery's: seq 0.
  static const std::string kUnknown = "000000000000000000000001";
  auto it = receipts_.find(id);
  const std::vector<std::string>* mine = it == receipts_.end() ? nullptr : &it->second;
  switch (ref) {
    case ReceiptRef::kLatest:
      return mine ? mine->back() : kUnknown;
    case ReceiptRef::kOlder:
      if (mine && mine->size() >= 2) return (*mine)[mine->size() - 2];
      for (auto r = all_receipts_.rbegin(); r != all_receipts_.rend(); ++r) {
        if (!mine || std::find(mine->begin(), mine->end(), *r) == mine->end()) return *r;
      }
      return kUnknown;
    case ReceiptRef::kForce:
      return "FORCE";
    case ReceiptRef::kNone:
      return kUnknown;
  }
  return kUnknown;
}

namespace {

Arg Plain(std::string s) { return {std::move(s), Arg::Kind::kPlain}; }
Arg Num(int64_t v) { return Plain(std::to_string(v)); }
Arg IdArg(std::string s) { return {std::move(s), Arg::Kind::kId}; }
Arg ReceiptArg(std::string s) {
  // Only the normalised names (r<n>) are the store's to replace.
  bool name = s.size() > 1 && s[0] == 'r';
  return {std::move(s), name ? Arg::Kind::kReceipt : Arg::Kind::kPlain};
}

std::vector<Arg> AddArgs(const History& h, const Command& c) {
  std::vector<Arg> a = {Plain("ADD"),
                        Plain(kTopics[c.topic]),
                        c.job == kGenerate ? Plain("*") : IdArg(h.IdOf(c.job)),
                        Num(c.delay_ms),
                        Num(c.ttr_ms),
                        Plain(c.body)};
  if (c.priority >= 0) a.insert(a.end(), {Plain("PRIORITY"), Num(c.priority)});
  if (c.max_attempts >= 0) a.insert(a.end(), {Plain("MAXATTEMPTS"), Num(c.max_attempts)});
  if (c.replace) a.push_back(Plain("REPLACE"));
  if (c.with_state) a.push_back(Plain("WITHSTATE"));
  return a;
}

std::vector<Arg> ReserveArgs(const Command& c) {
  std::vector<Arg> a = {Plain("RESERVE")};
  if (c.count > 0) a.insert(a.end(), {Plain("COUNT"), Num(c.count)});
  if (c.max_bytes > 0) a.insert(a.end(), {Plain("MAXBYTES"), Num(c.max_bytes)});
  a.push_back(Plain("FROM"));
  for (int t : c.from) a.push_back(Plain(kTopics[t]));
  return a;
}

}  // namespace

std::vector<Arg> History::Resolve(const Command& c) const {
  const std::string id = c.job == kGenerate ? "" : IdOf(c.job);
  const std::string topic = kTopics[c.topic];
  auto receipt = [&] { return ReceiptArg(ReceiptFor(id, c.receipt)); };
  static const char* kStates[] = {"READY", "DELAYED", "BURIED"};
  switch (c.op) {
    case Op::kAdd:
      return AddArgs(*this, c);
    case Op::kReserve:
      return ReserveArgs(c);
    case Op::kFinish:
      return {Plain("FINISH"), IdArg(id), receipt()};
    case Op::kTouch:
      return {Plain("TOUCH"), IdArg(id), receipt()};
    case Op::kUnreserve:
      return {Plain("UNRESERVE"), IdArg(id), receipt()};
    case Op::kRelease: {
      std::vector<Arg> a = {Plain("RELEASE"), IdArg(id), Num(c.delay_ms), receipt()};
      if (!c.error.empty()) a.insert(a.end(), {Plain("ERROR"), Plain(c.error)});
      return a;
    }
    case Op::kBury: {
      std::vector<Arg> a = {Plain("BURY"), IdArg(id), receipt()};
      if (!c.error.empty()) a.insert(a.end(), {Plain("ERROR"), Plain(c.error)});
      return a;
    }
    case Op::kDelete:
      return {Plain("DELETE"), IdArg(id)};
    case Op::kKick:
      return {Plain("KICK"), IdArg(id)};
    case Op::kKickTopic:
      return {Plain("KICKTOPIC"), Plain(topic), Num(c.n)};
    case Op::kGet:
      return {Plain("GET"), IdArg(id)};
    case Op::kPeek:
      return {Plain("PEEK"), Plain(topic), Plain(kStates[c.state])};
    case Op::kPause:
      return {Plain("PAUSE"), Plain(topic), Num(c.pause_ms)};
    case Op::kResume:
      return {Plain("RESUME"), Plain(topic)};
    case Op::kStats:
      return {Plain("STATS")};
    case Op::kStatsTopic:
      return {Plain("STATS"), Plain(topic)};
    case Op::kTopics:
      return {Plain("TOPICS")};
  }
  return {Plain("PING")};
}

std::string Render(const std::vector<Arg>& args) {
  std::string s;
  for (const Arg& a : args) {
    if (!s.empty()) s += ' ';
    s += a.text;
  }
  return s;
}

}  // namespace delayq::differential
