// The schedules benchmark (schedule_bench.h). Three phases, each a NetLoop:
//
//   CommandStream  keeps `depth` pipelined commands in flight per connection
//                  until N are answered: the SCHEDULE SETs, and at the end the
//                  SCHEDULE DELs
//   ConsumerRun    one per server, on its own thread: each connection holds
//                  one RESERVE TIMEOUT w COUNT k; a reply's jobs are recorded
//                  and their FINISHes written with the next RESERVE in one
//                  write (the server sees the batch, then the next wait)
//
// Each consumer thread records into its own FiringLog (a cell per schedule
// and second, counting deliveries with attempts 1), merged after the run, so
// a duplicate across two servers is found as surely as one on a single
// server. The main thread meanwhile sleeps to the window's edges and reads
// the servers' CPU there.
#include "schedule_bench.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "clients.h"
#include "net_loop.h"

namespace delayq::bench {
namespace {

constexpr int64_t kNsPerS = 1'000'000'000;
constexpr uint32_t kTagReserve = 1;
constexpr uint32_t kTagFinish = 2;

double CpuSecondsSelf() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

// VmRSS of a process in bytes, or -1.
int64_t RssOf(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;
  }
  return -1;
}

// utime + stime of a process in seconds, or -1. The command name (field 2)
// may hold spaces, so fields are counted from its closing parenthesis.
double CpuSecondsOf(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t paren = all.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream rest(all.substr(paren + 2));
  std::string field;
  uint64_t utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::strtoull(field.c_str(), nullptr, 10);
    if (i == 15) stime = std::strtoull(field.c_str(), nullptr, 10);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
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

// Errors counted, the first one kept.
struct Errors {
  uint64_t count = 0;
  std::string first;
  void Add(std::string_view what, std::string_view msg) {
    if (count++ == 0) first = std::string(what) + ": " + std::string(msg);
  }
  void Merge(const Errors& o) {
    if (count == 0) first = o.first;
    count += o.count;
  }
};

// --- reading a RESERVE reply -----------------------------------------------------

// A decimal (RESP lengths, counts, integers), without a copy or strtoll's
// locale: the consumers read ten thousand jobs a second on the server's
// machine, so their own reading must stay small beside the server's work.
int64_t Num(std::string_view t) {
  bool neg = !t.empty() && t[0] == '-';
  int64_t x = 0;
  for (size_t i = neg ? 1 : 0; i < t.size(); ++i) x = x * 10 + (t[i] - '0');
  return neg ? -x : x;
}

// A cursor over RESP bytes already known to be one whole reply (the codec
// scanned it), so bounds are checked but incompleteness is an error.
class RespCursor {
 public:
  explicit RespCursor(std::string_view s) : s_(s) {}

  // Reads a header line: its type byte and the text after it.
  bool Header(char* type, std::string_view* text) {
    if (pos_ >= s_.size()) return false;
    const void* lf = std::memchr(s_.data() + pos_, '\n', s_.size() - pos_);
    if (lf == nullptr) return false;
    size_t at_lf = static_cast<size_t>(static_cast<const char*>(lf) - s_.data());
    if (at_lf < pos_ + 2 || s_[at_lf - 1] != '\r') return false;  // a type byte, then CR LF
    size_t nl = at_lf - 1;
    *type = s_[pos_];
    *text = s_.substr(pos_ + 1, nl - pos_ - 1);
    pos_ = nl + 2;
    return true;
  }
  // Reads a scalar (bulk, simple, integer, null) into *v; an array is skipped
  // whole and reads as empty.
  bool Scalar(std::string_view* v) {
    char type;
    std::string_view text;
    if (!Header(&type, &text)) return false;
    switch (type) {
      case '$': {
        int64_t len = Num(text);
        if (len < 0) {
          *v = {};
          return true;
        }
        if (pos_ + static_cast<size_t>(len) + 2 > s_.size()) return false;
        *v = s_.substr(pos_, static_cast<size_t>(len));
        pos_ += static_cast<size_t>(len) + 2;
        return true;
      }
      case '+':
      case ':':
      case ',':
      case '#':
        *v = text;
        return true;
      case '_':
        *v = {};
        return true;
      case '*': {
        int64_t n = Num(text);
        std::string_view skip;
        for (int64_t i = 0; i < n; ++i) {
          if (!Scalar(&skip)) return false;
        }
        *v = {};
        return true;
      }
      default:
        return false;
    }
  }

 private:
  std::string_view s_;
  size_t pos_ = 0;
};

struct ReservedJob {
  std::string_view id, receipt;
  int64_t attempts = 0;
};

// Calls f(job) for each job of a RESERVE reply [[id, topic, body, receipt,
// attempts, ...], ...]; nil is no job. False if the reply is not that.
template <typename F>
bool ForEachJob(std::string_view raw, F f) {
  RespCursor cur(raw);
  char type;
  std::string_view text;
  if (!cur.Header(&type, &text)) return false;
  if (type == '_' || (type == '$' && text == "-1")) return true;
  if (type != '*') return false;
  int64_t n = Num(text);
  for (int64_t i = 0; i < n; ++i) {
    if (!cur.Header(&type, &text) || type != '*') return false;
    int64_t fields = Num(text);
    if (fields < 5) return false;
    std::string_view v[5];
    for (int64_t k = 0; k < fields; ++k) {
      std::string_view x;
      if (!cur.Scalar(&x)) return false;
      if (k < 5) v[k] = x;
    }
    ReservedJob job{v[0], v[3], Num(v[4])};
    f(job);
  }
  return true;
}

// --- CommandStream -----------------------------------------------------------------

// Commands numbered [0, n) over all of a loop's connections, `depth` in
// flight on each; make(seq, &out) appends command seq, done(reply) sees
// each answer.
class CommandStream : public NetLoop::Handler {
 public:
  using MakeFn = std::function<void(uint64_t seq, std::string* out)>;

  CommandStream(NetLoop* loop, int depth, uint64_t n, MakeFn make)
      : loop_(loop), depth_(depth), n_(n), make_(std::move(make)) {}

  void OnReply(Conn&, const Pending&, const Reply& r) override {
    ++replied_;
    if (r.kind == Reply::Kind::kError) errors_.Add("command", r.error);
  }
  void OnReplies(Conn& c) override { Fill(c); }
  bool OnTick() override {
    if (!started_) {
      started_ = true;
      for (int i = 0; i < loop_->size(); ++i) Fill(loop_->conn(i));
    }
    return replied_ < n_;
  }
  const Errors& errors() const { return errors_; }

 private:
  // Refills a connection once half its window came back: fewer, larger writes.
  void Fill(Conn& c) {
    if (c.pending() > static_cast<size_t>(depth_) / 2) return;
    while (c.pending() < static_cast<size_t>(depth_) && sent_ < n_) {
      scratch_.clear();
      make_(sent_++, &scratch_);
      c.Command(scratch_);
    }
  }

  NetLoop* loop_;
  int depth_;
  uint64_t n_, sent_ = 0, replied_ = 0;
  MakeFn make_;
  std::string scratch_;
  bool started_ = false;
  Errors errors_;
};

// --- consumers -----------------------------------------------------------------------

// Which fire times a consumer thread records cell by cell: seconds
// [base_s, base_s + span) of every schedule; the window [w0_s, w1_s) within.
struct Geometry {
  std::string prefix;  // "<name prefix>-"
  uint64_t schedules = 0;
  int64_t base_s = 0, span = 0;
  int64_t w0_s = 0, w1_s = 0;
};

// What one consumer thread saw.
struct FiringLog {
  std::vector<uint8_t> firsts;       // deliveries with attempts 1, per cell (saturating)
  std::vector<int64_t> lateness_us;  // of first deliveries of fire times in the window
  uint64_t delivered = 0;            // jobs received
  uint64_t redelivered = 0;          // with attempts > 1 (a TTR ran out)
  uint64_t early = 0;                // received before their fire time
  int64_t earliest_us = 0;           // the most negative lateness
  uint64_t outside = 0;              // fire times outside [base, base + span)
  uint64_t off_grid = 0;             // fire times not on a whole second
  uint64_t foreign = 0;              // ids not "<prefix><i>@<ms>" of this run
  Errors errors;
};

// Parses "<prefix><i>@<ms>".
bool ParseFiringId(std::string_view id, std::string_view prefix, uint64_t* index,
                   int64_t* fire_ms) {
  if (id.size() <= prefix.size() || id.compare(0, prefix.size(), prefix) != 0) return false;
  size_t at = id.find('@', prefix.size());
  if (at == std::string_view::npos || at == prefix.size() || at + 1 == id.size()) return false;
  uint64_t i = 0;
  for (size_t k = prefix.size(); k < at; ++k) {
    if (id[k] < '0' || id[k] > '9') return false;
    i = i * 10 + static_cast<uint64_t>(id[k] - '0');
  }
  int64_t ms = 0;
  for (size_t k = at + 1; k < id.size(); ++k) {
    if (id[k] < '0' || id[k] > '9') return false;
    ms = ms * 10 + (id[k] - '0');
  }
  *index = i;
  *fire_ms = ms;
  return true;
}

class ConsumerRun : public NetLoop::Handler {
 public:
  ConsumerRun(NetLoop* loop, const ScheduleBenchOptions& o, const Geometry* g, int64_t end_wall_us,
              FiringLog* log)
      : loop_(loop), o_(o), g_(g), end_wall_us_(end_wall_us), log_(log) {
    AppendRespCommand(&reserve_, {"RESERVE", "TIMEOUT", std::to_string(o.wait_ms), "COUNT",
                                  std::to_string(o.count), "FROM", o.topic});
    log_->firsts.assign(g->schedules * static_cast<uint64_t>(g->span), 0);
  }

  void OnReply(Conn& c, const Pending& p, const Reply& r) override {
    if (p.tag == kTagFinish) {
      if (r.kind == Reply::Kind::kError) log_->errors.Add("finish", r.error);
      return;
    }
    if (r.kind == Reply::Kind::kError) {
      // Asking again would only spin: the run ends, the error reported.
      log_->errors.Add("reserve", r.error);
      loop_->Stop();
      return;
    }
    // One write: the batch's finishes, then the next wait.
    bool ok = ForEachJob(r.raw, [&](const ReservedJob& job) {
      Record(job);
      finish_.clear();
      AppendRespCommand(&finish_, {"FINISH", job.id, job.receipt});
      c.Command(finish_, 0, kTagFinish);
    });
    if (!ok) log_->errors.Add("reserve", "not an array of jobs");
    if (loop_->now_wall_us() < end_wall_us_) c.Command(reserve_, o_.wait_ms, kTagReserve);
  }

  bool OnTick() override {
    if (!started_) {
      started_ = true;
      for (int i = 0; i < loop_->size(); ++i) {
        loop_->conn(i).Command(reserve_, o_.wait_ms, kTagReserve);
      }
    }
    return loop_->now_wall_us() < end_wall_us_;
  }

 private:
  void Record(const ReservedJob& job) {
    ++log_->delivered;
    int64_t now_us = loop_->now_wall_us();
    uint64_t index;
    int64_t fire_ms;
    if (!ParseFiringId(job.id, g_->prefix, &index, &fire_ms) || index >= g_->schedules) {
      ++log_->foreign;
      return;
    }
    int64_t late_us = now_us - fire_ms * 1000;
    if (late_us < 0) {
      ++log_->early;
      log_->earliest_us = std::min(log_->earliest_us, late_us);
    }
    if (job.attempts > 1) {
      ++log_->redelivered;
      return;
    }
    if (fire_ms % 1000 != 0) {
      ++log_->off_grid;
      return;
    }
    int64_t s = fire_ms / 1000;
    if (s < g_->base_s || s >= g_->base_s + g_->span) {
      ++log_->outside;
      return;
    }
    uint8_t& cell = log_->firsts[index * static_cast<uint64_t>(g_->span) +
                                 static_cast<uint64_t>(s - g_->base_s)];
    if (cell == 0 && s >= g_->w0_s && s < g_->w1_s) log_->lateness_us.push_back(late_us);
    if (cell < 255) ++cell;
  }

  NetLoop* loop_;
  const ScheduleBenchOptions& o_;
  const Geometry* g_;
  int64_t end_wall_us_;
  FiringLog* log_;
  std::string reserve_;
  std::string finish_;
  bool started_ = false;
};

}  // namespace

namespace {

struct Address {
  std::string host;
  int port = 0;
};

bool ParseAddress(const std::string& s, Address* a) {
  size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  a->host = s.substr(0, colon);
  char* end = nullptr;
  long port = std::strtol(s.c_str() + colon + 1, &end, 10);
  if (end == s.c_str() + colon + 1 || *end != '\0' || port <= 0 || port > 65535) return false;
  a->port = static_cast<int>(port);
  return true;
}

int Fail(const Status& s) {
  std::fprintf(stderr, "delayq-bench: %s\n", s.message().c_str());
  return 1;
}

Result<std::unique_ptr<NetLoop>> Connect(const Codec* codec, const Address& a, int conns,
                                         double stall_seconds) {
  auto loop = NetLoop::Connect(codec, a.host, a.port, conns);
  if (loop.ok()) (*loop)->set_stall_ns(static_cast<int64_t>(stall_seconds * kNsPerS));
  return loop;
}

std::string ScheduleName(const std::string& prefix, uint64_t i) {
  std::string name = prefix;
  AppendInt(&name, static_cast<int64_t>(i));
  return name;
}

// Runs `n` commands made by `make` over o.create_connections connections to
// `a`; returns the seconds it took, or an error (including the first error
// a command was answered with).
Result<double> Stream(const Codec* codec, const Address& a, const ScheduleBenchOptions& o,
                      uint64_t n, CommandStream::MakeFn make, const char* what) {
  auto loop = Connect(codec, a, o.create_connections, o.stall_seconds);
  if (!loop.ok()) return loop.status();
  CommandStream stream(loop->get(), o.create_depth, n, std::move(make));
  int64_t start = MonoNs();
  if (Status st = (*loop)->Run(stream, 10'000'000); !st.ok()) return st;
  double secs = static_cast<double>(MonoNs() - start) / 1e9;
  if (stream.errors().count != 0) {
    return Unavailable(std::string(what) + ": " + std::to_string(stream.errors().count) +
                       " errors, first: " + stream.errors().first);
  }
  return secs;
}

void SleepUntilWallMs(int64_t wall_ms) {
  std::this_thread::sleep_until(
      std::chrono::system_clock::time_point(std::chrono::milliseconds(wall_ms)));
}

double PercentileMs(const std::vector<int64_t>& sorted_us, double q) {
  if (sorted_us.empty()) return 0;
  auto rank = static_cast<size_t>(q / 100.0 * static_cast<double>(sorted_us.size()));
  if (rank >= sorted_us.size()) rank = sorted_us.size() - 1;
  return static_cast<double>(sorted_us[rank]) / 1000.0;
}

// A cron that fires on every second, whose fire times in a window are
// therefore known: schedules x seconds.
bool EverySecond(std::string_view cron) { return cron == "* * * * * *" || cron == "@every 1s"; }

// The merged logs of the consumer threads.
struct Outcome {
  FiringLog all;
  uint64_t expected = 0;    // fire times in the window (every-second crons)
  uint64_t in_window = 0;   // of them delivered at least once
  uint64_t missing = 0;     // of them not delivered
  uint64_t duplicates = 0;  // deliveries with attempts 1 beyond the first, any second
};

Outcome Merge(const Geometry& g, std::vector<FiringLog>& logs, bool every_second) {
  Outcome out;
  FiringLog& all = out.all;
  for (FiringLog& l : logs) {
    all.delivered += l.delivered;
    all.redelivered += l.redelivered;
    all.early += l.early;
    all.earliest_us = std::min(all.earliest_us, l.earliest_us);
    all.outside += l.outside;
    all.off_grid += l.off_grid;
    all.foreign += l.foreign;
    all.errors.Merge(l.errors);
    all.lateness_us.insert(all.lateness_us.end(), l.lateness_us.begin(), l.lateness_us.end());
    l.lateness_us = {};
  }
  std::sort(all.lateness_us.begin(), all.lateness_us.end());
  auto span = static_cast<uint64_t>(g.span);
  for (uint64_t i = 0; i < g.schedules; ++i) {
    for (int64_t s = g.base_s; s < g.base_s + g.span; ++s) {
      uint64_t cell = i * span + static_cast<uint64_t>(s - g.base_s);
      unsigned sum = 0;
      for (const FiringLog& l : logs) sum += l.firsts[cell];
      if (sum > 1) out.duplicates += sum - 1;
      if (s < g.w0_s || s >= g.w1_s) continue;
      if (sum > 0) ++out.in_window;
      if (every_second && sum == 0) ++out.missing;
    }
  }
  if (every_second) out.expected = g.schedules * static_cast<uint64_t>(g.w1_s - g.w0_s);
  return out;
}

void PrintMemory(const ScheduleBenchOptions& o, const std::vector<int64_t>& before,
                 const std::vector<int64_t>& after) {
  int64_t delta = 0;
  std::printf(",\"pids\":[");
  for (size_t i = 0; i < o.pids.size(); ++i) std::printf("%s%d", i ? "," : "", o.pids[i]);
  std::printf("],\"rss_before_bytes\":[");
  for (size_t i = 0; i < before.size(); ++i) {
    std::printf("%s%" PRId64, i ? "," : "", before[i]);
  }
  std::printf("],\"rss_after_bytes\":[");
  for (size_t i = 0; i < after.size(); ++i) {
    std::printf("%s%" PRId64, i ? "," : "", after[i]);
    delta += after[i] - before[i];
  }
  std::printf("]");
  if (!o.pids.empty()) {
    std::printf(",\"bytes_per_schedule\":%.1f", static_cast<double>(delta) /
                                                    static_cast<double>(o.schedules) /
                                                    static_cast<double>(o.pids.size()));
  }
}

double ServersCpu(const std::vector<int>& pids) {
  double sum = 0;
  for (int pid : pids) sum += CpuSecondsOf(pid);
  return sum;
}

// Consumes on every server from now until the window's end + drain; fills
// `logs` (one per server). Reads the servers' CPU at the window's edges.
Status Consume(const Codec* codec, const std::vector<Address>& addrs, const ScheduleBenchOptions& o,
               const Geometry& g, std::vector<FiringLog>* logs, double* server_cpu_s) {
  size_t n = addrs.size();
  std::vector<std::unique_ptr<NetLoop>> loops;
  for (size_t i = 0; i < n; ++i) {
    int conns = o.consumers / static_cast<int>(n) +
                (static_cast<int>(i) < o.consumers % static_cast<int>(n) ? 1 : 0);
    auto loop = Connect(codec, addrs[i], std::max(conns, 1), o.stall_seconds);
    if (!loop.ok()) return loop.status();
    loops.push_back(std::move(loop).value());
  }
  logs->assign(n, FiringLog());
  std::vector<Status> results(n, Status::Ok());
  int64_t end_wall_us = (g.w1_s + o.drain_seconds) * 1'000'000;
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      ConsumerRun run(loops[i].get(), o, &g, end_wall_us, &(*logs)[i]);
      results[i] = loops[i]->Run(run, 100'000'000);
    });
  }
  SleepUntilWallMs(g.w0_s * 1000);
  double cpu0 = ServersCpu(o.pids);
  SleepUntilWallMs(g.w1_s * 1000);
  *server_cpu_s = ServersCpu(o.pids) - cpu0;
  for (std::thread& t : threads) t.join();
  for (const Status& st : results) {
    if (!st.ok()) return st;
  }
  return Status::Ok();
}

}  // namespace

int RunScheduleBench(const ScheduleBenchOptions& o) {
  std::vector<Address> addrs;
  for (const std::string& s : o.servers) {
    Address a;
    if (!ParseAddress(s, &a)) {
      std::fprintf(stderr, "delayq-bench: --servers: '%s' is not host:port\n", s.c_str());
      return 2;
    }
    addrs.push_back(a);
  }
  for (int pid : o.pids) {
    if (RssOf(pid) < 0) {
      std::fprintf(stderr, "delayq-bench: --pids: no process %d to read VmRSS from\n", pid);
      return 2;
    }
  }
  if (addrs.empty() || o.schedules == 0 || o.consumers < static_cast<int>(addrs.size()) ||
      o.seconds < 0) {
    std::fprintf(stderr,
                 "delayq-bench: need a server, --schedules >= 1, --seconds >= 0 and a consumer "
                 "per server at least\n");
    return 2;
  }
  auto codec = Codec::Create("resp", addrs[0].host);
  if (!codec.ok()) return Fail(codec.status());
  std::string prefix =
      (o.name_prefix.empty() ? "sb" + std::to_string(getpid()) : o.name_prefix) + "-";

  std::vector<int64_t> rss_before, rss_after;
  for (int pid : o.pids) rss_before.push_back(RssOf(pid));
  int64_t create_start_ms = WallUs() / 1000;
  Result<double> create_s = Stream(
      codec->get(), addrs[0], o, o.schedules,
      [&](uint64_t seq, std::string* out) {
        std::string name = ScheduleName(prefix, seq);
        if (o.body.empty()) {
          AppendRespCommand(out, {"SCHEDULE", "SET", name, "cron", o.cron, "topic", o.topic});
        } else {
          AppendRespCommand(
              out, {"SCHEDULE", "SET", name, "cron", o.cron, "topic", o.topic, "body", o.body});
        }
      },
      "SCHEDULE SET");
  if (!create_s.ok()) return Fail(create_s.status());
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(o.settle_seconds * 1000)));
  for (int pid : o.pids) rss_after.push_back(RssOf(pid));

  Geometry g;
  g.prefix = prefix;
  g.schedules = o.schedules;
  g.base_s = create_start_ms / 1000 - 1;
  g.w0_s = (WallUs() / 1000 + 999) / 1000 + o.warmup_seconds;
  g.w1_s = g.w0_s + o.seconds;
  g.span = g.w1_s + o.drain_seconds + 2 - g.base_s;
  Outcome out;
  double server_cpu_s = 0, client_cpu_s = 0;
  if (o.seconds > 0) {
    double cpu0 = CpuSecondsSelf();
    std::vector<FiringLog> logs;
    if (Status st = Consume(codec->get(), addrs, o, g, &logs, &server_cpu_s); !st.ok()) {
      return Fail(st);
    }
    client_cpu_s = CpuSecondsSelf() - cpu0;
    out = Merge(g, logs, EverySecond(o.cron));
  }
  Errors errors = out.all.errors;
  double delete_s = 0;
  if (!o.keep) {
    Result<double> d = Stream(
        codec->get(), addrs[0], o, o.schedules,
        [&](uint64_t seq, std::string* cmd) {
          AppendRespCommand(cmd, {"SCHEDULE", "DEL", ScheduleName(prefix, seq)});
        },
        "SCHEDULE DEL");
    if (d.ok()) {
      delete_s = *d;
    } else {
      errors.Add("delete", d.status().message());
    }
  }

  std::printf("{\"bench\":\"schedules\",\"servers\":[");
  for (size_t i = 0; i < o.servers.size(); ++i) {
    std::printf("%s\"%s\"", i ? "," : "", JsonEscape(o.servers[i]).c_str());
  }
  std::printf("],\"schedules\":%" PRIu64 ",\"cron\":\"%s\",\"topic\":\"%s\"", o.schedules,
              JsonEscape(o.cron).c_str(), JsonEscape(o.topic).c_str());
  std::printf(",\"create_s\":%.2f,\"sets_per_s\":%.0f", *create_s,
              static_cast<double>(o.schedules) / *create_s);
  PrintMemory(o, rss_before, rss_after);
  if (o.seconds > 0) {
    const FiringLog& a = out.all;
    const std::vector<int64_t>& l = a.lateness_us;
    std::printf(",\"seconds\":%d,\"window_start_ms\":%" PRId64 ",\"consumers\":%d,\"count\":%d",
                o.seconds, g.w0_s * 1000, o.consumers, o.count);
    std::printf(",\"delivered\":%" PRIu64 ",\"firings_in_window\":%" PRIu64, a.delivered,
                out.in_window);
    if (EverySecond(o.cron)) {
      std::printf(",\"expected\":%" PRIu64 ",\"missing\":%" PRIu64, out.expected, out.missing);
    }
    std::printf(",\"duplicates\":%" PRIu64 ",\"redelivered\":%" PRIu64 ",\"early\":%" PRIu64,
                out.duplicates, a.redelivered, a.early);
    if (a.early != 0) {
      std::printf(",\"earliest_ms\":%.3f", static_cast<double>(a.earliest_us) / 1000.0);
    }
    std::printf(",\"outside_window\":%" PRIu64 ",\"off_grid\":%" PRIu64 ",\"foreign\":%" PRIu64,
                a.outside, a.off_grid, a.foreign);
    std::printf(",\"p50_ms\":%.3f,\"p90_ms\":%.3f,\"p99_ms\":%.3f,\"p999_ms\":%.3f,\"max_ms\":%.3f",
                PercentileMs(l, 50), PercentileMs(l, 90), PercentileMs(l, 99),
                PercentileMs(l, 99.9), l.empty() ? 0.0 : static_cast<double>(l.back()) / 1000.0);
    if (!o.pids.empty()) {
      std::printf(
          ",\"server_cpu_s\":%.2f,\"cpu_us_per_firing\":%.2f", server_cpu_s,
          out.in_window == 0 ? 0.0 : server_cpu_s * 1e6 / static_cast<double>(out.in_window));
    }
    std::printf(",\"client_cpu_s\":%.2f", client_cpu_s);
  }
  if (!o.keep) std::printf(",\"delete_s\":%.2f", delete_s);
  std::printf(",\"errors\":%" PRIu64, errors.count);
  if (errors.count != 0) std::printf(",\"first_error\":\"%s\"", JsonEscape(errors.first).c_str());
  std::printf("}\n");
  bool bad = errors.count != 0 || out.missing != 0 || out.duplicates != 0 || out.all.early != 0;
  return bad ? 1 : 0;
}

}  // namespace delayq::bench
