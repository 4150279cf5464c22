// The server's side of Standard Webhooks signing, over the one
// implementation in src/codec/webhook_signature.h (which delayq::Endpoint,
// the receiving side in the library, verifies with too).
#include "push/signature.h"

#include <optional>
#include <string>

#include "codec/webhook_signature.h"

namespace delayq::push {

Result<std::vector<std::string>> DecodeSecrets(const std::vector<std::string>& secrets) {
  std::vector<std::string> keys;
  keys.reserve(secrets.size());
  for (size_t i = 0; i < secrets.size(); ++i) {
    std::string problem;
    std::optional<std::string> key = codec::DecodeWebhookSecret(secrets[i], &problem);
    // Named by position, never by value: the secret must not reach a log.
    if (!key) return InvalidArgument("secrets[" + std::to_string(i) + "]: " + problem);
    keys.push_back(std::move(*key));
  }
  return keys;
}

std::string SignatureHeader(const std::vector<std::string>& keys, std::string_view message_id,
                            int64_t timestamp_s, std::string_view body) {
  return codec::WebhookSignatureHeader(keys, message_id, timestamp_s, body);
}

}  // namespace delayq::push
