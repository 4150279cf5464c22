// Blocking HTTP/1.1 for an Endpoint. The server side reads a request's head
// up to "\r\n\r\n", takes Content-Length bytes of body and leaves whatever
// follows for the next request of the keep-alive connection; poll(2) bounds
// each wait so an idle connection ends and a shut-down socket wakes it. The
// client side connects non-blocking (so a connect has a deadline too), then
// sends and reads with SO_SNDTIMEO / SO_RCVTIMEO.
#include "endpoint/http_exchange.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace delayq::endpoint {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool ParseSize(std::string_view text, size_t* out) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 405:
      return "Method Not Allowed";
    case 410:
      return "Gone";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    default:
      return "Unknown";
  }
}

bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Splits "name: value" lines after the first line of `head` into *headers.
bool ParseHeaderLines(std::string_view head, Headers* headers) {
  size_t pos = head.find("\r\n");
  while (pos != std::string_view::npos && pos + 2 < head.size()) {
    pos += 2;
    size_t end = head.find("\r\n", pos);
    std::string_view line = head.substr(pos, end == std::string_view::npos ? end : end - pos);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return false;
    headers->emplace_back(Lower(line.substr(0, colon)), std::string(Trim(line.substr(colon + 1))));
    pos = end;
  }
  return true;
}

std::string_view Find(const Headers& headers, std::string_view name) {
  for (const auto& [k, v] : headers) {
    if (k == name) return v;
  }
  return {};
}

}  // namespace

std::string_view HttpRequest::Header(std::string_view name) const { return Find(headers, name); }

bool RequestReader::Fill(int timeout_ms) {
  pollfd p{fd_, POLLIN, 0};
  for (;;) {
    int r = ::poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    break;
  }
  char buf[16 * 1024];
  for (;;) {
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    in_.append(buf, static_cast<size_t>(n));
    return true;
  }
}

RequestReader::Result RequestReader::Read(HttpRequest* req, int idle_ms, int* status,
                                          std::string* error) {
  auto bad = [&](int code, std::string why) {
    *status = code;
    *error = std::move(why);
    return Result::kBad;
  };
  size_t head_end;
  while ((head_end = in_.find("\r\n\r\n")) == std::string::npos) {
    if (in_.size() > kMaxHeadBytes) return bad(431, "request head over 16 KiB");
    if (!Fill(idle_ms)) return Result::kClosed;
  }
  if (head_end > kMaxHeadBytes) return bad(431, "request head over 16 KiB");
  std::string_view head(in_.data(), head_end);
  std::string_view line = head.substr(0, head.find("\r\n"));
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) return bad(400, "malformed request line");
  std::string_view version = line.substr(sp2 + 1);
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return bad(400, "not HTTP/1.x");
  *req = HttpRequest();
  req->method = std::string(line.substr(0, sp1));
  req->target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
  if (!ParseHeaderLines(head, &req->headers)) return bad(400, "malformed header line");
  std::string connection = Lower(req->Header("connection"));
  req->keep_alive = version == "HTTP/1.1" ? connection.find("close") == std::string::npos
                                          : connection.find("keep-alive") != std::string::npos;
  if (!req->Header("transfer-encoding").empty()) {
    return bad(501, "chunked request bodies are not supported: send Content-Length");
  }
  size_t length = 0;
  std::string_view length_text = req->Header("content-length");
  if (!length_text.empty() && !ParseSize(length_text, &length)) {
    return bad(400, "bad Content-Length");
  }
  if (length > kMaxBodyBytes) return bad(413, "request body over 16 MiB");
  const size_t total = head_end + 4 + length;
  while (in_.size() < total) {
    if (!Fill(idle_ms)) return Result::kClosed;
  }
  req->body = in_.substr(head_end + 4, length);
  in_.erase(0, total);
  return Result::kRequest;
}

bool WriteResponse(int fd, int status, const Headers& headers, std::string_view body,
                   bool keep_alive) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + Reason(status) + "\r\n";
  for (const auto& [k, v] : headers) out.append(k).append(": ").append(v).append("\r\n");
  if (!body.empty()) out.append("Content-Type: text/plain; charset=utf-8\r\n");
  out.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n");
  if (!keep_alive) out.append("Connection: close\r\n");
  out.append("\r\n").append(body);
  return SendAll(fd, out);
}

std::string HostPort::ToString() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return h + ":" + std::to_string(port);
}

Result<HostPort> ParseHostPort(std::string_view text, std::string_view what, bool allow_zero_port) {
  auto fail = [&](const std::string& why) {
    return InvalidArgument(std::string(what) + ": \"" + std::string(text) + "\" " + why);
  };
  HostPort hp;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return fail("is not [ipv6]:port");
    }
    hp.host = std::string(text.substr(1, close - 1));
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return fail("has no port: give host:port");
    hp.host = std::string(text.substr(0, colon));
    if (hp.host.find(':') != std::string::npos) return fail("has an IPv6 host: write [host]:port");
    port = text.substr(colon + 1);
  }
  if (hp.host.empty()) return fail("has no host");
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value > 65535 ||
      (value == 0 && !allow_zero_port)) {
    return fail(allow_zero_port ? "has no port 0..65535" : "has no port 1..65535");
  }
  hp.port = static_cast<uint16_t>(value);
  return hp;
}

namespace {

// A connected socket to `server`, at most timeout_ms per address tried.
Result<int> Connect(const HostPort& server, int timeout_ms) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  const std::string port = std::to_string(server.port);
  if (int rc = ::getaddrinfo(server.host.c_str(), port.c_str(), &hints, &list); rc != 0) {
    return Unavailable(server.ToString() + ": " + ::gai_strerror(rc));
  }
  std::string error = "no address";
  int fd = -1;
  for (addrinfo* ai = list; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc < 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = ::poll(&p, 1, timeout_ms);
      int so_error = 0;
      socklen_t len = sizeof so_error;
      if (rc == 0) {
        so_error = ETIMEDOUT;
      } else if (rc > 0) {
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
      } else {
        so_error = errno;
      }
      rc = so_error == 0 ? 0 : -1;
      errno = so_error;
    }
    if (rc < 0) {
      error = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(list);
  if (fd < 0) return Unavailable(server.ToString() + ": " + error);
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

}  // namespace

Result<HttpReply> HttpCall(const HostPort& server, std::string_view method, std::string_view target,
                           const Headers& headers, std::string_view body, int timeout_ms) {
  Result<int> fd = Connect(server, timeout_ms);
  if (!fd.ok()) return fd.status();
  std::string out = std::string(method) + " " + std::string(target) + " HTTP/1.1\r\n";
  out.append("Host: ").append(server.ToString()).append("\r\n");
  for (const auto& [k, v] : headers) out.append(k).append(": ").append(v).append("\r\n");
  out.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n");
  out.append("Connection: close\r\n\r\n").append(body);
  std::string in;
  bool sent = SendAll(*fd, out);
  // Read to the end: the server closes after its answer (Connection: close),
  // or stops once Content-Length bytes of body have come.
  size_t want = std::string::npos;
  char buf[16 * 1024];
  while (sent && in.size() < want) {
    ssize_t n = ::recv(*fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(*fd);
      return Unavailable(server.ToString() + ": " +
                         (errno == EAGAIN ? "no answer within " + std::to_string(timeout_ms) + " ms"
                                          : std::string(std::strerror(errno))));
    }
    if (n == 0) break;
    in.append(buf, static_cast<size_t>(n));
    size_t head_end = in.find("\r\n\r\n");
    if (want == std::string::npos && head_end != std::string::npos) {
      Headers h;
      size_t length = 0;
      if (ParseHeaderLines(std::string_view(in).substr(0, head_end), &h) &&
          ParseSize(Find(h, "content-length"), &length)) {
        want = head_end + 4 + length;
      }
    }
  }
  ::close(*fd);
  if (!sent) return Unavailable(server.ToString() + ": the request could not be sent");
  HttpReply reply;
  size_t head_end = in.find("\r\n\r\n");
  int status = 0;
  if (in.compare(0, 9, "HTTP/1.1 ") == 0 || in.compare(0, 9, "HTTP/1.0 ") == 0) {
    std::from_chars(in.data() + 9, in.data() + std::min<size_t>(in.size(), 12), status);
  }
  if (head_end == std::string::npos || status < 100 || status > 599) {
    return Unavailable(server.ToString() + ": the answer is not HTTP");
  }
  reply.status = status;
  reply.body = in.substr(head_end + 4);
  return reply;
}

std::string PercentEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

}  // namespace delayq::endpoint
