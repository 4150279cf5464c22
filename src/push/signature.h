// Standard Webhooks signatures (https://www.standardwebhooks.com): what a
// pushed request carries so that any receiver library of that scheme can
// verify it came from us and was not replayed.
//
//   webhook-id:        the message id: the job's id, the same on every attempt, so a
//                      receiver can drop a duplicate delivery by it
//   webhook-timestamp: Unix seconds when the request was signed
//   webhook-signature: "v1,<base64 HMAC-SHA256(key, id + "." + timestamp + "." + body)>",
//                      one such entry per secret, separated by spaces (key rotation)
//
// A secret is "whsec_" + base64 of the key; the HMAC key is the decoded bytes.
#ifndef DELAYQ_PUSH_SIGNATURE_H_
#define DELAYQ_PUSH_SIGNATURE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/status.h"

namespace delayq::push {

// The decoded keys of "whsec_..." secrets (validated by ValidateSubscription).
// Errors: kInvalidArgument naming the secret that does not decode.
Result<std::vector<std::string>> DecodeSecrets(const std::vector<std::string>& secrets);

// The webhook-signature header's value for one message under every key:
// "v1,<sig1> v1,<sig2>". Keys as DecodeSecrets returns them.
std::string SignatureHeader(const std::vector<std::string>& keys, std::string_view message_id,
                            int64_t timestamp_s, std::string_view body);

}  // namespace delayq::push

#endif  // DELAYQ_PUSH_SIGNATURE_H_
