// OpenSSL 3 (Debian 12: 3.0). Every call that can fail leaves its reasons on
// the thread's error queue: it is cleared before each step, and read into a
// message (OpenSSL's reason, or the certificate check's) when a step fails.
#include "net/tls.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace delayq::net {
namespace {

// The reasons on the error queue, the last first, emptied.
std::string QueueReasons() {
  std::vector<std::string> reasons;
  for (unsigned long e = ERR_get_error(); e != 0; e = ERR_get_error()) {
    const char* r = ERR_reason_error_string(e);
    reasons.emplace_back(r != nullptr ? r : "error " + std::to_string(ERR_GET_REASON(e)));
  }
  std::string out;
  for (auto it = reasons.rbegin(); it != reasons.rend(); ++it) {
    if (!out.empty()) out += "; ";
    out += *it;
  }
  return out;
}

Status Bad(const std::string& what) {
  return InvalidArgument("tls: " + what + (ERR_peek_error() != 0 ? ": " + QueueReasons() : ""));
}

// TlsOptions::protocols as OpenSSL's min and max versions.
Status ProtocolRange(const std::string& text, int* min, int* max) {
  bool v12 = false;
  bool v13 = false;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find_first_of(" ,", at);
    if (end == std::string::npos) end = text.size();
    std::string word = text.substr(at, end - at);
    at = end + 1;
    if (word.empty()) continue;
    if (word == "TLSv1.2") {
      v12 = true;
    } else if (word == "TLSv1.3") {
      v13 = true;
    } else {
      return InvalidArgument("tls protocols: '" + word +
                             "' is not one delayq speaks (TLSv1.2, TLSv1.3)");
    }
  }
  if (!v12 && !v13) v12 = v13 = true;  // empty: both
  *min = v12 ? TLS1_2_VERSION : TLS1_3_VERSION;
  *max = v13 ? TLS1_3_VERSION : TLS1_2_VERSION;
  return Status::Ok();
}

std::string NameOf(X509_NAME* name) {
  if (name == nullptr) return "";
  char buf[512];
  X509_NAME_oneline(name, buf, sizeof buf);
  return buf;
}

std::string ExpiryOf(X509* cert) {
  BIO* bio = BIO_new(BIO_s_mem());
  if (bio == nullptr) return "";
  ASN1_TIME_print(bio, X509_get0_notAfter(cert));
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<size_t>(len > 0 ? len : 0));
  BIO_free(bio);
  return out;
}

bool IsIpAddress(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

}  // namespace

Result<TlsOptions::ClientAuth> ParseClientAuth(std::string_view text) {
  if (text == "no") return TlsOptions::ClientAuth::kNo;
  if (text == "optional") return TlsOptions::ClientAuth::kOptional;
  if (text == "yes") return TlsOptions::ClientAuth::kYes;
  return InvalidArgument("tls client auth: '" + std::string(text) +
                         "' is not one of no, optional, yes");
}

// ---------------------------------------------------------------------------
// TlsContext

TlsContext::TlsContext(Role role, TlsOptions options, ssl_ctx_st* ctx)
    : role_(role), options_(std::move(options)), ctx_(ctx) {}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

Result<std::shared_ptr<TlsContext>> TlsContext::Create(Role role, const TlsOptions& o) {
  ERR_clear_error();
  int min = 0;
  int max = 0;
  if (Status s = ProtocolRange(o.protocols, &min, &max); !s.ok()) return s;
  if (role == Role::kServer && (o.cert_file.empty() || o.key_file.empty())) {
    return InvalidArgument("tls: a server needs a certificate and its key (cert and key files)");
  }
  if (o.cert_file.empty() != o.key_file.empty()) {
    return InvalidArgument("tls: a certificate needs its key, and a key its certificate");
  }
  if (role == Role::kServer && o.client_auth != TlsOptions::ClientAuth::kNo && o.ca_file.empty()) {
    return InvalidArgument("tls: client certificates are checked against a CA file: give one");
  }
  SSL_CTX* raw = SSL_CTX_new(role == Role::kServer ? TLS_server_method() : TLS_client_method());
  if (raw == nullptr) return Internal("tls: cannot make a context: " + QueueReasons());
  std::shared_ptr<TlsContext> ctx(new TlsContext(role, o, raw));

  SSL_CTX_set_min_proto_version(raw, min);
  SSL_CTX_set_max_proto_version(raw, max);
  // No renegotiation (a client could make a server redo handshakes at will)
  // and no compression; writes may be partial and move, as a loop's are.
  SSL_CTX_set_options(
      raw, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_mode(raw, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                            SSL_MODE_RELEASE_BUFFERS);
  if (!o.ciphers.empty() && SSL_CTX_set_cipher_list(raw, o.ciphers.c_str()) != 1) {
    return Bad("TLS 1.2 ciphers '" + o.ciphers + "'");
  }
  if (!o.ciphersuites.empty() && SSL_CTX_set_ciphersuites(raw, o.ciphersuites.c_str()) != 1) {
    return Bad("TLS 1.3 ciphersuites '" + o.ciphersuites + "'");
  }
  if (!o.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(raw, o.cert_file.c_str()) != 1) {
      return Bad("cannot use certificate " + o.cert_file);
    }
    if (SSL_CTX_use_PrivateKey_file(raw, o.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
        return Bad("key " + o.key_file + " does not match certificate " + o.cert_file);
      }
      return Bad("cannot use key " + o.key_file);
    }
    if (SSL_CTX_check_private_key(raw) != 1) {
      return Bad("key " + o.key_file + " does not match certificate " + o.cert_file);
    }
    if (X509* cert = SSL_CTX_get0_certificate(raw); cert != nullptr) {
      ctx->summary_ = NameOf(X509_get_subject_name(cert)) + ", until " + ExpiryOf(cert);
    }
  }
  if (!o.ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(raw, o.ca_file.c_str(), nullptr) != 1) {
      return Bad("cannot read CA file " + o.ca_file);
    }
  } else if (role == Role::kClient && SSL_CTX_set_default_verify_paths(raw) != 1) {
    return Bad("cannot load the system's trust store");
  }
  if (role == Role::kServer) {
    if (o.client_auth != TlsOptions::ClientAuth::kNo) {
      STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(o.ca_file.c_str());
      if (names == nullptr) return Bad("no CA names in " + o.ca_file);
      SSL_CTX_set_client_CA_list(raw, names);
      int mode = SSL_VERIFY_PEER;
      if (o.client_auth == TlsOptions::ClientAuth::kYes) mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
      SSL_CTX_set_verify(raw, mode, nullptr);
    }
    // Sessions are not resumed across servers or restarts: no ticket keys
    // to share or rotate.
    SSL_CTX_set_session_cache_mode(raw, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_num_tickets(raw, 0);
    // One read(2) takes a record's header and body (and whatever follows)
    // rather than two. A server's reader then must not take an unreadable
    // socket for "nothing more": TlsSession::has_pending says what is held.
    SSL_CTX_set_read_ahead(raw, 1);
  } else {
    SSL_CTX_set_verify(raw, o.verify_peer ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
  }
  return ctx;
}

// ---------------------------------------------------------------------------
// TlsSession

Result<std::unique_ptr<TlsSession>> TlsSession::Accept(const TlsContext& ctx, int fd) {
  ERR_clear_error();
  SSL* ssl = SSL_new(ctx.native());
  if (ssl == nullptr || SSL_set_fd(ssl, fd) != 1) {
    SSL_free(ssl);
    return Internal("tls: cannot start a session: " + QueueReasons());
  }
  SSL_set_accept_state(ssl);
  return std::unique_ptr<TlsSession>(new TlsSession(ssl));
}

Result<std::unique_ptr<TlsSession>> TlsSession::Connect(const TlsContext& ctx, int fd,
                                                        std::string_view server_name) {
  ERR_clear_error();
  SSL* ssl = SSL_new(ctx.native());
  if (ssl == nullptr || SSL_set_fd(ssl, fd) != 1) {
    SSL_free(ssl);
    return Internal("tls: cannot start a session: " + QueueReasons());
  }
  std::unique_ptr<TlsSession> session(new TlsSession(ssl));
  const std::string name(server_name);
  if (!name.empty()) {
    if (IsIpAddress(name)) {
      // An address is checked against the IP SANs, and is not sent as SNI
      // (RFC 6066 names hosts only).
      if (ctx.options().verify_peer &&
          X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str()) != 1) {
        return InvalidArgument("tls: '" + name + "' is not an address");
      }
    } else {
      SSL_set_tlsext_host_name(ssl, name.c_str());
      if (ctx.options().verify_peer && SSL_set1_host(ssl, name.c_str()) != 1) {
        return InvalidArgument("tls: cannot check the name '" + name + "'");
      }
    }
  }
  SSL_set_connect_state(ssl);
  return session;
}

TlsSession::~TlsSession() { SSL_free(ssl_); }

TlsIo TlsSession::Outcome(int ret) {
  const int err = SSL_get_error(ssl_, ret);
  switch (err) {
    case SSL_ERROR_WANT_READ:
      return TlsIo::kWantRead;
    case SSL_ERROR_WANT_WRITE:
      return TlsIo::kWantWrite;
    case SSL_ERROR_ZERO_RETURN:
      return TlsIo::kClosed;
    case SSL_ERROR_SYSCALL:
      if (ERR_peek_error() == 0) {
        // The socket ended without a close_notify (or failed).
        if (errno != 0 && errno != EPIPE && errno != ECONNRESET) {
          error_ = std::strerror(errno);
          return TlsIo::kError;
        }
        if (!done_) {
          error_ = "the connection closed during the handshake";
          failed_peer_ = Peer::kGoneEarly;
          return TlsIo::kError;
        }
        return TlsIo::kClosed;
      }
      break;
    default:
      break;
  }
  const unsigned long e = ERR_peek_error();
  const int reason = ERR_GET_REASON(e);
  const long verify = SSL_get_verify_result(ssl_);
  if (reason == SSL_R_UNEXPECTED_EOF_WHILE_READING && !done_) {
    // OpenSSL 3's word for a peer that closed without a close_notify.
    error_ = "the connection closed during the handshake";
    failed_peer_ = Peer::kGoneEarly;
  } else if (reason == SSL_R_HTTP_REQUEST || reason == SSL_R_HTTPS_PROXY_REQUEST) {
    error_ = "plaintext HTTP on a TLS port";
    failed_peer_ = Peer::kPlaintext;
  } else if (reason == SSL_R_WRONG_VERSION_NUMBER && !done_) {
    error_ = SSL_is_server(ssl_) == 1 ? "not TLS (a plaintext client on a TLS port?)"
                                      : "not TLS (a plaintext server on this port?)";
    failed_peer_ = Peer::kPlaintext;
  } else if (reason == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE) {
    error_ = "peer did not return a certificate";
  } else if (reason == SSL_R_UNSUPPORTED_PROTOCOL || reason == SSL_R_NO_PROTOCOLS_AVAILABLE ||
             reason == SSL_R_TLSV1_ALERT_PROTOCOL_VERSION) {
    error_ = "no protocol both sides speak (" + QueueReasons() + ")";
  } else if (verify != X509_V_OK) {
    error_ = std::string("certificate verify failed: ") + X509_verify_cert_error_string(verify);
  } else {
    error_ = QueueReasons();
    if (error_.empty()) error_ = "TLS error " + std::to_string(err);
  }
  ERR_clear_error();
  return TlsIo::kError;
}

TlsIo TlsSession::Handshake() {
  if (done_) return TlsIo::kDone;
  ERR_clear_error();
  errno = 0;
  const int ret = SSL_do_handshake(ssl_);
  if (ret == 1) {
    done_ = true;
    // From now on the peer's FIN without a close_notify ends its input, as
    // on plaintext (kClosed), rather than failing the session: OpenSSL 3
    // would take it for a truncated record, send a decode_error alert and
    // drop what came before it. What delayq reads is framed (RESP, HTTP),
    // so a cut cannot pass for a whole request; and a client leaves a
    // waiting reserve by its FIN alone (client/waiting_reserves.h), then
    // reads the reply the server may have sent meanwhile. Before the
    // handshake ends, such a FIN is still a failure (kGoneEarly).
    SSL_set_options(ssl_, SSL_OP_IGNORE_UNEXPECTED_EOF);
    return TlsIo::kDone;
  }
  return Outcome(ret);
}

TlsIo TlsSession::Read(char* buf, size_t max, size_t* n) {
  *n = 0;
  if (!done_) {
    TlsIo h = Handshake();
    if (h != TlsIo::kDone) return h;
  }
  ERR_clear_error();
  errno = 0;
  const int ret = SSL_read_ex(ssl_, buf, max, n);
  if (ret == 1) return TlsIo::kDone;
  *n = 0;
  return Outcome(ret);
}

TlsIo TlsSession::Write(std::string_view data, size_t* n) {
  *n = 0;
  if (!done_) {
    TlsIo h = Handshake();
    if (h != TlsIo::kDone) return h;
  }
  if (data.empty()) return TlsIo::kDone;
  ERR_clear_error();
  errno = 0;
  const int ret = SSL_write_ex(ssl_, data.data(), data.size(), n);
  if (ret == 1) return TlsIo::kDone;
  *n = 0;
  return Outcome(ret);
}

bool TlsSession::has_pending() const { return SSL_has_pending(ssl_) == 1; }

void TlsSession::Shutdown() {
  if (!done_) return;
  ERR_clear_error();
  SSL_shutdown(ssl_);
  ERR_clear_error();
}

std::string TlsSession::protocol() const { return SSL_get_version(ssl_); }

std::string TlsSession::peer_subject() const {
  X509* cert = SSL_get1_peer_certificate(ssl_);
  if (cert == nullptr) return "";
  std::string out = NameOf(X509_get_subject_name(cert));
  X509_free(cert);
  return out;
}

}  // namespace delayq::net
