// One field table per wire type — /healthz, an add's answer, a delivery, a
// job, a topic, the queue's figures, a push subscription, a schedule —
// shared by every protocol: the JSON of
// the HTTP API, the RESP replies, the Prometheus text of /metrics and the command line. A new field
// of a type is one line in its table; the encoders (wire/encode.h) walk the tables.
//
// A row names the field, reads it from the struct, and says where else it
// goes: under another name in RESP, or as a Prometheus sample. The order of
// a table is the order on the wire (RESERVE's array of a delivery's values
// too: a new delivery field goes at the end of its table).
#ifndef DELAYQ_WIRE_FIELDS_H_
#define DELAYQ_WIRE_FIELDS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/job.h"
#include "delayq/queue.h"
#include "delayq/schedule.h"
#include "delayq/subscription.h"
#include "delayq/version.h"

namespace delayq::wire {

// What a field holds, and so how each protocol writes it.
enum class Kind : uint8_t {
  kText,      // a string: JSON string, RESP bulk
  kBytes,     // a job's body: JSON "body" if UTF-8 else "body_base64"; RESP bulk
  kUint,      // JSON number; RESP bulk of its digits in pairs, integer in arrays
  kInt,       // likewise, signed
  kBool,      // JSON true/false; RESP 1/0
  kDouble,    // JSON number (shortest round-trip form); RESP bulk of that text
  kTextList,  // JSON array of strings; RESP array of bulks; INFO and the CLI's text: a,b
};

struct Value {
  Kind kind = Kind::kText;
  std::string_view text;                           // kText, kBytes
  int64_t i = 0;                                   // kInt, kBool (0/1)
  uint64_t u = 0;                                  // kUint
  double d = 0;                                    // kDouble
  const std::vector<std::string>* list = nullptr;  // kTextList; never null then
};
constexpr Value Text(std::string_view s) { return {Kind::kText, s, 0, 0}; }
constexpr Value Bytes(std::string_view s) { return {Kind::kBytes, s, 0, 0}; }
constexpr Value Uint(uint64_t v) { return {Kind::kUint, {}, 0, v}; }
constexpr Value Int(int64_t v) { return {Kind::kInt, {}, v, 0}; }
constexpr Value Bool(bool v) { return {Kind::kBool, {}, v ? 1 : 0, 0}; }
constexpr Value Double(double v) { return {Kind::kDouble, {}, 0, 0, v}; }
constexpr Value TextList(const std::vector<std::string>& v) {
  return {Kind::kTextList, {}, 0, 0, 0, &v};
}

// A Prometheus sample of a figure: the metric's name, its type, a label
// pair (`state="ready"`, or empty) and its help line. Rows of one metric
// stand together; the first of them writes the HELP and TYPE lines.
struct Metric {
  std::string_view name;
  std::string_view type;
  std::string_view label;
  std::string_view help;
};

template <typename T>
struct Field {
  std::string_view name;       // JSON key, RESP key
  Value (*get)(const T&);      // the value in a struct
  std::string_view resp = {};  // RESP's key, when it differs from `name`
  Metric metric = {};          // the queue's figures: a Prometheus sample
  bool omit_empty = false;     // JSON only: an empty text is left out, key and all
  std::string_view resp_name() const { return resp.empty() ? name : resp; }
};

// What a reserve hands out. JSON sends an object of every row; RESP's
// RESERVE and PEEK an array of every row's value, in this order (the first
// five were all it sent before issue 16: keep them first).
inline constexpr Field<Delivery> kDeliveryFields[] = {
    {"id", [](const Delivery& d) { return Text(d.id); }},
    {"topic", [](const Delivery& d) { return Text(d.topic); }},
    {"body", [](const Delivery& d) { return Bytes(d.body); }},
    {"receipt", [](const Delivery& d) { return Text(d.receipt); }},
    {"attempts", [](const Delivery& d) { return Uint(d.attempts); }},
    {"ttr_ms", [](const Delivery& d) { return Uint(d.ttr_ms); }},
    {"priority", [](const Delivery& d) { return Uint(d.priority); }},
    {"run_at_ms", [](const Delivery& d) { return Int(d.run_at_ms); }},
    {"reserved_until_ms", [](const Delivery& d) { return Int(d.reserved_until_ms); }},
    // Last, so clients that read by position keep working: with attempts, it
    // says whether a release buries the job (ReleaseBuries).
    {"max_attempts", [](const Delivery& d) { return Uint(d.max_attempts); }},
};

// A job shown as a delivery (PEEK, `delayq peek`): its receipt is empty
// unless the job is reserved, reserved_until_ms 0 likewise.
inline Delivery AsDelivery(const JobInfo& j) {
  Delivery d;
  d.id = j.id;
  d.topic = j.topic;
  d.body = j.body;
  d.receipt = j.receipt;
  d.attempts = j.attempts;
  d.ttr_ms = j.ttr_ms;
  d.priority = j.priority;
  d.run_at_ms = j.run_at_ms;
  d.reserved_until_ms = j.reserved_until_ms;
  d.max_attempts = j.max_attempts;
  return d;
}

// What /healthz answers: ok, degraded (200) or failed (503), and why.
struct Health {
  std::string_view status;    // "ok", "degraded", "failed"
  std::string_view store;     // why, when not ok
  std::string_view topology;  // StoreFigures::topology, when the store has one
};
inline constexpr Field<Health> kHealthFields[] = {
    {"status", [](const Health& h) { return Text(h.status); }},
    {"store", [](const Health& h) { return Text(h.store); }, {}, {}, true},
    {"version", [](const Health&) { return Text(DELAYQ_VERSION); }},
    {"topology", [](const Health& h) { return Text(h.topology); }, {}, {}, true},
};

// What an add answers over HTTP (RESP's ADD answers the id alone).
inline constexpr Field<AddResult> kAddedFields[] = {
    {"id", [](const AddResult& a) { return Text(a.id); }},
    {"state", [](const AddResult& a) { return Text(StateName(a.state)); }},
    {"run_at_ms", [](const AddResult& a) { return Int(a.run_at_ms); }},
};

// A job and its state (GET; HTTP's job reads).
inline constexpr Field<JobInfo> kJobFields[] = {
    {"id", [](const JobInfo& j) { return Text(j.id); }},
    {"topic", [](const JobInfo& j) { return Text(j.topic); }},
    {"state", [](const JobInfo& j) { return Text(StateName(j.state)); }},
    {"body", [](const JobInfo& j) { return Bytes(j.body); }},
    {"priority", [](const JobInfo& j) { return Uint(j.priority); }},
    {"ttr_ms", [](const JobInfo& j) { return Uint(j.ttr_ms); }},
    {"max_attempts", [](const JobInfo& j) { return Uint(j.max_attempts); }},
    {"attempts", [](const JobInfo& j) { return Uint(j.attempts); }},
    {"created_at_ms", [](const JobInfo& j) { return Int(j.created_at_ms); }},
    {"run_at_ms", [](const JobInfo& j) { return Int(j.run_at_ms); }},
    {"reserved_until_ms", [](const JobInfo& j) { return Int(j.reserved_until_ms); }},
    {"receipt", [](const JobInfo& j) { return Text(j.receipt); }},
    {"last_error", [](const JobInfo& j) { return Text(j.last_error); }},
};

// One topic's counts (TOPIC; GET /v1/topics[/name]).
inline constexpr Field<TopicInfo> kTopicFields[] = {
    {"name", [](const TopicInfo& t) { return Text(t.name); }, "topic"},
    {"delayed", [](const TopicInfo& t) { return Uint(t.delayed); }},
    {"ready", [](const TopicInfo& t) { return Uint(t.ready); }},
    {"reserved", [](const TopicInfo& t) { return Uint(t.reserved); }},
    {"buried", [](const TopicInfo& t) { return Uint(t.buried); }},
    {"waiting", [](const TopicInfo& t) { return Uint(t.waiting); }},
    {"paused", [](const TopicInfo& t) { return Bool(t.paused); }},
    {"paused_for_ms", [](const TopicInfo& t) { return Int(t.paused_for_ms); }},
};

// The queue's figures (STATS, GET /v1/stats, /metrics). What follows them
// on the wire — connections, lateness, the store's own figures — is the
// server's (FrontEnd::SharedStatsFields, ServingQueue::Figures).
inline constexpr std::string_view kByState = "Live jobs by state.";
inline constexpr Field<QueueStats> kStatsFields[] = {
    {"jobs", [](const QueueStats& s) { return Uint(s.jobs); }},
    {"delayed",
     [](const QueueStats& s) { return Uint(s.delayed); },
     {},
     {"delayq_jobs", "gauge", "state=\"delayed\"", kByState}},
    {"ready",
     [](const QueueStats& s) { return Uint(s.ready); },
     {},
     {"delayq_jobs", "gauge", "state=\"ready\"", kByState}},
    {"reserved",
     [](const QueueStats& s) { return Uint(s.reserved); },
     {},
     {"delayq_jobs", "gauge", "state=\"reserved\"", kByState}},
    {"buried",
     [](const QueueStats& s) { return Uint(s.buried); },
     {},
     {"delayq_jobs", "gauge", "state=\"buried\"", kByState}},
    {"topics",
     [](const QueueStats& s) { return Uint(s.topics); },
     {},
     {"delayq_topics", "gauge", "", "Topics with jobs, waiting reserves or a pause."}},
    {"waiting",
     [](const QueueStats& s) { return Uint(s.waiting); },
     {},
     {"delayq_waiting_reserves", "gauge", "", "Reserves waiting for a job."}},
    {"added",
     [](const QueueStats& s) { return Uint(s.added); },
     {},
     {"delayq_added_total", "counter", "", "Jobs added since start (replacements included)."}},
    {"replaced",
     [](const QueueStats& s) { return Uint(s.replaced); },
     {},
     {"delayq_replaced_total", "counter", "",
      "Adds that replaced a live job of the same id since start."}},
    {"reserves",
     [](const QueueStats& s) { return Uint(s.reserves); },
     {},
     {"delayq_reserved_total", "counter", "", "Jobs handed to a worker (reserved) since start."}},
    {"finished",
     [](const QueueStats& s) { return Uint(s.finished); },
     {},
     {"delayq_finished_total", "counter", "", "Jobs finished (acknowledged) since start."}},
    {"deleted",
     [](const QueueStats& s) { return Uint(s.deleted); },
     {},
     {"delayq_deleted_total", "counter", "", "Jobs deleted since start."}},
    {"released",
     [](const QueueStats& s) { return Uint(s.released); },
     {},
     {"delayq_released_total", "counter", "",
      "Reserved jobs released by their worker since start."}},
    {"timed_out",
     [](const QueueStats& s) { return Uint(s.timed_out); },
     {},
     {"delayq_timed_out_total", "counter", "", "Reservations whose TTR ran out since start."}},
    {"buried_total",
     [](const QueueStats& s) { return Uint(s.buried_total); },
     {},
     {"delayq_buried_total", "counter", "",
      "Jobs buried since start (by a worker, or out of attempts)."}},
    {"kicked",
     [](const QueueStats& s) { return Uint(s.kicked); },
     {},
     {"delayq_kicked_total", "counter", "", "Buried or delayed jobs kicked to ready since start."}},
};

// A push subscription's instance as PUT /v1/subscriptions/{name} and
// SUBSCRIPTION SET answer it; GET and LIST follow it with the instance's
// figures (kPushFigureFields). The secrets themselves are never shown: only
// whether requests are signed and with how many keys (a rotation in
// progress shows 2).
//
// The retry policy is flat here (retry_min_backoff_ms, ...) although a PUT
// gives it as the object "retry": every encoder walks one level of rows —
// RESP pairs, INFO lines and the command line's `key: value` lines have no
// nesting to put an object in — and a flat name still reads as the nested
// field it came from.
inline constexpr Field<Subscription> kSubscriptionFields[] = {
    {"name", [](const Subscription& s) { return Text(s.name); }},
    {"url", [](const Subscription& s) { return Text(s.url); }},
    {"topics", [](const Subscription& s) { return TextList(s.topics); }},
    {"concurrency", [](const Subscription& s) { return Uint(s.concurrency); }},
    {"timeout_ms", [](const Subscription& s) { return Uint(s.timeout_ms); }},
    {"ttl_ms", [](const Subscription& s) { return Int(s.ttl_ms); }},
    {"signed", [](const Subscription& s) { return Bool(!s.secrets.empty()); }},
    {"secret_count", [](const Subscription& s) { return Uint(s.secrets.size()); }},
    {"retry_min_backoff_ms", [](const Subscription& s) { return Int(s.retry.min_backoff_ms); }},
    {"retry_max_backoff_ms", [](const Subscription& s) { return Int(s.retry.max_backoff_ms); }},
    {"retry_max_doublings", [](const Subscription& s) { return Uint(s.retry.max_doublings); }},
    {"rate_per_s", [](const Subscription& s) { return Double(s.rate_per_s); }},
    {"created_ms", [](const Subscription& s) { return Int(s.created_ms); }},
    {"renewed_ms", [](const Subscription& s) { return Int(s.renewed_ms); }},
    // 0: kept until deleted; else the instance lapses then unless renewed.
    {"expires_ms", [](const Subscription& s) { return Int(s.expires_ms); }},
};

// What the servers know of one instance's requests, after its
// kSubscriptionFields (GET /v1/subscriptions, SUBSCRIPTION GET and LIST).
// `F` is the store's PushFigures (src/serving/push_ledger.h): a template
// because this layer sits below src/serving and cannot include it, while
// the rows must still be the one place the figures' names are written.
template <typename F>
inline constexpr Field<F> kPushFigureFields[] = {
    {"in_flight", [](const F& f) { return Uint(f.in_flight); }},
    {"slots_held", [](const F& f) { return Uint(f.slots_held); }},
    {"delivered", [](const F& f) { return Uint(f.delivered); }},
    {"failed", [](const F& f) { return Uint(f.failed); }},
    {"last_success_ms", [](const F& f) { return Int(f.last_success_ms); }},
    {"last_error_ms", [](const F& f) { return Int(f.last_error_ms); }},
    {"last_error", [](const F& f) { return Text(f.last_error); }},
};

// A schedule (SPEC §9) as PUT /v1/schedules/{name}, GET, SCHEDULE SET and
// GET answer it: its definition, then the firing state the scheduler keeps.
// The job's body is a kBytes, as a job's: JSON "body" when it is UTF-8, else
// "body_base64", the same two fields a PUT takes. An empty time zone is
// UTC, and shown so. The store's own bookkeeping (revision,
// planned_version, first_fire_at_ms, gaps, paused_at_ms) stays inside.
inline constexpr Field<Schedule> kScheduleFields[] = {
    {"name", [](const Schedule& s) { return Text(s.name); }},
    {"cron", [](const Schedule& s) { return Text(s.cron); }},
    {"timezone",
     [](const Schedule& s) {
       return Text(s.timezone.empty() ? "UTC" : std::string_view(s.timezone));
     }},
    {"topic", [](const Schedule& s) { return Text(s.topic); }},
    {"body", [](const Schedule& s) { return Bytes(s.body); }},
    {"ttr_ms", [](const Schedule& s) { return Uint(s.ttr_ms); }},
    {"priority", [](const Schedule& s) { return Uint(s.priority); }},
    {"max_attempts", [](const Schedule& s) { return Uint(s.max_attempts); }},
    {"catchup", [](const Schedule& s) { return Text(CatchupName(s.catchup)); }},
    {"catchup_window_ms", [](const Schedule& s) { return Int(s.catchup_window_ms); }},
    {"overlap", [](const Schedule& s) { return Text(OverlapName(s.overlap)); }},
    {"paused", [](const Schedule& s) { return Bool(s.paused); }},
    {"pause_on_failure", [](const Schedule& s) { return Bool(s.pause_on_failure); }},
    // Why the scheduler paused it (a firing's job was buried); "" otherwise.
    {"pause_reason", [](const Schedule& s) { return Text(s.pause_reason); }},
    // Unix ms; 0: none (not planned, never fired, nothing held).
    {"next_fire_at_ms", [](const Schedule& s) { return Int(s.next_fire_at_ms); }},
    {"last_fire_at_ms", [](const Schedule& s) { return Int(s.last_fire_at_ms); }},
    {"buffered_fire_at_ms", [](const Schedule& s) { return Int(s.buffered_fire_at_ms); }},
    {"firings", [](const Schedule& s) { return Uint(s.firings); }},
    {"skipped", [](const Schedule& s) { return Uint(s.skipped); }},
    {"version", [](const Schedule& s) { return Uint(s.version); }},
    {"created_ms", [](const Schedule& s) { return Int(s.created_ms); }},
    {"updated_ms", [](const Schedule& s) { return Int(s.updated_ms); }},
};

// What a backfill answers (POST /v1/schedules/{name}/backfill, SCHEDULE
// BACKFILL). `R` is src/schedule's BackfillResult, a template for the reason
// kPushFigureFields is one: that layer sits above this one.
template <typename R>
inline constexpr Field<R> kBackfillFields[] = {
    {"added", [](const R& r) { return Uint(r.added); }},
    {"already", [](const R& r) { return Uint(r.already); }},
    {"in_range", [](const R& r) { return Uint(r.in_range); }},
};

// The server's scheduler's figures, after the queue's in STATS, /v1/stats
// and INFO, and in /metrics. `S` is src/schedule's SchedulerStats. Counts of
// this server's own work since it started: every server runs the scheduler,
// and a firing is counted by the one whose compare-and-set made it.
template <typename S>
inline constexpr Field<S> kSchedulerStatsFields[] = {
    {"schedules",
     [](const S& s) { return Uint(s.schedules); },
     {},
     {"delayq_schedules", "gauge", "", "Schedules this server knows."}},
    {"schedule_firings",
     [](const S& s) { return Uint(s.firings); },
     {},
     {"delayq_schedule_firings_total", "counter", "",
      "Jobs this server added for schedules' firings since start."}},
    {"schedule_skipped",
     [](const S& s) { return Uint(s.skipped); },
     {},
     {"delayq_schedule_skipped_total", "counter", "",
      "Fire times this server decided to skip since start (catch-up, pause, overlap)."}},
    {"schedule_conflicts",
     [](const S& s) { return Uint(s.conflicts); },
     {},
     {"delayq_schedule_conflicts_total", "counter", "",
      "Firings another server (or a change of the schedule) made first, since start."}},
    {"schedule_next_fire_at_ms",
     [](const S& s) { return Uint(static_cast<uint64_t>(s.next_fire_at_ms)); },  // >= 0
     {},
     {"delayq_schedule_next_fire_at_ms", "gauge", "",
      "The earliest next fire time (Unix ms) of the schedules this server runs; 0 for none."}},
};

}  // namespace delayq::wire

#endif  // DELAYQ_WIRE_FIELDS_H_
