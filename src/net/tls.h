// TLS over OpenSSL (Debian's libssl): one context type for every side of
// delayq that speaks it — the listeners (serving), the Redis connection and
// the network client (connecting) — and a session per connection that never
// blocks, so a handshake on one socket does not stall the others of a loop.
//
//   TlsOptions o;
//   o.cert_file = "server.pem";  o.key_file = "server.key";
//   auto ctx = TlsContext::Create(TlsContext::Role::kServer, o);
//   auto session = TlsSession::Accept(*ctx, fd);  // fd: non-blocking
//   switch (session->Handshake()) { case TlsIo::kWantRead: /* wait for EPOLLIN */ ... }
//
// Protocols: TLS 1.2 and 1.3 only (TlsOptions::protocols may narrow them).
// A server asks for client certificates only with a CA file
// (client_auth optional or yes); with `yes`, a client without a certificate
// signed by that CA is refused in the handshake. A client verifies the
// server's certificate against TlsOptions::ca_file, or the system's trust
// store, and its name (SNI sent; hostname or IP address subject alternative
// name checked), unless verify_peer is off.
//
// Errors are values that say which: a file that cannot be read or does not
// match ("tls: key /etc/delayq/key.pem does not match certificate ..."), a
// handshake refused ("certificate verify failed: unable to get local issuer
// certificate", "peer did not return a certificate", "plaintext HTTP on a
// TLS port", "no protocol both sides speak").
//
// A context can be shared by any number of sessions and threads (OpenSSL's
// SSL_CTX is, once set up); a session is one thread's at a time. Reloading
// certificates (SIGHUP) is a new context: sessions keep the context they
// began with (OpenSSL counts its references), new ones take the new one.
#ifndef DELAYQ_NET_TLS_H_
#define DELAYQ_NET_TLS_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "delayq/status.h"

// OpenSSL's types, kept out of this header.
struct ssl_ctx_st;
struct ssl_st;

namespace delayq::net {

struct TlsOptions {
  // PEM: this side's certificate (a chain allowed: the leaf first) and its
  // private key. A server needs both; a client only for mutual TLS.
  std::string cert_file;
  std::string key_file;
  // PEM bundle of the CAs that sign the peer's certificate. Server: asks for
  // client certificates (see client_auth); empty: asks for none. Client:
  // verifies the server with it; empty: with the system's trust store.
  std::string ca_file;
  // Server: whether a client certificate is asked for and required (needs
  // ca_file). kOptional: asked, checked if given.
  enum class ClientAuth { kNo, kOptional, kYes };
  ClientAuth client_auth = ClientAuth::kNo;
  // Client: verify the server's certificate and name. Default: true.
  bool verify_peer = true;
  // "TLSv1.2", "TLSv1.3" or both, separated by spaces (Redis's
  // tls-protocols). Empty: both.
  std::string protocols;
  // TLS 1.2 cipher list and TLS 1.3 ciphersuites, in OpenSSL's syntax
  // (Redis's tls-ciphers, tls-ciphersuites). Empty: OpenSSL's defaults.
  std::string ciphers;
  std::string ciphersuites;
};

// Parses a client_auth word: "no", "optional", "yes".
Result<TlsOptions::ClientAuth> ParseClientAuth(std::string_view text);

class TlsContext {
 public:
  enum class Role { kServer, kClient };
  // Loads and checks everything now: kInvalidArgument naming the file or
  // the option that is wrong.
  static Result<std::shared_ptr<TlsContext>> Create(Role role, const TlsOptions& options);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  Role role() const { return role_; }
  const TlsOptions& options() const { return options_; }
  // The certificate's subject and expiry, for logs ("/CN=delayq, until
  // Nov 28 03:42:58 2027 GMT"); empty without a certificate.
  const std::string& certificate_summary() const { return summary_; }
  ssl_ctx_st* native() const { return ctx_; }

 private:
  TlsContext(Role role, TlsOptions options, ssl_ctx_st* ctx);

  const Role role_;
  const TlsOptions options_;
  ssl_ctx_st* const ctx_;  // owned
  std::string summary_;
};

// What a session's step did.
enum class TlsIo {
  kDone,       // done (Read/Write: n bytes moved, possibly 0 for Write of nothing)
  kWantRead,   // call again when the socket is readable
  kWantWrite,  // call again when the socket is writable
  kClosed,     // the peer closed the TLS session (close_notify) or, once the
               // handshake is done, the socket (a FIN without one)
  kError,      // failed for good: error() says why; close the connection
};

class TlsSession {
 public:
  // A server session on accepted socket `fd` (non-blocking; not owned).
  static Result<std::unique_ptr<TlsSession>> Accept(const TlsContext& ctx, int fd);
  // A client session on connected socket `fd`; `server_name` is sent as SNI
  // and checked against the certificate (a host name or an IP address).
  static Result<std::unique_ptr<TlsSession>> Connect(const TlsContext& ctx, int fd,
                                                     std::string_view server_name);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  // Drives the handshake; kDone once it is complete.
  TlsIo Handshake();
  bool handshake_done() const { return done_; }
  // Puts up to `max` decrypted bytes in buf[0..max); *n is how many. kDone
  // with *n > 0, or kWantRead when nothing is there yet.
  TlsIo Read(char* buf, size_t max, size_t* n);
  // Encrypts and sends from `data`; *n is how many bytes of it were taken.
  TlsIo Write(std::string_view data, size_t* n);
  // Decrypted or received bytes are held in the session that a Read would
  // return without the socket being readable (SSL_has_pending). A server
  // session reads ahead (one read(2) per record, not two), so its reader
  // must ask this before it waits for the socket.
  bool has_pending() const;
  // Sends close_notify (best effort, never blocks).
  void Shutdown();
  // Why the last kError came about, in words.
  const std::string& error() const { return error_; }
  // What kind of peer the last kError came from, for what to do about it
  // (a plaintext one may be told so in plaintext; one that left before its
  // first byte is not worth a log line).
  enum class Peer { kTls, kPlaintext, kGoneEarly };
  Peer failed_peer() const { return failed_peer_; }
  // The negotiated protocol ("TLSv1.3") and the peer certificate's subject
  // (empty without one).
  std::string protocol() const;
  std::string peer_subject() const;

 private:
  explicit TlsSession(ssl_st* ssl) : ssl_(ssl) {}
  // Maps SSL_get_error after a call that returned `ret`.
  TlsIo Outcome(int ret);

  ssl_st* const ssl_;  // owned
  bool done_ = false;
  std::string error_;
  Peer failed_peer_ = Peer::kTls;
};

}  // namespace delayq::net

#endif  // DELAYQ_NET_TLS_H_
