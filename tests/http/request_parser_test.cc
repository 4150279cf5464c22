// RequestParser through real byte streams: whole, pipelined, split at every
// byte, over and exactly at every limit, and hostile.
#include "http/request_parser.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace delayq::http {
namespace {

using Status = RequestParser::Status;
using Lines = std::vector<std::string>;

// One line per request: "METHOD target version ka|close body", with
// " auth=..." and " ct=..." when present; "ERR <status>" on an error.
std::string Describe(const Request& r) {
  std::string s = r.method_name + " " + r.target + " " + std::to_string(r.version) +
                  (r.keep_alive ? " ka " : " close ") + r.body;
  if (!r.authorization.empty()) s += " auth=" + r.authorization;
  if (!r.content_type.empty()) s += " ct=" + r.content_type;
  return s;
}

// Feeds `stream` to a parser in pieces of `chunk` bytes, as reads would
// deliver it, dropping consumed bytes as a server does.
Lines Feed(const std::string& stream, size_t chunk, ParserLimits limits = {}) {
  RequestParser p(limits);
  std::string buf;
  Lines out;
  for (size_t off = 0;;) {
    if (off < stream.size()) {
      buf.append(stream, off, chunk);
      off += chunk;
    }
    for (;;) {
      size_t consumed = 0;
      Status s = p.Parse(buf, &consumed);
      EXPECT_LE(consumed, buf.size());
      if (s == Status::kError) {
        out.push_back("ERR " + std::to_string(p.error_status()));
        return out;
      }
      if (s == Status::kRequest) out.push_back(Describe(p.request()));
      buf.erase(0, consumed);
      if (s == Status::kNeedMore && consumed == 0) break;
    }
    if (off >= stream.size()) return out;
  }
}

Lines Whole(const std::string& stream, ParserLimits limits = {}) {
  return Feed(stream, stream.size() + 1, limits);
}

// The status of the first error parsing `stream` whole, or 0.
int ErrorStatus(const std::string& stream, ParserLimits limits = {}) {
  RequestParser p(limits);
  size_t consumed = 0;
  std::string buf = stream;
  for (;;) {
    Status s = p.Parse(buf, &consumed);
    if (s == Status::kError) return p.error_status();
    buf.erase(0, consumed);
    if (s == Status::kNeedMore) return 0;
  }
}

std::string ErrorMessage(const std::string& stream, ParserLimits limits = {}) {
  RequestParser p(limits);
  size_t consumed = 0;
  EXPECT_EQ(p.Parse(stream, &consumed), Status::kError) << stream;
  return p.error();
}

TEST(RequestParser, GetIsParsedWithTheFieldsDelayqUses) {
  RequestParser p;
  const std::string s =
      "GET /v1/jobs/a%2Fb?wait=5 HTTP/1.1\r\nHost: x\r\nAuthorization:  Bearer tok \r\n"
      "content-type: text/plain\r\nX-Other: y\r\n\r\n";
  size_t consumed = 0;
  ASSERT_EQ(p.Parse(s, &consumed), Status::kRequest);
  EXPECT_EQ(consumed, s.size());
  const Request& r = p.request();
  EXPECT_EQ(r.method, Method::kGet);
  EXPECT_EQ(r.method_name, "GET");
  EXPECT_EQ(r.target, "/v1/jobs/a%2Fb?wait=5");
  EXPECT_EQ(r.version, 11);
  EXPECT_TRUE(r.keep_alive);
  EXPECT_EQ(r.authorization, "Bearer tok");
  EXPECT_EQ(r.content_type, "text/plain");
  EXPECT_EQ(r.body, "");
  EXPECT_FALSE(p.InProgress());
}

TEST(RequestParser, MethodsMapToTheEnumAndOthersKeepTheirName) {
  const std::pair<const char*, Method> cases[] = {
      {"GET", Method::kGet},   {"HEAD", Method::kHead},     {"POST", Method::kPost},
      {"PUT", Method::kPut},   {"DELETE", Method::kDelete}, {"PATCH", Method::kOther},
      {"get", Method::kOther}, {"OPTIONS", Method::kOther}, {"X-CUSTOM", Method::kOther}};
  for (const auto& [name, method] : cases) {
    RequestParser p;
    size_t consumed = 0;
    ASSERT_EQ(p.Parse(std::string(name) + " / HTTP/1.1\r\n\r\n", &consumed), Status::kRequest)
        << name;
    EXPECT_EQ(p.request().method, method) << name;
    EXPECT_EQ(p.request().method_name, name);
  }
}

TEST(RequestParser, ContentLengthBodyIsReadAsBytes) {
  const std::string body("a\0\r\n\xff\x01z", 7);
  EXPECT_EQ(Whole("POST /t HTTP/1.1\r\nContent-Length: 7\r\n\r\n" + body),
            (Lines{"POST /t 11 ka " + body}));
}

TEST(RequestParser, PipelinedRequestsInOneBufferComeOutInOrder) {
  std::string s;
  for (int i = 0; i < 100; ++i) {
    std::string body = std::to_string(i);
    s += "POST /" + std::to_string(i) +
         " HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  }
  RequestParser p;
  std::string_view rest = s;
  for (int i = 0; i < 100; ++i) {
    size_t consumed = 0;
    ASSERT_EQ(p.Parse(rest, &consumed), Status::kRequest) << i;
    EXPECT_EQ(p.request().target.substr(1), std::to_string(i));
    EXPECT_EQ(p.request().body, std::to_string(i));
    EXPECT_EQ(p.InProgress(), i < 99);  // the next request's bytes are pending
    rest.remove_prefix(consumed);
  }
  EXPECT_TRUE(rest.empty());
  size_t consumed = 1;
  EXPECT_EQ(p.Parse(rest, &consumed), Status::kNeedMore);
  EXPECT_EQ(consumed, 0u);
}

// A stream with every framing the parser knows.
const std::string kMixedStream =
    "\r\n"
    "GET /a?x=1 HTTP/1.1\r\nHost: h\r\nAuthorization: Basic dTpw\r\n\r\n"
    "POST /b HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n"
    "{\"k\":\"v\"}\r\n"
    "PUT /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
    "5;name=value\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nX-Trailer: t\r\n\r\n"
    "HEAD /d HTTP/1.0\r\n\r\n"
    "DELETE /e HTTP/1.0\r\nConnection: keep-alive\r\nExpect: 100-continue\r\n"
    "Content-Length: 3\r\n\r\nxyz"
    "GET /f HTTP/1.1\r\nConnection: close\r\n\r\n";

const Lines kMixedRequests = {
    "GET /a?x=1 11 ka  auth=Basic dTpw",
    "POST /b 11 ka {\"k\":\"v\"}\r\n ct=application/json",
    "PUT /c 11 ka hello world",
    "HEAD /d 10 close ",
    "DELETE /e 10 ka xyz",
    "GET /f 11 close ",
};

TEST(RequestParser, StreamSplitIntoPiecesOfEverySizeParsesTheSame) {
  ASSERT_EQ(Whole(kMixedStream), kMixedRequests);
  for (size_t chunk = 1; chunk <= kMixedStream.size(); ++chunk) {
    EXPECT_EQ(Feed(kMixedStream, chunk), kMixedRequests) << "chunk " << chunk;
  }
}

TEST(RequestParser, StreamSplitInTwoAtEveryOffsetParsesTheSame) {
  for (size_t cut = 0; cut <= kMixedStream.size(); ++cut) {
    RequestParser p;
    std::string buf = kMixedStream.substr(0, cut);
    Lines out;
    bool second_half_added = false;
    for (;;) {
      size_t consumed = 0;
      Status s = p.Parse(buf, &consumed);
      ASSERT_NE(s, Status::kError) << "cut " << cut << ": " << p.error();
      if (s == Status::kRequest) out.push_back(Describe(p.request()));
      buf.erase(0, consumed);
      if (s == Status::kNeedMore && consumed == 0) {
        if (second_half_added) break;
        buf += kMixedStream.substr(cut);
        second_half_added = true;
      }
    }
    EXPECT_EQ(out, kMixedRequests) << "cut " << cut;
  }
}

TEST(RequestParser, ChunkedBodyIsJoinedAndTrailersAreNotTrusted) {
  EXPECT_EQ(Whole("POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n"
                  "3\r\nabc\r\nA;x=\"q\"\r\n0123456789\r\n0\r\n"
                  "Authorization: evil\r\nContent-Type: evil\r\n\r\n"),
            (Lines{"POST / 11 ka abc0123456789"}));
  // An empty chunked body.
  EXPECT_EQ(Whole("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
            (Lines{"POST / 11 ka "}));
}

TEST(RequestParser, PartialBodyIsConsumedAsItArrives) {
  RequestParser p;
  const std::string header = "POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\n";
  size_t consumed = 0;
  ASSERT_EQ(p.Parse(header + "0123", &consumed), Status::kNeedMore);
  EXPECT_EQ(consumed, header.size() + 4);  // header and the body so far: drop them
  EXPECT_TRUE(p.InProgress());
  ASSERT_EQ(p.Parse("4567", &consumed), Status::kNeedMore);
  EXPECT_EQ(consumed, 4u);
  ASSERT_EQ(p.Parse("89GET", &consumed), Status::kRequest);
  EXPECT_EQ(consumed, 2u);
  EXPECT_EQ(p.request().body, "0123456789");
  EXPECT_TRUE(p.InProgress());  // "GET" is pending
}

TEST(RequestParser, PartialHeaderIsNeverConsumed) {
  RequestParser p;
  size_t consumed = 9;
  EXPECT_FALSE(p.InProgress());
  ASSERT_EQ(p.Parse("GET / HT", &consumed), Status::kNeedMore);
  EXPECT_EQ(consumed, 0u);
  EXPECT_TRUE(p.InProgress());
  const std::string s = "GET / HTTP/1.1\r\nHost: x\r\nAuthorization: a\r\nX-";
  ASSERT_EQ(p.Parse(s, &consumed), Status::kNeedMore);
  EXPECT_EQ(consumed, 0u);  // the caller keeps the header until it is whole
  ASSERT_EQ(p.Parse(s + "Y: z\r\n\r\n", &consumed), Status::kRequest);
  EXPECT_EQ(p.request().authorization, "a");
}

TEST(RequestParser, BytesNoHeaderMayHoldAreRefusedBeforeTheHeaderEnds) {
  // A TLS ClientHello on the plain port, a bare LF, a bare CR, a DEL.
  for (const std::string& s :
       {std::string("\x16\x03\x01\x02\x00\x01", 6), std::string("GET / HTTP/1.1\nHost: x"),
        std::string("GET / HTTP/1.1\r\nX: a\rb"), std::string("GET /\x7f")}) {
    EXPECT_EQ(Feed(s, 1), (Lines{"ERR 400"})) << s;
    EXPECT_EQ(Whole(s), (Lines{"ERR 400"})) << s;
  }
  EXPECT_NE(ErrorMessage(std::string("\x16\x03", 2)).find("0x16"), std::string::npos);
}

TEST(RequestParser, WellFormedButWrongHeaderIsJudgedWhenWhole) {
  // Beast would see the bad field at once; split reads must not change the
  // verdict, so it comes with the blank line, whatever the reads were.
  const std::string s = "GET / HTTP/1.1\r\nBad Field: x\r\n";
  EXPECT_EQ(Whole(s), (Lines{}));
  EXPECT_EQ(Feed(s, 3), (Lines{}));
  EXPECT_EQ(Whole(s + "\r\n"), (Lines{"ERR 400"}));
  EXPECT_EQ(Feed(s + "\r\n", 3), (Lines{"ERR 400"}));
}

TEST(RequestParser, EmptyLinesBeforeARequestAreSkipped) {
  RequestParser p;
  size_t consumed = 0;
  ASSERT_EQ(p.Parse("\r\n\r\n", &consumed), Status::kNeedMore);
  EXPECT_EQ(consumed, 4u);
  EXPECT_FALSE(p.InProgress());
  ASSERT_EQ(p.Parse("\r", &consumed), Status::kNeedMore);
  EXPECT_EQ(consumed, 0u);
  ASSERT_EQ(p.Parse("\r\nGET / HTTP/1.1\r\n\r\n", &consumed), Status::kRequest);
  EXPECT_EQ(p.request().target, "/");
}

TEST(RequestParser, ExpectContinueIsAnnouncedOnceWhileTheBodyIsMissing) {
  RequestParser p;
  size_t consumed = 0;
  const std::string header = "POST / HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 4\r\n\r\n";
  ASSERT_EQ(p.Parse(header, &consumed), Status::kNeedMore);
  EXPECT_EQ(consumed, header.size());
  EXPECT_TRUE(p.TakeContinue());
  EXPECT_FALSE(p.TakeContinue());
  ASSERT_EQ(p.Parse("ab", &consumed), Status::kNeedMore);
  EXPECT_FALSE(p.TakeContinue());
  ASSERT_EQ(p.Parse("cd", &consumed), Status::kRequest);
  EXPECT_EQ(p.request().body, "abcd");
  EXPECT_FALSE(p.TakeContinue());

  // The body arrived with the header: nothing to announce.
  ASSERT_EQ(p.Parse(header + "abcd", &consumed), Status::kRequest);
  EXPECT_FALSE(p.TakeContinue());
  // No body at all.
  ASSERT_EQ(p.Parse("GET / HTTP/1.1\r\nExpect: 100-continue\r\n\r\n", &consumed), Status::kRequest);
  EXPECT_FALSE(p.TakeContinue());
  // Chunked: announced too.
  ASSERT_EQ(p.Parse("PUT / HTTP/1.1\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n",
                    &consumed),
            Status::kNeedMore);
  EXPECT_TRUE(p.TakeContinue());
}

TEST(RequestParser, ExpectContinueFromHttp10IsIgnored) {
  RequestParser p;
  size_t consumed = 0;
  ASSERT_EQ(
      p.Parse("POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n", &consumed),
      Status::kNeedMore);
  EXPECT_FALSE(p.TakeContinue());
}

TEST(RequestParser, KeepAliveFollowsTheVersionAndConnection) {
  auto keep_alive = [](const std::string& version, const std::string& connection) {
    RequestParser p;
    size_t consumed = 0;
    std::string s = "GET / " + version + "\r\n";
    if (!connection.empty()) s += "Connection: " + connection + "\r\n";
    EXPECT_EQ(p.Parse(s + "\r\n", &consumed), Status::kRequest);
    return p.request().keep_alive;
  };
  EXPECT_TRUE(keep_alive("HTTP/1.1", ""));
  EXPECT_TRUE(keep_alive("HTTP/1.1", "keep-alive"));
  EXPECT_TRUE(keep_alive("HTTP/1.1", "Upgrade"));
  EXPECT_FALSE(keep_alive("HTTP/1.1", "close"));
  EXPECT_FALSE(keep_alive("HTTP/1.1", "CLOSE"));
  EXPECT_FALSE(keep_alive("HTTP/1.1", "keep-alive, close"));
  EXPECT_FALSE(keep_alive("HTTP/1.0", ""));
  EXPECT_TRUE(keep_alive("HTTP/1.0", "keep-alive"));
  EXPECT_TRUE(keep_alive("HTTP/1.0", "Keep-Alive"));
  EXPECT_FALSE(keep_alive("HTTP/1.0", "close, keep-alive"));
}

TEST(RequestParser, FieldsAreResetBetweenRequests) {
  EXPECT_EQ(Whole("POST / HTTP/1.1\r\nAuthorization: a\r\nContent-Type: t\r\n"
                  "Content-Length: 1\r\n\r\nx"
                  "GET / HTTP/1.0\r\n\r\n"),
            (Lines{"POST / 11 ka x auth=a ct=t", "GET / 10 close "}));
}

TEST(RequestParser, HeaderLimitIsMetExactlyAndExceededByOneByte) {
  ParserLimits limits;
  limits.max_header_bytes = 100;
  const std::string start = "GET / HTTP/1.1\r\nX: ";
  const std::string end = "\r\n\r\n";
  const std::string fits = start + std::string(100 - start.size() - end.size(), 'v') + end;
  const std::string over = start + std::string(101 - start.size() - end.size(), 'v') + end;
  ASSERT_EQ(fits.size(), 100u);
  for (size_t chunk : {size_t{1}, size_t{7}, size_t{99}, size_t{100}, size_t{1000}}) {
    EXPECT_EQ(Feed(fits + "GET /2 HTTP/1.1\r\n\r\n", chunk, limits),
              (Lines{"GET / 11 ka ", "GET /2 11 ka "}))
        << chunk;
    EXPECT_EQ(Feed(over, chunk, limits), (Lines{"ERR 431"})) << chunk;
  }
  // A request line alone over the limit.
  EXPECT_EQ(Feed("GET /" + std::string(200, 'a'), 16, limits), (Lines{"ERR 431"}));
  // A header that never ends.
  EXPECT_EQ(Feed("GET / HTTP/1.1\r\n" + std::string(200, 'a'), 16, limits), (Lines{"ERR 431"}));
  EXPECT_NE(ErrorMessage(over, limits).find("100 bytes"), std::string::npos);
}

TEST(RequestParser, ContentLengthLimitIsMetExactlyAndExceededByOneByte) {
  ParserLimits limits;
  limits.max_body_bytes = 10;
  EXPECT_EQ(Whole("POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789", limits),
            (Lines{"POST / 11 ka 0123456789"}));
  // Refused on the header: no body byte is waited for or stored.
  EXPECT_EQ(ErrorStatus("POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n", limits), 413);
}

TEST(RequestParser, ChunkedLimitCountsTheJoinedBody) {
  ParserLimits limits;
  limits.max_body_bytes = 10;
  const std::string head = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  EXPECT_EQ(Whole(head + "6\r\n012345\r\n4\r\n6789\r\n0\r\n\r\n", limits),
            (Lines{"POST / 11 ka 0123456789"}));
  // Refused on the second chunk's size line, before its data.
  EXPECT_EQ(ErrorStatus(head + "6\r\n012345\r\n5\r\n", limits), 413);
  EXPECT_EQ(ErrorStatus(head + "ffffffffff\r\n", limits), 413);
}

TEST(RequestParser, AbsurdContentLengthIsRefusedNotAllocated) {
  EXPECT_EQ(ErrorStatus("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n"), 413);
  EXPECT_EQ(ErrorStatus("POST / HTTP/1.1\r\nContent-Length: 18446744073709551615\r\n\r\n"), 413);
  EXPECT_EQ(ErrorStatus("POST / HTTP/1.1\r\nContent-Length: 18446744073709551616\r\n\r\n"), 413);
  EXPECT_EQ(ErrorStatus("POST / HTTP/1.1\r\nContent-Length: 1048577\r\n\r\n"), 413);
  EXPECT_EQ(ErrorStatus("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"), 400);
  EXPECT_EQ(ErrorStatus("POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n"), 400);
  EXPECT_EQ(ErrorStatus("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"), 400);
  EXPECT_EQ(ErrorStatus("POST / HTTP/1.1\r\nContent-Length: \r\n\r\n"), 400);
}

TEST(RequestParser, ChunkSizeOverflowIsMalformed) {
  EXPECT_EQ(ErrorStatus("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                        "fffffffffffffffffffff\r\n"),
            400);
  EXPECT_EQ(ErrorStatus("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n"), 400);
  EXPECT_EQ(ErrorStatus("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                        "1\r\naXY0\r\n\r\n"),
            400);
}

// Regression: Beast 1.74 charges a chunk against its body limit before
// parsing the chunk's extensions, and again on every retry of a line it
// could not finish; a quoted extension running past the line end made split
// reads answer 413 where one read answered 400.
TEST(RequestParser, QuotedChunkExtensionPastTheLineEndIsNot413WhenSplit) {
  ParserLimits limits;
  limits.max_body_bytes = 20;
  const std::string s =
      "PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5;ext=\"   \r\n" +
      std::string(60, ' ') + "\"\r\nhello\r\n0\r\n\r\n";
  const Lines whole = Whole(s, limits);
  EXPECT_EQ(whole, (Lines{"ERR 400"}));
  for (size_t chunk = 1; chunk < 20; ++chunk) EXPECT_EQ(Feed(s, chunk, limits), whole) << chunk;
}

TEST(RequestParser, EndlessChunkLineOrTrailerIsRefused) {
  ParserLimits limits;
  limits.max_header_bytes = 100;
  const std::string head = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string long_ext = "1;" + std::string(200, 'e');
  EXPECT_EQ(Feed(head + long_ext, 1000, limits), (Lines{"ERR 400"}));
  EXPECT_EQ(Feed(head + long_ext, 3, limits), (Lines{"ERR 400"}));
  const std::string long_trailer = "0\r\nX: " + std::string(200, 't');
  EXPECT_EQ(Feed(head + long_trailer, 1000, limits), (Lines{"ERR 400"}));
  EXPECT_EQ(Feed(head + long_trailer, 5, limits), (Lines{"ERR 400"}));
  // Zeros are a valid way to write a chunk size, but not without end.
  EXPECT_EQ(Feed(head + std::string(200, '0'), 10, limits), (Lines{"ERR 400"}));
}

TEST(RequestParser, UnsupportedTransferEncodingIs501) {
  for (const char* te : {"gzip", "gzip, chunked", "identity", "chunked;q=1", "deflate"}) {
    EXPECT_EQ(ErrorStatus(std::string("POST / HTTP/1.1\r\nTransfer-Encoding: ") + te +
                          "\r\n\r\n0\r\n\r\n"),
              501)
        << te;
  }
  EXPECT_NE(ErrorMessage("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n").find("gzip"),
            std::string::npos);
}

TEST(RequestParser, AmbiguousFramingIs400) {
  // Request smuggling shapes: both lengths, chunked twice, chunked not last.
  EXPECT_EQ(ErrorStatus("POST / HTTP/1.1\r\nContent-Length: 3\r\n"
                        "Transfer-Encoding: chunked\r\n\r\n"),
            400);
  EXPECT_EQ(ErrorStatus("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
                        "Content-Length: 3\r\n\r\n"),
            400);
  EXPECT_EQ(ErrorStatus("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
                        "Transfer-Encoding: chunked\r\n\r\n"),
            400);
  EXPECT_EQ(ErrorStatus("POST / HTTP/1.1\r\nTransfer-Encoding: chunked, chunked\r\n\r\n"), 400);
  EXPECT_EQ(ErrorStatus("POST / HTTP/1.1\r\nTransfer-Encoding: \r\n\r\n"), 400);
  EXPECT_EQ(ErrorStatus("GET / HTTP/1.1\r\nAuthorization: a\r\nAuthorization: b\r\n\r\n"), 400);
  EXPECT_EQ(ErrorStatus("GET / HTTP/1.1\r\nContent-Type: a\r\nContent-Type: b\r\n\r\n"), 400);
}

TEST(RequestParser, UnsupportedVersionIs505AndMalformedVersionIs400) {
  EXPECT_EQ(ErrorStatus("GET / HTTP/2.0\r\n\r\n"), 505);
  EXPECT_EQ(ErrorStatus("GET / HTTP/0.9\r\n\r\n"), 505);
  EXPECT_EQ(ErrorStatus("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 505);
  EXPECT_EQ(ErrorStatus("GET / HTTP/1.2\r\n\r\n"), 505);
  EXPECT_EQ(ErrorStatus("GET / HTTX/1.1\r\n\r\n"), 400);
  EXPECT_EQ(ErrorStatus("GET / HTTP/1.1x\r\n\r\n"), 400);
  EXPECT_EQ(ErrorStatus("GET / HTTP/1.10\r\n\r\n"), 400);
  EXPECT_EQ(ErrorStatus("GET / http/1.1\r\n\r\n"), 400);
  EXPECT_EQ(ErrorStatus("GET / HTTP/1.1\n\n"), 400);
  EXPECT_NE(ErrorMessage("GET / HTTP/2.0\r\n\r\n").find("2.0"), std::string::npos);
}

TEST(RequestParser, MalformedRequestsAre400) {
  const char* cases[] = {
      "GET\r\n\r\n",                             // no target
      "GET  / HTTP/1.1\r\n\r\n",                 // two spaces: empty target
      " GET / HTTP/1.1\r\n\r\n",                 // empty method
      "G(T / HTTP/1.1\r\n\r\n",                  // not a token
      "GET /\x01 HTTP/1.1\r\n\r\n",              // control character in target
      "GET / HTTP/1.1\r\nNo colon\r\n\r\n",      // field without ':'
      "GET / HTTP/1.1\r\n: empty name\r\n\r\n",  // empty field name
      "GET / HTTP/1.1\r\nX : y\r\n\r\n",         // space before ':'
      "GET / HTTP/1.1\r\nX: a\x01z\r\n\r\n",     // control character in value
      "GET / HTTP/1.1\r\nX: y\rZ\r\n\r\n",       // bare CR
      "GET / HTTP/1.1\r\nX: y\r\n\rZ",           // bare CR ending the header
  };
  for (const char* c : cases) {
    EXPECT_EQ(ErrorStatus(c), 400) << c;
    EXPECT_FALSE(ErrorMessage(c).empty()) << c;
  }
}

TEST(RequestParser, BinaryGarbageIsAnErrorAtEveryChunking) {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::string s(1 + rng() % 300, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    if (s[0] == '\r') s[0] = 'x';
    Lines whole = Whole(s);
    // Random bytes almost never make a request; whatever they make, the
    // answer does not depend on how they were split.
    if (!whole.empty()) {
      EXPECT_EQ(whole.back(), "ERR 400");
    }
    EXPECT_EQ(Feed(s, 1 + rng() % 13), whole);
  }
}

TEST(RequestParser, ErrorIsStickyAndConsumesNothing) {
  RequestParser p;
  size_t consumed = 5;
  ASSERT_EQ(p.Parse(std::string("\x00\xff\r\n\r\n", 6), &consumed), Status::kError);
  EXPECT_EQ(consumed, 0u);
  EXPECT_EQ(p.error_status(), 400);
  EXPECT_FALSE(p.InProgress());
  EXPECT_EQ(p.Parse("GET / HTTP/1.1\r\n\r\n", &consumed), Status::kError);
}

TEST(RequestParser, MovedParserContinuesTheRequest) {
  RequestParser p;
  size_t consumed = 0;
  ASSERT_EQ(p.Parse("POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\na", &consumed), Status::kNeedMore);
  RequestParser q(std::move(p));
  ASSERT_EQ(q.Parse("b", &consumed), Status::kRequest);
  EXPECT_EQ(q.request().body, "ab");
}

TEST(RequestParser, RequestStringsKeepTheirCapacityAcrossRequests) {
  RequestParser p;
  size_t consumed = 0;
  const std::string body(1000, 'b');
  ASSERT_EQ(p.Parse("POST / HTTP/1.1\r\nContent-Length: 1000\r\n\r\n" + body, &consumed),
            Status::kRequest);
  const char* data = p.request().body.data();
  ASSERT_EQ(p.Parse("POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", &consumed),
            Status::kRequest);
  EXPECT_EQ(p.request().body.data(), data);
  EXPECT_EQ(p.request().body, "abc");
}

}  // namespace
}  // namespace delayq::http
