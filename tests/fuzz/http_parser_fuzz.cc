// libFuzzer target for http::RequestParser. Besides "never crash, never read
// out of bounds" (ASan, and Beast's own assertions: this build keeps them),
// it checks a differential property: the input parsed in one piece and parsed
// in the chunks the fuzzer's first byte chooses give the same requests
// (method, target, body, keep-alive) and the same error status.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "http/request_parser.h"

namespace {

using delayq::http::Method;
using delayq::http::ParserLimits;
using delayq::http::Request;
using delayq::http::RequestParser;

void Check(bool ok) {
  if (!ok) std::abort();
}

std::vector<std::string> Run(const std::string& input, size_t chunk) {
  ParserLimits limits;
  limits.max_header_bytes = 512;  // small, so the fuzzer reaches them
  limits.max_body_bytes = 2048;
  RequestParser p(limits);
  std::string buf;
  std::vector<std::string> out;
  size_t off = 0;
  for (;;) {
    if (off < input.size()) {
      buf.append(input, off, chunk);
      off += chunk;
    }
    for (;;) {
      size_t consumed = 0;
      RequestParser::Status s = p.Parse(buf, &consumed);
      Check(consumed <= buf.size());
      if (s == RequestParser::Status::kError) {
        int status = p.error_status();
        Check(status == 400 || status == 413 || status == 431 || status == 501 || status == 505);
        Check(!p.error().empty());
        out.push_back("ERR " + std::to_string(status));
        return out;
      }
      if (s == RequestParser::Status::kRequest) {
        const Request& r = p.request();
        Check(r.version == 10 || r.version == 11);
        Check(r.body.size() <= limits.max_body_bytes);
        Check((r.method == Method::kGet) == (r.method_name == "GET"));
        Check((r.method == Method::kOther) ==
              (r.method_name != "GET" && r.method_name != "HEAD" && r.method_name != "POST" &&
               r.method_name != "PUT" && r.method_name != "DELETE"));
        out.push_back(r.method_name + " " + r.target + " " + std::to_string(r.version) +
                      (r.keep_alive ? " ka " : " close ") + std::to_string(r.body.size()) + ":" +
                      r.body + " auth=" + r.authorization + " ct=" + r.content_type);
      }
      buf.erase(0, consumed);
      if (s == RequestParser::Status::kNeedMore && consumed == 0) break;
    }
    if (off >= input.size()) return out;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  size_t chunk = 1 + data[0] % 17;
  std::string input(reinterpret_cast<const char*>(data + 1), size - 1);
  if (Run(input, input.size() + 1) != Run(input, chunk)) std::abort();
  return 0;
}
