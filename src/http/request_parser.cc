// How it works. Beast's basic_parser does the parsing; Impl::Beast, its
// subclass, copies into Request only what delayq uses as the callbacks fire
// (no field container, so nothing is allocated per header, and Request's
// strings keep their capacity from one request to the next). A fresh Beast
// parser is emplaced per request: its state is one message's, and building
// it allocates nothing.
//
// The header goes to Beast whole, never in pieces. Beast can parse a partial
// header, but once it has said "need more" it waits for the blank line
// before looking again, so an error it would see at once in one read stays
// hidden when the same bytes come in several, and its header limit counts
// only bytes not yet consumed. So: on a request's first read the header is
// usually all there and Beast gets it straight away (the fast path); if it
// is not, that Beast parser is thrown away, and Parse scans the bytes as
// they come for the blank line — rejecting at once bytes no header may hold
// (controls, bare CR or LF: TLS hellos and binary noise get their 400
// without waiting) — and hands Beast the header when it is complete. Every
// verdict is therefore a function of the bytes alone, however they were
// split (tests/fuzz/http_parser_fuzz.cc checks it), and the header limit is
// exact. The caller never drops part of a header.
//
// After the header, Beast consumes body bytes as they arrive. Nothing in
// Beast bounds a chunk-size line or the trailer section (it never consumes
// them in part), so while one is expected Beast sees at most
// max_header_bytes of input, one chunk element per put() (eager off), and
// an element that does not end inside that window is an error.
//
// Beast accepts some things delayq must not, and they are checked here:
// a Transfer-Encoding other than exactly "chunked" (Beast would ignore it and
// read no body: a smuggling hazard), duplicate Authorization/Content-Type,
// and trailer fields (parsed, never copied into Request).
#include "http/request_parser.h"

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/verb.hpp>
#include <boost/optional.hpp>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>  // before Beast: its headers use std::exchange unincluded on g++ 12

namespace delayq::http {
namespace {

namespace bhttp = boost::beast::http;
using boost::system::error_code;

// The body's first reservation is capped: a client announcing 1 MiB and then
// sending nothing should not pin 1 MiB per connection. Beyond it the string
// grows as bytes actually arrive.
constexpr size_t kInitialBodyReserve = 64 * 1024;
// The smallest chunk header Beast may be handed ("\r\n0\r\n" or "0\r\n\r\n"):
// with fewer bytes, its last-chunk path asserts. Waiting for them changes
// nothing else, since no chunk header completes in fewer.
constexpr size_t kMinChunkHeaderBytes = 5;

std::string_view Sv(boost::beast::string_view s) { return {s.data(), s.size()}; }

char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + ('a' - 'A')) : c; }

bool IEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (Lower(a[i]) != Lower(b[i])) return false;
  }
  return true;
}

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Calls f(element) for each non-empty element of a comma-separated list.
template <typename F>
void ForEachListElement(std::string_view list, F f) {
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view element = TrimOws(list.substr(0, comma));
    if (!element.empty()) f(element);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
}

// What to shout back when a client sends something it should not.
std::string Printable(std::string_view s, size_t max = 32) {
  std::string out;
  for (char c : s.substr(0, max)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > max) out += "...";
  return out;
}

// The field line at the front of `in` (Beast leaves a failing field
// unconsumed): its value, trimmed, or "" when it is not one line.
std::string_view FieldValueAt(std::string_view in) {
  size_t colon = in.find(':');
  size_t cr = in.find('\r');
  if (colon == std::string_view::npos || cr == std::string_view::npos || cr < colon) return {};
  return TrimOws(in.substr(colon + 1, cr - colon - 1));
}

// True when `digits` is all digits and names a number above `max`.
bool DigitsAbove(std::string_view digits, uint64_t max) {
  if (digits.empty()) return false;
  uint64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    if (v > (std::numeric_limits<uint64_t>::max() - 9) / 10) return true;  // overflow: above
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v > max;
}

Method ToMethod(bhttp::verb v) {
  switch (v) {
    case bhttp::verb::get:
      return Method::kGet;
    case bhttp::verb::head:
      return Method::kHead;
    case bhttp::verb::post:
      return Method::kPost;
    case bhttp::verb::put:
      return Method::kPut;
    case bhttp::verb::delete_:
      return Method::kDelete;
    default:
      return Method::kOther;
  }
}

}  // namespace

struct RequestParser::Impl {
  // Beast's parser, reporting into the Impl that owns it.
  class Beast final : public bhttp::basic_parser<true> {
   public:
    explicit Beast(Impl* impl) : impl_(impl) {}

   private:
    void on_request_impl(bhttp::verb method, boost::beast::string_view method_str,
                         boost::beast::string_view target, int version, error_code& ec) override;
    void on_response_impl(int, boost::beast::string_view, int, error_code&) override {}
    void on_field_impl(bhttp::field name, boost::beast::string_view name_string,
                       boost::beast::string_view value, error_code& ec) override;
    void on_header_impl(error_code& ec) override;
    void on_body_init_impl(const boost::optional<std::uint64_t>& content_length,
                           error_code& ec) override;
    size_t on_body_impl(boost::beast::string_view body, error_code& ec) override;
    void on_chunk_header_impl(std::uint64_t size, boost::beast::string_view extensions,
                              error_code& ec) override;
    size_t on_chunk_body_impl(std::uint64_t remain, boost::beast::string_view body,
                              error_code& ec) override;
    void on_finish_impl(error_code& ec) override;

    Impl* impl_;
  };

  explicit Impl(ParserLimits l) : limits(l) {}

  Status Parse(std::string_view in, size_t* consumed);
  void StartRequest();
  // Scans pending[header_scanned, window) for the blank line ending the
  // header; sets *header_end past it (0: not there yet). False after Fail()
  // on a byte no header may hold.
  bool ScanHeader(std::string_view pending, size_t window, size_t* header_end);
  size_t Put(std::string_view window, error_code* ec);
  // Records an error found by a callback; Beast then stops with `ec` set.
  void Reject(int status, std::string message, error_code& ec);
  Status Fail(int status, std::string message);
  // Maps Beast's error to a status; `at` is the input from where Beast stopped.
  Status FailFromBeast(error_code ec, std::string_view at);

  ParserLimits limits;
  Request request;
  std::optional<Beast> beast;  // the current request's; emplaced by StartRequest

  // The current request, reset by StartRequest.
  bool header_started = false;   // its first byte was seen (and the fast path tried)
  size_t header_scanned = 0;     // pending header bytes ScanHeader has passed
  size_t request_consumed = 0;   // bytes of this request consumed so far
  uint64_t chunk_remaining = 0;  // bytes of the current chunk to come; 0 between chunks
  bool header_done = false;      // on_header_impl ran: later fields are trailers
  bool chunked = false;
  bool expect_continue = false;   // "Expect: 100-continue" on an HTTP/1.1 request
  bool connection_close = false;  // "Connection: close"
  bool connection_keep_alive = false;
  bool seen_authorization = false;
  bool seen_content_type = false;
  bool complete = false;  // on_finish_impl ran: request is whole

  // The connection.
  bool continue_pending = false;  // TakeContinue()'s answer
  bool in_progress = false;
  bool failed = false;
  int error_status = 0;  // 0 until an error; a callback may set it first
  std::string error;
};

void RequestParser::Impl::Beast::on_request_impl(bhttp::verb method,
                                                 boost::beast::string_view method_str,
                                                 boost::beast::string_view target, int version,
                                                 error_code& ec) {
  Request& r = impl_->request;
  r.method = ToMethod(method);
  r.method_name.assign(method_str.data(), method_str.size());
  r.target.assign(target.data(), target.size());
  r.version = version;
}

void RequestParser::Impl::Beast::on_field_impl(bhttp::field name,
                                               boost::beast::string_view name_string,
                                               boost::beast::string_view value, error_code& ec) {
  Impl& m = *impl_;
  if (m.header_done) return;  // a trailer: nothing in it is trusted or used
  switch (name) {
    case bhttp::field::authorization:
      if (m.seen_authorization) return m.Reject(400, "more than one Authorization header", ec);
      m.seen_authorization = true;
      m.request.authorization.assign(value.data(), value.size());
      return;
    case bhttp::field::content_type:
      if (m.seen_content_type) return m.Reject(400, "more than one Content-Type header", ec);
      m.seen_content_type = true;
      m.request.content_type.assign(value.data(), value.size());
      return;
    case bhttp::field::connection:
      ForEachListElement(Sv(value), [&m](std::string_view option) {
        if (IEquals(option, "close")) m.connection_close = true;
        if (IEquals(option, "keep-alive")) m.connection_keep_alive = true;
      });
      return;
    case bhttp::field::transfer_encoding: {
      // Beast has already refused a second Transfer-Encoding after
      // "chunked", and one beside Content-Length.
      int codings = 0;
      std::string_view unsupported;
      ForEachListElement(Sv(value), [&](std::string_view coding) {
        ++codings;
        if (!IEquals(coding, "chunked") && unsupported.empty()) unsupported = coding;
      });
      if (!unsupported.empty()) {
        return m.Reject(
            501, "unsupported Transfer-Encoding '" + Printable(unsupported) + "' (only chunked is)",
            ec);
      }
      if (codings != 1) return m.Reject(400, "Transfer-Encoding must be exactly 'chunked'", ec);
      return;
    }
    case bhttp::field::expect:
      // RFC 9110 10.1.1: an HTTP/1.0 request's 100-continue is ignored.
      if (m.request.version >= 11 && IEquals(TrimOws(Sv(value)), "100-continue")) {
        m.expect_continue = true;
      }
      return;
    default:
      return;
  }
}

void RequestParser::Impl::Beast::on_header_impl(error_code& ec) {
  Impl& m = *impl_;
  m.header_done = true;
  m.request.keep_alive =
      !m.connection_close && (m.request.version >= 11 || m.connection_keep_alive);
  m.chunked = chunked();
  if (m.chunked) {
    // One chunk element per put(), so each chunk header gets its own window.
    eager(false);
    // The limit is counted in on_chunk_header_impl instead: Beast 1.74
    // subtracts a chunk's size from its limit before parsing the chunk's
    // extensions, and again each time it retries a line it could not finish,
    // so a split read could turn a malformed line into a false 413.
    body_limit(boost::none);
  }
  m.continue_pending = m.expect_continue && !is_done();
}

void RequestParser::Impl::Beast::on_body_init_impl(
    const boost::optional<std::uint64_t>& content_length, error_code& ec) {
  // Beast has checked Content-Length against body_limit already.
  if (content_length) {
    impl_->request.body.reserve(
        static_cast<size_t>(std::min<uint64_t>(*content_length, kInitialBodyReserve)));
  }
}

size_t RequestParser::Impl::Beast::on_body_impl(boost::beast::string_view body, error_code& ec) {
  impl_->request.body.append(body.data(), body.size());
  return body.size();
}

void RequestParser::Impl::Beast::on_chunk_header_impl(std::uint64_t size,
                                                      boost::beast::string_view extensions,
                                                      error_code& ec) {
  Impl& m = *impl_;
  // Before a byte of the chunk is stored (the final chunk has size 0).
  if (size > m.limits.max_body_bytes - m.request.body.size()) {
    return m.Reject(413, "body exceeds " + std::to_string(m.limits.max_body_bytes) + " bytes", ec);
  }
  m.chunk_remaining = size;
}

size_t RequestParser::Impl::Beast::on_chunk_body_impl(std::uint64_t remain,
                                                      boost::beast::string_view body,
                                                      error_code& ec) {
  impl_->request.body.append(body.data(), body.size());
  impl_->chunk_remaining = remain - body.size();
  return body.size();
}

void RequestParser::Impl::Beast::on_finish_impl(error_code& ec) {
  impl_->complete = true;
  impl_->continue_pending = false;  // the body came with the header
}

void RequestParser::Impl::StartRequest() {
  request.method = Method::kOther;
  request.method_name.clear();
  request.target.clear();
  request.version = 11;
  request.keep_alive = true;
  request.authorization.clear();
  request.content_type.clear();
  request.body.clear();
  header_started = false;
  header_scanned = 0;
  request_consumed = 0;
  chunk_remaining = 0;
  header_done = false;
  chunked = false;
  expect_continue = false;
  connection_close = false;
  connection_keep_alive = false;
  seen_authorization = false;
  seen_content_type = false;
  complete = false;
  continue_pending = false;
  error_status = 0;  // a failed fast path may have set them
  error.clear();
  beast.emplace(this);
  beast->eager(true);
  beast->body_limit(static_cast<uint64_t>(limits.max_body_bytes));
  beast->header_limit(static_cast<uint32_t>(
      std::min<size_t>(limits.max_header_bytes, std::numeric_limits<uint32_t>::max())));
}

void RequestParser::Impl::Reject(int status, std::string message, error_code& ec) {
  error_status = status;
  error = std::move(message);
  ec = bhttp::error::bad_value;  // any error stops Beast; the status above is what counts
}

RequestParser::Status RequestParser::Impl::Fail(int status, std::string message) {
  failed = true;
  in_progress = false;
  continue_pending = false;
  error_status = status;
  error = std::move(message);
  return Status::kError;
}

RequestParser::Status RequestParser::Impl::FailFromBeast(error_code ec, std::string_view at) {
  if (error_status != 0) return Fail(error_status, std::move(error));  // a callback's verdict
  const std::string header_limit = std::to_string(limits.max_header_bytes);
  const std::string body_limit = std::to_string(limits.max_body_bytes);
  if (ec.category() != bhttp::make_error_code(bhttp::error::need_more).category()) {
    return Fail(400, "malformed request: " + ec.message());
  }
  switch (static_cast<bhttp::error>(ec.value())) {
    case bhttp::error::header_limit:
      return Fail(431, "request line and headers exceed " + header_limit + " bytes");
    case bhttp::error::body_limit:
      return Fail(413, "body exceeds " + body_limit + " bytes");
    case bhttp::error::bad_method:
      return Fail(400, "malformed method in request line");
    case bhttp::error::bad_target:
      return Fail(400, "malformed request target");
    case bhttp::error::bad_version: {
      // Beast stops here for an unsupported version and for a malformed
      // one alike; "HTTP/d.d" outside 1.0 and 1.1 is the 505 case.
      // The request line is whole in `at`: Beast consumes none of it early.
      size_t sp1 = at.find(' ');
      size_t sp2 = sp1 == std::string_view::npos ? sp1 : at.find(' ', sp1 + 1);
      std::string_view v = sp2 == std::string_view::npos ? std::string_view() : at.substr(sp2 + 1);
      v = v.substr(0, v.find_first_of("\r\n"));
      bool well_formed = v.size() == 8 && v.substr(0, 5) == "HTTP/" && v[5] >= '0' && v[5] <= '9' &&
                         v[6] == '.' && v[7] >= '0' && v[7] <= '9';
      if (well_formed && v != "HTTP/1.0" && v != "HTTP/1.1") {
        return Fail(
            505, "HTTP version " + std::string(v.substr(5)) + " not supported (1.0 and 1.1 are)");
      }
      if (well_formed) return Fail(400, "request line does not end with CRLF");
      return Fail(400, "malformed HTTP version '" + Printable(v) + "'");
    }
    case bhttp::error::bad_line_ending:
      return Fail(400, "malformed line ending (lines end with CRLF)");
    case bhttp::error::bad_field:
      return Fail(400, "malformed header field name");
    case bhttp::error::bad_value:
      return Fail(400, "malformed header field value");
    case bhttp::error::bad_content_length:
      // Beast refuses a Content-Length too large for 64 bits without saying
      // so; a number is a number, and one that large is a 413.
      if (!header_done && DigitsAbove(FieldValueAt(at), limits.max_body_bytes)) {
        return Fail(413, "body exceeds " + body_limit + " bytes (Content-Length " +
                             Printable(FieldValueAt(at)) + ")");
      }
      return Fail(400, "invalid Content-Length, or Content-Length with chunked encoding");
    case bhttp::error::bad_transfer_encoding:
      return Fail(400, "Transfer-Encoding repeated, or sent with Content-Length");
    case bhttp::error::bad_chunk:
      return Fail(400, "malformed chunk size line");
    case bhttp::error::bad_chunk_extension:
      return Fail(400, "malformed chunk extension");
    case bhttp::error::bad_obs_fold:
      return Fail(400, "malformed folded header line");
    default:
      return Fail(400, "malformed request: " + ec.message());
  }
}

size_t RequestParser::Impl::Put(std::string_view window, error_code* ec) {
  size_t n = beast->put(boost::asio::const_buffer(window.data(), window.size()), *ec);
  request_consumed += n;
  return n;
}

bool RequestParser::Impl::ScanHeader(std::string_view pending, size_t window, size_t* header_end) {
  *header_end = 0;
  size_t i = header_scanned;
  for (; i < window; ++i) {
    unsigned char c = static_cast<unsigned char>(pending[i]);
    if ((c >= 0x20 && c != 0x7f) || c == '\t') continue;
    if (c == '\r') {
      if (i + 1 == window) break;  // its LF is still to come
      if (pending[i + 1] != '\n') {
        Fail(400, "bare CR in request header (lines end with CRLF)");
        return false;
      }
      // The request starts with no CRLF (they are skipped), so a CRLF right
      // after a CRLF is the blank line.
      if (i >= 2 && pending[i - 2] == '\r' && pending[i - 1] == '\n') {
        *header_end = i + 2;
        break;
      }
      ++i;  // past the LF
      continue;
    }
    if (c == '\n') {
      Fail(400, "bare LF in request header (lines end with CRLF)");
    } else {
      const char hex[] = {"0123456789abcdef"[c >> 4], "0123456789abcdef"[c & 0xf], '\0'};
      Fail(400, std::string("control character 0x") + hex + " in request header");
    }
    return false;
  }
  header_scanned = i;
  return true;
}

RequestParser::Status RequestParser::Impl::Parse(std::string_view in, size_t* consumed) {
  *consumed = 0;
  if (failed) return Status::kError;
  if (!beast || complete) StartRequest();
  size_t pos = 0;
  if (!header_done) {
    if (!header_started) {
      // RFC 9112 2.2: empty lines before a request line are ignored.
      while (in.size() - pos >= 2 && in[pos] == '\r' && in[pos + 1] == '\n') pos += 2;
      if (in.size() == pos || (in.size() - pos == 1 && in[pos] == '\r')) {
        *consumed = pos;
        in_progress = pos < in.size();
        return Status::kNeedMore;
      }
    }
    const std::string_view pending = in.substr(pos);
    const size_t window = std::min(pending.size(), limits.max_header_bytes);
    error_code ec;
    size_t n = 0;
    if (!header_started) {
      header_started = true;
      n = Put(pending.substr(0, window), &ec);  // the fast path
      if (!header_done) {  // incomplete or wrong: decided on the whole header below
        StartRequest();
        header_started = true;
        ec = {};
        n = 0;
      }
    }
    if (!header_done) {
      size_t header_end = 0;
      if (!ScanHeader(pending, window, &header_end)) return Status::kError;
      if (header_end == 0) {
        if (pending.size() >= limits.max_header_bytes) {
          return Fail(431, "request line and headers exceed " +
                               std::to_string(limits.max_header_bytes) + " bytes");
        }
        *consumed = pos;
        in_progress = true;
        return Status::kNeedMore;
      }
      n = Put(pending.substr(0, window), &ec);
      if (!header_done && (!ec || ec == bhttp::error::need_more)) {
        return Fail(400, "malformed request header");  // whole, yet Beast wants more
      }
    }
    pos += n;
    if (complete) {
      *consumed = pos;
      in_progress = pos < in.size();
      return Status::kRequest;
    }
    if (ec) return FailFromBeast(ec, in.substr(pos));
  }
  // The body: Beast consumes it as it comes.
  while (pos < in.size()) {
    const size_t rest = in.size() - pos;
    size_t window = rest;
    if (chunked && chunk_remaining == 0) {
      // A chunk-size line, or the last chunk and its trailers (see the top).
      window = std::min(rest, std::max(limits.max_header_bytes, size_t{64}));
      if (rest < kMinChunkHeaderBytes) break;
    }
    error_code ec;
    size_t n = Put(in.substr(pos, window), &ec);
    pos += n;
    if (complete) {
      *consumed = pos;
      in_progress = pos < in.size();
      return Status::kRequest;
    }
    if (ec == bhttp::error::need_more) {
      if (window == rest) break;
      return Fail(
          400, "chunk size line or trailer section exceeds " + std::to_string(window) + " bytes");
    }
    if (ec) return FailFromBeast(ec, in.substr(pos));
    if (n == 0) break;  // waiting for body bytes
  }
  *consumed = pos;
  in_progress = request_consumed > 0 || pos < in.size();
  return Status::kNeedMore;
}

RequestParser::RequestParser(ParserLimits limits) : impl_(std::make_unique<Impl>(limits)) {}
RequestParser::~RequestParser() = default;
RequestParser::RequestParser(RequestParser&&) noexcept = default;
RequestParser& RequestParser::operator=(RequestParser&&) noexcept = default;

RequestParser::Status RequestParser::Parse(std::string_view in, size_t* consumed) {
  return impl_->Parse(in, consumed);
}

const Request& RequestParser::request() const { return impl_->request; }
Request& RequestParser::mutable_request() { return impl_->request; }

bool RequestParser::TakeContinue() { return std::exchange(impl_->continue_pending, false); }
bool RequestParser::InProgress() const { return impl_->in_progress; }
int RequestParser::error_status() const { return impl_->error_status; }
const std::string& RequestParser::error() const { return impl_->error; }

}  // namespace delayq::http
