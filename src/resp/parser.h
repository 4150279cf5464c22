// RequestParser: reads Redis protocol (RESP2) requests from a connection's
// input buffer — what redis-cli, redis-benchmark and every Redis client send:
//
//   *<argc>\r\n  then argc times  $<len>\r\n<len bytes>\r\n      (multibulk)
//   PING\r\n  or  ADD t * 0 1000 hello\r\n                        (inline)
//
// It is incremental: state is kept between calls, so a 256 KiB body that
// arrives in a hundred reads is scanned once, not a hundred times. The
// arguments it returns are views into the caller's buffer.
//
// Every limit is checked before memory is committed to it, so absurd lengths
// ("*2147483647", "$99999999999") are errors, not allocations.
//
// Thread-safety: none; one parser per connection.
#ifndef DELAYQ_RESP_PARSER_H_
#define DELAYQ_RESP_PARSER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace delayq::resp {

struct ParserLimits {
  size_t max_args = 4096;                      // arguments per command. Default: 4096.
  size_t max_bulk_bytes = size_t{8} << 20;     // one argument. Default: 8 MiB.
  size_t max_inline_bytes = size_t{64} << 10;  // one inline command line. Default: 64 KiB.
  // One multibulk command, headers and arguments together, so that many
  // arguments each under max_bulk_bytes cannot add up. Default: 16 MiB.
  size_t max_command_bytes = size_t{16} << 20;
};

class RequestParser {
 public:
  enum class Status {
    kNeedMore,  // no complete command yet: read more and call again
    kCommand,   // args() holds one command
    kError,     // protocol error: reply error() and close the connection
  };

  explicit RequestParser(ParserLimits limits = {}) : limits_(limits) {}

  // Parses the command at the front of `in`, which holds the connection's
  // unconsumed input: the same bytes as the previous call (if it returned
  // kNeedMore) with more appended; the buffer may have moved.
  // On kCommand, *consumed is the command's length in bytes: the caller
  // drops them from its buffer after using args(), and calls again for a
  // pipelined next command. An empty inline line is skipped (kNeedMore with
  // *consumed > 0 is possible: drop those bytes too).
  // REQUIRES: after kCommand or kError, the caller drops *consumed bytes
  // before the next call (kError consumes nothing; the connection closes).
  Status Parse(std::string_view in, size_t* consumed);

  // The arguments of the last kCommand; views into the `in` of that call,
  // valid until the caller changes its buffer.
  const std::vector<std::string_view>& args() const { return args_; }
  // What was wrong, for "-ERR Protocol error: ..." replies.
  const std::string& error() const { return error_; }

 private:
  Status Fail(std::string message);
  Status ParseInline(std::string_view in, size_t* consumed);
  // Reads a "<prefix><integer>\r\n" line at pos_. kNeedMore if incomplete.
  Status ReadLength(std::string_view in, char prefix, int64_t max, int64_t* value);
  void Reset();

  ParserLimits limits_;
  // Progress through a multibulk command, kept across kNeedMore calls.
  size_t pos_ = 0;                                // bytes of the command parsed so far
  int64_t argc_ = -1;                             // -1: header not read yet
  int64_t bulk_len_ = -1;                         // -1: next bulk header not read yet
  std::vector<std::pair<size_t, size_t>> spans_;  // (offset, length) of each argument
  std::vector<std::string_view> args_;
  std::string error_;
};

}  // namespace delayq::resp

#endif  // DELAYQ_RESP_PARSER_H_
