// Appends RESP2 replies to an output buffer. Replies to a pipeline are
// appended one after another and leave in one write.
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

}  // namespace delayq::resp

#endif  // DELAYQ_RESP_WRITER_H_
