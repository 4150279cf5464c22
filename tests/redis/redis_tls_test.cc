// rediss://: the Redis client layer over TLS against redis-server's TLS port
// (RedisServerOptions::tls; Redis 7 built with TLS), certificates from
// tests/testing/test_certs.h through the harness (TlsCertsDir). What a
// plaintext connection does must hold over TLS — pipelines, values larger
// than a TLS record both ways, a restart picked up, pub/sub, a cluster's
// nodes — and what only TLS can get wrong must fail in words and in bounded
// time: a CA that did not sign the server, a name the certificate does not
// carry, a missing client certificate, a server that never answers the
// handshake, plaintext on either side; and a server's last reply is read
// when its close comes right behind it.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "redis/client.h"
#include "redis/connection.h"
#include "redis/redis_harness.h"
#include "redis/subscriber.h"
#include "redis/url.h"
#include "testing/loopback_listener.h"

namespace delayq::redis {
namespace {

using redis_harness::ElapsedMs;
using redis_harness::RedisCluster;
using redis_harness::RedisServer;
using redis_harness::RedisServerOptions;
using redis_harness::WaitFor;

std::string Cert(const std::string& name) {
  Result<std::string> dir = redis_harness::TlsCertsDir();
  EXPECT_TRUE(dir.ok()) << dir.status().ToString();
  return dir.ok() ? *dir + "/" + name : name;
}

std::unique_ptr<RedisServer> StartTlsServer(std::string auth_clients = "no") {
  RedisServerOptions o;
  o.tls = true;
  o.tls_auth_clients = std::move(auth_clients);
  auto s = RedisServer::Start(std::move(o));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

// Trusts the test CA; a client certificate when `mutual`.
ClientOptions TlsClientOptions(bool mutual = false) {
  ClientOptions o;
  o.tls.ca_file = Cert("ca.pem");
  if (mutual) {
    o.tls.cert_file = Cert("client.pem");
    o.tls.key_file = Cert("client.key");
  }
  return o;
}

ConnectionOptions TlsConnectionOptions(const net::TlsOptions& tls) {
  ConnectionOptions o;
  auto ctx = net::TlsContext::Create(net::TlsContext::Role::kClient, tls);
  EXPECT_TRUE(ctx.ok()) << ctx.status().ToString();
  if (ctx.ok()) o.tls = std::move(ctx).value();
  return o;
}

Endpoint At(const RedisServer& server) { return Endpoint{server.host(), server.port()}; }

TEST(RedisTls, ConnectionPingsPipelinesAndMovesLargeValuesBothWays) {
  auto server = StartTlsServer();
  ASSERT_NE(server, nullptr);
  net::TlsOptions tls;
  tls.ca_file = Cert("ca.pem");
  auto conn = Connection::Open(At(*server), TlsConnectionOptions(tls));
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();

  auto pong = (*conn)->Exec({"PING"});
  ASSERT_TRUE(pong.ok()) << pong.status().ToString();
  EXPECT_EQ(pong->str(), "PONG");

  // 500 commands in one write, 500 replies that straddle TLS records.
  std::vector<Argv> cmds;
  for (int i = 0; i < 250; ++i) {
    cmds.push_back({"SET", "k" + std::to_string(i), std::string(100, 'a' + i % 26)});
    cmds.push_back({"GET", "k" + std::to_string(i)});
  }
  auto replies = (*conn)->ExecMany(cmds);
  ASSERT_TRUE(replies.ok()) << replies.status().ToString();
  ASSERT_EQ(replies->size(), cmds.size());
  for (size_t i = 1; i < replies->size(); i += 2) {
    EXPECT_EQ((*replies)[i].str(), cmds[i - 1][2]) << i;
  }

  // 3 MiB out and back: many TLS records, partial writes, a reply the
  // reader gets in pieces. Binary, with NULs and CRLFs inside.
  std::string big(3 * 1024 * 1024 + 17, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 131) % 251);
  big.replace(1000, 2, "\r\n");
  auto set = (*conn)->Exec(Argv{"SET", "big", big});
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  auto got = (*conn)->Exec({"GET", "big"});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got->str() == big) << "GET big: " << got->str().size() << " bytes";
  // The same connection, still in step after the large reply.
  auto after = (*conn)->Exec({"ECHO", "after"});
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->str(), "after");
}

TEST(RedisTls, ClientOnARedissUrlWorksAndPicksUpARestart) {
  auto server = StartTlsServer();
  ASSERT_NE(server, nullptr);
  ASSERT_EQ(server->url().rfind("rediss://", 0), 0u) << server->url();
  auto client = Client::Open(server->url(), TlsClientOptions());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_EQ((*client)->url(), server->url());
  ASSERT_NE((*client)->tls_context(), nullptr);
  auto set = (*client)->Exec("a", {"SET", "a", "1"});
  ASSERT_TRUE(set.ok()) << set.status().ToString();

  // Idle pooled connections have read the server's session tickets by now
  // (or will): they must not be taken for closed ones.
  for (int i = 0; i < 20; ++i) {
    auto r = (*client)->Exec("a", {"GET", "a"});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->str(), "1");
  }

  ASSERT_TRUE(server->Stop().ok());
  auto down = (*client)->Exec("a", {"GET", "a"});
  EXPECT_FALSE(down.ok());
  ASSERT_TRUE(server->Restart().ok());
  bool back = WaitFor([&] {
    auto r = (*client)->Exec("a", {"PING"});
    return r.ok() && r->str() == "PONG";
  });
  EXPECT_TRUE(back) << "no PONG over TLS after the restart";
}

TEST(RedisTls, ACaThatDidNotSignTheServerIsRefusedInWords) {
  auto server = StartTlsServer();
  ASSERT_NE(server, nullptr);
  ClientOptions o;
  o.tls.ca_file = Cert("other-ca.pem");
  auto client = Client::Open(server->url(), o);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), Code::kUnavailable);
  const std::string& m = client.status().message();
  // The server sends its chain (leaf, then the test CA): OpenSSL's words are
  // "self-signed certificate in certificate chain"; without the CA in the
  // chain, "unable to get local issuer certificate".
  EXPECT_NE(m.find("redis " + server->address() +
                   ": TLS handshake failed: certificate verify "
                   "failed: "),
            std::string::npos)
      << m;
}

TEST(RedisTls, ANameTheCertificateDoesNotCarryIsRefused) {
  auto server = StartTlsServer();
  ASSERT_NE(server, nullptr);
  // The certificate is for localhost and 127.0.0.1: both pass.
  for (const char* name : {"localhost", "127.0.0.1"}) {
    ClientOptions o = TlsClientOptions();
    o.connection.tls_server_name = name;
    auto ok = Client::Open(server->url(), o);
    EXPECT_TRUE(ok.ok()) << name << ": " << ok.status().ToString();
  }
  ClientOptions o = TlsClientOptions();
  o.connection.tls_server_name = "redis.example.com";
  auto client = Client::Open(server->url(), o);
  ASSERT_FALSE(client.ok());
  EXPECT_NE(client.status().message().find("certificate verify failed: hostname mismatch"),
            std::string::npos)
      << client.status().message();
  // An address the certificate does not name (checked against its IP SANs).
  o.connection.tls_server_name = "127.0.0.2";
  auto other = Client::Open(server->url(), o);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("certificate verify failed: IP address mismatch"),
            std::string::npos)
      << other.status().message();
}

TEST(RedisTls, MutualTlsNeedsTheClientCertificate) {
  auto server = StartTlsServer("yes");
  ASSERT_NE(server, nullptr);
  auto without = Client::Open(server->url(), TlsClientOptions(/*mutual=*/false));
  ASSERT_FALSE(without.ok());
  EXPECT_EQ(without.status().code(), Code::kUnavailable);
  EXPECT_NE(without.status().message().find("redis " + server->address()), std::string::npos)
      << without.status().message();
  // With TLS 1.3 the refusal comes after the client's handshake: as the
  // server's alert ("tlsv13 alert certificate required") when it is read
  // before the close, else as a close before any reply, with a hint.
  const std::string& m = without.status().message();
  EXPECT_TRUE(m.find("certificate required") != std::string::npos ||
              m.find("require a client certificate") != std::string::npos)
      << m;

  auto with = Client::Open(server->url(), TlsClientOptions(/*mutual=*/true));
  ASSERT_TRUE(with.ok()) << with.status().ToString();
  auto pong = (*with)->Exec("k", {"PING"});
  ASSERT_TRUE(pong.ok()) << pong.status().ToString();
  EXPECT_EQ(pong->str(), "PONG");
}

TEST(RedisTls, AServerThatNeverAnswersTheHandshakeFailsWithinTheBound) {
  // A listening socket nobody accepts on: the kernel completes the TCP
  // handshake, and the TLS hello waits for ever.
  int port = 0;
  int fd = testing_net::ListenOnLoopback(&port, 8);
  ASSERT_GE(fd, 0);

  net::TlsOptions tls;
  tls.ca_file = Cert("ca.pem");
  ConnectionOptions o = TlsConnectionOptions(tls);
  o.connect_timeout_ms = 200;
  o.command_timeout_ms = 300;
  auto start = std::chrono::steady_clock::now();
  auto conn = Connection::Open(Endpoint{"127.0.0.1", port}, o);
  const int64_t took = ElapsedMs(start);
  close(fd);
  ASSERT_FALSE(conn.ok());
  EXPECT_EQ(conn.status().code(), Code::kUnavailable);
  EXPECT_NE(conn.status().message().find("no answer to the TLS handshake within 500 ms"),
            std::string::npos)
      << conn.status().message();
  EXPECT_GE(took, 450);
  EXPECT_LT(took, 3000);
}

TEST(RedisTls, PlaintextOnEitherSideFailsClearlyAndPromptly) {
  // rediss:// to a plaintext Redis: it waits for the end of an inline
  // command that never comes; the handshake's bound ends it.
  auto plain = RedisServer::Start();
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  ClientOptions o = TlsClientOptions();
  o.connection.connect_timeout_ms = 300;
  o.connection.command_timeout_ms = 300;
  auto start = std::chrono::steady_clock::now();
  auto tls_to_plain = Client::Open("rediss://" + (*plain)->address(), o);
  ASSERT_FALSE(tls_to_plain.ok());
  EXPECT_LT(ElapsedMs(start), 3000);
  EXPECT_EQ(tls_to_plain.status().code(), Code::kUnavailable);
  const std::string& m1 = tls_to_plain.status().message();
  EXPECT_TRUE(m1.find("TLS handshake") != std::string::npos) << m1;

  // redis:// to a TLS Redis: it drops the connection at the first byte.
  auto server = StartTlsServer();
  ASSERT_NE(server, nullptr);
  ClientOptions p;
  p.connection.connect_timeout_ms = 300;
  p.connection.command_timeout_ms = 300;
  start = std::chrono::steady_clock::now();
  auto plain_to_tls = Client::Open("redis://" + server->address(), p);
  ASSERT_FALSE(plain_to_tls.ok());
  EXPECT_LT(ElapsedMs(start), 3000);
  EXPECT_EQ(plain_to_tls.status().code(), Code::kUnavailable);
  const std::string& m2 = plain_to_tls.status().message();
  EXPECT_NE(m2.find("its URL would be rediss://"), std::string::npos) << m2;
}

// A TLS server of one connection on a loopback port: it answers the first
// command "+PONG" and closes at once — with a close_notify, or with a bare
// FIN — as delayq's server does after a client's FIN (a cancelled waiting
// reserve) or on shutdown. Blocking, each step bounded by SO_RCVTIMEO.
class AnswerThenCloseServer {
 public:
  explicit AnswerThenCloseServer(bool close_notify) : close_notify_(close_notify) {
    net::TlsOptions o;
    o.cert_file = Cert("server.pem");
    o.key_file = Cert("server.key");
    auto ctx = net::TlsContext::Create(net::TlsContext::Role::kServer, o);
    EXPECT_TRUE(ctx.ok()) << ctx.status().ToString();
    if (ctx.ok()) ctx_ = std::move(ctx).value();
    listen_fd_ = testing_net::ListenOnLoopback(&port_, 8);
    EXPECT_GE(listen_fd_, 0);
    thread_ = std::thread([this] { Serve(); });
  }
  ~AnswerThenCloseServer() {
    Join();
    close(listen_fd_);
  }
  int port() const { return port_; }
  // Returns once the reply and the close are on their way.
  void Join() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Serve() {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0 || ctx_ == nullptr) return;
    timeval tv{5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    auto session = net::TlsSession::Accept(*ctx_, fd);
    if (session.ok() && (*session)->Handshake() == net::TlsIo::kDone) {
      std::string in;
      char buf[4096];
      size_t n = 0;
      while (!in.ends_with("PING\r\n") &&
             (*session)->Read(buf, sizeof buf, &n) == net::TlsIo::kDone) {
        in.append(buf, n);
      }
      (*session)->Write("+PONG\r\n", &n);
      if (close_notify_) (*session)->Shutdown();
    }
    close(fd);
  }

  const bool close_notify_;
  std::shared_ptr<net::TlsContext> ctx_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

// The last reply and the close arrive together, and the client reads them
// in one go: the reply is handed out, and the close shows on the next read
// (as on plaintext). A client that lost the reply to the close would not
// know that a waiting reserve it withdrew had been answered with jobs,
// which would then stay reserved for nobody until their TTR.
TEST(RedisTls, AReplyTheServerSendsRightBeforeClosingIsRead) {
  net::TlsOptions tls;
  tls.ca_file = Cert("ca.pem");
  for (bool close_notify : {true, false}) {
    for (bool read_some : {false, true}) {
      SCOPED_TRACE(std::string(close_notify ? "close_notify" : "a bare FIN") +
                   (read_some ? ", ReadSome" : ", Receive"));
      AnswerThenCloseServer server(close_notify);
      auto conn = Connection::Open(Endpoint{"127.0.0.1", server.port()}, TlsConnectionOptions(tls));
      ASSERT_TRUE(conn.ok()) << conn.status().ToString();
      ASSERT_TRUE((*conn)->Append({"PING"}).ok());
      ASSERT_TRUE((*conn)->Flush().ok());
      server.Join();  // the reply and the close are in the socket, unread
      std::vector<Reply> got;
      Status st = read_some ? (*conn)->ReadSome(&got) : (*conn)->Receive(1, &got);
      ASSERT_TRUE(st.ok()) << st.ToString();
      ASSERT_EQ(got.size(), 1u);
      EXPECT_EQ(got[0].str(), "PONG");
      EXPECT_EQ((*conn)->pending(), 0u);
      // Then the close, from the next read on.
      st = (*conn)->ReadSome(&got);
      EXPECT_EQ(st.code(), Code::kUnavailable) << st.ToString();
      EXPECT_NE(st.message().find("Server closed the connection"), std::string::npos)
          << st.ToString();
      EXPECT_EQ((*conn)->last_failure(), Connection::Failure::kClosed);
      EXPECT_FALSE((*conn)->connected());
      EXPECT_EQ(got.size(), 1u);
    }
  }
}

TEST(RedisTls, ATlsContextWithAPlaintextUrlOrABadCaFileIsAnInvalidArgument) {
  ClientOptions with_context;
  with_context.connection = TlsConnectionOptions(net::TlsOptions{});
  auto a = Client::Open("redis://127.0.0.1:1", with_context);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), Code::kInvalidArgument) << a.status().ToString();

  ClientOptions missing;
  missing.tls.ca_file = "/nonexistent/ca.pem";
  auto b = Client::Open("rediss://127.0.0.1:1", missing);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), Code::kInvalidArgument) << b.status().ToString();
  EXPECT_NE(b.status().message().find("/nonexistent/ca.pem"), std::string::npos)
      << b.status().ToString();
}

TEST(RedisTls, SubscriberReceivesOverTls) {
  auto server = StartTlsServer();
  ASSERT_NE(server, nullptr);
  auto client = Client::Open(server->url(), TlsClientOptions());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  std::mutex mu;
  std::vector<std::string> got;
  std::atomic<int> connects{0};
  SubscriberOptions so;
  so.connection.tls = (*client)->tls_context();
  so.health_check_interval_ms = 100;  // PINGs and PONGs over TLS too
  auto sub = Subscriber::Start(
      server->url(), {"ch"},
      [&](std::string_view, std::string_view m) {
        std::lock_guard lock(mu);
        got.emplace_back(m);
      },
      [&] { ++connects; }, so);
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  ASSERT_TRUE(WaitFor([&] { return (*sub)->connected(); }));
  std::string big(100 * 1024, 'm');  // a message over several records
  for (const std::string& m : {std::string("one"), big, std::string("three")}) {
    auto r = (*client)->Exec("ch", {"PUBLISH", "ch", m});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard lock(mu);
    return got.size() == 3;
  }));
  std::lock_guard lock(mu);
  EXPECT_EQ(got[0], "one");
  EXPECT_EQ(got[1], big);
  EXPECT_EQ(got[2], "three");
  EXPECT_EQ(connects.load(), 1) << "a health-check PING over TLS was taken for a failure";
}

TEST(RedisTls, EveryNodeOfATlsClusterIsReachedOverTls) {
  RedisServerOptions o;
  o.tls = true;
  auto cluster = RedisCluster::Start(3, o);
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  // One seed: the other masters are learned from CLUSTER SLOTS.
  const std::string seed = "rediss://" + (*cluster)->node(0).address();
  auto client = Client::Open(seed, TlsClientOptions());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  ASSERT_TRUE((*client)->cluster());
  EXPECT_EQ((*client)->Masters().size(), 3u);
  std::vector<Command> cmds;
  for (int i = 0; i < 60; ++i) {
    std::string key = "key" + std::to_string(i);
    cmds.push_back(Command{.key = key, .argv = {"SET", key, std::to_string(i)}});
  }
  for (auto& r : (*client)->ExecBatch(cmds)) ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (int i = 0; i < 60; ++i) {
    std::string key = "key" + std::to_string(i);
    auto r = (*client)->Exec(key, {"GET", key});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->str(), std::to_string(i));
  }
  for (auto& [node, r] : (*client)->ExecOnEachMaster({"DBSIZE"})) {
    ASSERT_TRUE(r.ok()) << node.ToString() << ": " << r.status().ToString();
    EXPECT_GT(r->integer(), 0) << node.ToString() << " got none of the keys";
  }
}

}  // namespace
}  // namespace delayq::redis
