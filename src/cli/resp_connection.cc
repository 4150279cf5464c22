// Blocking hiredis: one connect with a timeout, then one request and one
// reply at a time, each bounded by SO_RCVTIMEO/SO_SNDTIMEO (redisSetTimeout).
// hiredis 0.14 reports failures in context->err/errstr and leaves the
// context unusable, which is fine for a process that sends a command or two.
#include "cli/resp_connection.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <cerrno>
#include <charconv>

namespace delayq::cli {
namespace {

timeval Timeval(int ms) {
  timeval tv{};
  tv.tv_sec = ms / 1000;
  tv.tv_usec = static_cast<suseconds_t>(ms % 1000) * 1000;
  return tv;
}

Reply Convert(const redisReply* r) {
  Reply out;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      out.type = Reply::Type::kString;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = Reply::Type::kStatus;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = Reply::Type::kError;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = Reply::Type::kInteger;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = Reply::Type::kArray;
      out.elements.reserve(r->elements);
      for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(Convert(r->element[i]));
      break;
    default:
      out.type = Reply::Type::kNil;
  }
  return out;
}

}  // namespace

std::string ServerAddress::ToString() const {
  std::string h = host.find(':') == std::string::npos ? host : "[" + host + "]";
  return h + ":" + std::to_string(port);
}

Result<ServerAddress> ParseServerAddress(const std::string& text) {
  ServerAddress a;
  std::string port;
  if (!text.empty() && text[0] == '[') {  // [v6]:port or [v6]
    size_t close = text.find(']');
    if (close == std::string::npos) return InvalidArgument("server address '" + text + "': no ']'");
    a.host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') {
        return InvalidArgument("server address '" + text + "': expected ':port' after ']'");
      }
      port = text.substr(close + 2);
      if (port.empty()) return InvalidArgument("server address '" + text + "': empty port");
    }
  } else if (size_t colon = text.rfind(':');
             colon != std::string::npos && text.find(':') == colon) {  // host:port
    a.host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (port.empty()) return InvalidArgument("server address '" + text + "': empty port");
  } else {  // host, or a bare IPv6 address
    a.host = text;
  }
  if (a.host.empty()) return InvalidArgument("server address '" + text + "': empty host");
  if (!port.empty()) {
    int p = 0;
    auto r = std::from_chars(port.data(), port.data() + port.size(), p);
    if (r.ec != std::errc() || r.ptr != port.data() + port.size() || p < 1 || p > 65535) {
      return InvalidArgument("server address '" + text + "': port must be 1..65535");
    }
    a.port = p;
  }
  return a;
}

Result<std::unique_ptr<RespConnection>> RespConnection::Connect(const ServerAddress& address,
                                                                int connect_timeout_ms) {
  redisContext* c =
      redisConnectWithTimeout(address.host.c_str(), address.port, Timeval(connect_timeout_ms));
  if (c == nullptr) {
    return Unavailable("cannot connect to " + address.ToString() + ": out of memory");
  }
  if (c->err != 0) {
    std::string why = c->errstr;
    redisFree(c);
    return Unavailable("cannot connect to " + address.ToString() + ": " + why);
  }
  return std::unique_ptr<RespConnection>(new RespConnection(address, c));
}

RespConnection::~RespConnection() { redisFree(context_); }

Result<Reply> RespConnection::Command(const std::vector<std::string>& args, int timeout_ms) {
  if (context_->err != 0) {
    return Unavailable("connection to " + address_.ToString() + " is broken: " + context_->errstr);
  }
  if (redisSetTimeout(context_, Timeval(timeout_ms)) != REDIS_OK) {
    return Unavailable("cannot set a timeout on the connection to " + address_.ToString());
  }
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  argv.reserve(args.size());
  lens.reserve(args.size());
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  errno = 0;
  auto* r = static_cast<redisReply*>(
      redisCommandArgv(context_, static_cast<int>(argv.size()), argv.data(), lens.data()));
  if (r == nullptr) {
    int err = errno;
    std::string where = address_.ToString();
    if (context_->err == REDIS_ERR_IO && (err == EAGAIN || err == EWOULDBLOCK)) {
      return Unavailable("no reply from " + where + " within " + std::to_string(timeout_ms) +
                         " ms");
    }
    if (context_->err == REDIS_ERR_EOF) return Unavailable(where + " closed the connection");
    return Unavailable("lost the connection to " + where + ": " + context_->errstr);
  }
  Reply reply = Convert(r);
  freeReplyObject(r);
  return reply;
}

}  // namespace delayq::cli
