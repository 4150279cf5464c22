#include "common/secure_compare.h"

#include <cstddef>

namespace delayq {

bool ConstantTimeEquals(std::string_view secret, std::string_view given) {
  // Every byte of `given` is compared with secret's byte at the same offset
  // (cycling over a shorter secret), and the differences are OR-ed: no
  // branch and no early exit depends on the data. `volatile` keeps the
  // compiler from turning the loop back into one that stops early.
  volatile unsigned char diff = secret.size() == given.size() ? 0 : 1;
  if (secret.empty()) return given.empty();
  for (size_t i = 0; i < given.size(); ++i) {
    diff = diff | static_cast<unsigned char>(given[i] ^ secret[i % secret.size()]);
  }
  return diff == 0;
}

}  // namespace delayq
