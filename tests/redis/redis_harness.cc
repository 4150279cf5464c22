// Processes are started with fork + execvp (the child sets PR_SET_PDEATHSIG
// first, so a dying test takes its servers along) and reaped with waitpid.
// Talking to a server for set-up and checks goes through hiredis directly,
// not through src/redis, so the harness does not lean on the code it tests
// (over TLS too: OpenSSL directly, blocking, with hiredis's reply reader).
#include "redis/redis_harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>

#include "testing/poll.h"
#include "testing/test_certs.h"

namespace delayq::redis_harness {

int64_t ElapsedMs(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               since)
      .count();
}

bool WaitFor(const std::function<bool()>& done, int timeout_ms) {
  return PollUntil(done, std::chrono::milliseconds(timeout_ms), std::chrono::milliseconds(2));
}
namespace {

using redis::Reply;

std::string Binary(const char* env, const char* fallback) {
  const char* v = std::getenv(env);
  return v != nullptr && *v != '\0' ? v : fallback;
}

// "%XX" for every byte but RFC 3986's unreserved ones: safe in a URL's userinfo.
std::string PercentEncode(const std::string& text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// A port nobody listens on now: bind 127.0.0.1:0 and read what the kernel chose.
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

// fork + execvp `args`, stdin from /dev/null, stdout and stderr to `log`
// (or /dev/null when empty). The child dies with the thread that forked it.
pid_t Spawn(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const char* out_path = log.empty() ? "/dev/null" : log.c_str();
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid != 0) return pid;  // parent (or -1)
  // Child: async-signal-safe calls only until exec.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);
  int in = open("/dev/null", O_RDONLY);
  int out = open(out_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (in >= 0) dup2(in, 0);
  if (out >= 0) {
    dup2(out, 1);
    dup2(out, 2);
  }
  execvp(argv[0], argv.data());
  _exit(127);
}

// Waits for `pid` to exit within `timeout_ms`; its exit status, or nullopt.
std::optional<int> WaitExit(pid_t pid, int timeout_ms) {
  std::optional<int> exit;
  PollUntil(
      [&] {
        int status = 0;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) exit = status;
        if (r < 0) exit = -1;  // not our child any more
        return exit.has_value();
      },
      std::chrono::milliseconds(timeout_ms), std::chrono::milliseconds(5));
  return exit;
}

Reply Convert(const redisReply* r) {
  switch (r->type) {
    case REDIS_REPLY_STRING:
      return Reply::String(std::string(r->str, r->len));
    case REDIS_REPLY_STATUS:
      return Reply::Status(std::string(r->str, r->len));
    case REDIS_REPLY_ERROR:
      return Reply::Error(std::string(r->str, r->len));
    case REDIS_REPLY_INTEGER:
      return Reply::Integer(r->integer);
    case REDIS_REPLY_ARRAY: {
      std::vector<Reply> e;
      for (size_t i = 0; i < r->elements; ++i) e.push_back(Convert(r->element[i]));
      return Reply::Array(std::move(e));
    }
    default:
      return Reply::Nil();
  }
}

// What to send for `cmds`: RESP, as hiredis formats it.
std::string Format(const std::vector<std::vector<std::string>>& cmds) {
  std::string out;
  for (const auto& cmd : cmds) {
    std::vector<const char*> p;
    std::vector<size_t> l;
    for (const std::string& a : cmd) {
      p.push_back(a.data());
      l.push_back(a.size());
    }
    char* raw = nullptr;
    int n = redisFormatCommandArgv(&raw, static_cast<int>(p.size()), p.data(), l.data());
    if (n > 0) out.append(raw, static_cast<size_t>(n));
    redisFreeCommand(raw);
  }
  return out;
}

// The harness's TLS client context: the test CA, and the client
// certificate (so servers with --tls-auth-clients yes answer it too).
SSL_CTX* HarnessTlsContext(std::string* error) {
  static std::mutex mu;
  static SSL_CTX* ctx = nullptr;
  std::lock_guard lock(mu);
  if (ctx != nullptr) return ctx;
  Result<std::string> dir = TlsCertsDir();
  if (!dir.ok()) {
    *error = dir.status().message();
    return nullptr;
  }
  SSL_CTX* c = SSL_CTX_new(TLS_client_method());
  if (c == nullptr || SSL_CTX_load_verify_locations(c, (*dir + "/ca.pem").c_str(), nullptr) != 1 ||
      SSL_CTX_use_certificate_chain_file(c, (*dir + "/client.pem").c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(c, (*dir + "/client.key").c_str(), SSL_FILETYPE_PEM) != 1) {
    *error = "cannot set up the harness's TLS context";
    SSL_CTX_free(c);
    return nullptr;
  }
  SSL_CTX_set_verify(c, SSL_VERIFY_PEER, nullptr);
  ctx = c;
  return ctx;
}

// `cmds` over a fresh blocking TLS connection: their last reply.
Result<Reply> RunTlsCommands(int port, const std::vector<std::vector<std::string>>& cmds) {
  const std::string where = "127.0.0.1:" + std::to_string(port);
  std::string error;
  SSL_CTX* ctx = HarnessTlsContext(&error);
  if (ctx == nullptr) return Internal(error);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Unavailable(where + ": socket failed");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    std::string why = std::strerror(errno);
    close(fd);
    return Unavailable(where + ": " + why);
  }
  SSL* ssl = SSL_new(ctx);
  redisReader* reader = redisReaderCreate();
  auto done = [&](Result<Reply> r) {
    redisReaderFree(reader);
    SSL_free(ssl);
    close(fd);
    ERR_clear_error();
    return r;
  };
  SSL_set_fd(ssl, fd);
  if (SSL_connect(ssl) != 1) return done(Unavailable(where + ": TLS handshake failed"));
  const std::string out = Format(cmds);
  if (SSL_write(ssl, out.data(), static_cast<int>(out.size())) != static_cast<int>(out.size())) {
    return done(Unavailable(where + ": TLS write failed"));
  }
  Reply last;
  for (size_t i = 0; i < cmds.size(); ++i) {
    void* raw = nullptr;
    for (;;) {
      if (redisReaderGetReply(reader, &raw) != REDIS_OK) {
        return done(Unavailable(where + ": bad reply"));
      }
      if (raw != nullptr) break;
      char buf[16384];
      int n = SSL_read(ssl, buf, sizeof buf);
      if (n <= 0) return done(Unavailable(where + ": connection lost (TLS)"));
      redisReaderFeed(reader, buf, static_cast<size_t>(n));
    }
    last = Convert(static_cast<redisReply*>(raw));
    freeReplyObject(raw);
  }
  return done(last);
}

// One command on a fresh hiredis connection, AUTH first if `password`.
Result<Reply> RunCommand(int port, const std::string& password, bool tls,
                         const std::vector<std::string>& argv) {
  if (tls) {
    std::vector<std::vector<std::string>> cmds;
    if (!password.empty()) cmds.push_back({"AUTH", password});
    cmds.push_back(argv);
    return RunTlsCommands(port, cmds);
  }
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port, timeval{1, 0});
  if (c == nullptr || c->err != 0) {
    std::string why = c != nullptr ? c->errstr : "out of memory";
    if (c != nullptr) redisFree(c);
    return Unavailable("127.0.0.1:" + std::to_string(port) + ": " + why);
  }
  redisSetTimeout(c, timeval{10, 0});
  std::vector<std::vector<std::string>> cmds;
  if (!password.empty()) cmds.push_back({"AUTH", password});
  cmds.push_back(argv);
  Reply last;
  for (const auto& cmd : cmds) {
    std::vector<const char*> p;
    std::vector<size_t> l;
    for (const std::string& a : cmd) {
      p.push_back(a.data());
      l.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(p.size()), p.data(), l.data()));
    if (r == nullptr) {
      std::string why = c->errstr;
      redisFree(c);
      return Unavailable("127.0.0.1:" + std::to_string(port) + ": " + why);
    }
    last = Convert(r);
    freeReplyObject(r);
  }
  redisFree(c);
  return last;
}

Status Expect(const Result<Reply>& r, const std::string& what) {
  if (!r.ok()) return Internal(what + ": " + r.status().message());
  if (r->is_error()) return Internal(what + ": -" + r->str());
  return Status::Ok();
}

// CLUSTER SLOTS as "start-end@port" sorted: comparable across nodes.
std::string SlotsSummary(const Reply& slots) {
  std::vector<std::string> parts;
  if (!slots.is_array()) return slots.ToString();
  for (const Reply& e : slots.elements()) {
    if (!e.is_array() || e.elements().size() < 3 || !e.elements()[2].is_array() ||
        e.elements()[2].elements().size() < 2) {
      return slots.ToString();
    }
    parts.push_back(std::to_string(e.elements()[0].integer()) + "-" +
                    std::to_string(e.elements()[1].integer()) + "@" +
                    std::to_string(e.elements()[2].elements()[1].integer()));
  }
  std::sort(parts.begin(), parts.end());
  std::string out;
  for (const std::string& p : parts) out += p + " ";
  return out;
}

// redis-cli's arguments for a TLS server: the test CA and client certificate.
std::vector<std::string> CliTlsArgs() {
  Result<std::string> dir = TlsCertsDir();
  if (!dir.ok()) return {};
  return {"--tls", "--cacert",          *dir + "/ca.pem", "--cert", *dir + "/client.pem",
          "--key", *dir + "/client.key"};
}

}  // namespace

Result<std::string> TlsCertsDir() {
  static std::mutex mu;
  static std::unique_ptr<TestCerts> certs;  // removed at exit
  std::lock_guard lock(mu);
  if (!certs) {
    Result<std::unique_ptr<TestCerts>> made = TestCerts::Make();
    if (!made.ok()) return made.status();
    certs = std::move(made).value();
  }
  return certs->dir();
}

// ---------------------------------------------------------------------------
// RedisServer

Result<std::unique_ptr<RedisServer>> RedisServer::Start(RedisServerOptions options) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/delayq-redis-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) return Internal("mkdtemp " + pattern + " failed");
  std::unique_ptr<RedisServer> server(new RedisServer(std::move(options), pattern));
  Status last;
  for (int attempt = 0; attempt < 5; ++attempt) {
    server->port_ = FreePort();
    if (server->options_.cluster) {
      do {
        server->cluster_port_ = FreePort();
      } while (server->cluster_port_ == server->port_);
    }
    last = server->Launch();
    if (last.ok()) return server;
    // Most likely the port was taken between FreePort and the bind: try another.
  }
  return last;
}

RedisServer::~RedisServer() {
  (void)Stop();
  if (std::getenv("DELAYQ_KEEP_REDIS_DIRS") == nullptr) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

std::string RedisServer::address() const { return "127.0.0.1:" + std::to_string(port_); }

std::string RedisServer::url() const {
  std::string auth = options_.password.empty() ? "" : ":" + PercentEncode(options_.password) + "@";
  return (options_.tls ? "rediss://" : "redis://") + auth + address();
}

Status RedisServer::Launch() {
  std::vector<std::string> args = {Binary("DELAYQ_REDIS_SERVER", "redis-server"),
                                   "--port",
                                   std::to_string(port_),
                                   "--bind",
                                   "127.0.0.1",
                                   "--dir",
                                   dir_,
                                   "--logfile",
                                   dir_ + "/redis.log",
                                   "--save",
                                   "",
                                   "--daemonize",
                                   "no",
                                   "--appendonly",
                                   options_.append_only ? "yes" : "no"};
  if (options_.tls) {
    Result<std::string> certs = TlsCertsDir();
    if (!certs.ok()) return certs.status();
    args[2] = "0";  // no plaintext port
    args.insert(args.end(),
                {"--tls-port", std::to_string(port_), "--tls-cert-file", *certs + "/server.pem",
                 "--tls-key-file", *certs + "/server.key", "--tls-ca-cert-file", *certs + "/ca.pem",
                 "--tls-auth-clients", options_.tls_auth_clients});
    if (options_.cluster) args.insert(args.end(), {"--tls-cluster", "yes"});
    if (options_.replica_of != 0) args.insert(args.end(), {"--tls-replication", "yes"});
  }
  if (!options_.password.empty() && !options_.sentinel) {
    args.insert(args.end(),
                {"--requirepass", options_.password, "--masterauth", options_.password});
  }
  if (options_.cluster) {
    args.insert(args.end(), {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                             "--cluster-port", std::to_string(cluster_port_)});
  }
  // A replica that connects is sent the data at once, not after 5 s.
  args.insert(args.end(), {"--repl-diskless-sync-delay", "0"});
  if (options_.replica_of != 0) {
    args.insert(args.end(), {"--replicaof", "127.0.0.1", std::to_string(options_.replica_of)});
  }
  if (options_.sentinel) {
    // Written once: a restart keeps what the sentinel learned (it rewrites the file).
    const std::string conf = dir_ + "/sentinel.conf";
    if (!std::filesystem::exists(conf)) {
      const RedisServerOptions::Sentinel& st = *options_.sentinel;
      std::ofstream out(conf);
      out << "sentinel monitor " << st.name << " 127.0.0.1 " << st.master_port << " " << st.quorum
          << "\n"
          << "sentinel down-after-milliseconds " << st.name << " " << st.down_after_ms << "\n"
          << "sentinel failover-timeout " << st.name << " " << st.failover_timeout_ms << "\n";
      if (!options_.password.empty()) {
        out << "sentinel auth-pass " << st.name << " " << options_.password << "\n";
      }
      if (!out) return Internal("cannot write " + conf);
    }
    args.insert(args.begin() + 1, {conf, "--sentinel"});
  }
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
  pid_ = Spawn(args, "");
  if (pid_ < 0) {
    pid_ = -1;
    return Internal("fork failed");
  }
  return WaitForPing();
}

Status RedisServer::WaitForPing() {
  bool exited = false;
  bool up = false;
  Result<Reply> pong = Internal("not polled");
  PollUntil(
      [&] {
        int status = 0;
        exited = waitpid(pid_, &status, WNOHANG) == pid_;
        if (exited) return true;
        // PONG (not -LOADING), from our process (INFO's process_id), not from
        // another server that won the port.
        pong = Command({"PING"});
        if (pong.ok() && pong->is_status() && pong->str() == "PONG") {
          Result<Reply> info = Command({"INFO", "server"});
          up = info.ok() && info->is_string() &&
               info->str().find("process_id:" + std::to_string(pid_) + "\r") != std::string::npos;
          if (!up)
            pong = Internal("port " + std::to_string(port_) + " is answered by another process");
        }
        return up;
      },
      std::chrono::milliseconds(options_.start_timeout_ms), std::chrono::milliseconds(10));
  if (up) return Status::Ok();
  if (exited) {
    pid_ = -1;
    return Internal("redis-server on port " + std::to_string(port_) +
                    " exited while starting; its log ends: " + LogTail());
  }
  std::string why = pong.ok() ? pong->ToString() : pong.status().message();
  (void)Stop(1000);
  return Internal("redis-server on port " + std::to_string(port_) + " did not answer PING in " +
                  std::to_string(options_.start_timeout_ms) + " ms (" + why +
                  "); its log ends: " + LogTail());
}

std::string RedisServer::LogTail() const {
  std::ifstream in(dir_ + "/redis.log");
  std::stringstream all;
  all << in.rdbuf();
  std::string s = all.str();
  return s.size() > 1500 ? s.substr(s.size() - 1500) : s;
}

Status RedisServer::Stop(int timeout_ms) {
  if (pid_ <= 0) return Status::Ok();
  kill(pid_, SIGCONT);  // in case it is paused
  kill(pid_, SIGTERM);
  if (!WaitExit(pid_, timeout_ms)) {
    kill(pid_, SIGKILL);
    (void)WaitExit(pid_, 10000);
  }
  pid_ = -1;
  return Status::Ok();
}

Status RedisServer::Kill() {
  if (pid_ <= 0) return Status::Ok();
  kill(pid_, SIGKILL);
  (void)WaitExit(pid_, 10000);
  pid_ = -1;
  return Status::Ok();
}

Status RedisServer::Restart() {
  if (running())
    return Internal("Restart: redis-server on port " + std::to_string(port_) + " is still running");
  return Launch();
}

Status RedisServer::Pause() {
  if (pid_ <= 0 || kill(pid_, SIGSTOP) != 0) return Internal("Pause: not running");
  return Status::Ok();
}

Status RedisServer::Resume() {
  if (pid_ <= 0 || kill(pid_, SIGCONT) != 0) return Internal("Resume: not running");
  return Status::Ok();
}

Status RedisServer::WaitForReplicas(int n, int timeout_ms) const {
  (void)Command({"SET", "delayq-harness:replica-probe", "1"});
  std::string problem;
  bool ok = PollUntil(
      [&] {
        Result<Reply> info = Command({"INFO", "replication"});
        if (!info.ok() || !info->is_string()) {
          problem = "no INFO replication";
          return false;
        }
        const std::string& text = info->str();
        auto number_after = [&](const std::string& key, size_t from) -> int64_t {
          size_t at = text.find(key, from);
          return at == std::string::npos ? -1 : std::atoll(text.c_str() + at + key.size());
        };
        const int64_t offset = number_after("master_repl_offset:", 0);
        int caught_up = 0;
        for (size_t at = text.find("state=online"); at != std::string::npos;
             at = text.find("state=online", at + 1)) {
          if (number_after("offset=", at) >= offset) ++caught_up;
        }
        problem = std::to_string(caught_up) + " of " + std::to_string(n) +
                  " replicas online and caught up with offset " + std::to_string(offset);
        return caught_up >= n;
      },
      std::chrono::milliseconds(timeout_ms), std::chrono::milliseconds(10));
  return ok ? Status::Ok() : Internal(address() + ": " + problem);
}

Result<Reply> RedisServer::Command(const std::vector<std::string>& argv) const {
  return RunCommand(port_, options_.password, options_.tls, argv);
}

// ---------------------------------------------------------------------------
// RedisPair

Result<RedisPair> RedisPair::Start(RedisServerOptions options) {
  RedisPair pair;
  Result<std::unique_ptr<RedisServer>> master = RedisServer::Start(options);
  if (!master.ok()) return master.status();
  pair.master = std::move(*master);
  options.replica_of = pair.master->port();
  Result<std::unique_ptr<RedisServer>> replica = RedisServer::Start(options);
  if (!replica.ok()) return replica.status();
  pair.replica = std::move(*replica);
  if (Status s = pair.master->WaitForReplicas(1); !s.ok()) return s;
  return pair;
}

// ---------------------------------------------------------------------------
// RedisCluster

Result<std::unique_ptr<RedisCluster>> RedisCluster::Start(int masters, RedisServerOptions options,
                                                          int replicas) {
  options.cluster = true;
  std::unique_ptr<RedisCluster> cluster(new RedisCluster());
  for (int i = 0; i < masters * (1 + replicas); ++i) {
    Result<std::unique_ptr<RedisServer>> s = RedisServer::Start(options);
    if (!s.ok()) return s.status();
    cluster->nodes_.push_back(std::move(*s));
  }
  std::vector<std::string> args = {Binary("DELAYQ_REDIS_CLI", "redis-cli"), "--cluster", "create"};
  for (const auto& n : cluster->nodes_) args.push_back(n->address());
  args.insert(args.end(), {"--cluster-replicas", std::to_string(replicas), "--cluster-yes"});
  if (!options.password.empty())
    args.insert(args.end(), {"-a", options.password, "--no-auth-warning"});
  if (options.tls) {
    std::vector<std::string> tls = CliTlsArgs();
    args.insert(args.end(), tls.begin(), tls.end());
  }
  std::string log = cluster->nodes_[0]->dir() + "/cluster-create.log";
  pid_t pid = Spawn(args, log);
  if (pid < 0) return Internal("fork failed");
  std::optional<int> status = WaitExit(pid, 30000);
  if (!status) {
    kill(pid, SIGKILL);
    (void)WaitExit(pid, 10000);
  }
  if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    return Internal("redis-cli --cluster create failed: " + text.str());
  }
  if (Status s = cluster->WaitHealthy(); !s.ok()) return s;
  if (replicas > 0) {
    if (Status s = cluster->WaitReplicas(replicas); !s.ok()) return s;
  }
  return cluster;
}

Result<bool> RedisCluster::IsMaster(size_t i) {
  Result<Reply> role = nodes_[i]->Command({"ROLE"});
  if (Status s = Expect(role, "ROLE"); !s.ok()) return s;
  return role->is_array() && !role->elements().empty() && role->elements()[0].str() == "master";
}

Status RedisCluster::WaitReplicas(int replicas, int timeout_ms) {
  auto began = std::chrono::steady_clock::now();
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (!nodes_[i]->running()) continue;
    Result<bool> master = IsMaster(i);
    if (!master.ok()) return master.status();
    if (!*master) continue;
    int left = std::max<int>(0, timeout_ms - static_cast<int>(ElapsedMs(began)));
    if (Status s = nodes_[i]->WaitForReplicas(replicas, left); !s.ok()) {
      return Internal("replicas not online: " + s.message());
    }
  }
  return Status::Ok();
}

std::string RedisCluster::url() const {
  const std::string& pw = nodes_[0]->options().password;
  std::string out = (nodes_[0]->options().tls ? "rediss://" : "redis://") +
                    (pw.empty() ? "" : ":" + PercentEncode(pw) + "@");
  for (size_t i = 0; i < nodes_.size(); ++i) out += (i > 0 ? "," : "") + nodes_[i]->address();
  return out;
}

Status RedisCluster::WaitHealthy(int timeout_ms) {
  std::string problem;
  bool healthy = PollUntil(
      [&] {
        problem.clear();
        std::string first_slots;
        for (size_t i = 0; i < nodes_.size() && problem.empty(); ++i) {
          if (!nodes_[i]->running()) continue;
          Result<Reply> info = nodes_[i]->Command({"CLUSTER", "INFO"});
          if (!info.ok() || !info->is_string() ||
              info->str().find("cluster_state:ok") == std::string::npos) {
            problem = "node " + std::to_string(i) + " is not cluster_state:ok";
            break;
          }
          Result<Reply> slots = nodes_[i]->Command({"CLUSTER", "SLOTS"});
          if (!slots.ok()) {
            problem = "node " + std::to_string(i) + ": " + slots.status().message();
            break;
          }
          std::string summary = SlotsSummary(*slots);
          if (first_slots.empty()) {
            first_slots = summary;
          } else if (summary != first_slots) {
            problem = "slot maps differ: '" + first_slots + "' vs node " + std::to_string(i) +
                      " '" + summary + "'";
          }
        }
        return problem.empty();
      },
      std::chrono::milliseconds(timeout_ms), std::chrono::milliseconds(20));
  return healthy ? Status::Ok() : Internal("cluster not healthy: " + problem);
}

Result<std::string> RedisCluster::NodeId(size_t i) {
  Result<Reply> r = nodes_[i]->Command({"CLUSTER", "MYID"});
  if (Status s = Expect(r, "CLUSTER MYID"); !s.ok()) return s;
  return r->str();
}

Result<size_t> RedisCluster::OwnerOf(int slot, size_t ask) {
  Result<Reply> r = nodes_[ask]->Command({"CLUSTER", "SLOTS"});
  if (Status s = Expect(r, "CLUSTER SLOTS"); !s.ok()) return s;
  for (const Reply& e : r->elements()) {
    if (e.elements()[0].integer() <= slot && slot <= e.elements()[1].integer()) {
      int64_t port = e.elements()[2].elements()[1].integer();
      for (size_t i = 0; i < nodes_.size(); ++i) {
        if (nodes_[i]->port() == port) return i;
      }
    }
  }
  return Internal("no node serves slot " + std::to_string(slot));
}

Status RedisCluster::BeginMigration(int slot, size_t from, size_t to) {
  Result<std::string> from_id = NodeId(from);
  Result<std::string> to_id = NodeId(to);
  if (!from_id.ok()) return from_id.status();
  if (!to_id.ok()) return to_id.status();
  std::string s = std::to_string(slot);
  if (Status st = Expect(nodes_[to]->Command({"CLUSTER", "SETSLOT", s, "IMPORTING", *from_id}),
                         "SETSLOT IMPORTING");
      !st.ok()) {
    return st;
  }
  return Expect(nodes_[from]->Command({"CLUSTER", "SETSLOT", s, "MIGRATING", *to_id}),
                "SETSLOT MIGRATING");
}

Status RedisCluster::MigrateKeys(int slot, size_t from, size_t to,
                                 const std::vector<std::string>& keys) {
  std::vector<std::string> move = keys;
  if (move.empty()) {
    Result<Reply> r =
        nodes_[from]->Command({"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), "100000"});
    if (Status s = Expect(r, "CLUSTER GETKEYSINSLOT"); !s.ok()) return s;
    for (const Reply& k : r->elements()) move.push_back(k.str());
  }
  if (move.empty()) return Status::Ok();
  std::vector<std::string> argv = {"MIGRATE", "127.0.0.1", std::to_string(nodes_[to]->port()),
                                   "",        "0",         "5000"};
  const std::string& pw = nodes_[from]->options().password;
  if (!pw.empty()) argv.insert(argv.end(), {"AUTH", pw});
  argv.push_back("KEYS");
  argv.insert(argv.end(), move.begin(), move.end());
  return Expect(nodes_[from]->Command(argv), "MIGRATE");
}

Status RedisCluster::FinishMigration(int slot, size_t to) {
  Result<std::string> to_id = NodeId(to);
  if (!to_id.ok()) return to_id.status();
  // The importing node first (it takes the slot and bumps its epoch), then the rest.
  std::vector<size_t> order = {to};
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (i != to) order.push_back(i);
  }
  for (size_t i : order) {
    if (!nodes_[i]->running()) continue;
    Status s =
        Expect(nodes_[i]->Command({"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", *to_id}),
               "SETSLOT NODE on node " + std::to_string(i));
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

Status RedisCluster::MoveSlot(int slot, size_t from, size_t to) {
  if (Status s = BeginMigration(slot, from, to); !s.ok()) return s;
  if (Status s = MigrateKeys(slot, from, to); !s.ok()) return s;
  if (Status s = FinishMigration(slot, to); !s.ok()) return s;
  return WaitHealthy();
}

}  // namespace delayq::redis_harness
