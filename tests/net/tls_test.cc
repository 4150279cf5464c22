// TlsContext and TlsSession (src/net/tls.h) with certificates made by
// `openssl` in the test (tests/testing/test_certs.h): both ends of a
// non-blocking socket pair in one thread, each step driven until both sides
// are done or one fails, so nothing waits on time. Checks what a listener and
// a connecting client rely on: a handshake and data both ways, a FIN without
// a close_notify taken for the end of input, the server's name and CA
// checked, mutual TLS required, optional and refused, plaintext on a TLS port
// named as such, protocols narrowed, and files that are wrong.
#include "net/tls.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <utility>

#include "testing/test_certs.h"

namespace delayq::net {
namespace {

// Two connected non-blocking sockets, closed with the object.
struct SocketPair {
  SocketPair() {
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) == 0) {
      server = fds[0];
      client = fds[1];
    }
  }
  SocketPair(SocketPair&& o) noexcept
      : server(std::exchange(o.server, -1)), client(std::exchange(o.client, -1)) {}
  SocketPair& operator=(SocketPair&&) = delete;
  ~SocketPair() {
    if (server >= 0) close(server);
    if (client >= 0) close(client);
  }
  int server = -1;
  int client = -1;
};

class TlsTest : public testing::Test {
 protected:
  void SetUp() override {
    auto certs = TestCerts::Make();
    ASSERT_TRUE(certs.ok()) << certs.status().ToString();
    certs_ = std::move(*certs);
  }

  TlsOptions ServerOptions() const {
    TlsOptions o;
    o.cert_file = certs_->Path("server.pem");
    o.key_file = certs_->Path("server.key");
    return o;
  }
  TlsOptions ClientOptions() const {
    TlsOptions o;
    o.ca_file = certs_->Path("ca.pem");
    return o;
  }
  std::shared_ptr<TlsContext> Context(TlsContext::Role role, const TlsOptions& o) {
    auto ctx = TlsContext::Create(role, o);
    EXPECT_TRUE(ctx.ok()) << ctx.status().ToString();
    return ctx.ok() ? *ctx : nullptr;
  }

  // Both handshakes, alternately, until both are done or one fails.
  struct Outcome {
    TlsIo server = TlsIo::kWantRead;
    TlsIo client = TlsIo::kWantRead;
  };
  static Outcome Shake(TlsSession& server, TlsSession& client) {
    Outcome o;
    for (int i = 0; i < 100; ++i) {
      if (o.client != TlsIo::kDone && o.client != TlsIo::kError) o.client = client.Handshake();
      if (o.server != TlsIo::kDone && o.server != TlsIo::kError) o.server = server.Handshake();
      const bool settled = (o.server == TlsIo::kDone || o.server == TlsIo::kError) &&
                           (o.client == TlsIo::kDone || o.client == TlsIo::kError);
      if (settled || o.server == TlsIo::kClosed || o.client == TlsIo::kClosed) break;
      if (o.server == TlsIo::kError && o.client != TlsIo::kDone) {
        // The client learns of the refusal on its next read.
        o.client = client.Handshake();
        break;
      }
    }
    return o;
  }

  // A server and a client session on a socket pair of their own.
  struct Pair {
    SocketPair sockets;
    std::unique_ptr<TlsSession> server;
    std::unique_ptr<TlsSession> client;
  };
  static Pair Sessions(const TlsContext& server_ctx, const TlsContext& client_ctx,
                       const std::string& name = "localhost") {
    Pair p;
    auto s = TlsSession::Accept(server_ctx, p.sockets.server);
    auto c = TlsSession::Connect(client_ctx, p.sockets.client, name);
    EXPECT_TRUE(s.ok() && c.ok());
    if (s.ok()) p.server = std::move(*s);
    if (c.ok()) p.client = std::move(*c);
    return p;
  }

  std::unique_ptr<TestCerts> certs_;
};

TEST_F(TlsTest, AHandshakeThenDataBothWays) {
  auto server_ctx = Context(TlsContext::Role::kServer, ServerOptions());
  auto client_ctx = Context(TlsContext::Role::kClient, ClientOptions());
  ASSERT_TRUE(server_ctx && client_ctx);
  EXPECT_NE(server_ctx->certificate_summary().find("CN=localhost"), std::string::npos)
      << server_ctx->certificate_summary();
  auto [sockets, server, client] = Sessions(*server_ctx, *client_ctx);
  Outcome o = Shake(*server, *client);
  ASSERT_EQ(o.server, TlsIo::kDone) << server->error();
  ASSERT_EQ(o.client, TlsIo::kDone) << client->error();
  EXPECT_EQ(client->protocol(), "TLSv1.3");

  size_t n = 0;
  ASSERT_EQ(client->Write("PING\r\n", &n), TlsIo::kDone);
  EXPECT_EQ(n, 6u);
  char buf[1 << 16];
  ASSERT_EQ(server->Read(buf, sizeof buf, &n), TlsIo::kDone) << server->error();
  EXPECT_EQ(std::string_view(buf, n), "PING\r\n");
  ASSERT_EQ(server->Write("+PONG\r\n", &n), TlsIo::kDone);
  ASSERT_EQ(client->Read(buf, sizeof buf, &n), TlsIo::kDone);
  EXPECT_EQ(std::string_view(buf, n), "+PONG\r\n");
  // Nothing more there: not an error, a wait.
  EXPECT_EQ(client->Read(buf, sizeof buf, &n), TlsIo::kWantRead);
  EXPECT_EQ(n, 0u);

  server->Shutdown();
  EXPECT_EQ(client->Read(buf, sizeof buf, &n), TlsIo::kClosed);
}

// A FIN without a close_notify once the handshake is done (a client leaving
// a waiting reserve, `nc -q0`) ends the peer's input after what it sent, as
// on plaintext: the request before it is read, the end is kClosed (OpenSSL
// 3 alone would fail the session and send a decode_error alert), and the
// reply still goes out. The other way round too: a server that answers and
// closes without a close_notify has closed, it has not failed.
TEST_F(TlsTest, AFinWithoutCloseNotifyEndsTheInputAfterWhatCameBefore) {
  auto server_ctx = Context(TlsContext::Role::kServer, ServerOptions());
  auto client_ctx = Context(TlsContext::Role::kClient, ClientOptions());
  ASSERT_TRUE(server_ctx && client_ctx);
  auto [sockets, server, client] = Sessions(*server_ctx, *client_ctx);
  Outcome o = Shake(*server, *client);
  ASSERT_EQ(o.server, TlsIo::kDone) << server->error();
  ASSERT_EQ(o.client, TlsIo::kDone) << client->error();

  size_t n = 0;
  ASSERT_EQ(client->Write("PING\r\n", &n), TlsIo::kDone);
  ASSERT_EQ(shutdown(sockets.client, SHUT_WR), 0);
  char buf[1 << 16];
  ASSERT_EQ(server->Read(buf, sizeof buf, &n), TlsIo::kDone) << server->error();
  EXPECT_EQ(std::string_view(buf, n), "PING\r\n");
  EXPECT_EQ(server->Read(buf, sizeof buf, &n), TlsIo::kClosed) << server->error();
  EXPECT_EQ(server->Read(buf, sizeof buf, &n), TlsIo::kClosed) << server->error();
  ASSERT_EQ(server->Write("+PONG\r\n", &n), TlsIo::kDone) << server->error();
  ASSERT_EQ(shutdown(sockets.server, SHUT_WR), 0);  // and leaves without a close_notify
  ASSERT_EQ(client->Read(buf, sizeof buf, &n), TlsIo::kDone) << client->error();
  EXPECT_EQ(std::string_view(buf, n), "+PONG\r\n");
  EXPECT_EQ(client->Read(buf, sizeof buf, &n), TlsIo::kClosed) << client->error();
}

TEST_F(TlsTest, AnAddressIsCheckedAgainstTheCertificatesIpNames) {
  auto server_ctx = Context(TlsContext::Role::kServer, ServerOptions());
  auto client_ctx = Context(TlsContext::Role::kClient, ClientOptions());
  auto [sockets, server, client] = Sessions(*server_ctx, *client_ctx, "127.0.0.1");
  Outcome o = Shake(*server, *client);
  EXPECT_EQ(o.client, TlsIo::kDone) << client->error();
}

TEST_F(TlsTest, AServerSignedByAnotherCaOrForAnotherNameIsRefused) {
  auto server_ctx = Context(TlsContext::Role::kServer, ServerOptions());
  TlsOptions wrong_ca = ClientOptions();
  wrong_ca.ca_file = certs_->Path("other-ca.pem");
  auto client_ctx = Context(TlsContext::Role::kClient, wrong_ca);
  {
    auto [sockets, server, client] = Sessions(*server_ctx, *client_ctx);
    Outcome o = Shake(*server, *client);
    ASSERT_EQ(o.client, TlsIo::kError);
    EXPECT_NE(client->error().find("certificate verify failed"), std::string::npos)
        << client->error();
  }
  auto right_ca = Context(TlsContext::Role::kClient, ClientOptions());
  Pair p = Sessions(*server_ctx, *right_ca, "queue.example.com");
  ASSERT_TRUE(p.server && p.client);
  Outcome o = Shake(*p.server, *p.client);
  EXPECT_EQ(o.client, TlsIo::kError);
  EXPECT_NE(p.client->error().find("hostname mismatch"), std::string::npos) << p.client->error();
}

TEST_F(TlsTest, MutualTlsRequiredRefusesNoCertificateAndAnotherCasOne) {
  TlsOptions so = ServerOptions();
  so.ca_file = certs_->Path("ca.pem");
  so.client_auth = TlsOptions::ClientAuth::kYes;
  auto server_ctx = Context(TlsContext::Role::kServer, so);
  ASSERT_TRUE(server_ctx);
  struct Case {
    std::string cert, key, expect;  // expect: "" accepted, else the server's error
  };
  for (const Case& c : {Case{"", "", "peer did not return a certificate"},
                        Case{"other-client.pem", "other-client.key", "certificate verify failed"},
                        Case{"client.pem", "client.key", ""}}) {
    SCOPED_TRACE(c.cert.empty() ? "no certificate" : c.cert);
    TlsOptions co = ClientOptions();
    if (!c.cert.empty()) {
      co.cert_file = certs_->Path(c.cert);
      co.key_file = certs_->Path(c.key);
    }
    auto client_ctx = Context(TlsContext::Role::kClient, co);
    Pair p = Sessions(*server_ctx, *client_ctx);
    ASSERT_TRUE(p.server && p.client);
    Outcome o = Shake(*p.server, *p.client);
    if (c.expect.empty()) {
      EXPECT_EQ(o.server, TlsIo::kDone) << p.server->error();
      EXPECT_NE(p.server->peer_subject().find("CN=worker"), std::string::npos)
          << p.server->peer_subject();
    } else {
      EXPECT_EQ(o.server, TlsIo::kError);
      EXPECT_NE(p.server->error().find(c.expect), std::string::npos) << p.server->error();
    }
  }
}

TEST_F(TlsTest, MutualTlsOptionalAcceptsAClientWithoutACertificate) {
  TlsOptions so = ServerOptions();
  so.ca_file = certs_->Path("ca.pem");
  so.client_auth = TlsOptions::ClientAuth::kOptional;
  auto server_ctx = Context(TlsContext::Role::kServer, so);
  auto client_ctx = Context(TlsContext::Role::kClient, ClientOptions());
  auto [sockets, server, client] = Sessions(*server_ctx, *client_ctx);
  Outcome o = Shake(*server, *client);
  EXPECT_EQ(o.server, TlsIo::kDone) << server->error();
  EXPECT_EQ(server->peer_subject(), "");
}

TEST_F(TlsTest, PlaintextOnATlsPortIsNamedAsSuch) {
  auto server_ctx = Context(TlsContext::Role::kServer, ServerOptions());
  for (const std::string& plain : {std::string("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"),
                                   std::string("*1\r\n$4\r\nPING\r\n")}) {
    SocketPair sockets;
    ASSERT_EQ(write(sockets.client, plain.data(), plain.size()),
              static_cast<ssize_t>(plain.size()));
    auto s = TlsSession::Accept(*server_ctx, sockets.server);
    ASSERT_TRUE(s.ok());
    EXPECT_EQ((*s)->Handshake(), TlsIo::kError);
    const std::string expect = plain[0] == 'G' ? "plaintext HTTP on a TLS port" : "not TLS";
    EXPECT_NE((*s)->error().find(expect), std::string::npos) << (*s)->error();
    EXPECT_EQ((*s)->failed_peer(), TlsSession::Peer::kPlaintext);
  }
}

TEST_F(TlsTest, AClientGoneBeforeItsFirstByteIsToldApartFromARefusal) {
  auto server_ctx = Context(TlsContext::Role::kServer, ServerOptions());
  SocketPair sockets;
  shutdown(sockets.client, SHUT_WR);  // a port probe: connect, then leave
  auto gone = TlsSession::Accept(*server_ctx, sockets.server);
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ((*gone)->Handshake(), TlsIo::kError);
  EXPECT_EQ((*gone)->failed_peer(), TlsSession::Peer::kGoneEarly) << (*gone)->error();

  // A TLS client refused (no certificate where one is required) is a TLS peer.
  TlsOptions so = ServerOptions();
  so.ca_file = certs_->Path("ca.pem");
  so.client_auth = TlsOptions::ClientAuth::kYes;
  auto mutual_ctx = Context(TlsContext::Role::kServer, so);
  auto client_ctx = Context(TlsContext::Role::kClient, ClientOptions());
  auto [pair, server, client] = Sessions(*mutual_ctx, *client_ctx);
  Outcome o = Shake(*server, *client);
  EXPECT_EQ(o.server, TlsIo::kError);
  EXPECT_EQ(server->failed_peer(), TlsSession::Peer::kTls) << server->error();
}

TEST_F(TlsTest, ProtocolsNarrowedToNoneInCommonFailTheHandshake) {
  TlsOptions so = ServerOptions();
  so.protocols = "TLSv1.3";
  TlsOptions co = ClientOptions();
  co.protocols = "TLSv1.2";
  auto server_ctx = Context(TlsContext::Role::kServer, so);
  auto client_ctx = Context(TlsContext::Role::kClient, co);
  auto [sockets, server, client] = Sessions(*server_ctx, *client_ctx);
  Outcome o = Shake(*server, *client);
  EXPECT_EQ(o.server, TlsIo::kError);
  EXPECT_NE(server->error().find("no protocol both sides speak"), std::string::npos)
      << server->error();

  TlsOptions tls12 = ClientOptions();
  tls12.protocols = "TLSv1.2";
  auto both_server = Context(TlsContext::Role::kServer, ServerOptions());
  auto tls12_client = Context(TlsContext::Role::kClient, tls12);
  Pair p = Sessions(*both_server, *tls12_client);
  ASSERT_TRUE(p.server && p.client);
  Outcome ok = Shake(*p.server, *p.client);
  EXPECT_EQ(ok.client, TlsIo::kDone) << p.client->error();
  EXPECT_EQ(p.client->protocol(), "TLSv1.2");
}

TEST_F(TlsTest, WrongFilesAndOptionsAreRefusedNamingWhatIsWrong) {
  struct Case {
    TlsContext::Role role;
    TlsOptions options;
    std::string expect;
  };
  TlsOptions missing = ServerOptions();
  missing.cert_file = certs_->Path("nope.pem");
  TlsOptions mismatched = ServerOptions();
  mismatched.key_file = certs_->Path("client.key");
  TlsOptions no_key = ServerOptions();
  no_key.key_file.clear();
  TlsOptions auth_without_ca = ServerOptions();
  auth_without_ca.client_auth = TlsOptions::ClientAuth::kYes;
  TlsOptions bad_protocol = ServerOptions();
  bad_protocol.protocols = "TLSv1.1";
  TlsOptions bad_ciphers = ServerOptions();
  bad_ciphers.ciphersuites = "NOT_A_SUITE";
  for (const Case& c : {
           Case{TlsContext::Role::kServer, missing, "cannot use certificate " + missing.cert_file},
           Case{TlsContext::Role::kServer, mismatched, "does not match certificate"},
           Case{TlsContext::Role::kServer, no_key, "needs a certificate and its key"},
           Case{TlsContext::Role::kServer, auth_without_ca, "CA file"},
           Case{TlsContext::Role::kServer, bad_protocol, "'TLSv1.1' is not one delayq speaks"},
           Case{TlsContext::Role::kServer, bad_ciphers, "TLS 1.3 ciphersuites 'NOT_A_SUITE'"},
       }) {
    auto ctx = TlsContext::Create(c.role, c.options);
    ASSERT_FALSE(ctx.ok()) << c.expect;
    EXPECT_EQ(ctx.status().code(), Code::kInvalidArgument);
    EXPECT_NE(ctx.status().message().find(c.expect), std::string::npos) << ctx.status().message();
  }
  EXPECT_TRUE(ParseClientAuth("optional").ok());
  EXPECT_EQ(ParseClientAuth("maybe").status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace delayq::net
