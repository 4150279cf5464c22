// The JSON an Endpoint reads and writes: the job a server POSTs (the fields
// of GET /v1/jobs/{id}, docs/push.md), the subscription it PUTs
// (docs/api.md, "Subscriptions"), and the message of a server's error
// answer.
//
// Thread-safety: every function may be called from any thread (each thread
// parses with a simdjson parser of its own).
#ifndef DELAYQ_ENDPOINT_JSON_IO_H_
#define DELAYQ_ENDPOINT_JSON_IO_H_

#include <string>
#include <string_view>

#include "delayq/job.h"
#include "delayq/status.h"
#include "delayq/subscription.h"

namespace delayq::endpoint {

// The Delivery a pushed request carries: id and topic required, "body" (a
// string) or "body_base64" (decoded), the numbers when present; receipt
// empty. Fields it does not know are ignored (a newer server may send
// more). Errors: kInvalidArgument naming the field, or saying the body is
// not a JSON object.
Result<Delivery> ParseJobJson(std::string_view json);

// {"topics":[...],"url":...,"concurrency":...,"ttl_ms":...,"timeout_ms":...,
//  "secrets":[...] (when any),"retry":{...}}: the body of
// PUT /v1/subscriptions/{name} (the name is in the path).
std::string SubscriptionJson(const Subscription& s);

// The "message" of a delayq error answer ({"error":{"code","message"}}),
// else the answer's first 200 bytes.
std::string ErrorMessage(std::string_view answer);

}  // namespace delayq::endpoint

#endif  // DELAYQ_ENDPOINT_JSON_IO_H_
