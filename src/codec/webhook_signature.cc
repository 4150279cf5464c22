// Standard Webhooks signing and verifying: one HMAC-SHA256 per key over
// "<id>.<timestamp>.<body>", each base64-encoded behind "v1,". The message
// is fed to the MAC piece by piece so the body (up to the job size limit)
// is never copied into a joined buffer.
#include "codec/webhook_signature.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "codec/base64.h"

namespace delayq::codec {
namespace {

constexpr std::string_view kSecretPrefix = "whsec_";
constexpr std::string_view kVersion = "v1,";

// HMAC as OpenSSL 3 provides it (its HMAC_CTX is deprecated). Fetched once:
// a fetch is a provider lookup under a lock, too dear per request.
EVP_MAC* HmacAlgorithm() {
  static EVP_MAC* const kMac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  return kMac;
}

bool Update(EVP_MAC_CTX* ctx, std::string_view bytes) {
  return EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()) ==
         1;
}

// The raw 32-byte HMAC-SHA256 of id.timestamp.body under `key`. Empty only
// when OpenSSL cannot allocate: a signer then sends a signature no receiver
// accepts and a verifier accepts nothing, so the failure is loud, never a
// pass.
std::string Mac(std::string_view key, std::string_view id, std::string_view timestamp,
                std::string_view body) {
  unsigned char out[EVP_MAX_MD_SIZE];
  size_t out_len = 0;
  EVP_MAC_CTX* ctx = HmacAlgorithm() != nullptr ? EVP_MAC_CTX_new(HmacAlgorithm()) : nullptr;
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                         OSSL_PARAM_construct_end()};
  bool ok = ctx != nullptr &&
            EVP_MAC_init(ctx, reinterpret_cast<const unsigned char*>(key.data()), key.size(),
                         params) == 1 &&
            Update(ctx, id) && Update(ctx, ".") && Update(ctx, timestamp) && Update(ctx, ".") &&
            Update(ctx, body) && EVP_MAC_final(ctx, out, &out_len, sizeof(out)) == 1;
  EVP_MAC_CTX_free(ctx);
  if (!ok) out_len = 0;
  return std::string(reinterpret_cast<const char*>(out), out_len);
}

}  // namespace

std::optional<std::string> DecodeWebhookSecret(std::string_view secret, std::string* problem) {
  auto fail = [&](const char* why) -> std::optional<std::string> {
    if (problem != nullptr) *problem = why;
    return std::nullopt;
  };
  if (secret.substr(0, kSecretPrefix.size()) != kSecretPrefix) {
    return fail("must start with \"whsec_\" (Standard Webhooks)");
  }
  std::optional<std::string> key = Base64Decode(secret.substr(kSecretPrefix.size()));
  if (!key) return fail("the key after \"whsec_\" is not base64");
  if (key->empty()) return fail("the key after \"whsec_\" is empty");
  return key;
}

std::string WebhookSignatureHeader(const std::vector<std::string>& keys,
                                   std::string_view message_id, int64_t timestamp_s,
                                   std::string_view body) {
  const std::string timestamp = std::to_string(timestamp_s);
  std::string header;
  header.reserve(keys.size() * 48);  // "v1," + 44 base64 characters + a space
  for (const std::string& key : keys) {
    if (!header.empty()) header.push_back(' ');
    header.append(kVersion).append(Base64Encode(Mac(key, message_id, timestamp, body)));
  }
  return header;
}

bool WebhookSignatureMatches(const std::vector<std::string>& keys, std::string_view message_id,
                             int64_t timestamp_s, std::string_view body, std::string_view header) {
  const std::string timestamp = std::to_string(timestamp_s);
  for (const std::string& key : keys) {
    const std::string mac = Mac(key, message_id, timestamp, body);
    if (mac.empty()) continue;
    const std::string expected = Base64Encode(mac);
    size_t pos = 0;
    while (pos < header.size()) {
      size_t end = header.find(' ', pos);
      if (end == std::string_view::npos) end = header.size();
      std::string_view entry = header.substr(pos, end - pos);
      pos = end + 1;
      if (entry.substr(0, kVersion.size()) != kVersion) continue;
      std::string_view sig = entry.substr(kVersion.size());
      // CRYPTO_memcmp: the time taken does not tell how much of a forged
      // signature was right.
      if (sig.size() == expected.size() &&
          CRYPTO_memcmp(sig.data(), expected.data(), expected.size()) == 0) {
        return true;
      }
    }
  }
  return false;
}

}  // namespace delayq::codec
