// The job model of SPEC §3 and §4: what a producer adds (JobSpec), what a
// worker is handed (Delivery) and what anyone can read back (JobInfo), and the
// one place where a JobSpec is validated (ValidateJobSpec), used by every
// Queue implementation and every protocol front end.
#ifndef DELAYQ_JOB_H_
#define DELAYQ_JOB_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "delayq/status.h"

namespace delayq {

inline constexpr uint32_t kDefaultTtrMs = 60'000;
inline constexpr uint32_t kDefaultPriority = 1024;
inline constexpr size_t kMaxTopicBytes = 200;
inline constexpr size_t kMaxIdBytes = 256;
inline constexpr size_t kDefaultMaxBodyBytes = size_t{256} * 1024;
inline constexpr int64_t kMaxDelayMs = 100LL * 365 * 24 * 3600 * 1000;  // 100 years
inline constexpr int64_t kMaxRunAtMs = 253'402'300'799'999;             // 9999-12-31
// The earliest run_at_ms accepted: 10^12 ms, 2001-09-09. Anything earlier
// is almost certainly a time in seconds, which would fire at once.
inline constexpr int64_t kMinRunAtMs = 1'000'000'000'000;
// An add's idempotency key: 1–64 bytes of [A-Za-z0-9_-] (JobSpec::idempotency_key).
inline constexpr size_t kMaxIdempotencyKeyBytes = 64;

enum class JobState : unsigned char {
  kDelayed = 0,   // waiting for run_at
  kReady = 1,     // due, waiting for a worker
  kReserved = 2,  // handed to a worker; back to ready when its TTR runs out
  kBuried = 3,    // set aside (bury, or max_attempts used up) until kicked
};

// "delayed", "ready", "reserved", "buried".
std::string_view StateName(JobState state);
// Inverse of StateName; nullopt for anything else.
std::optional<JobState> ParseState(std::string_view name);

// What a producer adds.
struct JobSpec {
  std::string topic;  // 1–200 bytes of [A-Za-z0-9._:-]. Required.
  std::string id;     // 1–256 bytes, no control characters. Empty: generated
                      // (24 hex digits, time-ordered, unique among live jobs).
  // When the job becomes due. At most one of delay_ms / run_at_ms may be set;
  // neither means due now. A run_at_ms in the past means due now.
  std::optional<int64_t> delay_ms;       // >= 0
  std::optional<int64_t> run_at_ms;      // Unix ms, kMinRunAtMs..kMaxRunAtMs
  uint32_t ttr_ms = kDefaultTtrMs;       // > 0
  uint32_t priority = kDefaultPriority;  // lower is served first
  uint32_t max_attempts = 0;             // deliveries before burying; 0 = unlimited
  std::string body;
  // Re-adding a live id fails with kExists unless `replace` is set, in which
  // case the job is re-created from this spec in one step, whatever its state
  // was: topic, body, priority, TTR, max_attempts and due time are the new
  // ones, attempts restart at 0, it goes to the back of its line, and the
  // receipt of any reservation it had goes stale.
  bool replace = false;
  // Makes the add idempotent: 1–64 bytes of [A-Za-z0-9_-], unique per add
  // request (a client makes one up per call and sends it on every attempt).
  // Empty: none, and the add behaves as without it. An add whose (id, key)
  // pair — (none, key) for a generated id — was already applied within the
  // store's dedup window (QueueOptions::dedup_window_ms, from that first
  // add) changes nothing and answers what the first one answered: the same
  // id, state and run_at, even if the job has been finished, deleted or
  // replaced since; `replace` is not applied again. See docs/api.md,
  // "Idempotent adds".
  std::string idempotency_key;
};

// Limits that validation enforces; the server sets them from its options.
struct Limits {
  size_t max_body_bytes = kDefaultMaxBodyBytes;  // Default: 256 KiB.
};

// Checks every field of `spec` against SPEC §3. Returns kInvalidArgument with
// a message that names the field, or kTooLarge for an oversize body.
Status ValidateJobSpec(const JobSpec& spec, const Limits& limits);
// Checks a topic name alone (1–200 bytes of [A-Za-z0-9._:-]).
Status ValidateTopic(std::string_view topic);
// Checks a job id alone (1–256 bytes, no control characters).
Status ValidateId(std::string_view id);
// Checks an idempotency key alone (1–64 bytes of [A-Za-z0-9_-]).
Status ValidateIdempotencyKey(std::string_view key);

// How many hex digits a receipt has (Delivery::receipt).
inline constexpr size_t kReceiptBytes = 24;
// Checks a receipt's shape: empty (the caller acts by id alone, what the
// servers call "force"), or 24 hex digits, as a reserve hands out. Anything
// else is kInvalidArgument, so a mistyped receipt is told apart from a stale
// one; every store checks it before looking at the job. (A well-formed
// receipt still matches only exactly: the same digits in upper case are
// stale.)
Status ValidateReceipt(std::string_view receipt);

// What add answers.
struct AddResult {
  std::string id;
  JobState state = JobState::kDelayed;  // kDelayed, or kReady when due now
  int64_t run_at_ms = 0;
};

// What a worker is handed by reserve.
struct Delivery {
  std::string id;
  std::string topic;
  std::string body;
  std::string receipt;    // proves this delivery; needed to finish it safely
  uint32_t attempts = 0;  // deliveries so far, this one included
  uint32_t ttr_ms = 0;
  uint32_t priority = 0;
  int64_t run_at_ms = 0;
  int64_t reserved_until_ms = 0;  // wall-clock estimate of the TTR deadline
  // The job's max_attempts (JobSpec::max_attempts); 0 = unlimited. With
  // `attempts`, it tells what a release of this delivery will do
  // (ReleaseBuries).
  uint32_t max_attempts = 0;
};

// Whether releasing `d` (Queue::Release with its receipt, or an Ack of kind
// kRelease) buries the job instead of making it due again: this delivery
// used up its max_attempts. Every store applies that rule on release, so a
// release answered ok of a delivery for which this is true left the job
// buried, with "max_attempts (n) used up" in its last_error.
inline bool ReleaseBuries(const Delivery& d) {
  return d.max_attempts != 0 && d.attempts >= d.max_attempts;
}

// A job as get and peek return it.
struct JobInfo {
  std::string id;
  std::string topic;
  JobState state = JobState::kDelayed;
  std::string body;
  uint32_t priority = 0;
  uint32_t ttr_ms = 0;
  uint32_t max_attempts = 0;
  uint32_t attempts = 0;
  int64_t created_at_ms = 0;
  int64_t run_at_ms = 0;
  int64_t reserved_until_ms = 0;  // 0 unless reserved
  std::string receipt;            // empty unless reserved
  std::string last_error;         // from the last release, or why it was buried
};

}  // namespace delayq

#endif  // DELAYQ_JOB_H_
