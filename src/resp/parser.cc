// The multibulk path keeps (offset, length) spans rather than views while a
// command is incomplete, because the caller may move its buffer between
// calls; views are made only once the command is whole.
#include "resp/parser.h"

#include <algorithm>

namespace delayq::resp {
namespace {

constexpr size_t kMaxLengthLine = 32;  // "$" + 20 digits + CRLF, with room

enum Read { kReadMore = 0, kReadOk = 1, kReadBad = -1 };

}  // namespace

void RequestParser::Reset() {
  pos_ = 0;
  argc_ = -1;
  bulk_len_ = -1;
  spans_.clear();
}

RequestParser::Status RequestParser::Fail(std::string message) {
  error_ = std::move(message);
  Reset();
  return Status::kError;
}

RequestParser::Status RequestParser::ReadLength(std::string_view in, char prefix, int64_t max,
                                                int64_t* value) {
  // Returns kCommand for "read", kNeedMore, or kError (Fail already called).
  if (pos_ >= in.size()) return Status::kNeedMore;
  if (in[pos_] != prefix) {
    std::string got = (in[pos_] >= 0x20 && in[pos_] < 0x7f) ? std::string(1, in[pos_]) : "?";
    return Fail(std::string("expected '") + prefix + "', got '" + got + "'");
  }
  size_t end = std::min(in.size(), pos_ + kMaxLengthLine);
  // The common case in one pass: 1-18 digits (no overflow), then CRLF.
  // Anything else (more input needed, an error) takes the general path.
  {
    size_t i = pos_ + 1;
    const size_t digits_end = std::min(end, pos_ + 19);
    int64_t v = 0;
    while (i < digits_end && static_cast<unsigned char>(in[i] - '0') < 10) {
      v = v * 10 + (in[i] - '0');
      ++i;
    }
    if (i > pos_ + 1 && i + 1 < in.size() && in[i] == '\r' && in[i + 1] == '\n') {
      if (v > max) {
        return Fail(prefix == '*' ? "invalid multibulk length" : "invalid bulk length");
      }
      *value = v;
      pos_ = i + 2;
      return Status::kCommand;
    }
  }
  size_t cr = in.find('\r', pos_ + 1);
  if (cr == std::string_view::npos || cr >= end) {
    if (in.size() - pos_ >= kMaxLengthLine) return Fail("length line too long");
    return Status::kNeedMore;
  }
  if (cr + 1 >= in.size()) return Status::kNeedMore;
  if (in[cr + 1] != '\n') return Fail("expected CRLF after length");
  std::string_view digits = in.substr(pos_ + 1, cr - pos_ - 1);
  if (digits.empty())
    return Fail(prefix == '*' ? "invalid multibulk length" : "invalid bulk length");
  int64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9' || v > max) {
      return Fail(prefix == '*' ? "invalid multibulk length" : "invalid bulk length");
    }
    v = v * 10 + (c - '0');
  }
  if (v > max) return Fail(prefix == '*' ? "invalid multibulk length" : "invalid bulk length");
  *value = v;
  pos_ = cr + 2;
  return Status::kCommand;
}

RequestParser::Status RequestParser::ParseInline(std::string_view in, size_t* consumed) {
  size_t nl = in.find('\n');
  if (nl == std::string_view::npos) {
    if (in.size() > limits_.max_inline_bytes) return Fail("too big inline request");
    return Status::kNeedMore;
  }
  if (nl > limits_.max_inline_bytes) return Fail("too big inline request");
  std::string_view line = in.substr(0, nl);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  args_.clear();
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) {
      if (args_.size() == limits_.max_args) return Fail("too many arguments");
      args_.push_back(line.substr(start, i - start));
    }
  }
  *consumed = nl + 1;
  // An empty line is skipped, as Redis does: consume it, no command.
  return args_.empty() ? Status::kNeedMore : Status::kCommand;
}

RequestParser::Status RequestParser::Parse(std::string_view in, size_t* consumed) {
  *consumed = 0;
  if (argc_ < 0) {
    if (in.empty()) return Status::kNeedMore;
    if (in[0] != '*') return ParseInline(in, consumed);
    pos_ = 0;
    Status s = ReadLength(in, '*', static_cast<int64_t>(limits_.max_args), &argc_);
    if (s != Status::kCommand) return s;
    if (argc_ == 0) {  // "*0\r\n": nothing to run
      *consumed = pos_;
      Reset();
      return Status::kNeedMore;
    }
    spans_.reserve(static_cast<size_t>(std::min<int64_t>(argc_, 64)));
  }
  while (static_cast<int64_t>(spans_.size()) < argc_) {
    if (bulk_len_ < 0) {
      Status s = ReadLength(in, '$', static_cast<int64_t>(limits_.max_bulk_bytes), &bulk_len_);
      if (s != Status::kCommand) return s;
    }
    size_t len = static_cast<size_t>(bulk_len_);
    if (pos_ + len + 2 > limits_.max_command_bytes) {
      return Fail("command longer than " + std::to_string(limits_.max_command_bytes) + " bytes");
    }
    if (in.size() - pos_ < len + 2) return Status::kNeedMore;
    if (in[pos_ + len] != '\r' || in[pos_ + len + 1] != '\n') {
      return Fail("expected CRLF after bulk string");
    }
    spans_.emplace_back(pos_, len);
    pos_ += len + 2;
    bulk_len_ = -1;
  }
  args_.clear();
  for (const auto& [offset, length] : spans_) args_.push_back(in.substr(offset, length));
  *consumed = pos_;
  Reset();
  return Status::kCommand;
}

}  // namespace delayq::resp
