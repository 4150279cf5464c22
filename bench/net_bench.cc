// The network benchmarks. Each is a NetLoop::Handler (or a few "roles",
// each owning a range of the loop's connections) over one NetLoop:
//
//   CycleRole     batches of add + reserve (+ the previous batch's finishes)
//                 per connection; paced to a rate or as fast as replies come;
//                 in put mode, batches of adds only; optionally N cycles
//                 (adds) in all, then done
//   PreloadRole   keeps `depth` adds in flight per connection until N jobs
//                 are added (lateness, memory)
//   ConsumerRole  a few long-poll reserves waiting per connection; a job's
//                 reply is answered by its finish and the next reserve in one
//                 write
//
// Figures are counted between the end of the warm-up and the end of the
// run; what is still in flight then is drained but not counted.
#include "net_bench.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "clients.h"
#include "net_loop.h"

namespace delayq::bench {
namespace {

constexpr int64_t kNsPerS = 1'000'000'000;
// A run bounded by its number of jobs rather than its time (~31 years).
constexpr double kUnlimitedSeconds = 1e9;

double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

// CPU seconds this process has used (user + system): the client's own cost,
// reported so a run can show the client did not starve the server.
double CpuSeconds() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

std::string JsonEscape(std::string_view s) {
  std::string out;
  for (char ch : s.substr(0, 200)) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c >= 0x7f) {
      out += '?';
    } else {
      out += ch;
    }
  }
  return out;
}

// The codec and a connected loop.
struct Setup {
  std::unique_ptr<Codec> codec;
  std::unique_ptr<NetLoop> loop;
  int port = 0;
};

// Returns the exit code: 0, 1 (cannot connect) or 2 (bad options).
int Open(const NetTarget& t, int connections, Setup* s) {
  auto codec = Codec::Create(t.proto, t.host);
  if (!codec.ok()) {
    std::fprintf(stderr, "delayq-bench: %s\n", codec.status().message().c_str());
    return 2;
  }
  s->codec = std::move(codec).value();
  s->port = t.port != 0 ? t.port : s->codec->default_port();
  std::shared_ptr<const net::TlsContext> tls;
  if (!t.tls_ca.empty()) {
    auto ctx = NetLoop::ClientTls(t.tls_ca);
    if (!ctx.ok()) {
      std::fprintf(stderr, "delayq-bench: --tls-ca: %s\n", ctx.status().message().c_str());
      return 2;
    }
    tls = std::move(ctx).value();
  }
  auto loop = NetLoop::Connect(s->codec.get(), t.host, s->port, connections, std::move(tls));
  if (!loop.ok()) {
    std::fprintf(stderr, "delayq-bench: %s\n", loop.status().message().c_str());
    return loop.status().code() == Code::kInvalidArgument ? 2 : 1;
  }
  s->loop = std::move(loop).value();
  s->loop->set_stall_ns(static_cast<int64_t>(t.stall_seconds * kNsPerS));
  return 0;
}

int Fail(const Status& s) {
  std::fprintf(stderr, "delayq-bench: %s\n", s.message().c_str());
  return 1;
}

// A per-run prefix for topics, so runs against one server do not meet.
std::string TopicPrefix() {
  std::string prefix = std::to_string(getpid());
  prefix.insert(0, 1, 'b');  // (not "b" + ...: g++ 12 warns falsely on that)
  return prefix;
}

// Whether `bench` may run over t.proto: the plain-Redis protocols serve
// one figure each.
bool Supports(const NetTarget& t, std::string_view bench) {
  std::string_view only = t.proto == "redis-set"        ? "put"
                          : t.proto == "redis-hashzset" ? "memory"
                                                        : "";
  if (only.empty() || only == bench) return true;
  std::fprintf(stderr, "delayq-bench: --proto %s serves `%s` only\n", t.proto.c_str(),
               std::string(only).c_str());
  return false;
}

// Counters of one role; what a report prints.
struct Counts {
  uint64_t adds = 0, reserves = 0, finishes = 0, empty = 0, errors = 0;
  std::string first_error;

  void Error(std::string_view what, std::string_view msg) {
    if (errors++ == 0) first_error = std::string(what) + ": " + std::string(msg);
  }
};

// --- CycleRole ----------------------------------------------------------------

class CycleRole {
 public:
  struct Config {
    int first_conn = 0;
    int conns = 0;
    int depth = 1;
    bool adds_only = false;  // put mode
    double rate = 0;         // cycles (or adds) per second in all; 0: unpaced
    int64_t delay_ms = 0;    // of the adds
    int64_t reserve_wait_ms = 1000;
    uint64_t max_cycles = 0;   // > 0: begin this many cycles (adds) in all, then no more
    std::string topic_prefix;  // connection i uses prefix + "-" + i (i % topics)
    int topics = 0;            // > 0: that many topics, shared round robin
    std::string body;
  };

  CycleRole(NetLoop* loop, Config cfg) : loop_(loop), cfg_(std::move(cfg)) {
    for (int i = 0; i < cfg_.conns; ++i) {
      int topic = cfg_.topics > 0 ? i % cfg_.topics : i;
      state_.push_back(ConnState{cfg_.topic_prefix + "-" + std::to_string(topic), 0, 0, false});
    }
  }

  bool Owns(const Conn& c) const {
    return c.index() >= cfg_.first_conn && c.index() < cfg_.first_conn + cfg_.conns;
  }

  void Start() {
    start_ns_ = loop_->now_ns();
    for (int i = 0; i < cfg_.conns; ++i) {
      Conn& c = loop_->conn(cfg_.first_conn + i);
      c.Bind(state_[static_cast<size_t>(i)].topic);
      StartBatch(c, /*on_tick=*/true);
    }
  }

  void OnReply(Conn& c, const Pending& p, const Reply& r) {
    switch (p.op) {
      case Op::kBind:
        if (r.kind == Reply::Kind::kError) counts_.Error("bind", r.error);
        break;
      case Op::kAdd:
        if (r.kind == Reply::Kind::kError) {
          counts_.Error("add", r.error);
        } else {
          ++counts_.adds;
          add_latency_.Record(loop_->now_ns() - p.sent_ns);
        }
        break;
      case Op::kReserve:
        if (r.kind == Reply::Kind::kJob) {
          ++counts_.reserves;
          c.StageFinish(r.id, r.receipt);
        } else if (r.kind == Reply::Kind::kEmpty) {
          ++counts_.empty;
        } else {
          counts_.Error("reserve", r.error);
        }
        break;
      case Op::kFinish:
        if (r.kind == Reply::Kind::kError) {
          counts_.Error("finish", r.error);
        } else {
          ++counts_.finishes;
        }
        break;
      case Op::kAddAux:
      case Op::kCommand:
        break;
    }
  }

  void OnReplies(Conn& c) {
    ConnState& s = state_[static_cast<size_t>(c.index() - cfg_.first_conn)];
    if (c.pending() != 0 || !s.in_batch) return;
    batch_latency_.Record(loop_->now_ns() - s.batch_sent_ns);
    s.in_batch = false;
    StartBatch(c, /*on_tick=*/false);
  }

  // Starts batches on idle connections: paced ones whose turn came, and
  // staged finishes after StopSoon.
  void OnTick() {
    for (int i = 0; i < cfg_.conns; ++i) {
      Conn& c = loop_->conn(cfg_.first_conn + i);
      if (c.pending() == 0 && !state_[static_cast<size_t>(i)].in_batch) StartBatch(c, true);
    }
  }

  // No more adds; what was reserved is still finished.
  void StopSoon() { stopping_ = true; }
  // All of max_cycles were begun (never true without a maximum).
  bool Exhausted() const { return cfg_.max_cycles != 0 && total_started_ >= cfg_.max_cycles; }
  bool Drained() const {
    for (int i = 0; i < cfg_.conns; ++i) {
      Conn& c = loop_->conn(cfg_.first_conn + i);
      if (c.pending() != 0 || c.staged() != 0) return false;
    }
    return true;
  }

  void ResetCounts() {
    counts_ = Counts();
    batch_latency_.Reset();
    add_latency_.Reset();
  }
  const Counts& counts() const { return counts_; }
  const Histogram& batch_latency() const { return batch_latency_; }
  const Histogram& add_latency() const { return add_latency_; }

 private:
  struct ConnState {
    std::string topic;
    uint64_t started;  // cycles begun, for pacing
    int64_t batch_sent_ns;
    bool in_batch;
  };

  // Paced, a batch is written at once only when it is full; a smaller one
  // waits for the next tick. Else a connection just under its rate would
  // write a batch of one or two cycles per round trip, which costs the
  // server (and the client) several times more per cycle than full
  // batches: "half the cycle rate" would not be half the load.
  void StartBatch(Conn& c, bool on_tick) {
    ConnState& s = state_[static_cast<size_t>(c.index() - cfg_.first_conn)];
    int64_t budget = stopping_ ? 0 : cfg_.depth;
    if (cfg_.rate > 0 && budget > 0) {
      double per_conn = cfg_.rate / cfg_.conns;
      auto due =
          static_cast<int64_t>(static_cast<double>(loop_->now_ns() - start_ns_) / 1e9 * per_conn) +
          1;
      budget = std::clamp<int64_t>(due - static_cast<int64_t>(s.started), 0, budget);
      if (budget < cfg_.depth && !on_tick) return;
    }
    if (cfg_.max_cycles != 0) {
      budget = std::min<int64_t>(budget, static_cast<int64_t>(cfg_.max_cycles - total_started_));
    }
    if (budget == 0 && c.staged() == 0 && c.pending() == 0) return;
    c.SendStaged();
    AddArgs a;
    a.topic = s.topic;
    a.delay_ms = cfg_.delay_ms;
    a.body = cfg_.body;
    for (int64_t i = 0; i < budget; ++i) c.Add(a);
    if (!cfg_.adds_only) {
      for (int64_t i = 0; i < budget; ++i) c.Reserve(s.topic, cfg_.reserve_wait_ms);
    }
    s.started += static_cast<uint64_t>(budget);
    total_started_ += static_cast<uint64_t>(budget);
    s.batch_sent_ns = loop_->now_ns();
    s.in_batch = true;
  }

  NetLoop* loop_;
  Config cfg_;
  std::vector<ConnState> state_;
  int64_t start_ns_ = 0;
  uint64_t total_started_ = 0;
  bool stopping_ = false;
  Counts counts_;
  Histogram batch_latency_;  // a batch's write to its last reply
  Histogram add_latency_;    // an add's write to its reply
};

// Runs one CycleRole over all of a loop's connections for warm-up +
// seconds, then drains it. The role's counts cover the timed part only.
// A role with a maximum of cycles that were all begun ends the run as soon
// as they are answered, all of them counted (give it no warm-up).
class TimedRun : public NetLoop::Handler {
 public:
  TimedRun(NetLoop* loop, CycleRole* role, double warmup_s, double seconds)
      : loop_(loop),
        role_(role),
        warm_end_ns_(loop->now_ns() + static_cast<int64_t>(warmup_s * kNsPerS)),
        run_ns_(static_cast<int64_t>(seconds * kNsPerS)) {}

  void OnReply(Conn& c, const Pending& p, const Reply& r) override { role_->OnReply(c, p, r); }
  void OnReplies(Conn& c) override {
    role_->OnReplies(c);
    if (measuring_ && !stopped_ && role_->Exhausted() && role_->Drained()) {
      Snapshot(loop_->now_ns());
      loop_->Stop();
    }
  }
  bool OnTick() override {
    int64_t now = loop_->now_ns();
    if (!started_) {
      started_ = true;
      role_->Start();
    }
    if (!measuring_ && now >= warm_end_ns_) {
      measuring_ = true;
      measure_start_ns_ = now;
      cpu_start_ = CpuSeconds();
      role_->ResetCounts();
    }
    if (measuring_ && !stopped_ &&
        (now >= measure_start_ns_ + run_ns_ || (role_->Exhausted() && role_->Drained()))) {
      Snapshot(now);
      role_->StopSoon();
    }
    if (stopped_ && role_->Drained()) return false;
    role_->OnTick();
    return true;
  }

  double seconds() const { return static_cast<double>(elapsed_ns_) / 1e9; }
  double client_cpu_seconds() const { return cpu_; }
  const Counts& counts() const { return counts_; }
  const Histogram& batch_latency() const { return batch_latency_; }
  const Histogram& add_latency() const { return add_latency_; }

 private:
  void Snapshot(int64_t now) {
    stopped_ = true;
    elapsed_ns_ = now - measure_start_ns_;
    cpu_ = CpuSeconds() - cpu_start_;
    counts_ = role_->counts();
    batch_latency_ = role_->batch_latency();
    add_latency_ = role_->add_latency();
  }

  NetLoop* loop_;
  CycleRole* role_;
  int64_t warm_end_ns_;
  int64_t run_ns_;
  bool started_ = false, measuring_ = false, stopped_ = false;
  int64_t measure_start_ns_ = 0, elapsed_ns_ = 0;
  double cpu_start_ = 0, cpu_ = 0;  // this process's CPU seconds
  Counts counts_;
  Histogram batch_latency_, add_latency_;
};

void PrintLatency(const char* name, const Histogram& h) {
  std::printf(",\"%s_p50_ms\":%.3f,\"%s_p99_ms\":%.3f,\"%s_max_ms\":%.3f", name,
              Ms(h.Percentile(50)), name, Ms(h.Percentile(99)), name, Ms(h.max()));
}

void PrintErrors(const Counts& c) {
  std::printf(",\"errors\":%" PRIu64, c.errors);
  if (c.errors != 0) std::printf(",\"first_error\":\"%s\"", JsonEscape(c.first_error).c_str());
}

// --- PreloadRole ----------------------------------------------------------------

// Adds jobs numbered [0, n) over a range of connections, `depth` in flight
// on each. make(seq, &args) fills an add; done(seq, reply) sees its reply.
class PreloadRole {
 public:
  using MakeFn = std::function<void(uint32_t seq, AddArgs* a)>;
  using DoneFn = std::function<void(uint32_t seq, const Reply& r)>;

  PreloadRole(NetLoop* loop, int first_conn, int conns, int depth, uint64_t n, MakeFn make,
              DoneFn done)
      : loop_(loop),
        first_(first_conn),
        conns_(conns),
        depth_(depth),
        n_(n),
        make_(std::move(make)),
        done_(std::move(done)) {}

  // Paces the adds to `rate` per second in all (0: as fast as replies come).
  void set_rate(double rate) { rate_ = rate; }

  void Start(std::string_view bind_topic) {
    start_ns_ = loop_->now_ns();
    for (int i = 0; i < conns_; ++i) {
      Conn& c = loop_->conn(first_ + i);
      c.Bind(bind_topic);
      Fill(c);
    }
  }
  void OnReply(Conn&, const Pending& p, const Reply& r) {
    if (p.op == Op::kAdd) {
      ++replied_;
      rtt_.Record(loop_->now_ns() - p.sent_ns);
      done_(p.tag, r);
    } else if (r.kind == Reply::Kind::kError) {
      counts_.Error(p.op == Op::kBind ? "bind" : "add (HSET)", r.error);
    }
  }
  void OnReplies(Conn& c) { Fill(c); }
  void OnTick() {
    if (rate_ <= 0) return;
    for (int i = 0; i < conns_; ++i) Fill(loop_->conn(first_ + i));
  }
  bool Done() const { return replied_ == n_; }
  // Errors other than the adds' own (which go to `done`).
  const Counts& counts() const { return counts_; }
  // An add's write to its reply.
  const Histogram& rtt() const { return rtt_; }

 private:
  // Refills a connection once half its window came back: fewer, larger writes.
  void Fill(Conn& c) {
    if (c.pending() > static_cast<size_t>(depth_) / 2) return;
    uint64_t limit = n_;
    if (rate_ > 0) {
      double allowed = static_cast<double>(loop_->now_ns() - start_ns_) / 1e9 * rate_ + 1;
      limit = std::min(n_, static_cast<uint64_t>(allowed));
    }
    AddArgs a;
    while (c.pending() < static_cast<size_t>(depth_) && sent_ < limit) {
      make_(static_cast<uint32_t>(sent_), &a);
      c.Add(a, static_cast<uint32_t>(sent_));
      ++sent_;
    }
  }

  NetLoop* loop_;
  int first_, conns_, depth_;
  uint64_t n_, sent_ = 0, replied_ = 0;
  double rate_ = 0;
  int64_t start_ns_ = 0;
  MakeFn make_;
  DoneFn done_;
  Counts counts_;
  Histogram rtt_;
};

class PreloadRun : public NetLoop::Handler {
 public:
  explicit PreloadRun(PreloadRole* role) : role_(role) {}
  void OnReply(Conn& c, const Pending& p, const Reply& r) override { role_->OnReply(c, p, r); }
  void OnReplies(Conn& c) override { role_->OnReplies(c); }
  bool OnTick() override {
    role_->OnTick();
    return !role_->Done();
  }

 private:
  PreloadRole* role_;
};

}  // namespace

// --- cycle / put --------------------------------------------------------------

int RunCycleBench(const CycleOptions& o) {
  if (!Supports(o.target, "cycle")) return 2;
  Setup s;
  if (int rc = Open(o.target, o.connections, &s); rc != 0) return rc;
  CycleRole::Config cfg;
  cfg.conns = o.connections;
  cfg.depth = o.depth;
  cfg.reserve_wait_ms = o.reserve_wait_ms;
  cfg.rate = o.rate;
  cfg.max_cycles = o.jobs;
  cfg.topic_prefix = TopicPrefix() + "-cycle";
  cfg.topics = o.topics;
  cfg.body.assign(o.body_bytes, 'x');
  CycleRole role(s.loop.get(), cfg);
  TimedRun run(s.loop.get(), &role, o.jobs != 0 ? 0 : o.warmup_seconds,
               o.jobs != 0 ? kUnlimitedSeconds : o.seconds);
  int64_t tick_ns = o.rate > 0 ? 1'000'000 : 10'000'000;  // paced batches start on ticks
  if (Status st = s.loop->Run(run, tick_ns); !st.ok()) return Fail(st);
  const Counts& c = run.counts();
  double secs = run.seconds();
  std::printf(
      "{\"bench\":\"cycle\",\"proto\":\"%s\",\"port\":%d,\"connections\":%d,\"depth\":%d,"
      "\"body_bytes\":%zu,\"seconds\":%.2f,\"cycles\":%" PRIu64
      ",\"cycles_per_s\":%.0f,\"commands_per_s\":%.0f,\"empty_reserves\":%" PRIu64,
      o.target.proto.c_str(), s.port, o.connections, o.depth, o.body_bytes, secs, c.finishes,
      static_cast<double>(c.finishes) / secs,
      static_cast<double>(c.adds + c.reserves + c.empty + c.finishes + c.errors) / secs, c.empty);
  if (o.jobs != 0) std::printf(",\"jobs\":%" PRIu64, o.jobs);
  std::printf(",\"topics\":%d", o.topics > 0 ? o.topics : o.connections);
  if (!o.target.tls_ca.empty()) std::printf(",\"tls\":true");
  std::printf(",\"client_cpu_s\":%.2f", run.client_cpu_seconds());
  PrintErrors(c);
  PrintLatency("batch", run.batch_latency());
  std::printf("}\n");
  return c.errors == 0 ? 0 : 1;
}

int RunPutBench(const PutOptions& o) {
  if (!Supports(o.target, "put")) return 2;
  Setup s;
  if (int rc = Open(o.target, o.connections, &s); rc != 0) return rc;
  CycleRole::Config cfg;
  cfg.conns = o.connections;
  cfg.depth = o.depth;
  cfg.adds_only = true;
  cfg.delay_ms = o.delay_ms;
  cfg.max_cycles = o.jobs;
  cfg.topic_prefix = o.topic_prefix.empty() ? TopicPrefix() + "-put" : o.topic_prefix;
  cfg.body.assign(o.body_bytes, 'x');
  CycleRole role(s.loop.get(), cfg);
  TimedRun run(s.loop.get(), &role, o.jobs != 0 ? 0 : o.warmup_seconds,
               o.jobs != 0 ? kUnlimitedSeconds : o.seconds);
  if (Status st = s.loop->Run(run, 10'000'000); !st.ok()) return Fail(st);
  const Counts& c = run.counts();
  double secs = run.seconds();
  std::printf(
      "{\"bench\":\"put\",\"proto\":\"%s\",\"port\":%d,\"connections\":%d,\"depth\":%d,"
      "\"body_bytes\":%zu,\"seconds\":%.2f,\"adds\":%" PRIu64 ",\"adds_per_s\":%.0f",
      o.target.proto.c_str(), s.port, o.connections, o.depth, o.body_bytes, secs, c.adds,
      static_cast<double>(c.adds) / secs);
  if (o.jobs != 0) std::printf(",\"jobs\":%" PRIu64 ",\"delay_ms\":%" PRId64, o.jobs, o.delay_ms);
  if (!o.target.tls_ca.empty()) std::printf(",\"tls\":true");
  std::printf(",\"client_cpu_s\":%.2f", run.client_cpu_seconds());
  PrintErrors(c);
  PrintLatency("latency", run.add_latency());
  std::printf("}\n");
  return c.errors == 0 ? 0 : 1;
}

// --- reservelat ----------------------------------------------------------------

namespace {

// add -> reserve -> finish on one connection, each request written when the
// previous one is answered.
class ReserveLatencyRun : public NetLoop::Handler {
 public:
  ReserveLatencyRun(NetLoop* loop, const ReserveLatencyOptions& o, std::string topic)
      : loop_(loop), o_(o), topic_(std::move(topic)), body_(o.body_bytes, 'x') {}

  void OnReply(Conn& c, const Pending& p, const Reply& r) override {
    int64_t rtt = loop_->now_ns() - p.sent_ns;
    switch (p.op) {
      case Op::kBind:
        if (r.kind == Reply::Kind::kError) Error(c, "bind", r.error);
        return;
      case Op::kAddAux:
      case Op::kCommand:
        return;
      case Op::kAdd:
        if (r.kind == Reply::Kind::kError) return Error(c, "add", r.error);
        add_.Record(rtt);
        c.Reserve(topic_, o_.reserve_wait_ms);
        return;
      case Op::kReserve:
        if (r.kind == Reply::Kind::kJob) {
          reserve_.Record(rtt);
          c.Finish(r.id, r.receipt);  // copies id and receipt into the output
        } else if (r.kind == Reply::Kind::kEmpty) {
          ++counts_.empty;  // the job is due at once: should not happen
          c.Reserve(topic_, o_.reserve_wait_ms);
        } else {
          Error(c, "reserve", r.error);
        }
        return;
      case Op::kFinish:
        if (r.kind == Reply::Kind::kError) return Error(c, "finish", r.error);
        finish_.Record(rtt);
        ++counts_.finishes;
        Next(c);
        return;
    }
  }

  bool OnTick() override {
    if (!started_) {
      started_ = true;
      Conn& c = loop_->conn(0);
      c.Bind(topic_);
      Next(c);
    }
    return !done_;
  }

  double seconds() const { return static_cast<double>(end_ns_ - start_ns_) / 1e9; }
  double client_cpu_seconds() const { return cpu_; }
  const Counts& counts() const { return counts_; }
  const Histogram& add() const { return add_; }
  const Histogram& reserve() const { return reserve_; }
  const Histogram& finish() const { return finish_; }

 private:
  // After a finish (or at the start): the next cycle's add, or the end.
  void Next(Conn& c) {
    if (!measuring_ && counts_.finishes >= o_.warmup_cycles) {
      measuring_ = true;
      counts_.finishes = counts_.empty = 0;  // errors of the warm-up stay counted
      add_.Reset();
      reserve_.Reset();
      finish_.Reset();
      start_ns_ = loop_->now_ns();
      cpu_start_ = CpuSeconds();
    }
    if (measuring_ && counts_.finishes >= o_.cycles) return End();
    AddArgs a;
    a.topic = topic_;
    a.body = body_;
    c.Add(a);
  }
  void Error(Conn& c, std::string_view what, std::string_view msg) {
    counts_.Error(what, msg);
    // Go on with a fresh cycle: an error leaves nothing in flight.
    if (counts_.errors > 100) return End();
    if (what != "bind") Next(c);
  }
  void End() {
    done_ = true;
    end_ns_ = loop_->now_ns();
    cpu_ = CpuSeconds() - cpu_start_;
    loop_->Stop();
  }

  NetLoop* loop_;
  const ReserveLatencyOptions& o_;
  std::string topic_;
  std::string body_;
  bool started_ = false, measuring_ = false, done_ = false;
  int64_t start_ns_ = 0, end_ns_ = 0;
  double cpu_start_ = 0, cpu_ = 0;
  Counts counts_;
  Histogram add_, reserve_, finish_;
};

void PrintUs(const char* name, const Histogram& h) {
  auto us = [](int64_t ns) { return static_cast<double>(ns) / 1e3; };
  std::printf(
      ",\"%s_p50_us\":%.1f,\"%s_p90_us\":%.1f,\"%s_p99_us\":%.1f,\"%s_p999_us\":%.1f"
      ",\"%s_max_us\":%.1f",
      name, us(h.Percentile(50)), name, us(h.Percentile(90)), name, us(h.Percentile(99)), name,
      us(h.Percentile(99.9)), name, us(h.max()));
}

}  // namespace

int RunReserveLatencyBench(const ReserveLatencyOptions& o) {
  if (!Supports(o.target, "reservelat")) return 2;
  if (o.cycles == 0) {
    std::fprintf(stderr, "delayq-bench: --cycles must be at least 1\n");
    return 2;
  }
  Setup s;
  if (int rc = Open(o.target, 1, &s); rc != 0) return rc;
  ReserveLatencyRun run(s.loop.get(), o, TopicPrefix() + "-rlat");
  if (Status st = s.loop->Run(run, 10'000'000); !st.ok()) return Fail(st);
  const Counts& c = run.counts();
  double secs = run.seconds();
  std::printf(
      "{\"bench\":\"reservelat\",\"proto\":\"%s\",\"port\":%d,\"body_bytes\":%zu"
      ",\"warmup_cycles\":%" PRIu64 ",\"cycles\":%" PRIu64
      ",\"seconds\":%.2f,\"cycles_per_s\":%.0f,\"empty_reserves\":%" PRIu64,
      o.target.proto.c_str(), s.port, o.body_bytes, o.warmup_cycles, c.finishes, secs,
      secs > 0 ? static_cast<double>(c.finishes) / secs : 0.0, c.empty);
  PrintUs("reserve", run.reserve());
  PrintUs("add", run.add());
  PrintUs("finish", run.finish());
  std::printf(",\"client_cpu_s\":%.2f", run.client_cpu_seconds());
  PrintErrors(c);
  std::printf("}\n");
  return c.errors == 0 ? 0 : 1;
}

// --- lateness -------------------------------------------------------------------

namespace {

// What the lateness run knows of each job.
enum JobMark : uint8_t { kNotAdded = 0, kAdded, kAddedLate, kDelivered, kFailed };

struct LatenessState {
  std::vector<int64_t> due_ms;  // by sequence
  std::vector<uint8_t> mark;    // JobMark by sequence
  std::vector<int64_t> lateness_us;
  uint64_t added = 0, added_late = 0, delivered = 0, delivered_late_added = 0;
  uint64_t duplicates = 0, foreign = 0;
  int64_t last_due_ms = 0;
  double preload_s = 0;
  Histogram preload_rtt;  // a timed add's write to its reply
  Counts counts;
};

// Reads "<due ms> <sequence> ..." from a body.
bool ParseBody(std::string_view body, int64_t* due_ms, uint64_t* seq) {
  int64_t v[2] = {0, 0};
  size_t i = 0;
  for (int k = 0; k < 2; ++k) {
    size_t start = i;
    while (i < body.size() && body[i] >= '0' && body[i] <= '9')
      v[k] = v[k] * 10 + (body[i++] - '0');
    if (i == start || i >= body.size() || body[i] != ' ') return false;
    ++i;
  }
  *due_ms = v[0];
  *seq = static_cast<uint64_t>(v[1]);
  return true;
}

class ConsumerRole {
 public:
  ConsumerRole(NetLoop* loop, int first_conn, int conns, int depth, std::string topic,
               int64_t wait_ms, LatenessState* st)
      : loop_(loop),
        first_(first_conn),
        conns_(conns),
        depth_(depth),
        topic_(std::move(topic)),
        wait_ms_(wait_ms),
        st_(st) {}

  bool Owns(const Conn& c) const { return c.index() >= first_ && c.index() < first_ + conns_; }
  void Start() {
    for (int i = 0; i < conns_; ++i) {
      Conn& c = loop_->conn(first_ + i);
      c.Bind(topic_);
      for (int k = 0; k < depth_; ++k) c.Reserve(topic_, wait_ms_);
    }
  }
  void OnReply(Conn& c, const Pending& p, const Reply& r) {
    if (p.op == Op::kFinish) {
      if (r.kind == Reply::Kind::kError) st_->counts.Error("finish", r.error);
      return;
    }
    if (p.op != Op::kReserve) {
      if (r.kind == Reply::Kind::kError) st_->counts.Error("bind", r.error);
      return;
    }
    if (r.kind == Reply::Kind::kJob) {
      Record(r.body);
      c.Finish(r.id, r.receipt);
    } else if (r.kind == Reply::Kind::kError) {
      st_->counts.Error("reserve", r.error);
    }
    c.Reserve(topic_, wait_ms_);
  }

 private:
  void Record(std::string_view body) {
    int64_t due_ms;
    uint64_t seq;
    if (!ParseBody(body, &due_ms, &seq) || seq >= st_->mark.size()) {
      ++st_->foreign;
      return;
    }
    uint8_t& m = st_->mark[seq];
    if (m == kDelivered) {
      ++st_->duplicates;
      return;
    }
    if (m == kAddedLate) {
      ++st_->delivered_late_added;
    } else {
      st_->lateness_us.push_back(loop_->now_wall_us() - due_ms * 1000);
    }
    m = kDelivered;
    ++st_->delivered;
  }

  NetLoop* loop_;
  int first_, conns_, depth_;
  std::string topic_;
  int64_t wait_ms_;
  LatenessState* st_;
};

class MeasureRun : public NetLoop::Handler {
 public:
  MeasureRun(NetLoop* loop, ConsumerRole* consumers, CycleRole* load, const LatenessState* st,
             uint64_t expected, int64_t end_wall_us)
      : loop_(loop),
        consumers_(consumers),
        load_(load),
        st_(st),
        expected_(expected),
        end_wall_us_(end_wall_us) {}

  void OnReply(Conn& c, const Pending& p, const Reply& r) override {
    if (load_ != nullptr && load_->Owns(c)) {
      load_->OnReply(c, p, r);
    } else {
      consumers_->OnReply(c, p, r);
    }
  }
  void OnReplies(Conn& c) override {
    if (load_ != nullptr && load_->Owns(c)) load_->OnReplies(c);
  }
  bool OnTick() override {
    if (!started_) {
      started_ = true;
      start_ns_ = loop_->now_ns();
      consumers_->Start();
      if (load_ != nullptr) load_->Start();
    }
    if (st_->delivered >= expected_ || loop_->now_wall_us() >= end_wall_us_) {
      elapsed_ns_ = loop_->now_ns() - start_ns_;
      return false;
    }
    if (load_ != nullptr) load_->OnTick();
    return true;
  }
  double seconds() const { return static_cast<double>(elapsed_ns_) / 1e9; }

 private:
  NetLoop* loop_;
  ConsumerRole* consumers_;
  CycleRole* load_;
  const LatenessState* st_;
  uint64_t expected_;
  int64_t end_wall_us_;
  bool started_ = false;
  int64_t start_ns_ = 0, elapsed_ns_ = 0;
};

// The q-th percentile of sorted values, in ms.
double PercentileMs(const std::vector<int64_t>& sorted_us, double q) {
  if (sorted_us.empty()) return 0;
  auto rank = static_cast<size_t>(q / 100.0 * static_cast<double>(sorted_us.size()));
  if (rank >= sorted_us.size()) rank = sorted_us.size() - 1;
  return static_cast<double>(sorted_us[rank]) / 1000.0;
}

void PadBody(std::string* body, size_t bytes) {
  if (body->size() < bytes) body->append(bytes - body->size(), 'x');
}

// Adds o.far_jobs jobs due 1-2 hours from now to `topic`, over the preload
// connections. Their bodies start "0 <sequence beyond o.jobs> ".
Status AddFarJobs(NetLoop* loop, const LatenessOptions& o, const std::string& topic,
                  bool whole_seconds) {
  std::mt19937_64 rng(o.seed + 1);
  std::uniform_int_distribution<int64_t> delay(3'600'000, 7'200'000);
  int64_t now_ms = WallUs() / 1000;
  std::string body;
  auto make = [&](uint32_t seq, AddArgs* a) {
    a->topic = topic;
    a->ttr_ms = 60'000;
    int64_t d = delay(rng);
    if (whole_seconds) {
      a->delay_ms = d / 1000 * 1000;
      a->run_at_ms = -1;
    } else {
      a->run_at_ms = now_ms + d;
    }
    body.assign("0 ");
    AppendInt(&body, static_cast<int64_t>(o.jobs + seq));
    body.push_back(' ');
    PadBody(&body, o.body_bytes);
    a->body = body;
  };
  Counts counts;
  auto done = [&](uint32_t, const Reply& r) {
    if (r.kind == Reply::Kind::kError) counts.Error("add", r.error);
  };
  PreloadRole far(loop, 0, o.preload_connections, o.preload_depth, o.far_jobs, make, done);
  PreloadRun run(&far);
  far.Start(topic);
  if (Status e = loop->Run(run, 10'000'000); !e.ok()) return e;
  if (counts.errors + far.counts().errors != 0) {
    return Unavailable(
        "far jobs: " + std::to_string(counts.errors + far.counts().errors) +
        " errors, first: " + (counts.errors != 0 ? counts.first_error : far.counts().first_error));
  }
  return Status::Ok();
}

}  // namespace

namespace {

// Draws the due times of the timed jobs: uniform over [now + lead, now +
// lead + window] (whole-second protocols adjust each when it is sent).
void DrawDueTimes(const LatenessOptions& o, LatenessState* st) {
  st->due_ms.resize(o.jobs);
  st->mark.assign(o.jobs, kNotAdded);
  st->lateness_us.reserve(o.jobs);
  int64_t first_due = WallUs() / 1000 + static_cast<int64_t>(o.lead_seconds * 1000);
  auto window_ms = static_cast<int64_t>(o.window_seconds * 1000);
  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<int64_t> spread(0, window_ms);
  for (auto& d : st->due_ms) d = first_due + spread(rng);
  st->last_due_ms = first_due + window_ms;
}

// Adds the timed jobs over the preload connections.
Status AddTimedJobs(NetLoop* loop, const LatenessOptions& o, const std::string& topic,
                    bool whole_seconds, LatenessState* st) {
  std::string body;
  auto make = [&](uint32_t seq, AddArgs* a) {
    int64_t due = st->due_ms[seq];
    a->topic = topic;
    a->ttr_ms = 60'000;
    if (whole_seconds) {
      // The server counts the delay from when it reads the put, at or
      // after now: so this due time is at or before the server's own, and
      // a delivery before it would be early indeed.
      int64_t now_ms = WallUs() / 1000;
      int64_t delay_s = due > now_ms ? (due - now_ms + 999) / 1000 : 0;
      due = now_ms + delay_s * 1000;
      st->due_ms[seq] = due;
      a->delay_ms = delay_s * 1000;
      a->run_at_ms = -1;
    } else {
      a->run_at_ms = due;
    }
    body.clear();
    AppendInt(&body, due);
    body.push_back(' ');
    AppendInt(&body, seq);
    body.push_back(' ');
    PadBody(&body, o.body_bytes);
    a->body = body;
  };
  auto done = [&](uint32_t seq, const Reply& r) {
    if (r.kind == Reply::Kind::kError) {
      st->counts.Error("add", r.error);
      st->mark[seq] = kFailed;
      return;
    }
    ++st->added;
    bool late = loop->now_wall_us() / 1000 >= st->due_ms[seq];
    st->added_late += late ? 1 : 0;
    st->mark[seq] = late ? kAddedLate : kAdded;
  };
  PreloadRole preload(loop, 0, o.preload_connections, o.preload_depth, o.jobs, make, done);
  if (whole_seconds && o.paced_preload_seconds > 0) {
    preload.set_rate(static_cast<double>(o.jobs) / o.paced_preload_seconds);
  }
  PreloadRun run(&preload);
  int64_t start = MonoNs();
  preload.Start(topic);
  if (Status e = loop->Run(run, 1'000'000); !e.ok()) return e;
  st->preload_s = static_cast<double>(MonoNs() - start) / 1e9;
  st->preload_rtt = preload.rtt();
  if (preload.counts().errors != 0) {
    if (st->counts.errors == 0) st->counts.first_error = preload.counts().first_error;
    st->counts.errors += preload.counts().errors;
  }
  if (st->added_late != 0) {
    std::fprintf(stderr,
                 "delayq-bench: the preload took %.1f s, longer than --lead-seconds %.1f: %" PRIu64
                 " jobs were added after their due time (left out of the figures)\n",
                 st->preload_s, o.lead_seconds, st->added_late);
  }
  return Status::Ok();
}

// Prints the lateness JSON; returns the exit code.
int ReportLateness(const LatenessOptions& o, int port, bool whole_seconds, LatenessState& st,
                   const CycleRole* load, double seconds) {
  std::vector<int64_t>& l = st.lateness_us;
  std::sort(l.begin(), l.end());
  auto early = static_cast<uint64_t>(std::lower_bound(l.begin(), l.end(), 0) - l.begin());
  uint64_t missing = st.added - st.delivered;
  std::printf("{\"bench\":\"lateness\",\"proto\":\"%s\",\"port\":%d,\"jobs\":%" PRIu64
              ",\"far_jobs\":%" PRIu64 ",\"window_s\":%.1f,\"lead_s\":%.1f,\"consumers\":%d",
              o.target.proto.c_str(), port, o.jobs, o.far_jobs, o.window_seconds, o.lead_seconds,
              o.consumers);
  std::printf(",\"consumer_depth\":%d,\"whole_second_delays\":%s,\"preload_s\":%.2f",
              o.consumer_depth, whole_seconds ? "true" : "false", st.preload_s);
  std::printf(",\"count\":%zu,\"early\":%" PRIu64
              ",\"p50_ms\":%.3f,\"p90_ms\":%.3f,\"p99_ms\":%.3f,\"p999_ms\":%.3f,\"max_ms\":%.3f",
              l.size(), early, PercentileMs(l, 50), PercentileMs(l, 90), PercentileMs(l, 99),
              PercentileMs(l, 99.9), l.empty() ? 0.0 : static_cast<double>(l.back()) / 1000.0);
  if (early != 0) std::printf(",\"min_ms\":%.3f", static_cast<double>(l.front()) / 1000.0);
  std::printf(",\"missing\":%" PRIu64 ",\"duplicates\":%" PRIu64 ",\"added_after_due\":%" PRIu64
              ",\"foreign\":%" PRIu64,
              missing, st.duplicates, st.added_late, st.foreign);
  PrintLatency("preload_rtt", st.preload_rtt);
  Counts errors = st.counts;
  if (load != nullptr) {
    const Counts& lc = load->counts();
    std::printf(",\"load_rate\":%.0f,\"load_cycles_per_s\":%.0f", o.load_rate,
                static_cast<double>(lc.finishes) / seconds);
    if (lc.errors != 0 && errors.errors == 0) errors.first_error = "load " + lc.first_error;
    errors.errors += lc.errors;
  }
  PrintErrors(errors);
  std::printf("}\n");
  return errors.errors == 0 && missing == 0 ? 0 : 1;
}

}  // namespace

int RunLatenessBench(const LatenessOptions& o) {
  if (!Supports(o.target, "lateness")) return 2;
  if (o.jobs == 0 || o.jobs > UINT32_MAX) {
    std::fprintf(stderr, "delayq-bench: --jobs must be 1..4294967295\n");
    return 2;
  }
  int load_conns = o.load_rate > 0 ? o.load_connections : 0;
  Setup s;
  if (int rc = Open(o.target, o.preload_connections + o.consumers + load_conns, &s); rc != 0) {
    return rc;
  }
  NetLoop* loop = s.loop.get();
  bool whole_seconds = s.codec->whole_seconds();
  std::string prefix = TopicPrefix();
  std::string topic = prefix + "-late";
  if (o.far_jobs > 0) {
    if (Status e = AddFarJobs(loop, o, topic, whole_seconds); !e.ok()) return Fail(e);
  }
  LatenessState st;
  DrawDueTimes(o, &st);
  if (Status e = AddTimedJobs(loop, o, topic, whole_seconds, &st); !e.ok()) return Fail(e);

  ConsumerRole consumers(loop, o.preload_connections, o.consumers, o.consumer_depth, topic,
                         o.wait_ms, &st);
  std::unique_ptr<CycleRole> load;
  if (load_conns > 0) {
    CycleRole::Config cfg;
    cfg.first_conn = o.preload_connections + o.consumers;
    cfg.conns = load_conns;
    cfg.depth = o.load_depth;
    cfg.rate = o.load_rate;
    cfg.topic_prefix = prefix + "-load";
    cfg.body.assign(o.body_bytes, 'x');
    load = std::make_unique<CycleRole>(loop, cfg);
  }
  int64_t end_wall_us = (st.last_due_ms + static_cast<int64_t>(o.drain_seconds * 1000)) * 1000;
  MeasureRun measure(loop, &consumers, load.get(), &st, st.added, end_wall_us);
  if (Status e = loop->Run(measure, 1'000'000); !e.ok()) return Fail(e);
  return ReportLateness(o, s.port, whole_seconds, st, load.get(), measure.seconds());
}

// --- memory -------------------------------------------------------------------

namespace {

// VmRSS of a process in bytes, or -1.
int64_t RssOf(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;
  }
  return -1;
}

}  // namespace

int RunMemoryBench(const MemoryOptions& o) {
  if (!Supports(o.target, "memory")) return 2;
  if (o.pid <= 0 || RssOf(o.pid) < 0) {
    std::fprintf(stderr, "delayq-bench: --pid %d: no such process to read VmRSS from\n", o.pid);
    return 2;
  }
  if (o.jobs == 0 || o.jobs > UINT32_MAX) {
    std::fprintf(stderr, "delayq-bench: --jobs must be 1..4294967295\n");
    return 2;
  }
  Setup s;
  if (int rc = Open(o.target, o.connections, &s); rc != 0) return rc;
  bool needs_id = o.target.proto == "redis-hashzset";
  std::string topic = TopicPrefix() + "-mem";
  std::string body(o.body_bytes, 'x');
  std::string id;
  std::string id_prefix = "job:" + std::to_string(getpid()) + ":";
  Counts counts;
  auto make = [&](uint32_t seq, AddArgs* a) {
    a->topic = topic;
    a->delay_ms = 3'600'000;
    a->ttr_ms = 60'000;
    a->body = body;
    if (needs_id) {
      id = id_prefix;
      AppendInt(&id, seq);
      a->id = id;
    }
  };
  auto done = [&](uint32_t, const Reply& r) {
    if (r.kind == Reply::Kind::kError) counts.Error("add", r.error);
  };
  PreloadRole adds(s.loop.get(), 0, o.connections, o.depth, o.jobs, make, done);
  PreloadRun run(&adds);
  int64_t before = RssOf(o.pid);
  int64_t start = MonoNs();
  adds.Start(topic);
  if (Status e = s.loop->Run(run, 10'000'000); !e.ok()) return Fail(e);
  double secs = static_cast<double>(MonoNs() - start) / 1e9;
  if (adds.counts().errors != 0) {
    if (counts.errors == 0) counts.first_error = adds.counts().first_error;
    counts.errors += adds.counts().errors;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(o.settle_seconds * 1000)));
  int64_t after = RssOf(o.pid);
  std::printf("{\"bench\":\"memory\",\"proto\":\"%s\",\"port\":%d,\"pid\":%d,\"jobs\":%" PRIu64
              ",\"body_bytes\":%zu,\"rss_before_bytes\":%" PRId64 ",\"rss_after_bytes\":%" PRId64
              ",\"bytes_per_job\":%.1f,\"adds_per_s\":%.0f",
              o.target.proto.c_str(), s.port, o.pid, o.jobs, o.body_bytes, before, after,
              static_cast<double>(after - before) / static_cast<double>(o.jobs),
              static_cast<double>(o.jobs) / secs);
  PrintErrors(counts);
  std::printf("}\n");
  return counts.errors == 0 ? 0 : 1;
}

// --- fill / probe ---------------------------------------------------------------

namespace {

int Digits(uint64_t v) {
  int n = 1;
  for (; v >= 10; v /= 10) ++n;
  return n;
}

}  // namespace

int RunFillBench(const FillOptions& o) {
  if (o.target.proto != "resp" && o.target.proto != "http") {
    std::fprintf(stderr, "delayq-bench: fill speaks --proto resp or http\n");
    return 2;
  }
  if (o.jobs == 0 || o.jobs > UINT32_MAX) {
    std::fprintf(stderr, "delayq-bench: --jobs must be 1..4294967295\n");
    return 2;
  }
  if (o.min_delay_ms < 0 || o.max_delay_ms < o.min_delay_ms) {
    std::fprintf(stderr, "delayq-bench: want 0 <= --min-delay-ms <= --max-delay-ms\n");
    return 2;
  }
  if (o.connections < 1 || o.depth < 1 || o.topics < 1) {
    std::fprintf(stderr, "delayq-bench: --connections, --depth and --topics must be >= 1\n");
    return 2;
  }
  if (o.sample > 0 && o.sample_file.empty()) {
    std::fprintf(stderr, "delayq-bench: --sample needs --sample-file\n");
    return 2;
  }
  std::string id_prefix = o.id_prefix;
  if (id_prefix.empty()) {
    id_prefix = std::to_string(getpid());
    id_prefix.insert(0, 1, 'f');
    id_prefix.push_back('-');
  }
  if (o.id_bytes != 0 && o.id_bytes < id_prefix.size() + static_cast<size_t>(Digits(o.jobs - 1))) {
    std::fprintf(stderr,
                 "delayq-bench: --id-bytes %zu is too short for the prefix '%s' and %d digits\n",
                 o.id_bytes, id_prefix.c_str(), Digits(o.jobs - 1));
    return 2;
  }
  Setup s;
  if (int rc = Open(o.target, o.connections, &s); rc != 0) return rc;
  NetLoop* loop = s.loop.get();
  std::string base = o.topic.empty() ? TopicPrefix() + "-far" : o.topic;
  std::vector<std::string> topics;
  for (int k = 0; k < o.topics; ++k) {
    topics.push_back(o.topics == 1 ? base : base + "-" + std::to_string(k));
  }
  std::string body(o.body_bytes, 'x');
  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<int64_t> delay(o.min_delay_ms, o.max_delay_ms);
  std::string id;
  auto make = [&](uint32_t seq, AddArgs* a) {
    a->topic = topics[seq % topics.size()];
    a->ttr_ms = 60'000;
    // As of the last read: the loop's clock, fresh within a turn.
    int64_t now_us = loop->now_wall_us() != 0 ? loop->now_wall_us() : WallUs();
    a->run_at_ms = now_us / 1000 + delay(rng);
    a->body = body;
    if (o.id_bytes != 0) {
      id.assign(id_prefix);
      id.append(o.id_bytes - id_prefix.size() - static_cast<size_t>(Digits(seq)), '0');
      AppendInt(&id, seq);
      a->id = id;
    }
  };
  Counts counts;
  uint64_t acked = 0, no_id = 0;
  std::vector<std::string> sample;
  sample.reserve(o.sample);
  std::mt19937_64 pick(o.seed + 1);
  auto done = [&](uint32_t, const Reply& r) {
    if (r.kind == Reply::Kind::kError) {
      counts.Error("add", r.error);
      return;
    }
    ++acked;
    if (o.sample == 0) return;
    if (r.id.empty()) {
      ++no_id;
      return;
    }
    if (sample.size() < o.sample) {
      sample.emplace_back(r.id);
    } else {
      uint64_t j = std::uniform_int_distribution<uint64_t>(0, acked - 1)(pick);
      if (j < o.sample) sample[j].assign(r.id);
    }
  };
  PreloadRole adds(loop, 0, o.connections, o.depth, o.jobs, make, done);
  PreloadRun run(&adds);
  int64_t start = MonoNs();
  double cpu0 = CpuSeconds();
  adds.Start(topics.front());
  if (Status e = loop->Run(run, 10'000'000); !e.ok()) return Fail(e);
  double secs = static_cast<double>(MonoNs() - start) / 1e9;
  double cpu = CpuSeconds() - cpu0;
  if (adds.counts().errors != 0) {
    if (counts.errors == 0) counts.first_error = adds.counts().first_error;
    counts.errors += adds.counts().errors;
  }
  if (o.sample > 0) {
    std::ofstream f(o.sample_file, std::ios::trunc);
    for (const std::string& x : sample) f << x << '\n';
    f.close();
    if (!f) {
      std::fprintf(stderr, "delayq-bench: cannot write --sample-file %s\n", o.sample_file.c_str());
      return 1;
    }
  }
  std::printf("{\"bench\":\"fill\",\"proto\":\"%s\",\"port\":%d,\"jobs\":%" PRIu64
              ",\"added\":%" PRIu64 ",\"body_bytes\":%zu,\"id_bytes\":%zu,\"min_delay_ms\":%" PRId64
              ",\"max_delay_ms\":%" PRId64 ",\"topics\":%d,\"connections\":%d,\"depth\":%d",
              o.target.proto.c_str(), s.port, o.jobs, acked, o.body_bytes, o.id_bytes,
              o.min_delay_ms, o.max_delay_ms, o.topics, o.connections, o.depth);
  std::printf(",\"seconds\":%.3f,\"adds_per_s\":%.0f,\"client_cpu_s\":%.2f,\"sample\":%zu", secs,
              static_cast<double>(acked) / secs, cpu, sample.size());
  if (no_id != 0) std::printf(",\"replies_without_id\":%" PRIu64, no_id);
  PrintLatency("latency", adds.rtt());
  PrintErrors(counts);
  std::printf("}\n");
  return counts.errors == 0 && acked == o.jobs ? 0 : 1;
}

namespace {

// GET each id, DELETE the first `deletes`, GET those again: one request in
// flight, each written when the previous reply is in.
class ProbeRun : public NetLoop::Handler {
 public:
  ProbeRun(NetLoop* loop, const std::vector<std::string>& ids, size_t deletes, uint64_t warmup)
      : loop_(loop), ids_(ids), deletes_(deletes), warmup_(warmup) {}

  void OnReply(Conn& c, const Pending& p, const Reply& r) override {
    int64_t rtt = loop_->now_ns() - p.sent_ns;
    bool null = IsNull(r.raw);
    switch (phase_) {
      case kWarmup:
        if (r.kind == Reply::Kind::kError) counts_.Error("get (warm-up)", r.error);
        break;
      case kGet:
        if (r.kind == Reply::Kind::kError) {
          counts_.Error("get", r.error);
        } else if (null) {
          ++get_not_found_;
        } else {
          get_.Record(rtt);
        }
        break;
      case kDelete:
        if (r.kind != Reply::Kind::kError) {
          del_.Record(rtt);
        } else if (r.error.substr(0, 8) == "NOTFOUND") {
          ++delete_not_found_;
        } else {
          counts_.Error("delete", r.error);
        }
        break;
      case kRecheck:
        if (r.kind == Reply::Kind::kError) {
          counts_.Error("get (after delete)", r.error);
        } else if (!null) {
          ++found_after_delete_;
        }
        break;
      case kDone:
        break;
    }
    ++i_;
    Next(c);
  }

  bool OnTick() override {
    if (!started_) {
      started_ = true;
      cpu_start_ = CpuSeconds();
      Next(loop_->conn(0));
    }
    return phase_ != kDone;
  }

  const Counts& counts() const { return counts_; }
  const Histogram& gets() const { return get_; }
  const Histogram& deletes() const { return del_; }
  uint64_t get_not_found() const { return get_not_found_; }
  uint64_t delete_not_found() const { return delete_not_found_; }
  uint64_t found_after_delete() const { return found_after_delete_; }
  double get_seconds() const { return static_cast<double>(get_ns_) / 1e9; }
  double delete_seconds() const { return static_cast<double>(del_ns_) / 1e9; }
  double client_cpu_seconds() const { return cpu_; }

 private:
  enum Phase { kWarmup, kGet, kDelete, kRecheck, kDone };

  // A null array (RESP2 *-1, RESP3 _) or an empty one: GET found nothing.
  static bool IsNull(std::string_view raw) {
    return raw.substr(0, 3) == "*-1" || raw.substr(0, 1) == "_" || raw.substr(0, 3) == "*0\r";
  }

  size_t PhaseSize() const {
    switch (phase_) {
      case kWarmup:
        return warmup_;
      case kGet:
        return ids_.size();
      case kDelete:
      case kRecheck:
        return deletes_;
      case kDone:
        break;
    }
    return 0;
  }

  // Writes the next request, moving through the phases as each runs out.
  void Next(Conn& c) {
    while (phase_ != kDone && i_ >= PhaseSize()) {
      int64_t now = loop_->now_ns();
      if (phase_ == kGet) get_ns_ = now - phase_start_ns_;
      if (phase_ == kDelete) del_ns_ = now - phase_start_ns_;
      phase_ = static_cast<Phase>(phase_ + 1);
      i_ = 0;
      phase_start_ns_ = now;
    }
    if (phase_ == kDone || counts_.errors > 100) {
      phase_ = kDone;
      cpu_ = CpuSeconds() - cpu_start_;
      loop_->Stop();
      return;
    }
    cmd_.clear();
    switch (phase_) {
      case kWarmup:
        AppendRespCommand(&cmd_, {"GET", "delayq-bench-probe-no-such-id"});
        break;
      case kGet:
      case kRecheck:
        AppendRespCommand(&cmd_, {"GET", ids_[i_]});
        break;
      case kDelete:
        AppendRespCommand(&cmd_, {"DELETE", ids_[i_]});
        break;
      case kDone:
        return;
    }
    c.Command(cmd_);
  }

  NetLoop* loop_;
  const std::vector<std::string>& ids_;
  size_t deletes_;
  uint64_t warmup_;
  Phase phase_ = kWarmup;
  size_t i_ = 0;
  bool started_ = false;
  std::string cmd_;
  int64_t phase_start_ns_ = 0, get_ns_ = 0, del_ns_ = 0;
  double cpu_start_ = 0, cpu_ = 0;
  Counts counts_;
  Histogram get_, del_;
  uint64_t get_not_found_ = 0, delete_not_found_ = 0, found_after_delete_ = 0;
};

}  // namespace

int RunProbeBench(const ProbeOptions& o) {
  if (o.target.proto != "resp") {
    std::fprintf(stderr, "delayq-bench: probe speaks --proto resp only\n");
    return 2;
  }
  std::vector<std::string> ids;
  {
    std::ifstream f(o.sample_file);
    if (!f) {
      std::fprintf(stderr, "delayq-bench: cannot read --sample-file %s\n", o.sample_file.c_str());
      return 2;
    }
    std::string line;
    while (std::getline(f, line)) {
      if (!line.empty()) ids.push_back(line);
    }
  }
  if (ids.empty()) {
    std::fprintf(stderr, "delayq-bench: no ids in %s\n", o.sample_file.c_str());
    return 2;
  }
  std::shuffle(ids.begin(), ids.end(), std::mt19937_64(o.seed));
  size_t deletes =
      o.deletes < 0 ? ids.size() : std::min(ids.size(), static_cast<size_t>(o.deletes));
  Setup s;
  if (int rc = Open(o.target, 1, &s); rc != 0) return rc;
  ProbeRun run(s.loop.get(), ids, deletes, o.warmup);
  if (Status st = s.loop->Run(run, 10'000'000); !st.ok()) return Fail(st);
  std::printf("{\"bench\":\"probe\",\"proto\":\"%s\",\"port\":%d,\"ids\":%zu,\"warmup\":%" PRIu64
              ",\"gets\":%" PRIu64 ",\"gets_per_s\":%.0f",
              o.target.proto.c_str(), s.port, ids.size(), o.warmup, run.gets().count(),
              run.get_seconds() > 0 ? static_cast<double>(ids.size()) / run.get_seconds() : 0.0);
  PrintUs("get", run.gets());
  std::printf(",\"get_not_found\":%" PRIu64 ",\"deletes\":%" PRIu64, run.get_not_found(),
              run.deletes().count());
  PrintUs("delete", run.deletes());
  std::printf(",\"delete_not_found\":%" PRIu64 ",\"found_after_delete\":%" PRIu64
              ",\"client_cpu_s\":%.2f",
              run.delete_not_found(), run.found_after_delete(), run.client_cpu_seconds());
  PrintErrors(run.counts());
  std::printf("}\n");
  bool ok = run.counts().errors == 0 && run.get_not_found() == 0 && run.delete_not_found() == 0 &&
            run.found_after_delete() == 0 && run.gets().count() == ids.size() &&
            run.deletes().count() == deletes;
  return ok ? 0 : 1;
}

}  // namespace delayq::bench
