// Reply: one RESP2 reply from Redis, owned: nil, integer, bulk string,
// status ("+OK"), error ("-ERR ...") or an array of replies (nested to any
// depth). hiredis's parser builds it directly (connection.cc gives the
// reader its own object functions), so nothing outside this layer sees
// hiredis.
//
// An error reply is a successful call that Redis answered with an error: it
// comes back as a Reply of type kError and the caller decides. Trouble
// talking to Redis is a non-OK Status (kUnavailable) instead, never a Reply.
//
// Thread-safety: a value; distinct objects need no synchronisation.
#ifndef DELAYQ_REDIS_REPLY_H_
#define DELAYQ_REDIS_REPLY_H_

#include <cassert>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace delayq::redis {

class Reply {
 public:
  enum class Type : unsigned char { kNil, kInteger, kString, kStatus, kError, kArray };

  // A nil reply.
  Reply() = default;

  static Reply Nil() { return Reply(); }
  static Reply Integer(int64_t value) {
    Reply r(Type::kInteger);
    r.integer_ = value;
    return r;
  }
  static Reply String(std::string value) { return WithText(Type::kString, std::move(value)); }
  static Reply Status(std::string value) { return WithText(Type::kStatus, std::move(value)); }
  // `value` is the whole line without '-': "NOSCRIPT No matching script...".
  static Reply Error(std::string value) { return WithText(Type::kError, std::move(value)); }
  static Reply Array(std::vector<Reply> elements) {
    Reply r(Type::kArray);
    r.elements_ = std::move(elements);
    return r;
  }

  Type type() const { return type_; }
  bool is_nil() const { return type_ == Type::kNil; }
  bool is_integer() const { return type_ == Type::kInteger; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_status() const { return type_ == Type::kStatus; }
  bool is_error() const { return type_ == Type::kError; }
  bool is_array() const { return type_ == Type::kArray; }

  // The bytes of a bulk string, the text of a status or of an error.
  // REQUIRES: is_string() || is_status() || is_error().
  const std::string& str() const {
    assert(is_string() || is_status() || is_error());
    return str_;
  }
  std::string& str() {
    assert(is_string() || is_status() || is_error());
    return str_;
  }
  // REQUIRES: is_integer().
  int64_t integer() const {
    assert(is_integer());
    return integer_;
  }
  // REQUIRES: is_array().
  const std::vector<Reply>& elements() const {
    assert(is_array());
    return elements_;
  }
  std::vector<Reply>& elements() {
    assert(is_array());
    return elements_;
  }

  // The first word of an error reply ("MOVED", "ASK", "NOSCRIPT", "ERR",
  // "WRONGTYPE"); empty for any other type.
  std::string_view error_code() const;

  // A readable rendering, for messages and test failures: nil, 42, "bytes"
  // (escaped), +OK, -ERR text, [a, b, [c]].
  std::string ToString() const;

  friend bool operator==(const Reply&, const Reply&) = default;

 private:
  explicit Reply(Type type) : type_(type) {}
  static Reply WithText(Type type, std::string text) {
    Reply r(type);
    r.str_ = std::move(text);
    return r;
  }

  Type type_ = Type::kNil;
  int64_t integer_ = 0;          // kInteger
  std::string str_;              // kString, kStatus, kError
  std::vector<Reply> elements_;  // kArray
};

}  // namespace delayq::redis

#endif  // DELAYQ_REDIS_REPLY_H_
