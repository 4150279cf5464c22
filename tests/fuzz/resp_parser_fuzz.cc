// libFuzzer target for resp::RequestParser. Besides "never crash, never read
// out of bounds" (ASan), it checks a differential property: the input parsed
// in one piece and parsed in the chunks the fuzzer's first byte chooses give
// the same commands and the same error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "resp/parser.h"

namespace {

using delayq::resp::ParserLimits;
using delayq::resp::RequestParser;

std::vector<std::string> Run(const std::string& input, size_t chunk) {
  ParserLimits limits;
  limits.max_bulk_bytes = 1 << 16;
  limits.max_inline_bytes = 1 << 12;
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
      if (consumed > buf.size()) std::abort();
      if (s == RequestParser::Status::kError) {
        out.push_back("ERR " + p.error());
        return out;
      }
      if (s == RequestParser::Status::kCommand) {
        std::string cmd;
        for (std::string_view a : p.args()) {
          if (a.data() < buf.data() || a.data() + a.size() > buf.data() + buf.size()) std::abort();
          cmd += std::to_string(a.size()) + ":" + std::string(a) + ",";
        }
        out.push_back(cmd);
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
