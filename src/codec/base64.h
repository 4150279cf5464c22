// Base64 (RFC 4648 section 4: the standard alphabet, '=' padding), for job
// bodies that are not UTF-8 and so cannot travel as JSON strings.
#ifndef DELAYQ_CODEC_BASE64_H_
#define DELAYQ_CODEC_BASE64_H_

#include <optional>
#include <string>
#include <string_view>

namespace delayq::codec {

// Always padded: 4 * ceil(n / 3) characters.
std::string Base64Encode(std::string_view bytes);

// Decodes padded input, and unpadded input too (length % 4 of 2 or 3: what
// many encoders emit when told to omit padding). std::nullopt on a character
// outside the alphabet (whitespace and the URL-safe "-_" included), a length
// % 4 of 1, '=' anywhere but the end, padding that does not complete the last
// group, or non-zero bits in the last character's unused low bits (so each
// byte string has exactly one accepted encoding, padded or not).
std::optional<std::string> Base64Decode(std::string_view text);

}  // namespace delayq::codec

#endif  // DELAYQ_CODEC_BASE64_H_
