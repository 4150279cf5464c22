// Standard Webhooks signing: one HMAC-SHA256 per key over
// "<id>.<timestamp>.<body>", each base64-encoded behind "v1,". The message is
// fed to the MAC piece by piece so the body (up to the job size limit) is
// never copied into a joined buffer.
#include "push/signature.h"

#include <openssl/core_names.h>
#include <openssl/evp.h>

#include <optional>
#include <string>

#include "codec/base64.h"

namespace delayq::push {
namespace {

constexpr std::string_view kSecretPrefix = "whsec_";

// HMAC as OpenSSL 3 provides it (its HMAC_CTX is deprecated). Fetched once:
// a fetch is a provider lookup under a lock, too dear per request.
EVP_MAC* HmacAlgorithm() {
  static EVP_MAC* const mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  return mac;
}

bool Update(EVP_MAC_CTX* ctx, std::string_view bytes) {
  return EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()) ==
         1;
}

// The raw 32-byte HMAC-SHA256 of id.timestamp.body under `key`. Empty only
// when OpenSSL cannot allocate: the header then carries a signature no
// receiver accepts, so the failure is loud at the receiver, never a pass.
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

Result<std::vector<std::string>> DecodeSecrets(const std::vector<std::string>& secrets) {
  std::vector<std::string> keys;
  keys.reserve(secrets.size());
  for (size_t i = 0; i < secrets.size(); ++i) {
    // Named by position, never by value: the secret must not reach a log.
    std::string field = "secrets[" + std::to_string(i) + "]";
    std::string_view s = secrets[i];
    if (s.substr(0, kSecretPrefix.size()) != kSecretPrefix) {
      return InvalidArgument(field + ": must start with \"whsec_\" (Standard Webhooks)");
    }
    std::optional<std::string> key = codec::Base64Decode(s.substr(kSecretPrefix.size()));
    if (!key) return InvalidArgument(field + ": the key after \"whsec_\" is not base64");
    if (key->empty()) return InvalidArgument(field + ": the key after \"whsec_\" is empty");
    keys.push_back(std::move(*key));
  }
  return keys;
}

std::string SignatureHeader(const std::vector<std::string>& keys, std::string_view message_id,
                            int64_t timestamp_s, std::string_view body) {
  const std::string timestamp = std::to_string(timestamp_s);
  std::string header;
  header.reserve(keys.size() * 48);  // "v1," + 44 base64 characters + a space
  for (const std::string& key : keys) {
    if (!header.empty()) header.push_back(' ');
    header.append("v1,").append(codec::Base64Encode(Mac(key, message_id, timestamp, body)));
  }
  return header;
}

}  // namespace delayq::push
