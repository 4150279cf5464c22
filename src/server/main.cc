// `delayq`: the server (`delayq serve`) and the client command line.
//
//   delayq serve [options]      every option also reads DELAYQ_<NAME>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "cli/client_commands.h"
#include "cli/left_over.h"
#include "cli/option_checks.h"
#include "common/duration.h"
#include "common/log.h"
#include "delayq/queue.h"
#include "delayq/version.h"
#include "net/event_loop.h"
#include "net/tls.h"
#include "push/pusher.h"
#include "queue/open.h"
#include "redis/url.h"
#include "schedule/scheduler.h"
#include "server/http_server.h"
#include "server/queue_on_loop.h"
#include "server/resp_server.h"

namespace {

using delayq::Log;
using delayq::LogLevel;
using delayq::Status;

struct ServeOptions {
  std::string store = "embedded";
  std::string data_dir = "./data";
  std::string fsync = "everysec";
  uint64_t segment_bytes = 64 << 20;
  int64_t memory_window_ms = 3'600'000;  // the far future off RAM; -1: off (every job in memory)
  uint64_t memory_window_bytes = 0;
  uint64_t far_index_memory_entries = uint64_t{1} << 20;
  uint64_t far_checkpoint_bytes = uint64_t{1} << 30;
  bool repair = false;
  int64_t dedup_window_ms = delayq::kDefaultDedupWindowMs;
  std::string redis_url = "redis://127.0.0.1:6379";
  std::string redis_prefix = "delayq";
  uint32_t redis_buckets = 0;
  uint32_t redis_wait_replicas = 0;
  int64_t redis_wait_timeout_ms = 1000;
  std::string redis_tls_ca_file, redis_tls_cert_file, redis_tls_key_file;
  std::string http_host = "127.0.0.1";
  int http_port = 7700;
  std::string resp_host = "127.0.0.1";
  int resp_port = 7701;
  std::string auth_token;
  size_t max_body = delayq::kDefaultMaxBodyBytes;
  size_t max_connections = 10'000;
  size_t max_header_bytes = 16 * 1024;
  size_t max_output_bytes = 64 << 20;
  size_t max_input_bytes = 64 << 20;
  int64_t idle_timeout_ms = 300'000;
  int64_t request_timeout_ms = 10'000;
  int64_t shutdown_timeout_ms = 5'000;
  std::string log_level = "info";
  // Push delivery: a CA bundle (PEM) for https receivers; empty: the system's.
  std::string push_ca_file;
  // TLS on both listeners when cert_file is set (tls.client_auth from
  // tls_auth_clients: "" means yes with a CA file, as Redis's default).
  delayq::net::TlsOptions tls;
  std::string tls_auth_clients;
  int64_t tls_handshake_timeout_ms = 10'000;
  // Whether --max-connections (or DELAYQ_MAX_CONNECTIONS) was given: only
  // then is lowering it to fit the open files limit worth a warning.
  bool max_connections_given = false;
  // How --data-dir was given ("--data-dir" or "DELAYQ_DATA_DIR"), empty
  // when it was not: a store that keeps nothing there then says so.
  std::string data_dir_given;
};

delayq::net::TcpServerOptions TcpOptions(const ServeOptions& o, std::string name, std::string host,
                                         int port) {
  delayq::net::TcpServerOptions t;
  t.name = std::move(name);
  t.host = std::move(host);
  t.port = port;
  t.max_connections = o.max_connections;
  t.max_output_bytes = o.max_output_bytes;
  t.max_input_bytes = o.max_input_bytes;
  t.idle_timeout_ms = o.idle_timeout_ms;
  t.request_timeout_ms = o.request_timeout_ms;
  t.tls_handshake_timeout_ms = o.tls_handshake_timeout_ms;
  return t;
}

// The listeners' TLS context from the --tls-* options: null without
// --tls-cert-file. Made again on SIGHUP (the files re-read).
delayq::Result<std::shared_ptr<const delayq::net::TlsContext>> ServingTls(const ServeOptions& o) {
  if (o.tls.cert_file.empty()) return std::shared_ptr<const delayq::net::TlsContext>();
  auto ctx = delayq::net::TlsContext::Create(delayq::net::TlsContext::Role::kServer, o.tls);
  if (!ctx.ok()) return ctx.status();
  return std::shared_ptr<const delayq::net::TlsContext>(std::move(ctx).value());
}

// The --tls-* options that only make sense together: a usage error naming
// the one missing or out of place, else empty. Fills o->tls.client_auth.
std::string CheckTlsOptions(ServeOptions* o) {
  delayq::net::TlsOptions& t = o->tls;
  if (t.cert_file.empty() != t.key_file.empty()) {
    return t.cert_file.empty() ? "--tls-key-file given without --tls-cert-file"
                               : "--tls-cert-file given without --tls-key-file";
  }
  const bool any_other = !t.ca_file.empty() || !o->tls_auth_clients.empty() ||
                         !t.protocols.empty() || !t.ciphers.empty() || !t.ciphersuites.empty();
  if (t.cert_file.empty() && any_other) {
    return "the --tls-* options need --tls-cert-file and --tls-key-file (TLS is on only with "
           "a certificate)";
  }
  if (o->tls_auth_clients.empty()) {
    t.client_auth = t.ca_file.empty() ? delayq::net::TlsOptions::ClientAuth::kNo
                                      : delayq::net::TlsOptions::ClientAuth::kYes;
    return "";
  }
  auto auth = delayq::net::ParseClientAuth(o->tls_auth_clients);
  if (!auth.ok()) return "--tls-auth-clients: " + auth.status().message();
  t.client_auth = *auth;
  if (t.client_auth != delayq::net::TlsOptions::ClientAuth::kNo && t.ca_file.empty()) {
    return "--tls-auth-clients " + o->tls_auth_clients +
           " needs --tls-ca-cert-file (the CA that signs the clients' certificates)";
  }
  return "";
}

// The store names QueueOptions' fields; `delayq serve`'s user typed flags.
delayq::Status InFlagNames(const delayq::Status& s) {
  std::string m = s.message();
  for (const auto& [field, flag] : {std::pair{"redis_tls_ca_file", "--redis-tls-ca-cert-file"},
                                    std::pair{"redis_tls_cert_file", "--redis-tls-cert-file"},
                                    std::pair{"redis_tls_key_file", "--redis-tls-key-file"}}) {
    for (size_t at = m.find(field); at != std::string::npos; at = m.find(field, at)) {
      m.replace(at, std::strlen(field), flag);
      at += std::strlen(flag);
    }
  }
  return delayq::Status(s.code(), m);
}

int Fail(const delayq::Status& s) {
  Log(LogLevel::kError, "%s", s.ToString().c_str());
  return 1;
}

// Descriptors left for everything but client connections: stdio, the
// store's log segments and lock, eventfds, timerfds, epoll, the signalfd,
// listeners and their spares, Redis connections. A fixed floor plus a
// share of the limit, so a big deployment's extra Redis shards fit too.
rlim_t FdsKept(rlim_t limit) { return 64 + limit / 16; }

// Raises the soft RLIMIT_NOFILE to the hard one (a stock soft limit of 1024
// holds a tenth of the default --max-connections) and returns the soft
// limit in force. The server uses epoll and poll only, never select, so
// descriptors above 1024 are safe.
rlim_t RaiseFdLimit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 1024;
  constexpr rlim_t kUnlimited = rlim_t{1} << 20;  // the kernel's default fs.nr_open
  if (rl.rlim_cur == RLIM_INFINITY) return kUnlimited;
  // A hard limit of "unlimited" cannot be set back (setrlimit refuses more
  // than fs.nr_open): raise the soft one to nr_open instead.
  rlim_t target = rl.rlim_max;
  if (target == RLIM_INFINITY) {
    target = kUnlimited;
    std::ifstream("/proc/sys/fs/nr_open") >> target;
  }
  if (rl.rlim_cur >= target) return rl.rlim_cur;
  rlimit raised = rl;
  raised.rlim_cur = target;
  if (setrlimit(RLIMIT_NOFILE, &raised) != 0) {
    Log(LogLevel::kWarn, "cannot raise the open files limit from %llu to %llu: %s",
        static_cast<unsigned long long>(rl.rlim_cur), static_cast<unsigned long long>(target),
        strerror(errno));
    return rl.rlim_cur;
  }
  Log(LogLevel::kInfo, "open files limit raised from %llu to %llu",
      static_cast<unsigned long long>(rl.rlim_cur), static_cast<unsigned long long>(target));
  return target;
}

// Fits --max-connections, which each of the two listeners enforces on its
// own, under the open files limit: past it, accept fails and clients would
// only get TcpServer's spare-descriptor busy reply. Lowers it when it does
// not fit (a warning when the user asked for the number, a debug line when
// it is the default); fails when the limit leaves no room at all.
Status FitMaxConnections(rlim_t limit, bool given, size_t* max_connections) {
  rlim_t kept = FdsKept(limit);
  size_t room = limit > kept ? static_cast<size_t>((limit - kept) / 2) : 0;
  if (*max_connections <= room) return Status::Ok();
  if (room == 0) {
    return delayq::Unavailable(
        "the open files limit (" + std::to_string(limit) + ") leaves no descriptors for " +
        "connections: " + std::to_string(kept) + " are kept for the store and the server; " +
        "raise it (ulimit -n) to at least " + std::to_string(kept + 2));
  }
  // The default lowered is routine: every start under a stock limit does it.
  Log(given ? LogLevel::kWarn : LogLevel::kDebug,
      "--max-connections %zu does not fit the open files limit (%llu, %llu kept for the store "
      "and the server, two protocols): lowered to %zu per protocol; raise the limit "
      "(ulimit -n, systemd LimitNOFILE=) for more",
      *max_connections, static_cast<unsigned long long>(limit),
      static_cast<unsigned long long>(kept), room);
  *max_connections = room;
  return Status::Ok();
}

int Serve(ServeOptions o) {
  if (auto level = delayq::ParseLogLevel(o.log_level)) delayq::SetLogLevel(*level);
  if (Status st = FitMaxConnections(RaiseFdLimit(), o.max_connections_given, &o.max_connections);
      !st.ok()) {
    return Fail(st);
  }
  // SIGTERM / SIGINT arrive as readable data on a signalfd in the loop. They
  // are blocked before any thread starts, so every thread inherits the mask.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGHUP);  // reloads the TLS certificates (ignored without TLS)
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // Both were checked against their names when parsed.
  const delayq::StoreKind store = *delayq::ParseStoreKind(o.store);
  const delayq::FsyncPolicy fsync = *delayq::ParseFsyncPolicy(o.fsync);
  delayq::QueueOptions qo;
  qo.store = store;
  qo.data_dir = o.data_dir;
  qo.fsync = fsync;
  qo.segment_bytes = o.segment_bytes;
  qo.memory_window_ms = o.memory_window_ms;
  qo.memory_window_bytes = o.memory_window_bytes;
  qo.far_index_memory_entries = static_cast<size_t>(o.far_index_memory_entries);
  qo.far_checkpoint_bytes = o.far_checkpoint_bytes;
  qo.repair_log = o.repair;
  qo.dedup_window_ms = o.dedup_window_ms;
  qo.redis_url = o.redis_url;
  qo.redis_prefix = o.redis_prefix;
  qo.redis_buckets = o.redis_buckets;
  qo.redis_wait_replicas = o.redis_wait_replicas;
  qo.redis_wait_timeout_ms = o.redis_wait_timeout_ms;
  qo.redis_tls_ca_file = o.redis_tls_ca_file;
  qo.redis_tls_cert_file = o.redis_tls_cert_file;
  qo.redis_tls_key_file = o.redis_tls_key_file;
  qo.limits.max_body_bytes = o.max_body;
  // The queue's timers run on the loop thread: a job that falls due reaches
  // its waiting reserve without waking a second thread first.
  delayq::OpenOptions open;
  open.caller_loop = true;
  if (store == delayq::StoreKind::kEmbedded) {
    Log(LogLevel::kInfo, "opening the embedded store in %s (fsync %s)", o.data_dir.c_str(),
        o.fsync.c_str());
  }
  if (store == delayq::StoreKind::kRedis) {
    Log(LogLevel::kInfo, "opening the redis store at %s (prefix %s)",
        delayq::redis::RedactUrl(o.redis_url).c_str(), o.redis_prefix.c_str());
  }
  // A directory given to a store that keeps nothing in it: said, so that no
  // one believes the jobs are kept there.
  if (store != delayq::StoreKind::kEmbedded && !o.data_dir_given.empty()) {
    const std::string where =
        store == delayq::StoreKind::kRedis
            ? "the jobs are in Redis at " + delayq::redis::RedactUrl(o.redis_url)
            : "nothing is kept, every job is lost when the server stops";
    Log(LogLevel::kWarn,
        "%s %s is not used by --store %s: %s (only --store embedded keeps its log there)",
        o.data_dir_given.c_str(), o.data_dir.c_str(), o.store.c_str(), where.c_str());
  }
  auto queue = delayq::OpenServingQueue(qo, open);
  if (!queue.ok()) return Fail(InFlagNames(queue.status()));
  if (std::string opened = (*queue)->OpenedSummary(); !opened.empty()) {
    Log(LogLevel::kInfo, "%s", opened.c_str());
  }
  auto tls = ServingTls(o);
  if (!tls.ok()) return Fail(tls.status());
  auto loop = delayq::net::EventLoop::Create();
  if (!loop.ok()) return Fail(loop.status());
  delayq::net::EventLoop* l = loop->get();
  auto on_loop = delayq::server::QueueOnLoop::Attach(l, queue->get());
  if (!on_loop.ok()) return Fail(on_loop.status());

  delayq::server::LatenessHistogram lateness;  // outlives both front ends
  delayq::server::HttpServerOptions ho;
  ho.tcp = TcpOptions(o, "HTTP", o.http_host, o.http_port);
  ho.tcp.tls = *tls;
  ho.auth_token = o.auth_token;
  ho.parser.max_header_bytes = o.max_header_bytes;
  // The JSON around a body: escapes can double it, base64 adds a third.
  ho.parser.max_body_bytes = 2 * o.max_body + 64 * 1024;
  auto http = delayq::server::HttpServer::Create(l, queue->get(), ho);
  if (!http.ok()) return Fail(http.status());

  delayq::server::RespServerOptions ro;
  ro.tcp = TcpOptions(o, "RESP", o.resp_host, o.resp_port);
  ro.tcp.tls = *tls;
  ro.auth_token = o.auth_token;
  ro.store = o.store;
  ro.parser.max_bulk_bytes = o.max_body + 1024;
  ro.parser.max_inline_bytes = o.max_header_bytes;
  // Every command of SPEC §7 is one body plus small arguments.
  ro.parser.max_args = 256;
  ro.parser.max_command_bytes = o.max_body + 64 * 1024;
  auto resp = delayq::server::RespServer::Create(l, queue->get(), ro);
  if (!resp.ok()) return Fail(resp.status());

  (*http)->set_lateness(&lateness);
  (*resp)->set_lateness(&lateness);
  // Push delivery (service mode): POSTs due jobs of the subscriptions' topics
  // to their endpoints, from this loop; the front ends register them with it.
  delayq::push::PusherOptions po;
  po.http.ca_file = o.push_ca_file;
  auto pusher = delayq::push::Pusher::Create(l, queue->get(), std::move(po));
  if (!pusher.ok()) return Fail(pusher.status());
  (*http)->set_pusher(pusher->get());
  (*resp)->set_pusher(pusher->get());
  // Periodic jobs: every server keeps each schedule's next firing in the
  // queue, from this loop; the front ends create and change schedules
  // through it.
  auto scheduler =
      delayq::schedule::Scheduler::Create(l, queue->get(), delayq::schedule::SchedulerOptions{});
  if (!scheduler.ok()) return Fail(scheduler.status());
  (*http)->set_scheduler(scheduler->get());
  (*resp)->set_scheduler(scheduler->get());
  if (store == delayq::StoreKind::kEmbedded) {
    // Group commit: what every connection changed in a turn is written
    // together at its end, then the replies that waited for it go out. With
    // fsync always and nothing else to do, the loop runs the fdatasync itself.
    (*on_loop)->HoldReplies({http->get(), resp->get()},
                            /*sync_when_idle=*/fsync == delayq::FsyncPolicy::kAlways);
  }

  // Shutdown: the first signal stops accepting and drains (waiting reserves
  // are answered "shutting down", owed replies are written) for at most
  // shutdown_timeout_ms; a second signal stops at once.
  int sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (sfd < 0) return Fail(delayq::Internal("signalfd failed: SIGTERM could not stop the server"));
  bool draining = false;
  bool push_stopped = false;  // the pusher's requests in flight have ended
  int64_t drain_deadline = 0;
  std::function<void()> check_drained = [&] {
    if (((*http)->Drained() && (*resp)->Drained() && push_stopped) ||
        delayq::net::MonotonicNowMs() >= drain_deadline) {
      l->Stop();
      return;
    }
    l->RunAfter(10, check_drained);
  };
  // SIGHUP: the certificate, key and CA files read again (a renewal); new
  // connections use them, open ones keep theirs. A file that fails keeps
  // the old ones serving, and says why.
  auto reload_tls = [&] {
    if (*tls == nullptr) {
      Log(LogLevel::kInfo, "SIGHUP: nothing to reload (TLS is off)");
      return;
    }
    auto fresh = ServingTls(o);
    if (!fresh.ok()) {
      Log(LogLevel::kError, "SIGHUP: TLS not reloaded, the old certificate still serves: %s",
          fresh.status().message().c_str());
      return;
    }
    (*http)->tcp()->SetTls(*fresh);
    (*resp)->tcp()->SetTls(*fresh);
    Log(LogLevel::kInfo, "SIGHUP: TLS reloaded: %s", (*fresh)->certificate_summary().c_str());
  };
  Status watched = l->Add(sfd, EPOLLIN, [&](uint32_t) {
    signalfd_siginfo info;
    bool stop = false;
    while (read(sfd, &info, sizeof info) == sizeof info) {
      if (info.ssi_signo == SIGHUP) {
        reload_tls();
      } else {
        stop = true;
      }
    }
    if (!stop) return;
    if (draining) {
      Log(LogLevel::kWarn, "second signal: stopping now");
      l->Stop();
      return;
    }
    draining = true;
    Log(LogLevel::kInfo, "stopping: draining %zu HTTP and %zu RESP connections",
        (*http)->connections(), (*resp)->connections());
    drain_deadline = delayq::net::MonotonicNowMs() + o.shutdown_timeout_ms;
    (*http)->BeginDrain();
    (*resp)->BeginDrain();
    // No new pushes; those in flight get the same time as the connections,
    // then are cancelled and their jobs given back, before the queue closes.
    (*pusher)->Stop(o.shutdown_timeout_ms, [&] { push_stopped = true; });
    // No further firing: another server (or the next start) makes the ones
    // this one would have, from the store.
    (*scheduler)->Stop();
    check_drained();
  });
  if (!watched.ok()) return Fail(watched);

  std::string where;
  if (store == delayq::StoreKind::kEmbedded) where = " in " + o.data_dir + ", fsync " + o.fsync;
  if (store == delayq::StoreKind::kRedis) {
    where = " at " + delayq::redis::RedactUrl(o.redis_url) + ", prefix " + o.redis_prefix;
  }
  Log(LogLevel::kInfo, "delayq %s: store %s%s%s", DELAYQ_VERSION, o.store.c_str(), where.c_str(),
      o.auth_token.empty() ? "" : ", auth required");
  if (*tls != nullptr) {
    Log(LogLevel::kInfo, "TLS on both listeners: %s%s", (*tls)->certificate_summary().c_str(),
        o.tls.client_auth == delayq::net::TlsOptions::ClientAuth::kYes
            ? "; client certificates required"
        : o.tls.client_auth == delayq::net::TlsOptions::ClientAuth::kOptional
            ? "; client certificates checked when given"
            : "");
  }
  const char* over = *tls != nullptr ? " (TLS)" : "";
  Log(LogLevel::kInfo, "serving HTTP on %s:%d%s", o.http_host.c_str(), (*http)->port(), over);
  Log(LogLevel::kInfo, "serving RESP on %s:%d%s", o.resp_host.c_str(), (*resp)->port(), over);
  (*pusher)->Start();  // on this thread, the loop's, before it runs
  (*scheduler)->Start();
  l->Run();
  size_t left = (*http)->connections() + (*resp)->connections();
  (*http)->CloseConnections();  // closes what is left; waiting reserves are withdrawn
  (*resp)->CloseConnections();
  pusher->reset();     // its reserves withdrawn and requests cancelled while the queue exists
  scheduler->reset();  // its store calls answered or dropped while the queue exists
  (*on_loop)->Detach();
  // Answers anything still in flight (the Redis store's threads call back
  // into the front ends, which post to the loop: both still exist); the log
  // is written and synced.
  queue->reset();
  http->reset();
  resp->reset();
  l->Remove(sfd);
  close(sfd);
  Log(LogLevel::kInfo, "stopped%s",
      left == 0 ? "" : (" (" + std::to_string(left) + " connections cut short)").c_str());
  return 0;
}

// Upper bounds of the timeouts: far beyond any sane setting, and far from
// overflowing the int64 milliseconds they are added to.
constexpr int64_t kMaxIdleTimeoutMs = 30LL * 86'400'000;  // 30 days
constexpr int64_t kMaxRequestTimeoutMs = 86'400'000;      // 1 day
constexpr int64_t kMaxShutdownTimeoutMs = 86'400'000;     // 1 day

// "DELAYQ_REQUEST_TIMEOUT" for "--request-timeout".
std::string EnvName(std::string_view flag) {
  std::string env = "DELAYQ_";
  for (char ch : flag.substr(2)) env += ch == '-' ? '_' : static_cast<char>(std::toupper(ch));
  return env;
}

// Whether `flag` is on the command line (as "--flag value" or "--flag=value"),
// rather than read from its environment variable.
bool OnCommandLine(int argc, char** argv, std::string_view flag) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == flag || (a.starts_with(flag) && a.size() > flag.size() && a[flag.size()] == '=')) {
      return true;
    }
  }
  return false;
}

// A time option of serve, in two forms as the client commands' --delay and
// --delay-ms: "--request-timeout 30s" (a duration, ParseDurationMs: the one
// syntax of every duration delayq takes) and "--request-timeout-ms 30000"
// (whole milliseconds, the older form), each also read from DELAYQ_<NAME>.
struct DurationFlag {
  DurationFlag(std::string n, int64_t* field, int64_t max_ms, std::string h, bool off = false)
      : name(std::move(n)), ms(field), most(max_ms), help(std::move(h)), can_be_off(off) {}

  std::string name;  // "--request-timeout"; the ms form is name + "-ms"
  int64_t* ms;       // ServeOptions' field, holding the default
  int64_t most;
  std::string help;
  // "off" is a value too (-1 in the ms form).
  bool can_be_off = false;
  std::string text;  // the duration form's value
  CLI::Option* text_opt = nullptr;
  CLI::Option* ms_opt = nullptr;
};

void AddDurationFlag(CLI::App* serve, DurationFlag* d) {
  const std::string ms_name = d->name + "-ms";
  // The duration form first: the one --help shows before the other.
  d->text_opt = serve
                    ->add_option(d->name, d->text,
                                 d->help + "; a duration: 500ms, 30s, 5m, 1h" +
                                     (d->can_be_off ? ", or off" : ""))
                    ->envname(EnvName(d->name))
                    ->type_name("DURATION")
                    ->default_str(*d->ms < 0 ? "off" : delayq::FormatDurationMs(*d->ms));
  d->ms_opt = serve
                  ->add_option(ms_name, *d->ms,
                               std::string("the same in whole milliseconds") +
                                   (d->can_be_off ? " (-1: off)" : ""))
                  ->envname(EnvName(ms_name))
                  ->capture_default_str()
                  ->check(CLI::Range(int64_t{d->can_be_off ? -1 : 0}, d->most));
}

// The value of each DurationFlag into its ServeOptions field. Both forms
// given the same way (both flags, or both variables) is a usage error naming
// them; a flag wins over the other form's variable, as every flag wins over
// its own. A bad duration names the option (or variable) and the value.
Status ReadDurationFlags(std::vector<DurationFlag>& flags, int argc, char** argv) {
  for (DurationFlag& d : flags) {
    const std::string ms_name = d.name + "-ms";
    const bool text_given = d.text_opt->count() > 0;
    const bool ms_given = d.ms_opt->count() > 0;
    const bool text_flag = OnCommandLine(argc, argv, d.name);
    const bool ms_flag = OnCommandLine(argc, argv, ms_name);
    const std::string text_src = text_flag ? d.name : EnvName(d.name);
    const std::string ms_src = ms_flag ? ms_name : EnvName(ms_name);
    if (text_given && ms_given && text_flag == ms_flag) {
      std::string both = text_src;
      both += " and ";
      both += ms_src;
      both += ": give one, not both (";
      both += text_src;
      both += " takes a duration such as 30s, ";
      both += ms_src;
      both += " whole milliseconds)";
      return delayq::InvalidArgument(std::move(both));
    }
    if (!text_given || (ms_given && ms_flag)) continue;  // the ms form (or the default) stands
    if (d.can_be_off && d.text == "off") {
      *d.ms = -1;
      continue;
    }
    delayq::Result<int64_t> ms = delayq::ParseDurationMsWithin(d.text, text_src, 0, d.most);
    if (!ms.ok()) return ms.status();
    *d.ms = *ms;
  }
  return Status::Ok();
}

template <typename T>
CLI::Option* AddOption(CLI::App* app, const std::string& flag, T& value, const std::string& help,
                       const std::string& env) {
  return app->add_option(flag, value, help)->envname(env)->capture_default_str();
}

}  // namespace

// CLI11 throws while the options are set up only on a mistake in this
// table, which should end the program: no catch for it.
// NOLINTNEXTLINE(bugprone-exception-escape)
int main(int argc, char** argv) {
  CLI::App app{"delayq: a delay queue server and its command line"};
  app.set_version_flag("--version", "delayq " DELAYQ_VERSION);
  app.require_subcommand(1);
  ServeOptions o;
  CLI::App* serve = app.add_subcommand("serve", "run the server");
  // Built whole before any is added: the options point into it.
  std::vector<DurationFlag> durations = {
      {"--dedup-window", &o.dedup_window_ms, 86'400'000,
       "how long an add with an idempotency key is remembered: a repeat within it changes "
       "nothing (0: not remembered)"},
      {"--memory-window", &o.memory_window_ms, delayq::kMaxDelayMs,
       "embedded store: delayed jobs due further ahead than this leave memory (their records "
       "stay in the log; ~12 bytes of memory each, up to ~24 with a client-chosen id) and come "
       "back this long before they are due",
       /*off=*/true},
      {"--redis-wait-timeout", &o.redis_wait_timeout_ms, 3'600'000,
       "redis store: how long a change waits for --redis-wait-replicas replicas before it is "
       "answered unavailable"},
      {"--idle-timeout", &o.idle_timeout_ms, kMaxIdleTimeoutMs,
       "close connections idle this long (0: never; a waiting reserve is not idle)"},
      {"--request-timeout", &o.request_timeout_ms, kMaxRequestTimeoutMs,
       "a request that has begun must arrive whole within this (0: no limit)"},
      {"--shutdown-timeout", &o.shutdown_timeout_ms, kMaxShutdownTimeoutMs,
       "on SIGTERM/SIGINT, time to finish writing replies before connections are cut"},
      {"--tls-handshake-timeout", &o.tls_handshake_timeout_ms, kMaxRequestTimeoutMs,
       "TLS: a client's handshake must be complete within this of its connect"},
  };
  AddOption(serve, "--store", o.store,
            "where jobs live: embedded (a durable log in --data-dir) | redis (Redis or Redis "
            "Cluster at --redis, shared by every server on it) | memory (nothing kept)",
            "DELAYQ_STORE")
      ->check(CLI::IsMember({"embedded", "redis", "memory"}));
  CLI::Option* data_dir =
      AddOption(serve, "--data-dir", o.data_dir,
                "directory of the embedded store's log, created if missing (not used by the "
                "other stores)",
                "DELAYQ_DATA_DIR");
  AddOption(serve, "--fsync", o.fsync,
            "embedded store: when a change is acknowledged: always (after an fdatasync that "
            "covers it) | everysec (once written; fdatasync each second) | never (once written)",
            "DELAYQ_FSYNC")
      ->check(CLI::IsMember({"always", "everysec", "never"}));
  AddOption(serve, "--segment-bytes", o.segment_bytes,
            "embedded store: size at which a log segment is closed", "DELAYQ_SEGMENT_BYTES")
      ->check(CLI::Range(uint64_t{4096}, uint64_t{1} << 40));
  // No environment variable: a repair is run once, by hand, never left on.
  serve->add_flag("--repair", o.repair,
                  "embedded store: start on a log damaged amid its records by dropping the "
                  "damaged bytes and keeping every record that verifies (the log says what was "
                  "dropped); without it such a log stops the start");
  AddDurationFlag(serve, &durations[0]);  // --dedup-window
  AddDurationFlag(serve, &durations[1]);  // --memory-window
  AddOption(serve, "--memory-window-bytes", o.memory_window_bytes,
            "embedded store with --memory-window: a budget for the jobs in memory (bytes of "
            "their records); past it, jobs come into memory only when due (0: none)",
            "DELAYQ_MEMORY_WINDOW_BYTES");
  AddOption(serve, "--far-index-memory-entries", o.far_index_memory_entries,
            "embedded store with --memory-window: entries of the far jobs' time index kept in "
            "memory (24 bytes each) before they are sealed as a sorted run on disk",
            "DELAYQ_FAR_INDEX_MEMORY_ENTRIES")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30));
  AddOption(serve, "--far-checkpoint-bytes", o.far_checkpoint_bytes,
            "embedded store with --memory-window: write a far-future checkpoint while serving "
            "once a crash's restart would replay this many bytes of log (0: only at a clean "
            "stop)",
            "DELAYQ_FAR_CHECKPOINT_BYTES");
  AddOption(serve, "--redis", o.redis_url,
            "redis store: redis://[[user]:password@]host:port[,host:port...][/db] (a cluster is "
            "detected; rediss:// for TLS), or "
            "redis+sentinel://host:port[,host:port...]/MASTER_NAME[/db] (the "
            "sentinels: the master is followed across failovers)",
            "DELAYQ_REDIS");
  AddOption(serve, "--redis-prefix", o.redis_prefix,
            "redis store: prefix of every key, so deployments can share one Redis",
            "DELAYQ_REDIS_PREFIX");
  AddOption(serve, "--redis-buckets", o.redis_buckets,
            "redis store: buckets jobs are spread over (one cluster slot each); fixed when a "
            "prefix is first used. 0: the prefix's count, else 1 on a standalone Redis, 16 on "
            "a cluster",
            "DELAYQ_REDIS_BUCKETS")
      ->check(CLI::Range(0, 16384));
  AddOption(serve, "--redis-wait-replicas", o.redis_wait_replicas,
            "redis store: acknowledge a change only once this many replicas of its master have "
            "it (WAIT; else unavailable after --redis-wait-timeout). 0: once the master has it, "
            "which a failover may lose",
            "DELAYQ_REDIS_WAIT_REPLICAS")
      ->check(CLI::Range(0, 1000));
  AddDurationFlag(serve, &durations[2]);  // --redis-wait-timeout
  AddOption(serve, "--redis-tls-ca-cert-file", o.redis_tls_ca_file,
            "redis store, rediss://: the CA bundle (PEM) to check Redis's certificate with "
            "(default: the system's)",
            "DELAYQ_REDIS_TLS_CA_CERT_FILE")
      ->check(CLI::ExistingFile);
  AddOption(serve, "--redis-tls-cert-file", o.redis_tls_cert_file,
            "redis store, rediss://: a client certificate (PEM) for a Redis that asks for one",
            "DELAYQ_REDIS_TLS_CERT_FILE")
      ->check(CLI::ExistingFile);
  AddOption(serve, "--redis-tls-key-file", o.redis_tls_key_file,
            "redis store, rediss://: the key of --redis-tls-cert-file (PEM)",
            "DELAYQ_REDIS_TLS_KEY_FILE")
      ->check(CLI::ExistingFile);
  AddOption(serve, "--http-host", o.http_host, "IPv4 address the HTTP/JSON API listens on",
            "DELAYQ_HTTP_HOST");
  AddOption(serve, "--http-port", o.http_port, "port of the HTTP/JSON API (0: any free port)",
            "DELAYQ_HTTP_PORT")
      ->check(CLI::Range(0, 65535));
  AddOption(serve, "--resp-host", o.resp_host, "IPv4 address the Redis protocol listens on",
            "DELAYQ_RESP_HOST");
  AddOption(serve, "--resp-port", o.resp_port, "port of the Redis protocol (0: any free port)",
            "DELAYQ_RESP_PORT")
      ->check(CLI::Range(0, 65535));
  serve
      ->add_option("--auth-token", o.auth_token,
                   "token clients must present: HTTP 'Authorization: Bearer <token>', RESP AUTH "
                   "(default: none; an empty DELAYQ_AUTH_TOKEN counts as unset)")
      ->envname("DELAYQ_AUTH_TOKEN")
      ->check(delayq::cli::NotEmpty("leave --auth-token out to run without authentication"));
  AddOption(serve, "--max-body", o.max_body, "largest job body, bytes", "DELAYQ_MAX_BODY")
      ->check(CLI::Range(size_t{0}, size_t{64} << 20));
  CLI::Option* max_connections =
      AddOption(serve, "--max-connections", o.max_connections,
                "connections at most, per protocol; lowered to what the open files limit holds",
                "DELAYQ_MAX_CONNECTIONS")
          ->check(CLI::Range(size_t{1}, size_t{1'000'000}));
  AddOption(serve, "--max-header-bytes", o.max_header_bytes,
            "largest HTTP request line + headers, and RESP inline command, bytes",
            "DELAYQ_MAX_HEADER_BYTES")
      ->check(CLI::Range(size_t{256}, size_t{1} << 20));
  AddOption(serve, "--max-output-bytes", o.max_output_bytes,
            "replies a client may leave unread before it is disconnected, bytes",
            "DELAYQ_MAX_OUTPUT_BYTES")
      ->check(CLI::Range(size_t{64} << 10, size_t{1} << 40));
  AddOption(serve, "--max-input-bytes", o.max_input_bytes,
            "requests a client may send ahead while its replies wait unread, bytes",
            "DELAYQ_MAX_INPUT_BYTES")
      ->check(CLI::Range(size_t{64} << 10, size_t{1} << 40));
  for (size_t i = 3; i + 1 < durations.size(); ++i) AddDurationFlag(serve, &durations[i]);
  AddOption(serve, "--push-ca-file", o.push_ca_file,
            "push delivery: a CA bundle (PEM) to verify https receivers with (default: the "
            "system's)",
            "DELAYQ_PUSH_CA_FILE")
      ->check(CLI::ExistingFile);
  AddOption(serve, "--tls-cert-file", o.tls.cert_file,
            "TLS: the server's certificate (PEM; a chain: the leaf first). With --tls-key-file, "
            "both listeners speak TLS only; SIGHUP reloads both files",
            "DELAYQ_TLS_CERT_FILE")
      ->check(CLI::ExistingFile);
  AddOption(serve, "--tls-key-file", o.tls.key_file, "TLS: the certificate's private key (PEM)",
            "DELAYQ_TLS_KEY_FILE")
      ->check(CLI::ExistingFile);
  AddOption(serve, "--tls-ca-cert-file", o.tls.ca_file,
            "TLS: the CA bundle (PEM) that signs client certificates (mutual TLS; see "
            "--tls-auth-clients)",
            "DELAYQ_TLS_CA_CERT_FILE")
      ->check(CLI::ExistingFile);
  serve
      ->add_option("--tls-auth-clients", o.tls_auth_clients,
                   "TLS: client certificates: yes (required, signed by --tls-ca-cert-file) | "
                   "optional (checked when given) | no (default: yes with a CA file, else no)")
      ->envname("DELAYQ_TLS_AUTH_CLIENTS")
      ->check(CLI::IsMember({"yes", "optional", "no"}));
  AddOption(serve, "--tls-protocols", o.tls.protocols,
            "TLS: the protocols spoken, \"TLSv1.2 TLSv1.3\" or one of them (default: both)",
            "DELAYQ_TLS_PROTOCOLS");
  AddOption(serve, "--tls-ciphers", o.tls.ciphers,
            "TLS 1.2 ciphers, in OpenSSL's syntax (default: OpenSSL's)", "DELAYQ_TLS_CIPHERS");
  AddOption(serve, "--tls-ciphersuites", o.tls.ciphersuites,
            "TLS 1.3 ciphersuites, in OpenSSL's syntax (default: OpenSSL's)",
            "DELAYQ_TLS_CIPHERSUITES");
  AddDurationFlag(serve, &durations.back());  // --tls-handshake-timeout
  AddOption(serve, "--log-level", o.log_level, "debug | info | warn | error", "DELAYQ_LOG_LEVEL")
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}));
  auto client = delayq::cli::AddClientCommands(&app);
  delayq::cli::RefuseOptionLikeValues(&app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // In delayq's words (cli/left_over.h): a mistyped word is named (and the
    // nearest one suggested), and any other mistake under its command's
    // name, with what to type instead. Every usage error is 2.
    if (std::string left = delayq::cli::DescribeParseError(app, e); !left.empty()) {
      std::fprintf(stderr, "%s\n", left.c_str());
      return 2;
    }
    if (app.get_subcommands().empty()) {
      std::fprintf(stderr,
                   "delayq: a command is needed: 'delayq serve' runs the server, 'delayq ping' "
                   "asks one ('delayq --help' lists them all)\n");
      return 2;
    }
    app.exit(e);
    return 2;
  }
  if (serve->parsed()) {
    // `delayq --auth-token T serve` would otherwise start a server without
    // authentication: the token before `serve` is the client commands'.
    if (std::string given = client->OptionGiven(); !given.empty()) {
      std::fprintf(stderr,
                   "delayq serve: %s before 'serve' is an option of the client commands; "
                   "serve's own options go after 'serve'\n",
                   given.c_str());
      return 2;
    }
    if (Status st = ReadDurationFlags(durations, argc, argv); !st.ok()) {
      std::fprintf(stderr, "delayq serve: %s\n", st.message().c_str());
      return 2;
    }
    if (o.redis_wait_timeout_ms < 1) {  // WAIT 0 would wait for ever
      std::fprintf(
          stderr,
          "delayq serve: --redis-wait-timeout (--redis-wait-timeout-ms) must be at least 1ms "
          "(a WAIT without a timeout would hold every change while a replica is away)\n");
      return 2;
    }
    if (std::string bad = CheckTlsOptions(&o); !bad.empty()) {
      std::fprintf(stderr, "delayq serve: %s\n", bad.c_str());
      return 2;
    }
    if (!o.tls.cert_file.empty() && o.tls_handshake_timeout_ms < 1) {
      std::fprintf(stderr, "delayq serve: --tls-handshake-timeout must be at least 1ms\n");
      return 2;
    }
    o.max_connections_given = max_connections->count() > 0;
    if (data_dir->count() > 0) {
      o.data_dir_given = OnCommandLine(argc, argv, "--data-dir") ? "--data-dir" : "DELAYQ_DATA_DIR";
    }
    return Serve(o);
  }
  if (client->Parsed()) return client->Run();
  return 2;
}
