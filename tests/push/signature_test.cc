#include "push/signature.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codec/base64.h"

namespace delayq::push {
namespace {

// The Standard Webhooks reference libraries' signing vector: TestWebhookSign
// in libraries/go/webhook_test.go of github.com/standard-webhooks/standard-webhooks
// (the other languages' tests share it).
constexpr const char* kVectorSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
constexpr const char* kVectorMsgId = "msg_p5jXN8AQM9LWM0D4loKWxJek";
constexpr int64_t kVectorTimestamp = 1614265330;
constexpr const char* kVectorPayload = R"({"test": 2432232314})";
constexpr const char* kVectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

std::vector<std::string> Keys(const std::vector<std::string>& secrets) {
  Result<std::vector<std::string>> keys = DecodeSecrets(secrets);
  EXPECT_TRUE(keys.ok()) << keys.status().ToString();
  return keys.ok() ? *keys : std::vector<std::string>{};
}

TEST(Signature, MatchesTheStandardWebhooksReferenceVector) {
  EXPECT_EQ(SignatureHeader(Keys({kVectorSecret}), kVectorMsgId, kVectorTimestamp, kVectorPayload),
            kVectorSignature);
}

TEST(Signature, DecodedKeyIsTheBase64AfterThePrefix) {
  std::vector<std::string> keys = Keys({kVectorSecret});
  ASSERT_EQ(keys.size(), 1u);
  EXPECT_EQ(keys[0].size(), 24u);
  EXPECT_EQ(codec::Base64Encode(keys[0]), "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
}

TEST(Signature, EveryKeySignsInOrderSeparatedBySpaces) {
  const std::string other = "whsec_" + codec::Base64Encode(std::string(32, '\x2a'));
  const std::string one_other =
      SignatureHeader(Keys({other}), kVectorMsgId, kVectorTimestamp, kVectorPayload);
  EXPECT_EQ(one_other.substr(0, 3), "v1,");
  EXPECT_EQ(one_other.size(), 3u + 44u);  // base64 of 32 bytes
  EXPECT_NE(one_other, kVectorSignature);
  EXPECT_EQ(
      SignatureHeader(Keys({kVectorSecret, other}), kVectorMsgId, kVectorTimestamp, kVectorPayload),
      std::string(kVectorSignature) + " " + one_other);
  EXPECT_EQ(
      SignatureHeader(Keys({other, kVectorSecret}), kVectorMsgId, kVectorTimestamp, kVectorPayload),
      one_other + " " + kVectorSignature);
}

TEST(Signature, IdTimestampAndBodyAreEachSigned) {
  const std::vector<std::string> keys = Keys({kVectorSecret});
  EXPECT_NE(SignatureHeader(keys, "msg_p5jXN8AQM9LWM0D4loKWxJeK", kVectorTimestamp, kVectorPayload),
            kVectorSignature);
  EXPECT_NE(SignatureHeader(keys, kVectorMsgId, kVectorTimestamp + 1, kVectorPayload),
            kVectorSignature);
  EXPECT_NE(SignatureHeader(keys, kVectorMsgId, kVectorTimestamp, R"({"test":2432232314})"),
            kVectorSignature);
}

TEST(Signature, BodyWithZeroBytesAndNonUtf8IsSignedWhole) {
  const std::vector<std::string> keys = Keys({kVectorSecret});
  const std::string a("a\0b\xff", 4), b("a\0c\xff", 4);
  EXPECT_NE(SignatureHeader(keys, kVectorMsgId, kVectorTimestamp, a),
            SignatureHeader(keys, kVectorMsgId, kVectorTimestamp, b));
}

TEST(Signature, NoKeysGiveAnEmptyHeader) {
  EXPECT_EQ(SignatureHeader({}, kVectorMsgId, kVectorTimestamp, kVectorPayload), "");
}

TEST(Signature, UndecodableSecretIsNamedByPositionNotValue) {
  Result<std::vector<std::string>> r = DecodeSecrets({kVectorSecret, "whsec_not*base64"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("secrets[1]"), std::string::npos) << r.status().message();
  EXPECT_EQ(r.status().message().find("not*base64"), std::string::npos) << r.status().message();
}

TEST(Signature, SecretWithoutPrefixOrKeyIsRefused) {
  for (const char* bad :
       {"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_", "WHSEC_MfKQ9r8GKYqrTwjU", ""}) {
    Result<std::vector<std::string>> r = DecodeSecrets({bad});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("secrets[0]"), std::string::npos) << r.status().message();
  }
}

TEST(Signature, NoSecretsDecodeToNoKeys) {
  Result<std::vector<std::string>> r = DecodeSecrets({});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());
}

}  // namespace
}  // namespace delayq::push
