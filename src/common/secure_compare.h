// Comparing secrets (auth tokens) without telling an attacker, by how long
// the comparison took, how much of a guess was right.
//
// A plain `a == b` stops at the first differing byte, so its timing reveals
// the length of the matching prefix and a token can be guessed byte by byte.
// Both front ends (HTTP Bearer, RESP AUTH) check tokens with this one helper.
//
// Thread-safety: a pure function.
#ifndef DELAYQ_COMMON_SECURE_COMPARE_H_
#define DELAYQ_COMMON_SECURE_COMPARE_H_

#include <string_view>

namespace delayq {

// Whether `given` equals `secret`. Runs in time that depends only on
// given.size(): never on the contents of either, nor on secret's length (a
// guess of the wrong length reads as many of secret's bytes as a right one).
bool ConstantTimeEquals(std::string_view secret, std::string_view given);

}  // namespace delayq

#endif  // DELAYQ_COMMON_SECURE_COMPARE_H_
