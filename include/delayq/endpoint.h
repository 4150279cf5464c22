// Endpoint: an application's side of push delivery (docs/push.md, service
// mode). The same handlers as a Worker's, served on a local HTTP port that
// the delayq servers POST due jobs to, registered with them as a
// subscription and kept registered while the endpoint runs: the whole
// start-up flow of a service in one call, with no polling thread.
//
//   delayq::EndpointOptions options;
//   options.name = "orders";                       // the subscription's name
//   options.listen = "0.0.0.0:8080";
//   options.advertise_url = "http://10.0.0.5:8080/";
//   auto endpoint = delayq::Endpoint::Create(options);
//   (*endpoint)->Handle("order.close", [](const delayq::Delivery& job) {
//     CloseOrder(job.body);                        // throw to retry later
//     return delayq::Outcome::Success();
//   });
//   (*endpoint)->Start();                          // listens, registers
//   ...
//   (*endpoint)->Stop(30'000);                     // deregisters, drains
//
// Requests. The server POSTs each job as a JSON object (docs/push.md, "Each
// delivery"); the endpoint reads it into a Delivery (id, topic, body — from
// "body", or "body_base64" decoded —, attempts, ttr_ms, priority,
// run_at_ms, reserved_until_ms, max_attempts; receipt empty: the server
// acknowledges from the answer) and runs the topic's handler on the
// connection's thread. What the handler returns becomes the answer, which
// the server turns into what a worker's outcome does:
//
//   Outcome::Success()          200                  finished
//   Outcome::Retry(error)       500, body `error`    released with the
//                                                    subscription's backoff
//   Outcome::RetryIn(ms, error) 503, Retry-After:    released for that long
//                               ceil(ms / 1000) s,   (capped by the server at
//                               body `error`         retry.max_backoff_ms)
//   Outcome::Bury(reason)       500, Delayq-Outcome: buried, `reason` as its
//                               bury, body `reason`  last_error
//   an exception                as Retry(what())
//
// Requests the endpoint answers without running a handler: a topic with no
// handler, 500 "no handler for topic X" (retried, maybe by an instance that
// has one); more requests at once than `threads`, 503 with Retry-After: 1;
// with `secrets`, a missing or wrong Standard Webhooks signature or a
// webhook-timestamp more than 5 minutes off the wall clock, 401; a body
// that is not a job, 400; a request that arrives once Stop has begun, 410
// Gone (the server drops this instance and gives the job to another at
// once, the attempt not counted).
//
// Registration. Start puts the subscription (PUT /v1/subscriptions/{name}:
// the handled topics, advertise_url, concurrency = threads, ttl_ms,
// timeout_ms, secrets, retry) to the first of `servers` that answers, and
// puts it again every ttl_ms / 3 so it never lapses while the process
// lives; a process that dies stops getting requests within ttl_ms. A
// renewal that fails (no server answers, or one refuses) is logged, counted
// in Stats().registration_failures and tried again after 100 ms, then
// 200 ms, ... (at most ttl_ms / 3 apart): never fatal. Each call waits at
// most 5 s for a server (connect, each read and write); the next renewal
// is counted from the start of the last. Stop first deletes
// this instance (DELETE /v1/subscriptions/{name}?url=advertise_url), so no
// new request is sent, then drains.
//
// The HTTP side. HTTP/1.1 with keep-alive, Content-Length bodies (up to
// 16 MiB), a thread per connection: the server keeps at most about
// `threads` connections busy (its concurrency for this instance), and a
// handler blocks its thread anyway. Idle connections are closed after
// 60 s. Plain HTTP only: put a TLS proxy in front for https.
//
// Time. Renewals and Stop's drain follow `options.clock`'s monotonic clock
// (with a ManualClock, they move when the test moves it); signature
// timestamps are checked against its wall clock.
//
// Threads. Create, Handle, Start, Stop and the destructor are for one
// thread (the owner's); Stats and url may be called from any thread.
// Handlers run on the endpoint's connection threads, up to `threads` at
// once, so a handler must be safe to run concurrently with itself and the
// others, and must not call Stop nor destroy the endpoint.
#ifndef DELAYQ_ENDPOINT_H_
#define DELAYQ_ENDPOINT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "delayq/clock.h"
#include "delayq/status.h"
#include "delayq/subscription.h"
#include "delayq/worker.h"

namespace delayq {

struct EndpointOptions {
  // The delayq servers' HTTP addresses, "host:port[,host:port...]"; each
  // registration goes to the first that answers, in this order. Empty: the
  // environment's DELAYQ_HTTP, else "127.0.0.1:7700".
  std::string servers;
  // The servers' --auth-token, sent as "Authorization: Bearer <token>".
  // Default: none.
  std::string token;
  // The subscription's name, shared by every instance of the application
  // (1–100 bytes of [A-Za-z0-9._:-]). Required.
  std::string name;
  // Where to listen, "host:port" ("[v6]:port"); port 0 picks a free one
  // (url() tells which). Default: "127.0.0.1:0".
  std::string listen = "127.0.0.1:0";
  // The URL the servers call: http://, this endpoint as they reach it.
  // Default: "http://<listen host>:<listening port>/"; required when the
  // listen host is a wildcard (0.0.0.0, ::), which no server can call.
  std::string advertise_url;
  // Handlers running at once, and the subscription's concurrency: the
  // servers never send more at once. 1..kMaxSubscriptionConcurrency.
  // Default: 4.
  uint32_t threads = 4;
  // The subscription lapses unless renewed within this; renewed every
  // ttl_ms / 3. 1000..kMaxSubscriptionTtlMs, or 0: registered once (tried
  // again until a server accepts it), never renewed, kept by the servers
  // until Stop deletes it — a process that dies leaves it behind. Default:
  // 30 s.
  int64_t ttl_ms = 30'000;
  // How long the server waits for one answer (the subscription's
  // timeout_ms): a handler should return well within it, or the job is
  // tried again while it still runs. 1..kMaxPushTimeoutMs. Default: 30 s.
  uint32_t timeout_ms = kDefaultPushTimeoutMs;
  // Standard Webhooks secrets, "whsec_" + base64 of the key (at most
  // kMaxSubscriptionSecrets). When set, the servers sign every request with
  // each, and a request no key signed is refused (401) without running a
  // handler. Default: none (requests unsigned and not checked).
  std::vector<std::string> secrets;
  // How the servers retry a failed request (the subscription's retry).
  // Default: 1 s, doubling 16 times, at most 5 min.
  RetryPolicy retry;
  // Renewal times, Stop's drain and signature timestamps. Default:
  // SystemClock().
  std::shared_ptr<Clock> clock;
};

// Figures since Create, for Stats().
struct EndpointStats {
  uint64_t requests = 0;               // requests answered (every kind below)
  uint64_t succeeded = 0;              // handlers that returned Success (200)
  uint64_t retried = 0;                // ... Retry, RetryIn or threw (500, 503)
  uint64_t buried = 0;                 // ... Bury (500 + Delayq-Outcome: bury)
  uint64_t errors = 0;                 // requests answered without a handler run:
                                       // no handler for the topic, busy, not a job,
                                       // a bad signature, stopping
  uint64_t unauthorized = 0;           // ... of those, the 401s (signature)
  uint64_t busy = 0;                   // ... of those, the 503s for more than `threads`
  uint64_t running = 0;                // handlers running now
  uint64_t registrations = 0;          // PUTs a server accepted
  uint64_t registration_failures = 0;  // PUTs no server accepted (each try)
  std::string last_registration_error;
};

class Endpoint {
 public:
  // An endpoint listening on options.listen (bound here, so url() is known
  // before Start), not yet serving nor registered. Errors: kInvalidArgument
  // naming the option (what ValidateSubscription checks included);
  // kUnavailable if the address cannot be bound.
  static Result<std::unique_ptr<Endpoint>> Create(EndpointOptions options);

  // Stop(0) if still running, then waits for every thread, even those
  // running a handler that Stop abandoned.
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  // Registers the handler of `topic` (a topic of the subscription).
  // REQUIRES: before Start. Errors: kInvalidArgument for a bad topic name,
  // an empty handler, a topic that already has one, more than
  // kMaxSubscriptionTopics, or an endpoint already started.
  Status Handle(std::string topic, Handler handler);

  // Starts serving, then registers with the servers (see Registration
  // above). Errors: kInvalidArgument without handlers or when started
  // before; the server's error if it refused the first registration
  // (kInvalidArgument, kUnauthorized: a request that will never succeed),
  // the endpoint then stopped. When no server answers, Start still returns
  // ok and the registration is tried again with backoff: the application
  // may start before the servers do.
  Status Start();

  // Stops, in this order: no more renewals; the instance is deleted from
  // the servers (so no new request is sent; requests arriving from now on
  // get 410); running handlers may finish and their answers are sent,
  // until drain_ms after the call on the clock (the deletion's time counts);
  // then every connection is closed (the
  // server releases the jobs of handlers still running, which go on to
  // their end on their threads with their answers dropped; the destructor
  // waits for them). A second Stop does nothing. REQUIRES: not called from
  // a handler.
  void Stop(int64_t drain_ms);

  EndpointStats Stats() const;

  // The URL registered with the servers (options.advertise_url or its
  // default).
  const std::string& url() const;

 private:
  class Impl;
  explicit Endpoint(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace delayq

#endif  // DELAYQ_ENDPOINT_H_
