// Appends RESP2 and RESP3 replies to an output buffer. Replies to a
// pipeline are appended one after another and leave in one write.
//
// A connection speaks RESP2 until it asks for RESP3 (HELLO 3). The replies
// whose form differs between the two take the connection's Protocol: a map
// is a flat array of pairs in RESP2, a null is "$-1" or "*-1" there.
//
// Simple strings and errors cannot carry CR or LF on the wire; these
// functions replace them with spaces so a message can never break framing.
#ifndef DELAYQ_RESP_WRITER_H_
#define DELAYQ_RESP_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace delayq::resp {

// "+OK\r\n"
void AppendSimple(std::string* out, std::string_view s);
// "-NOTFOUND job 'x' does not exist\r\n": `line` starts with the error prefix.
void AppendError(std::string* out, std::string_view line);
// ":42\r\n"
void AppendInteger(std::string* out, int64_t v);
// "$5\r\nhello\r\n"; binary safe.
void AppendBulk(std::string* out, std::string_view s);
// "$-1\r\n" (nil)
void AppendNullBulk(std::string* out);
// "*-1\r\n" (nil array)
void AppendNullArray(std::string* out);
// "*3\r\n", to be followed by n replies.
void AppendArrayHeader(std::string* out, size_t n);

// The protocol version a connection speaks.
enum class Protocol : uint8_t { kResp2 = 2, kResp3 = 3 };

// A map of `pairs` key/value pairs, to be followed by them: "%2\r\n" in
// RESP3, the flat array "*4\r\n" in RESP2.
void AppendMapHeader(std::string* out, size_t pairs, Protocol p);
// A set of n replies: "~3\r\n" in RESP3, "*3\r\n" in RESP2.
void AppendSetHeader(std::string* out, size_t n, Protocol p);
// Nothing, where RESP2 sends a nil bulk string: "_\r\n" in RESP3, "$-1\r\n".
void AppendNull(std::string* out, Protocol p);
// Nothing, where RESP2 sends a nil array: "_\r\n" in RESP3, "*-1\r\n".
void AppendNullArray(std::string* out, Protocol p);
// Text meant to be shown as it is (INFO, CLIENT LIST): RESP3's verbatim
// string "=<n>\r\ntxt:<text>\r\n", a bulk string in RESP2.
void AppendVerbatim(std::string* out, std::string_view text, Protocol p);

}  // namespace delayq::resp

#endif  // DELAYQ_RESP_WRITER_H_
