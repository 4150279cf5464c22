// Standard Webhooks signatures (https://www.standardwebhooks.com), both
// ends: the server signs what it pushes (src/push) and an application's
// delayq::Endpoint verifies what it receives (src/endpoint), with this one
// implementation.
//
//   webhook-id:        the message id
//   webhook-timestamp: Unix seconds when the request was signed
//   webhook-signature: "v1,<base64 HMAC-SHA256(key, id + "." + timestamp + "." + body)>",
//                      one such entry per key, separated by spaces (key rotation)
//
// A secret is "whsec_" + base64 of the key; the HMAC key is the decoded
// bytes. HMAC-SHA256 is OpenSSL's (libcrypto's EVP_MAC).
//
// Thread-safety: every function may be called from any thread.
#ifndef DELAYQ_CODEC_WEBHOOK_SIGNATURE_H_
#define DELAYQ_CODEC_WEBHOOK_SIGNATURE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace delayq::codec {

// The key of one "whsec_<base64>" secret, or nullopt with *problem (when
// given) saying what is wrong, without the secret's value: "must start with
// \"whsec_\" (Standard Webhooks)", "the key after \"whsec_\" is not base64",
// "... is empty".
std::optional<std::string> DecodeWebhookSecret(std::string_view secret,
                                               std::string* problem = nullptr);

// The webhook-signature header's value for one message under every key, in
// order: "v1,<sig1> v1,<sig2>". A key is the decoded bytes
// (DecodeWebhookSecret).
std::string WebhookSignatureHeader(const std::vector<std::string>& keys,
                                   std::string_view message_id, int64_t timestamp_s,
                                   std::string_view body);

// Whether `header` (a webhook-signature value: space-separated entries,
// "v1,<base64>" among them; other versions are skipped) holds a signature
// of the message by any of `keys`. Compared in constant time per entry.
// False for no keys or no "v1," entry.
bool WebhookSignatureMatches(const std::vector<std::string>& keys, std::string_view message_id,
                             int64_t timestamp_s, std::string_view body, std::string_view header);

}  // namespace delayq::codec

#endif  // DELAYQ_CODEC_WEBHOOK_SIGNATURE_H_
