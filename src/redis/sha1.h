// SHA-1 (FIPS 180-4), for one purpose: the name Redis gives a Lua script
// (EVALSHA takes the lowercase hex SHA-1 of the script's source), computed
// here so a script can be run by name without asking Redis first.
// Not for security: SHA-1 is broken for that.
//
// Thread-safety: a pure function.
#ifndef DELAYQ_REDIS_SHA1_H_
#define DELAYQ_REDIS_SHA1_H_

#include <string>
#include <string_view>

namespace delayq::redis {

// The SHA-1 of `data` as 40 lowercase hex digits.
std::string Sha1Hex(std::string_view data);

}  // namespace delayq::redis

#endif  // DELAYQ_REDIS_SHA1_H_
