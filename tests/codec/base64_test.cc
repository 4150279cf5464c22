#include "codec/base64.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace delayq::codec {
namespace {

TEST(Base64, Rfc4648TestVectors) {
  const std::pair<const char*, const char*> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, encoded] : vectors) {
    EXPECT_EQ(Base64Encode(plain), encoded);
    EXPECT_EQ(Base64Decode(encoded), plain);
  }
}

TEST(Base64, AllByteValuesRoundTripAtEveryLength) {
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  EXPECT_EQ(Base64Decode(Base64Encode(all)), all);
  for (size_t n = 0; n <= all.size(); ++n) {
    std::string s = all.substr(256 - n);
    std::string e = Base64Encode(s);
    EXPECT_EQ(e.size(), (n + 2) / 3 * 4);
    EXPECT_EQ(Base64Decode(e), s) << n;
  }
  std::mt19937 rng(1);
  for (int round = 0; round < 500; ++round) {
    std::string s(rng() % 100, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    EXPECT_EQ(Base64Decode(Base64Encode(s)), s);
  }
}

TEST(Base64, TheWholeAlphabetDecodes) {
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  auto decoded = Base64Decode(alphabet);
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(Base64Encode(*decoded), alphabet);
}

TEST(Base64, MissingPaddingIsAccepted) {
  EXPECT_EQ(Base64Decode("Zg"), "f");
  EXPECT_EQ(Base64Decode("Zm8"), "fo");
  EXPECT_EQ(Base64Decode("Zm9vYg"), "foob");
}

TEST(Base64, BadInputIsRefused) {
  for (const char* bad : {
           "Z",         // length % 4 == 1
           "Zm9vY",     // likewise, after whole groups
           "Zg=",       // padding that does not complete the group
           "Z===",      // too much padding
           "====",      // only padding
           "Zg==Zg==",  // padding in the middle
           "Zm=v",      // '=' inside a group
           "Zm9v\n",    // whitespace
           "Zm 9v",     // whitespace
           "Zm9-",      // URL-safe alphabet
           "Zm9_",      // URL-safe alphabet
           "Zm9\x80",   // not ASCII
           "Zh==",      // non-zero unused bits (would also decode to "f")
           "Zm9=",      // likewise, 2 bytes
           "Zm8=Zm8=",  // padding in the middle
           "Zm9vY===",  // three pad characters
       }) {
    EXPECT_EQ(Base64Decode(bad), std::nullopt) << bad;
  }
  EXPECT_EQ(Base64Decode(std::string("Zm9\0", 4)), std::nullopt);
}

}  // namespace
}  // namespace delayq::codec
