// RemoteQueue: the Queue of store "remote" — jobs kept by one or more
// `delayq serve`, reached over RESP (docs/api.md §4). Applications get one
// from OpenQueue with QueueOptions::store = StoreKind::kRemote:
//
//   QueueOptions o;
//   o.store = StoreKind::kRemote;
//   o.servers = "10.0.0.5:7701,10.0.0.6:7701";  // servers sharing one Redis
//   o.auth_token = "s3cret";                      // their --auth-token, if any
//   o.tls = true;                                 // their --tls-cert-file, if any:
//   o.tls_ca_file = "/etc/delayq/ca.pem";         //   checked against this CA
//   auto queue = OpenQueue(o);                    // connects lazily
//
// Opening connects to nothing: a server that is down shows on the first
// call, as kUnavailable naming every server tried and why ("no delayq server
// answered: 127.0.0.1:7701 (Connection refused), 127.0.0.1:7702 (...)").
// Several servers are for failover, not for sharding: each call goes to the
// server that answered last and moves on when it cannot be reached (the
// rule, and how a server is marked down and retried: client/server_set.h).
// They must serve the same jobs (one Redis behind them all).
//
// Which calls are retried on the next server after their reply was lost
// (the request written, the connection then broken), and why that is safe:
//  - Add: always, under the same id and the same idempotency key. The
//    client fills in an id when the spec has none (32 hex digits: the
//    wall-clock ms, a counter and 64 random bits per RemoteQueue: unique,
//    and time-ordered for one client) and a key when the spec has none (this
//    queue's random tag and a counter: one per Add call, the same on every
//    attempt of it). The server remembers an applied (id, key) for its dedup
//    window (QueueOptions::dedup_window_ms, 5 minutes by default), so a
//    retry whose first attempt ran is answered as that attempt was — even
//    when a worker finished or deleted the job meanwhile, and a `replace`
//    is not applied twice: the job is added at most once. A retry that
//    still meets `exists` (the first attempt did not run, and another add
//    of that id is live) counts as success when the live job has our topic
//    and body (answered from GET), as the caller asked for exactly that.
//  - Finish, Release, Touch, Bury, Unreserve with a receipt: a receipt names
//    one delivery, so a repeat acts on that delivery or fails; it never
//    touches another worker's. A repeated Finish answered not_found means
//    the job is gone — what the first attempt may have done — and counts as
//    success; any other error of a repeat is returned with " (after a lost
//    reply: the first attempt ... may have done it)" appended.
//  - Get, Peek, Topics, Topic, Stats (reads); Pause, Resume (settings).
// Not retried once written (kUnavailable "... may have run"): Reserve (a
// lost reply may have reserved jobs for nobody; they come back after their
// TTR); Delete, Kick, KickTopic, and Finish/Release/Touch/Bury without a
// receipt ("force"): by id alone, a repeat could act on another delivery
// or another job.
//
// An `unavailable` answered by a server (it was reached, and could not do or
// confirm the call) is returned as it is, not repeated here. On the Redis
// store with --redis-wait-replicas (docs/redis-store.md, "What survives a
// failure") it may mean a WAIT timed out: the change was made on the Redis
// master but not confirmed by its replicas, and may or may not survive it.
// Repeating such an Add is safe under the same id and idempotency key, which
// the caller must then choose (the ones filled in here are new on every Add
// call): it is answered as the first was if the first survived, and made now
// if not. A repeated Finish answered not_found means the first made it.
//
// A server that shuts down while a reserve waits on it answers kUnavailable
// "shutting down: ..." (never "no job"): that server is going away. The
// client closes its connections to it and marks it down; with a list, the
// reserve goes to the next server at once, for what is left of its wait
// (it took nothing on the first: nothing can be delivered twice), and the
// caller sees only its answer there; with one server — or none of the
// others taking it — the caller gets kUnavailable, its message beginning
// "shutting down: " (IsShuttingDown, include/delayq/status.h) and naming the server, so a
// worker reconnects rather than polling.
//
// Waiting reserves hold no thread each: one I/O thread of this queue
// polls them all (client/waiting_reserves.h), and reserve callbacks run on
// it. Connections are pooled per server; every connect is bounded by
// connect_timeout_ms and every request by request_timeout_ms, a waiting
// reserve by its wait plus request_timeout_ms.
//
// Errors are as every Queue's, as the server answers them (its RESP error
// prefixes mapped back to codes), plus kUnavailable when no server answered
// or one answered something this client cannot read (that connection is
// closed), and kUnauthorized when a server refused the AUTH token. What can
// be checked here is checked before sending (ValidateJobSpec with
// QueueOptions::limits, receipts, topics, counts), with the same messages
// as the in-process queue. QueueOptions::clock does not drive the servers'
// time: it only orders generated ids.
//
// Thread-safety: as every Queue, any number of threads at once.
#ifndef DELAYQ_CLIENT_REMOTE_QUEUE_H_
#define DELAYQ_CLIENT_REMOTE_QUEUE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "client/server_set.h"
#include "client/waiting_reserves.h"
#include "delayq/queue.h"

namespace delayq::client {

// How the error of a request repeated after a lost reply is read (see the
// comment above): as is, or, for a finish, "not found" as done.
enum class Repeat { kAsIs, kGoneIsDone };

class RemoteQueue final : public Queue {
 public:
  // Errors: kInvalidArgument for bad servers or timeouts; kInternal when the
  // I/O thread cannot start. Connects to nothing.
  static Result<std::unique_ptr<RemoteQueue>> Open(const QueueOptions& options);
  // Answers every waiting reserve kUnavailable, closes every connection.
  ~RemoteQueue() override;

  Result<AddResult> Add(const JobSpec& spec) override;
  uint64_t ReserveAsync(const ReserveRequest& req, ReserveCallback done) override;
  bool CancelReserve(uint64_t ticket) override;
  Status Unreserve(std::string_view id, std::string_view receipt) override;
  Status Finish(std::string_view id, std::string_view receipt) override;
  // One pipeline: one round trip for them all (retried together, as each
  // would be alone).
  std::vector<Status> Acknowledge(std::span<const Ack> acks) override;
  Status Delete(std::string_view id) override;
  Status Release(std::string_view id, std::string_view receipt, int64_t delay_ms,
                 std::string_view error) override;
  Status Touch(std::string_view id, std::string_view receipt) override;
  Status Bury(std::string_view id, std::string_view receipt, std::string_view reason) override;
  Status Kick(std::string_view id) override;
  Result<uint64_t> KickTopic(std::string_view topic, uint64_t n) override;
  Result<JobInfo> Get(std::string_view id) override;
  Result<JobInfo> Peek(std::string_view topic, JobState state) override;
  Status Pause(std::string_view topic, int64_t duration_ms) override;
  Status Resume(std::string_view topic) override;
  Result<std::vector<TopicInfo>> Topics() override;
  Result<TopicInfo> Topic(std::string_view topic) override;
  Result<QueueStats> Stats() override;

 private:
  RemoteQueue(const QueueOptions& options, std::unique_ptr<ServerSet> servers);
  // A generated id: 12 hex digits of wall-clock ms, 4 of a counter within
  // the ms, 16 of this queue's random tag. Strictly increasing per queue.
  std::string NewId();
  // An idempotency key, one per Add call: this queue's tag and a counter.
  std::string NewIdempotencyKey();
  // One command answered +OK.
  Status RunOk(const redis::Argv& cmd, Retry retry, Repeat repeat);
  // FINISH, RELEASE or BURY alone.
  Status RunAck(const Ack& ack);
  // One command, its reply parsed by `parse`.
  template <typename T, typename Parse>
  Result<T> RunParsed(const redis::Argv& cmd, Retry retry, Parse parse);

  const Limits limits_;
  const std::shared_ptr<Clock> clock_;
  std::unique_ptr<ServerSet> servers_;
  std::unique_ptr<WaitingReserves> waiting_;  // destroyed first

  std::mutex id_mu_;
  int64_t id_ms_ = 0;              // GUARDED_BY(id_mu_): ms of the last generated id
  uint32_t id_seq_ = 0;            // GUARDED_BY(id_mu_): its counter
  std::string id_tag_;             // 16 hex digits, fixed at Open
  std::atomic<uint64_t> adds_{0};  // NewIdempotencyKey's counter
};

}  // namespace delayq::client

#endif  // DELAYQ_CLIENT_REMOTE_QUEUE_H_
