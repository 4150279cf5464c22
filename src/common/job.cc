#include "delayq/job.h"

#include <string>

#include "common/name_chars.h"
#include "delayq/queue.h"

namespace delayq {

std::string_view StateName(JobState state) {
  switch (state) {
    case JobState::kDelayed:
      return "delayed";
    case JobState::kReady:
      return "ready";
    case JobState::kReserved:
      return "reserved";
    case JobState::kBuried:
      return "buried";
  }
  return "unknown";
}

std::optional<JobState> ParseState(std::string_view name) {
  for (JobState s :
       {JobState::kDelayed, JobState::kReady, JobState::kReserved, JobState::kBuried}) {
    if (StateName(s) == name) return s;
  }
  return std::nullopt;
}

Status ValidateTopic(std::string_view topic) {
  if (topic.empty()) return InvalidArgument("topic: required, 1-200 bytes of [A-Za-z0-9._:-]");
  if (topic.size() > kMaxTopicBytes) {
    return InvalidArgument("topic: " + std::to_string(topic.size()) +
                           " bytes, at most 200 allowed");
  }
  for (unsigned char c : topic) {
    if (!IsNameChar(c)) {
      return InvalidArgument("topic: only [A-Za-z0-9._:-] allowed, found byte 0x" +
                             std::string(1, "0123456789abcdef"[c >> 4]) +
                             std::string(1, "0123456789abcdef"[c & 15]));
    }
  }
  return Status::Ok();
}

Status ValidateId(std::string_view id) {
  if (id.empty()) return InvalidArgument("id: must not be empty");
  if (id.size() > kMaxIdBytes) {
    return InvalidArgument("id: " + std::to_string(id.size()) + " bytes, at most 256 allowed");
  }
  for (unsigned char c : id) {
    if (c < 0x20 || c == 0x7f) return InvalidArgument("id: control characters are not allowed");
  }
  return Status::Ok();
}

Status ValidateReceipt(std::string_view receipt) {
  if (receipt.empty()) return Status::Ok();
  bool hex = receipt.size() == kReceiptBytes;
  for (size_t i = 0; hex && i < receipt.size(); ++i) {
    char c = receipt[i];
    hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  }
  if (hex) return Status::Ok();
  std::string got = receipt.size() == kReceiptBytes
                        ? std::string("24 characters, not all hex digits")
                        : std::to_string(receipt.size()) + " characters";
  return InvalidArgument("receipt: expected the 24 hex digits a reserve hands out, got " + got);
}

Status ValidateReserveRequest(const ReserveRequest& req) {
  if (req.topics.empty()) return InvalidArgument("topics: give at least one topic");
  if (req.count == 0 || req.count > kMaxReserveCount) {
    return InvalidArgument("count: must be 1.." + std::to_string(kMaxReserveCount));
  }
  if (req.wait_ms < 0) return InvalidArgument("wait_ms: must be >= 0");
  if (req.topics.size() > kMaxReserveTopics) {
    return InvalidArgument("topics: at most " + std::to_string(kMaxReserveTopics) + " per reserve");
  }
  for (const std::string& name : req.topics) {
    if (Status s = ValidateTopic(name); !s.ok()) return s;
  }
  return Status::Ok();
}

Status ValidateIdempotencyKey(std::string_view key) {
  if (key.empty() || key.size() > kMaxIdempotencyKeyBytes) {
    return InvalidArgument("idempotency_key: 1-64 bytes, got " + std::to_string(key.size()));
  }
  for (char c : key) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-';
    if (!ok) return InvalidArgument("idempotency_key: only [A-Za-z0-9_-] allowed");
  }
  return Status::Ok();
}

Status ValidateJobSpec(const JobSpec& spec, const Limits& limits) {
  if (Status s = ValidateTopic(spec.topic); !s.ok()) return s;
  if (!spec.id.empty()) {
    if (Status s = ValidateId(spec.id); !s.ok()) return s;
  }
  if (spec.delay_ms && spec.run_at_ms) {
    return InvalidArgument("delay_ms and run_at_ms: give at most one of them");
  }
  if (spec.delay_ms && *spec.delay_ms < 0) {
    return InvalidArgument("delay_ms: must be >= 0, got " + std::to_string(*spec.delay_ms));
  }
  if (spec.delay_ms && *spec.delay_ms > kMaxDelayMs) {
    return InvalidArgument("delay_ms: at most 100 years (" + std::to_string(kMaxDelayMs) + ")");
  }
  if (spec.run_at_ms && *spec.run_at_ms >= 0 && *spec.run_at_ms < kMinRunAtMs) {
    // Almost certainly seconds (or a mistake): taken as ms it would be due
    // at once, in 1970.
    return InvalidArgument("run_at_ms: " + std::to_string(*spec.run_at_ms) +
                           " is before 2001-09-09 — it looks like seconds; give milliseconds (" +
                           std::to_string(*spec.run_at_ms) + "000)");
  }
  if (spec.run_at_ms && (*spec.run_at_ms < kMinRunAtMs || *spec.run_at_ms > kMaxRunAtMs)) {
    return InvalidArgument("run_at_ms: must be a Unix time in ms between " +
                           std::to_string(kMinRunAtMs) + " (2001-09-09) and " +
                           std::to_string(kMaxRunAtMs) + " (9999-12-31), got " +
                           std::to_string(*spec.run_at_ms));
  }
  if (spec.ttr_ms == 0) return InvalidArgument("ttr_ms: must be > 0");
  if (!spec.idempotency_key.empty()) {
    if (Status s = ValidateIdempotencyKey(spec.idempotency_key); !s.ok()) return s;
  }
  if (spec.body.size() > limits.max_body_bytes) {
    return TooLarge("body: " + std::to_string(spec.body.size()) + " bytes, at most " +
                    std::to_string(limits.max_body_bytes) + " allowed");
  }
  return Status::Ok();
}

}  // namespace delayq
