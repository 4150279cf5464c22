// ConstantTimeEquals: the auth token check of both front ends.
#include "common/secure_compare.h"

#include <gtest/gtest.h>

#include <string>

namespace delayq {
namespace {

TEST(ConstantTimeEquals, EqualTokensMatch) {
  EXPECT_TRUE(ConstantTimeEquals("s3cret-token", "s3cret-token"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  std::string with_nul("a\0b", 3);
  EXPECT_TRUE(ConstantTimeEquals(with_nul, std::string("a\0b", 3)));
}

TEST(ConstantTimeEquals, AnyDifferingByteFails) {
  const std::string secret = "s3cret-token";
  for (size_t i = 0; i < secret.size(); ++i) {
    std::string guess = secret;
    guess[i] ^= 0x01;
    EXPECT_FALSE(ConstantTimeEquals(secret, guess)) << "byte " << i;
  }
  EXPECT_FALSE(ConstantTimeEquals("a\0b", std::string("a\0c", 3)));
}

TEST(ConstantTimeEquals, APrefixOrExtensionOfTheSecretFails) {
  EXPECT_FALSE(ConstantTimeEquals("token", "tok"));
  EXPECT_FALSE(ConstantTimeEquals("token", "tokentoken"));  // cycles over the secret: still no
  EXPECT_FALSE(ConstantTimeEquals("token", std::string("token\0", 6)));
  EXPECT_FALSE(ConstantTimeEquals("token", ""));
}

TEST(ConstantTimeEquals, AnEmptySecretMatchesOnlyEmpty) {
  EXPECT_FALSE(ConstantTimeEquals("", "x"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

}  // namespace
}  // namespace delayq
