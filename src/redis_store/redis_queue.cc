// RedisQueue: threads, waiters and the Queue methods. How it works is in
// redis_queue.h; how each call becomes script calls is in redis_queue_ops.cc.
//
// Three threads of the queue's own, plus the Subscriber's:
//  - the dispatcher runs rounds: pending ops (and attempts of waiting
//    reserves, grouped by topics) planned into one ExecBatch; it owns the
//    ops while they run;
//  - the timer promotes due buckets and ends waits that ran out;
//  - the subscriber turns wake messages into attempts and due times.
// Waiters, pending ops and per-bucket due times live under mu_. Callbacks
// are collected under mu_ and run after it is released.
#include "redis_store/redis_queue.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <future>
#include <optional>
#include <unordered_map>
#include <utility>

#include "common/log.h"
#include "redis/url.h"
#include "redis_store/redis_push.h"
#include "redis_store/redis_queue_ops.h"
#include "redis_store/redis_schedule.h"

namespace delayq {
namespace {

using rq::kNever;
using SteadyClock = std::chrono::steady_clock;

// Set on the dispatcher and timer threads: a blocking call made there (from a
// callback) runs its op on the spot instead of waiting for the dispatcher.
thread_local const RedisQueue* t_queue_thread = nullptr;
thread_local const RedisQueue* t_dispatcher = nullptr;

constexpr size_t kMaxOpsPerRound = 4096;
constexpr size_t kMaxRoundBytes = 32 << 20;
constexpr int64_t kMaxWaitMs = 86'400'000;  // as the engine: a day caps a long-poll
constexpr auto kSafetyNet = std::chrono::seconds(1);
constexpr auto kHoldAfterFailure = std::chrono::milliseconds(250);
constexpr auto kHoldWhenStuck = std::chrono::milliseconds(50);
constexpr auto kSubscribeWait = std::chrono::seconds(1);

Status NotFoundId(std::string_view id) { return NotFound(rq::QuoteId(id) + " does not exist"); }

// What finish, release, touch, unreserve and bury check before the round
// trip, as the engine does: the receipt's shape (a mistyped one is
// kInvalidArgument, not stale), then the id (no job can have a bad one).
Status CheckIdReceipt(std::string_view id, std::string_view receipt) {
  if (Status s = ValidateReceipt(receipt); !s.ok()) return s;
  if (!ValidateId(id).ok()) return NotFoundId(id);
  return Status::Ok();
}

// The message without a leading "<what>: " (to put the option's name there).
std::string Tail(const std::string& message, std::string_view what) {
  if (message.rfind(what, 0) == 0) return message.substr(what.size());
  return message;
}

// The option a TLS context's complaint is about (net/tls.cc names the
// file: "tls: cannot read CA file ...", "tls: cannot use key ..."); one it
// does not tie to a file (the system's trust store) names none.
std::string TlsOptionOf(const std::string& message) {
  auto has = [&](std::string_view part) { return message.find(part) != std::string::npos; };
  if (has("CA file")) return "redis_tls_ca_file: ";
  if (has("needs its key") || has("does not match")) {
    return "redis_tls_cert_file and redis_tls_key_file: ";
  }
  if (has("cannot use certificate")) return "redis_tls_cert_file: ";
  if (has("cannot use key")) return "redis_tls_key_file: ";
  return "redis TLS: ";
}

}  // namespace

struct RedisQueue::Waiter {
  std::vector<std::string> topics;  // deduplicated, in the order given
  // The topics joined (and the TTR override): attempts with one key share a
  // group.
  std::string key;
  uint32_t count = 1;
  // ReserveRequest::max_bytes. Applied when a group hands its deliveries
  // to its attempts, not inside the scripts: one reserve call serves several
  // waiters' summed counts across buckets, so a bucket cannot know a
  // waiter's share of the bytes. What an attempt leaves goes to the next
  // attempt of its group, and what none takes is given back (unreserve, no
  // attempt counted) before any is answered; the cost, a script per job
  // given back, falls only on batches larger than a server can write.
  uint64_t max_bytes = 0;
  uint32_t ttr_ms = 0;  // ReserveRequest::ttr_ms: part of `key` (one per group)
  bool once = false;    // wait_ms == 0: answered after its first attempt
  int64_t deadline_mono = kNever;
  ReserveCallback done;
  uint64_t serial = 0;  // of its current attempt
  enum class State { kQueued, kRunning, kIdle } state = State::kQueued;
  bool executing = false;  // its attempt is in the round being run now
  bool abandoned = false;  // AbandonReserve during that round: ends with it
  bool recheck = false;    // woken during its attempt: try once more if it gets nothing
  bool expired = false;    // its wait ran out during its attempt
};

// --- opening and closing ----------------------------------------------------------

Result<std::unique_ptr<RedisQueue>> RedisQueue::Open(const QueueOptions& options) {
  const std::string& prefix = options.redis_prefix;
  if (prefix.empty() || prefix.size() > 256) {
    return InvalidArgument("redis_prefix: 1-256 bytes, got " + std::to_string(prefix.size()));
  }
  if (prefix.find_first_of("{}") != std::string::npos) {
    return InvalidArgument(
        "redis_prefix: '{' and '}' are not allowed (the prefix is the hash tag of every key)");
  }
  if (options.redis_buckets > rq::kMaxBuckets) {
    return InvalidArgument("redis_buckets: must be 1..16384 (or 0: automatic), got " +
                           std::to_string(options.redis_buckets));
  }
  auto url = redis::ParseRedisUrl(options.redis_url);
  if (!url.ok()) {
    return InvalidArgument("redis_url: " + Tail(url.status().message(), "redis url: "));
  }
  if (options.redis_wait_replicas > 1000) {
    return InvalidArgument("redis_wait_replicas: must be 0..1000, got " +
                           std::to_string(options.redis_wait_replicas));
  }
  if (options.redis_wait_timeout_ms < 1 || options.redis_wait_timeout_ms > 3'600'000) {
    return InvalidArgument("redis_wait_timeout_ms: must be 1..3600000 (an hour), got " +
                           std::to_string(options.redis_wait_timeout_ms));
  }
  if (!url->tls) {
    for (const auto& [name, value] : {std::pair{"redis_tls_ca_file", &options.redis_tls_ca_file},
                                      {"redis_tls_cert_file", &options.redis_tls_cert_file},
                                      {"redis_tls_key_file", &options.redis_tls_key_file}}) {
      if (!value->empty()) {
        return InvalidArgument(std::string(name) +
                               " given, but the Redis URL is redis://, not rediss://");
      }
    }
  }
  redis::ClientOptions client_options;
  client_options.wait_replicas = static_cast<int>(options.redis_wait_replicas);
  client_options.wait_timeout_ms = static_cast<int>(options.redis_wait_timeout_ms);
  client_options.tls.ca_file = options.redis_tls_ca_file;
  client_options.tls.cert_file = options.redis_tls_cert_file;
  client_options.tls.key_file = options.redis_tls_key_file;
  auto client = redis::Client::Open(*url, client_options);
  if (!client.ok()) {
    const std::string& m = client.status().message();
    if (client.status().code() == Code::kInvalidArgument) {
      if (m.starts_with("tls: ")) return InvalidArgument(TlsOptionOf(m) + Tail(m, "tls: "));
      return InvalidArgument("redis_url: " + m);
    }
    // A refused certificate is the CA option's business (or the server's
    // name: the message says which).
    if (m.find("certificate verify failed") != std::string::npos) {
      return Status(client.status().code(), m + " (redis_tls_ca_file)");
    }
    return client.status();
  }

  auto ctx = std::make_unique<rq::Context>();
  ctx->clock = options.clock ? options.clock : SystemClock();
  ctx->limits = options.limits;
  ctx->dedup_window_ms = std::max<int64_t>(0, options.dedup_window_ms);
  ctx->wait_replicas = options.redis_wait_replicas;
  ctx->prefix = prefix;
  ctx->buckets = options.redis_buckets;
  if (ctx->buckets == 0) {
    // Automatic: what the prefix was first used with (bucket 0 exists at
    // every count), else what suits the deployment.
    auto known =
        (*client)->Exec("{" + prefix + ":0}:meta", {"HGET", "{" + prefix + ":0}:meta", "buckets"});
    if (!known.ok()) return known.status();
    uint64_t n = 0;
    if (known->is_string()) {
      const std::string& text = known->str();
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
      if (ec != std::errc() || end != text.data() + text.size() || n < 1 || n > rq::kMaxBuckets) {
        return Internal("redis store: prefix " + prefix + " holds a bad bucket count '" +
                        text.substr(0, 32) + "'");
      }
    } else {
      n = (*client)->cluster() ? rq::kClusterBuckets : 1;
    }
    ctx->buckets = static_cast<uint32_t>(n);
  }
  ctx->due = std::make_unique<rq::DueTimes>(ctx->buckets);  // all due: promoted at start
  for (uint32_t b = 0; b < ctx->buckets; ++b) {
    ctx->tags.push_back("{" + prefix + ":" + std::to_string(b) + "}");
  }

  // Every script loaded on every master first, so the first round does not
  // meet NOSCRIPT once per bucket (the client would load and retry anyway).
  for (size_t i = 0; i < rq::kLuaCount; ++i) {
    const redis::Script& script = rq::ScriptOf(static_cast<rq::Lua>(i));
    for (auto& [node, r] : (*client)->ExecOnEachMaster({"SCRIPT", "LOAD", script.source()})) {
      if (!r.ok()) return r.status();
    }
  }
  // Format and bucket count, checked (or written on first use) everywhere.
  std::vector<redis::Command> init;
  const std::string now = std::to_string(ctx->clock->NowMs());
  for (uint32_t b = 0; b < ctx->buckets; ++b) {
    init.push_back(
        redis::Command::Eval(rq::ScriptOf(rq::Lua::kInit), {ctx->tags[b]},
                             {now, std::to_string(rq::kFormat), std::to_string(ctx->buckets)}));
  }
  for (Result<redis::Reply>& r : (*client)->ExecBatch(init)) {
    if (!r.ok()) return r.status();
    if (!r->is_error()) continue;
    Status s = rq::ErrorStatus(*r);
    if (s.code() == Code::kInvalidArgument) {
      return InvalidArgument("redis_buckets: " + Tail(s.message(), "buckets: "));
    }
    return s;
  }

  if (ctx->wait_replicas > 0) {
    redis::Client* c = client->get();
    rq::Context* context = ctx.get();
    ctx->short_of_replicas = [c, context](uint32_t bucket) {
      return c->ShortOfReplicas(context->tags[bucket]);
    };
  }
  auto q = std::unique_ptr<RedisQueue>(new RedisQueue(std::move(ctx), std::move(client).value()));
  // Wake-ups first (docs/redis-store.md: subscribe before anything else).
  // Any master can take over the subscription when one dies.
  // With Sentinel the URL names sentinels: the master and its replicas then
  // (a PUBLISH on the master reaches its replicas), the master first, as the
  // client knows it now, after a failover too.
  redis::RedisUrl sub_url = *url;
  sub_url.sentinel_master.clear();
  std::vector<redis::Endpoint> seeds = q->client_->Masters();
  std::vector<redis::Endpoint> more = url->sentinel() ? q->client_->SentinelReplicas() : url->seeds;
  for (const redis::Endpoint& e : more) {
    if (std::find(seeds.begin(), seeds.end(), e) == seeds.end()) seeds.push_back(e);
  }
  sub_url.seeds = std::move(seeds);
  RedisQueue* raw = q.get();
  redis::SubscriberOptions sub_options;
  sub_options.connection.tls = q->client_->tls_context();  // the same servers
  redis::Client* client_raw = q->client_.get();
  sub_options.prefer = [client_raw]() -> std::optional<redis::Endpoint> {
    std::vector<redis::Endpoint> masters = client_raw->Masters();
    if (masters.empty()) return std::nullopt;
    return masters.front();
  };
  auto sub = redis::Subscriber::Start(
      sub_url, {prefix + ":wake"},
      [raw](std::string_view, std::string_view message) { raw->OnWakeMessage(message); },
      [raw] { raw->OnSubscribed(); }, std::move(sub_options));
  if (!sub.ok()) return sub.status();
  q->subscriber_ = std::move(sub).value();
  {
    std::unique_lock<std::mutex> lock(q->mu_);
    q->round_cv_.wait_for(lock, kSubscribeWait, [&] { return q->subscribed_; });
  }
  if (!q->clock_->IsRealTime()) q->clock_token_ = q->clock_->Subscribe([raw] { raw->PokeTimer(); });
  q->dispatcher_ = std::thread([raw] { raw->RunDispatcher(); });
  q->timer_ = std::thread([raw] { raw->RunTimer(); });
  return q;
}

RedisQueue::RedisQueue(std::unique_ptr<rq::Context> ctx, std::unique_ptr<redis::Client> client)
    : ctx_(std::move(ctx)),
      clock_(ctx_->clock),
      client_(std::move(client)),
      known_(ctx_->buckets),
      ledger_(std::make_unique<rq::RedisLedger>(
          [this](std::unique_ptr<rq::Op> op) { Submit(std::move(op), /*wait=*/false); })) {}

RedisQueue::~RedisQueue() {
  if (clock_token_ != 0) clock_->Unsubscribe(clock_token_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  round_cv_.notify_all();
  PokeTimer();
  if (dispatcher_.joinable()) dispatcher_.join();
  if (timer_.joinable()) timer_.join();
  subscriber_.reset();  // its callbacks take mu_ (not held here) and see stopping_
  std::vector<std::unique_ptr<rq::Op>> ops;
  std::vector<ReserveCallback> waits;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& op : pending_) ops.push_back(std::move(op));
    for (auto& op : leftover_) {
      if (op->AsGroup() == nullptr) ops.push_back(std::move(op));
    }
    pending_.clear();
    leftover_.clear();
    pending_attempts_.clear();
    for (auto& [ticket, w] : waiters_) waits.push_back(std::move(w.done));
    waiters_.clear();
    topic_waiters_.clear();
    wait_deadlines_.clear();
    waiting_ = 0;
  }
  // Callbacks may call the queue: every entry point answers kUnavailable now.
  for (auto& op : ops) {
    op->Fail(Unavailable("queue closed"));
    op->Complete();
  }
  for (auto& done : waits) done(Unavailable("queue closed"));
}

uint32_t RedisQueue::buckets() const { return ctx_->buckets; }

uint32_t RedisQueue::BucketOf(std::string_view id) const { return ctx_->BucketOf(id); }

RedisQueue::DispatchStats RedisQueue::dispatch_stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dispatch_stats_;
}

StoreFigures RedisQueue::Figures() {
  DispatchStats d = dispatch_stats();
  const redis::Topology t = client_->topology();
  // Replicas known, and the fewest the last WAIT of any master confirmed.
  uint64_t replicas = 0;
  int64_t acked = -1;
  std::string masters;
  std::string short_of;  // the masters whose last WAIT fell short
  for (const redis::Topology::Master& m : t.masters) {
    replicas += static_cast<uint64_t>(std::max(0, m.replicas));
    if (m.acked >= 0) acked = acked < 0 ? m.acked : std::min<int64_t>(acked, m.acked);
    masters += (masters.empty() ? "" : ", ") + m.endpoint.ToString() + " (" +
               (m.replicas < 0 ? std::string("?") : std::to_string(m.replicas)) + " replicas";
    if (m.acked >= 0) masters += ", last WAIT " + std::to_string(m.acked);
    masters += ")";
    if (ctx_->wait_replicas > 0 && m.acked >= 0 &&
        static_cast<uint32_t>(m.acked) < ctx_->wait_replicas) {
      short_of += (short_of.empty() ? "" : ", ") + m.endpoint.ToString();
    }
  }
  StoreFigures f;
  f.fields = {{"redis_rounds", d.rounds},
              {"redis_commands", d.commands},
              {"redis_ops", d.ops},
              {"redis_masters", t.masters.size()},
              {"redis_replicas", replicas},
              {"redis_wait_replicas", ctx_->wait_replicas},
              {"redis_replicas_acked", acked < 0 ? 0 : static_cast<uint64_t>(acked)},
              {"redis_waits", t.waits},
              {"redis_wait_shortfalls", t.wait_shortfalls},
              {"redis_failovers", t.failovers}};
  f.topology = std::string(redis::ModeName(t.mode)) + ": " + masters;
  if (!short_of.empty()) {
    f.health = Unavailable("redis: the last WAIT on " + short_of + " confirmed fewer than " +
                           std::to_string(ctx_->wait_replicas) +
                           " replicas (--redis-wait-replicas): changes there are refused");
  }
  return f;
}

// --- running ops ---------------------------------------------------------------------

void RedisQueue::Submit(std::unique_ptr<rq::Op> op, bool wait) {
  bool closed;
  {
    std::unique_lock<std::mutex> lock(mu_);
    closed = stopping_;
    if (!closed && !(wait && t_queue_thread == this)) {
      pending_.push_back(std::move(op));
      lock.unlock();
      work_cv_.notify_one();
      return;
    }
  }
  if (closed) {
    op->Fail(Unavailable("queue closed"));
  } else {
    RunInline(*op);  // a callback of ours waits for it: the dispatcher may be this thread
  }
  op->Complete();
}

template <typename T, typename Make>
T RedisQueue::Call(Make make) {
  auto promise = std::make_shared<std::promise<T>>();
  std::future<T> future = promise->get_future();
  Submit(make([promise](T r) { promise->set_value(std::move(r)); }), /*wait=*/true);
  return future.get();
}

void RedisQueue::RunInline(rq::Op& op) {
  for (;;) {
    rq::Batch b(*ctx_, clock_->NowMs());
    op.Plan(b);
    b.Seal();
    b.SetResults(client_->ExecBatch(b.commands()));
    const size_t commands = b.commands().size();
    const bool done = op.Absorb(b);
    std::lock_guard<std::mutex> lock(mu_);
    ApplyNotes(b);
    ++dispatch_stats_.rounds;
    dispatch_stats_.commands += commands;
    ++dispatch_stats_.ops;
    if (done) return;
  }
}

void RedisQueue::ApplyNotes(const rq::Batch& b) {
  // Empty buckets first: a script of this round that ran after the heads
  // (an add behind it in the pipeline) then invalidates what it found.
  for (const rq::Batch::Empty& e : b.empty_notes()) {
    Knowledge& k = known_[e.bucket];
    if (k.any_event > e.stamp) continue;
    for (const std::string& t : *e.topics) {
      auto it = k.events.find(t);
      if (it == k.events.end() || it->second <= e.stamp) k.empty.insert(t);
    }
  }
  for (const auto& [bucket, ms] : b.due_notes()) LowerDue(bucket, ms);
  for (const auto& [topic, bucket] : b.ready_notes()) {
    Invalidate(bucket, topic);
    if (!topic.empty()) WakeTopic(topic);
  }
}

void RedisQueue::RunDispatcher() {
  t_queue_thread = this;
  t_dispatcher = this;
  std::vector<std::unique_ptr<rq::Op>> active;  // ops that need another round
  std::vector<std::function<void()>> callbacks;
  for (;;) {
    std::vector<std::unique_ptr<rq::Op>> round;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] {
        return stopping_ || !pending_.empty() || !pending_attempts_.empty() || !active.empty();
      });
      if (stopping_) {
        leftover_ = std::move(active);
        return;
      }
      bool held = false;  // an op of the last round needs another: later ones wait
      for (auto& op : active) {
        rq::ReserveGroup* g = op->AsGroup();
        if (g != nullptr && !PrepareGroup(*g)) continue;
        held = held || g == nullptr;
        round.push_back(std::move(op));
      }
      active.clear();
      TakePending(&round, held);
    }
    if (round.empty()) continue;
    rq::Batch b(*ctx_, clock_->NowMs());
    for (auto& op : round) op->Plan(b);
    b.Seal();  // the reserve groups' shared heads and reserve calls
    if (!b.commands().empty()) b.SetResults(client_->ExecBatch(b.commands()));
    std::vector<std::unique_ptr<rq::Op>> done;
    for (auto& op : round) {
      if (op->Absorb(b)) {
        done.push_back(std::move(op));
      } else {
        active.push_back(std::move(op));
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ApplyNotes(b);
      ++dispatch_stats_.rounds;
      dispatch_stats_.commands += b.commands().size();
      dispatch_stats_.ops += round.size();
      for (auto* ops : {&done, &active}) {
        for (auto& op : *ops) {
          if (rq::ReserveGroup* g = op->AsGroup()) SettleGroup(*g, &callbacks);
        }
      }
    }
    round_cv_.notify_all();
    for (auto& op : done) {
      if (op->AsGroup() == nullptr) op->Complete();
    }
    done.clear();
    for (auto& cb : callbacks) cb();
    callbacks.clear();
  }
}

void RedisQueue::TakePending(std::vector<std::unique_ptr<rq::Op>>* round, bool held) {
  if (!held) TakeOps(round);
  TakeAttempts(round);
}

void RedisQueue::TakeOps(std::vector<std::unique_ptr<rq::Op>>* round) {
  // Ops on one id keep their order: within a shared command a script takes
  // them in order, but commands of different kinds are not ordered, so an
  // op of another kind on an id already in this round waits for the next.
  std::unordered_map<std::string_view, rq::Lua> ids;
  size_t bytes = 0;
  size_t taken = 0;
  while (!pending_.empty() && taken < kMaxOpsPerRound && bytes < kMaxRoundBytes) {
    rq::Op& op = *pending_.front();
    if (std::string_view id = op.id(); !id.empty()) {
      auto [it, fresh] = ids.emplace(id, op.kind());
      if (!fresh && it->second != op.kind()) break;
    }
    bytes += op.bytes();
    ++taken;
    round->push_back(std::move(pending_.front()));
    pending_.pop_front();
    // What follows an op that may need more rounds waits until it is done:
    // sharing its first round, it would run before the op's later rounds.
    // What follows a read or change of more than one job waits for the next
    // round: it might join a command that runs before it (rq::Op::Barrier).
    if (op.MayTakeRounds(*ctx_) || op.Barrier()) break;
  }
}

void RedisQueue::TakeAttempts(std::vector<std::unique_ptr<rq::Op>>* round) {
  // Attempts with the same topics form one group, up to kMaxReserveCount
  // jobs. Groups with other topics do not cost calls of their own: all the
  // groups of a round share each bucket's heads and reserve (rq::Batch).
  // Groups that share a topic are never in flight together: their heads
  // would show both the same jobs, and the later could get the next best of
  // a bucket instead of the next best overall, or nothing. So an attempt
  // joins the group of its topics only if no attempt on other topics that
  // share one came in between; otherwise it, and every later attempt that
  // shares a topic with it, waits for a later round, in order.
  std::unordered_map<std::string, std::pair<rq::ReserveGroup*, uint32_t>> groups;
  std::unordered_map<std::string, const std::string*> owner;  // topic -> key of its group
  for (const auto& op : *round) {
    if (rq::ReserveGroup* g = op->AsGroup()) {
      for (const std::string& t : g->topics()) owner.emplace(t, nullptr);  // continuing: busy
    }
  }
  std::set<std::string> deferred_topics;
  std::deque<std::pair<uint64_t, uint64_t>> deferred;
  const int64_t now_ms = pending_attempts_.empty() ? 0 : clock_->NowMs();
  while (!pending_attempts_.empty()) {
    auto [ticket, serial] = pending_attempts_.front();
    pending_attempts_.pop_front();
    auto it = waiters_.find(ticket);
    if (it == waiters_.end() || it->second.serial != serial ||
        it->second.state != Waiter::State::kQueued) {
      continue;  // withdrawn, or answered
    }
    Waiter& w = it->second;
    auto group_it = groups.find(w.key);
    const bool joins =
        group_it != groups.end() && group_it->second.second + w.count <= kMaxReserveCount;
    const bool blocked = std::any_of(w.topics.begin(), w.topics.end(), [&](const std::string& t) {
      if (deferred_topics.count(t) != 0) return true;
      auto o = owner.find(t);
      return o != owner.end() && !(joins && o->second == &group_it->first);
    });
    if (blocked) {
      deferred.emplace_back(ticket, serial);
      deferred_topics.insert(w.topics.begin(), w.topics.end());
      continue;
    }
    rq::Attempt a;
    a.ticket = ticket;
    a.serial = serial;
    a.count = w.count;
    a.max_bytes = w.max_bytes;
    if (!w.once) {
      // A waiting reserve looks only where jobs may be ready (see
      // known_), and if that is nowhere, waits for news at once.
      std::vector<uint32_t> scope = WaiterScope(w, now_ms);
      if (scope.empty()) {
        w.state = Waiter::State::kIdle;
        continue;
      }
      if (scope.size() < ctx_->buckets) {
        a.all_buckets = false;
        a.buckets = std::move(scope);
      }
    }
    if (!joins) {
      auto g = std::make_unique<rq::ReserveGroup>(w.topics, w.ttr_ms);
      group_it = groups.insert_or_assign(w.key, std::make_pair(g.get(), 0u)).first;
      round->push_back(std::move(g));
      for (const std::string& t : w.topics) owner[t] = &group_it->first;
    }
    auto& [group, total] = group_it->second;
    group->attempts.push_back(std::move(a));
    total += w.count;
    w.state = Waiter::State::kRunning;
    w.executing = true;
  }
  pending_attempts_ = std::move(deferred);
}

bool RedisQueue::PrepareGroup(rq::ReserveGroup& group) {
  auto& attempts = group.attempts;
  attempts.erase(std::remove_if(attempts.begin(), attempts.end(),
                                [&](const rq::Attempt& a) {
                                  auto it = waiters_.find(a.ticket);
                                  return it == waiters_.end() || it->second.serial != a.serial;
                                }),
                 attempts.end());
  for (const rq::Attempt& a : attempts) waiters_.at(a.ticket).executing = true;
  return !attempts.empty();
}

void RedisQueue::SettleGroup(rq::ReserveGroup& group,
                             std::vector<std::function<void()>>* callbacks) {
  // Its attempts have their jobs, but are answered once the jobs past their
  // budgets are back (the group's next round).
  if (group.GivingBack()) return;
  std::vector<rq::Attempt> keep;
  for (rq::Attempt& a : group.attempts) {
    auto it = waiters_.find(a.ticket);
    if (it == waiters_.end() || it->second.serial != a.serial) {
      // Cannot happen: a waiter whose attempt runs is neither cancelled nor
      // expired (CancelReserve waits, the timer marks it), so no job is lost.
      if (!a.got.empty()) Log(LogLevel::kError, "redis queue: deliveries without a waiter");
      continue;
    }
    Waiter& w = it->second;
    w.executing = false;
    if (w.abandoned && !a.finished) {  // took nothing yet (an attempt takes jobs as it ends)
      EraseWaiter(a.ticket);
      continue;
    }
    if (a.finished) {
      EndAttempt(a.ticket, w, a, callbacks);
    } else {
      keep.push_back(std::move(a));
    }
  }
  group.attempts = std::move(keep);
}

void RedisQueue::EndAttempt(uint64_t ticket, Waiter& w, rq::Attempt& a,
                            std::vector<std::function<void()>>* callbacks) {
  if (!a.error.ok() || !a.got.empty() || w.once || w.expired || w.abandoned || stopping_) {
    // The jobs are within the byte budget: the group cut them, and gave
    // back what no attempt took before this (rq::ReserveGroup).
    Result<Deliveries> r = Deliveries{};
    if (!a.error.ok()) {
      r = a.error;
    } else if (!a.got.empty()) {
      r = std::move(a.got);
    } else if (stopping_) {
      r = Unavailable("queue closed");
    }
    callbacks->push_back(
        [done = std::move(w.done), r = std::move(r)]() mutable { done(std::move(r)); });
    EraseWaiter(ticket);
  } else if (w.recheck) {
    QueueAttempt(ticket, w);
  } else {
    w.state = Waiter::State::kIdle;
  }
}

// --- waiters -------------------------------------------------------------------------

void RedisQueue::Invalidate(uint32_t bucket, const std::string& topic) {
  if (bucket == rq::kAllBuckets) {
    for (uint32_t b = 0; b < ctx_->buckets; ++b) Invalidate(b, topic);
    return;
  }
  if (bucket >= ctx_->buckets) return;
  const uint64_t stamp = ctx_->ready_events.fetch_add(1, std::memory_order_relaxed) + 1;
  Knowledge& k = known_[bucket];
  if (topic.empty()) {
    k.any_event = stamp;
    k.empty.clear();
    k.events.clear();  // any_event covers them
  } else {
    k.events[topic] = stamp;
    k.empty.erase(topic);
  }
}

std::vector<uint32_t> RedisQueue::WaiterScope(const Waiter& w, int64_t now_ms) const {
  std::vector<uint32_t> scope;
  // Without the subscription, wake messages are lost: trust nothing.
  const bool trust = subscriber_ != nullptr && subscriber_->connected();
  for (uint32_t b = 0; b < ctx_->buckets; ++b) {
    if (!trust) {
      scope.push_back(b);
      continue;
    }
    const std::set<std::string>& empty = known_[b].empty;
    const bool known_empty = !ctx_->due->Known(b, now_ms) &&
                             std::all_of(w.topics.begin(), w.topics.end(),
                                         [&](const std::string& t) { return empty.count(t) != 0; });
    if (!known_empty) scope.push_back(b);
  }
  return scope;
}

void RedisQueue::QueueAttempt(uint64_t ticket, Waiter& w) {
  ++w.serial;
  w.state = Waiter::State::kQueued;
  w.recheck = false;
  pending_attempts_.emplace_back(ticket, w.serial);
}

void RedisQueue::WakeTopic(const std::string& topic) {
  auto it = topic_waiters_.find(topic);
  if (it == topic_waiters_.end()) return;
  for (uint64_t ticket : it->second) {
    Waiter& w = waiters_.at(ticket);
    if (w.state == Waiter::State::kIdle) {
      QueueAttempt(ticket, w);
    } else if (w.state == Waiter::State::kRunning) {
      w.recheck = true;
    }
  }
  work_cv_.notify_one();
}

void RedisQueue::WakeAll() {
  for (auto& [ticket, w] : waiters_) {
    if (w.state == Waiter::State::kIdle) {
      QueueAttempt(ticket, w);
    } else if (w.state == Waiter::State::kRunning) {
      w.recheck = true;
    }
  }
  work_cv_.notify_one();
}

void RedisQueue::EraseWaiter(uint64_t ticket) {
  auto it = waiters_.find(ticket);
  if (it == waiters_.end()) return;
  Waiter& w = it->second;
  if (!w.once) {
    for (const std::string& t : w.topics) {
      auto tw = topic_waiters_.find(t);
      if (tw == topic_waiters_.end()) continue;
      tw->second.erase(ticket);
      if (tw->second.empty()) topic_waiters_.erase(tw);
    }
    wait_deadlines_.erase({w.deadline_mono, ticket});
    --waiting_;
  }
  waiters_.erase(it);
}

uint64_t RedisQueue::ReserveAsync(const ReserveRequest& req, ReserveCallback done) {
  if (Status s = ValidateReserveRequest(req); !s.ok()) {
    done(std::move(s));
    return 0;
  }
  Waiter w;
  for (const std::string& t : req.topics) {
    if (std::find(w.topics.begin(), w.topics.end(), t) != w.topics.end()) continue;
    w.topics.push_back(t);
    w.key += t;
    w.key += '\n';
  }
  w.count = req.count;
  w.max_bytes = req.max_bytes;
  w.ttr_ms = req.ttr_ms;
  // A group's attempts share one reserve call, and so one TTR override.
  if (w.ttr_ms != 0) w.key += "ttr " + std::to_string(w.ttr_ms) + '\n';
  w.once = req.wait_ms == 0;
  if (!w.once) w.deadline_mono = clock_->MonotonicMs() + std::min(req.wait_ms, kMaxWaitMs);
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping_) {
    lock.unlock();
    done(Unavailable("queue closed"));
    return 0;
  }
  w.done = std::move(done);
  const uint64_t ticket = next_ticket_++;
  Waiter& added = waiters_.emplace(ticket, std::move(w)).first->second;
  const bool poke = !added.once && added.deadline_mono < timer_wakes_at_mono_.load();
  if (!added.once) {
    for (const std::string& t : added.topics) topic_waiters_[t].insert(ticket);
    wait_deadlines_.emplace(added.deadline_mono, ticket);
    ++waiting_;
  }
  QueueAttempt(ticket, added);  // registered before its first attempt
  lock.unlock();
  work_cv_.notify_one();
  if (poke) PokeTimer();
  return ticket;
}

bool RedisQueue::CancelReserve(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    auto it = waiters_.find(ticket);
    if (it == waiters_.end()) return false;
    if (!it->second.executing) {
      EraseWaiter(ticket);
      return true;
    }
    // Its attempt is in a round: whether it took jobs is known when the
    // round ends. (Never the case on the dispatcher thread, which runs
    // callbacks between rounds.)
    if (t_dispatcher == this) return false;
    round_cv_.wait(lock);
  }
}

void RedisQueue::AbandonReserve(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = waiters_.find(ticket);
  if (it == waiters_.end()) return;
  if (it->second.executing) {
    // Its round says whether it took jobs; SettleGroup ends it then.
    it->second.abandoned = true;
    return;
  }
  EraseWaiter(ticket);
}

// --- timing --------------------------------------------------------------------------

void RedisQueue::PokeTimer() {
  {
    std::lock_guard<std::mutex> lock(timer_mu_);
    timer_poked_ = true;
  }
  timer_cv_.notify_one();
}

void RedisQueue::LowerDue(uint32_t bucket, int64_t ms) {
  if (bucket >= ctx_->buckets || ms < 0) return;
  if (ctx_->due->Note(bucket, ms) && ms < timer_wakes_at_wall_.load()) PokeTimer();
}

struct RedisQueue::TimerState {
  explicit TimerState(uint32_t buckets)
      : last_promote(buckets, SteadyClock::now()), hold(buckets) {}
  std::vector<SteadyClock::time_point> last_promote;
  std::vector<SteadyClock::time_point> hold;  // after a failure: not before
};

void RedisQueue::ExpireWaits(int64_t mono, std::vector<std::function<void()>>* callbacks) {
  // A wait that ran out answers empty; one whose attempt is in a round
  // answers when the round ends.
  while (!wait_deadlines_.empty() && wait_deadlines_.begin()->first <= mono) {
    const uint64_t ticket = wait_deadlines_.begin()->second;
    Waiter& w = waiters_.at(ticket);
    if (w.executing) {
      w.expired = true;
      wait_deadlines_.erase(wait_deadlines_.begin());
      continue;
    }
    callbacks->push_back([done = std::move(w.done)]() mutable { done(Deliveries{}); });
    EraseWaiter(ticket);
  }
}

void RedisQueue::Promote(TimerState& ts, const std::vector<uint32_t>& due, int64_t now) {
  // Every due bucket in one round trip; several servers promoting one
  // bucket cost only a few commands (promote is idempotent).
  const redis::Script& script = rq::ScriptOf(rq::Lua::kPromote);
  const std::string now_text = std::to_string(now);
  std::vector<redis::Command> cmds;
  cmds.reserve(due.size());
  for (uint32_t b : due) {
    cmds.push_back(
        redis::Command::Eval(script, {ctx_->tags[b]}, {now_text, std::to_string(rq::kMaxBatch)}));
  }
  std::vector<Result<redis::Reply>> results = client_->ExecBatch(cmds);
  const auto after = SteadyClock::now();
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < due.size(); ++i) {
    const uint32_t b = due[i];
    ts.last_promote[b] = after;
    const Result<redis::Reply>& r = results[i];
    if (!r.ok() || !r->is_array() || r->elements().size() != 3 || !r->elements()[0].is_integer() ||
        !r->elements()[1].is_integer() || !r->elements()[2].is_integer()) {
      ts.hold[b] = after + kHoldAfterFailure;  // Redis away: the safety net's pace
      continue;
    }
    const int64_t moved = r->elements()[0].integer() + r->elements()[1].integer();
    if (moved > 0) Invalidate(b, "");  // jobs became ready (their wake messages follow)
    ctx_->due->EndPromote(b, r->elements()[2].integer() < 0 ? kNever : r->elements()[2].integer());
    const int64_t next = ctx_->due->At(b);
    // Work left (next <= now) runs again at once, unless promote could not
    // move any of it: then do not spin.
    if (next <= now && moved == 0) ts.hold[b] = after + kHoldWhenStuck;
  }
}

void RedisQueue::RunTimer() {
  t_queue_thread = this;
  const uint32_t n = ctx_->buckets;
  TimerState ts(n);
  for (;;) {
    const int64_t now = clock_->NowMs();
    const int64_t mono = clock_->MonotonicMs();
    const auto steady = SteadyClock::now();
    std::vector<std::function<void()>> callbacks;
    std::vector<uint32_t> due;
    int64_t next_wall = kNever;
    int64_t next_mono = kNever;
    auto next_steady = steady + kSafetyNet;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      ExpireWaits(mono, &callbacks);
      if (!wait_deadlines_.empty()) next_mono = wait_deadlines_.begin()->first;
      for (uint32_t b = 0; b < n; ++b) {
        if (steady < ts.hold[b]) {
          next_steady = std::min(next_steady, ts.hold[b]);
          continue;
        }
        const int64_t at = ctx_->due->At(b);
        if (at <= now || steady - ts.last_promote[b] >= kSafetyNet) {
          due.push_back(b);
          ctx_->due->BeginPromote(b);
        } else {
          next_wall = std::min(next_wall, at);
          next_steady = std::min(next_steady, ts.last_promote[b] + kSafetyNet);
        }
      }
      timer_wakes_at_wall_.store(due.empty() ? next_wall : 0);
      timer_wakes_at_mono_.store(due.empty() ? next_mono : 0);
    }
    for (auto& cb : callbacks) cb();
    if (!due.empty()) {
      Promote(ts, due, now);
      continue;  // what is left due runs at once
    }
    if (!callbacks.empty()) continue;
    SteadyClock::duration wait = next_steady - steady;
    if (clock_->IsRealTime()) {  // a manual clock pokes us when it moves instead
      const int64_t ms = std::min(next_wall == kNever ? kNever : next_wall - now,
                                  next_mono == kNever ? kNever : next_mono - mono);
      if (ms != kNever) wait = std::min<SteadyClock::duration>(wait, std::chrono::milliseconds(ms));
    }
    std::unique_lock<std::mutex> lock(timer_mu_);
    if (!timer_poked_) timer_cv_.wait_for(lock, wait, [&] { return timer_poked_; });
    timer_poked_ = false;
  }
}

// --- wake-ups ------------------------------------------------------------------------

void RedisQueue::OnWakeMessage(std::string_view message) {
  // "r <bucket> <topic>" or "d <bucket> <ms>".
  if (message.size() < 5 || message[1] != ' ') return;
  const char kind = message[0];
  std::string_view rest = message.substr(2);
  const size_t space = rest.find(' ');
  if (space == std::string_view::npos) return;
  uint64_t bucket = 0;
  for (char c : rest.substr(0, space)) {
    if (c < '0' || c > '9' || bucket > rq::kMaxBuckets) return;
    bucket = bucket * 10 + static_cast<uint64_t>(c - '0');
  }
  std::string_view arg = rest.substr(space + 1);
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return;
  if (kind == 'r') {
    if (bucket >= ctx_->buckets) return;
    const std::string topic(arg);
    Invalidate(static_cast<uint32_t>(bucket), topic);
    WakeTopic(topic);
  } else if (kind == 'd') {
    int64_t ms = 0;
    for (char c : arg) {
      if (c < '0' || c > '9' || ms > kNever / 20) return;
      ms = ms * 10 + (c - '0');
    }
    LowerDue(static_cast<uint32_t>(bucket), ms);
  }
}

void RedisQueue::OnSubscribed() {
  // Messages sent while unsubscribed are lost: look at everything again.
  std::lock_guard<std::mutex> lock(mu_);
  subscribed_ = true;
  round_cv_.notify_all();
  if (stopping_) return;
  for (uint32_t b = 0; b < ctx_->buckets; ++b) {
    LowerDue(b, 0);
    Invalidate(b, "");
  }
  WakeAll();
}

// --- the Queue operations ------------------------------------------------------------

Result<AddResult> RedisQueue::Add(const JobSpec& spec) {
  if (Status s = ValidateJobSpec(spec, ctx_->limits); !s.ok()) return s;
  return Call<Result<AddResult>>(
      [&](rq::AddDone done) { return rq::MakeAdd(spec, std::move(done)); });
}

void RedisQueue::AddAsync(const JobSpec& spec, AddCallback done) {
  if (Status s = ValidateJobSpec(spec, ctx_->limits); !s.ok()) return done(std::move(s));
  Submit(rq::MakeAdd(spec, std::move(done)), /*wait=*/false);
}

Status RedisQueue::Finish(std::string_view id, std::string_view receipt) {
  if (Status s = CheckIdReceipt(id, receipt); !s.ok()) return s;
  return Call<Status>(
      [&](rq::StatusDone done) { return rq::MakeFinish(id, receipt, std::move(done)); });
}

void RedisQueue::FinishAsync(std::string_view id, std::string_view receipt, StatusCallback done) {
  if (Status s = CheckIdReceipt(id, receipt); !s.ok()) return done(std::move(s));
  Submit(rq::MakeFinish(id, receipt, std::move(done)), /*wait=*/false);
}

std::vector<Status> RedisQueue::Acknowledge(std::span<const Ack> acks) {
  if (t_queue_thread == this) return Queue::Acknowledge(acks);
  struct Wait {
    std::mutex mu;
    std::condition_variable cv;
    size_t left = 0;
    std::vector<Status> out;
  };
  auto w = std::make_shared<Wait>();
  w->left = acks.size();
  w->out.resize(acks.size());
  for (size_t i = 0; i < acks.size(); ++i) {
    const Ack& a = acks[i];
    auto done = [w, i](Status s) {
      std::lock_guard<std::mutex> lock(w->mu);
      w->out[i] = std::move(s);
      if (--w->left == 0) w->cv.notify_all();
    };
    switch (a.kind) {
      case Ack::Kind::kFinish:
        FinishAsync(a.id, a.receipt, std::move(done));
        break;
      case Ack::Kind::kRelease:
        ReleaseAsync(a.id, a.receipt, a.delay_ms, a.text, std::move(done));
        break;
      case Ack::Kind::kBury:
        BuryAsync(a.id, a.receipt, a.text, std::move(done));
        break;
    }
  }
  std::unique_lock<std::mutex> lock(w->mu);
  w->cv.wait(lock, [&] { return w->left == 0; });
  return std::move(w->out);
}

Status RedisQueue::Delete(std::string_view id) {
  if (!ValidateId(id).ok()) return NotFoundId(id);
  return Call<Status>([&](rq::StatusDone done) { return rq::MakeDelete(id, std::move(done)); });
}

void RedisQueue::DeleteAsync(std::string_view id, StatusCallback done) {
  if (!ValidateId(id).ok()) return done(NotFoundId(id));
  Submit(rq::MakeDelete(id, std::move(done)), /*wait=*/false);
}

namespace {

Status CheckRelease(std::string_view id, std::string_view receipt, int64_t delay_ms) {
  if (delay_ms < 0) return InvalidArgument("delay_ms: must be >= 0");
  if (delay_ms > kMaxDelayMs) return InvalidArgument("delay_ms: at most 100 years");
  return CheckIdReceipt(id, receipt);
}

}  // namespace

Status RedisQueue::Release(std::string_view id, std::string_view receipt, int64_t delay_ms,
                           std::string_view error) {
  if (Status s = CheckRelease(id, receipt, delay_ms); !s.ok()) return s;
  return Call<Status>([&](rq::StatusDone done) {
    return rq::MakeRelease(id, receipt, delay_ms, error, std::move(done));
  });
}

void RedisQueue::ReleaseAsync(std::string_view id, std::string_view receipt, int64_t delay_ms,
                              std::string_view error, StatusCallback done) {
  if (Status s = CheckRelease(id, receipt, delay_ms); !s.ok()) return done(std::move(s));
  Submit(rq::MakeRelease(id, receipt, delay_ms, error, std::move(done)), /*wait=*/false);
}

Status RedisQueue::Touch(std::string_view id, std::string_view receipt) {
  if (Status s = CheckIdReceipt(id, receipt); !s.ok()) return s;
  return Call<Status>(
      [&](rq::StatusDone done) { return rq::MakeTouch(id, receipt, std::move(done)); });
}

Status RedisQueue::Unreserve(std::string_view id, std::string_view receipt) {
  if (receipt.empty()) return InvalidArgument("receipt: required to give back a delivery");
  if (Status s = CheckIdReceipt(id, receipt); !s.ok()) return s;
  return Call<Status>(
      [&](rq::StatusDone done) { return rq::MakeUnreserve(id, receipt, std::move(done)); });
}

void RedisQueue::UnreserveAsync(std::string_view id, std::string_view receipt,
                                StatusCallback done) {
  if (receipt.empty()) return done(InvalidArgument("receipt: required to give back a delivery"));
  if (Status s = CheckIdReceipt(id, receipt); !s.ok()) return done(std::move(s));
  Submit(rq::MakeUnreserve(id, receipt, std::move(done)), /*wait=*/false);
}

void RedisQueue::TouchAsync(std::string_view id, std::string_view receipt, StatusCallback done) {
  if (Status s = CheckIdReceipt(id, receipt); !s.ok()) return done(std::move(s));
  Submit(rq::MakeTouch(id, receipt, std::move(done)), /*wait=*/false);
}

Status RedisQueue::Bury(std::string_view id, std::string_view receipt, std::string_view reason) {
  if (Status s = CheckIdReceipt(id, receipt); !s.ok()) return s;
  return Call<Status>(
      [&](rq::StatusDone done) { return rq::MakeBury(id, receipt, reason, std::move(done)); });
}

void RedisQueue::BuryAsync(std::string_view id, std::string_view receipt, std::string_view reason,
                           StatusCallback done) {
  if (Status s = CheckIdReceipt(id, receipt); !s.ok()) return done(std::move(s));
  Submit(rq::MakeBury(id, receipt, reason, std::move(done)), /*wait=*/false);
}

Status RedisQueue::Kick(std::string_view id) {
  if (!ValidateId(id).ok()) return NotFoundId(id);
  return Call<Status>([&](rq::StatusDone done) { return rq::MakeKick(id, std::move(done)); });
}

void RedisQueue::KickAsync(std::string_view id, StatusCallback done) {
  if (!ValidateId(id).ok()) return done(NotFoundId(id));
  Submit(rq::MakeKick(id, std::move(done)), /*wait=*/false);
}

Result<uint64_t> RedisQueue::KickTopic(std::string_view topic, uint64_t n) {
  if (Status s = ValidateTopic(topic); !s.ok()) return s;
  if (n == 0) return uint64_t{0};
  return Call<Result<uint64_t>>(
      [&](rq::CountDone done) { return rq::MakeKickTopic(topic, n, std::move(done)); });
}

void RedisQueue::KickTopicAsync(std::string_view topic, uint64_t n, CountCallback done) {
  if (Status s = ValidateTopic(topic); !s.ok()) return done(std::move(s));
  if (n == 0) return done(uint64_t{0});
  Submit(rq::MakeKickTopic(topic, n, std::move(done)), /*wait=*/false);
}

Result<JobInfo> RedisQueue::Get(std::string_view id) {
  if (!ValidateId(id).ok()) return NotFoundId(id);
  return Call<Result<JobInfo>>([&](rq::JobDone done) { return rq::MakeGet(id, std::move(done)); });
}

void RedisQueue::GetAsync(std::string_view id, JobCallback done) {
  if (!ValidateId(id).ok()) return done(NotFoundId(id));
  Submit(rq::MakeGet(id, std::move(done)), /*wait=*/false);
}

namespace {

Status CheckPeek(std::string_view topic, JobState state) {
  if (Status s = ValidateTopic(topic); !s.ok()) return s;
  if (state == JobState::kReserved) {
    return InvalidArgument("state: peek takes ready, delayed or buried");
  }
  return Status::Ok();
}

Status CheckPause(std::string_view topic, int64_t duration_ms) {
  if (Status s = ValidateTopic(topic); !s.ok()) return s;
  if (duration_ms < 0) return InvalidArgument("duration_ms: must be >= 0 (0 = until resumed)");
  return Status::Ok();
}

}  // namespace

Result<JobInfo> RedisQueue::Peek(std::string_view topic, JobState state) {
  if (Status s = CheckPeek(topic, state); !s.ok()) return s;
  return Call<Result<JobInfo>>(
      [&](rq::JobDone done) { return rq::MakePeek(topic, state, std::move(done)); });
}

void RedisQueue::PeekAsync(std::string_view topic, JobState state, JobCallback done) {
  if (Status s = CheckPeek(topic, state); !s.ok()) return done(std::move(s));
  Submit(rq::MakePeek(topic, state, std::move(done)), /*wait=*/false);
}

int64_t RedisQueue::PauseEnd(int64_t duration_ms) const {
  return duration_ms == 0 ? -1 : clock_->NowMs() + std::min<int64_t>(duration_ms, kMaxDelayMs);
}

Status RedisQueue::Pause(std::string_view topic, int64_t duration_ms) {
  if (Status s = CheckPause(topic, duration_ms); !s.ok()) return s;
  const int64_t until = PauseEnd(duration_ms);
  return Call<Status>(
      [&](rq::StatusDone done) { return rq::MakePause(topic, until, std::move(done)); });
}

void RedisQueue::PauseAsync(std::string_view topic, int64_t duration_ms, StatusCallback done) {
  if (Status s = CheckPause(topic, duration_ms); !s.ok()) return done(std::move(s));
  Submit(rq::MakePause(topic, PauseEnd(duration_ms), std::move(done)), /*wait=*/false);
}

Status RedisQueue::Resume(std::string_view topic) {
  if (Status s = ValidateTopic(topic); !s.ok()) return s;
  return Call<Status>(
      [&](rq::StatusDone done) { return rq::MakePause(topic, 0, std::move(done)); });
}

void RedisQueue::ResumeAsync(std::string_view topic, StatusCallback done) {
  if (Status s = ValidateTopic(topic); !s.ok()) return done(std::move(s));
  Submit(rq::MakePause(topic, 0, std::move(done)), /*wait=*/false);
}

void RedisQueue::AddWaiting(std::vector<TopicInfo>* topics, bool add_missing) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, tickets] : topic_waiters_) {
    auto it = std::find_if(topics->begin(), topics->end(),
                           [&name = name](const TopicInfo& t) { return t.name == name; });
    if (it != topics->end()) {
      it->waiting = tickets.size();
    } else if (add_missing) {
      TopicInfo t;
      t.name = name;
      t.waiting = tickets.size();
      topics->push_back(std::move(t));
    }
  }
}

Result<std::vector<TopicInfo>> RedisQueue::TopicsOf(Result<std::vector<rq::TopicCounts>> counts) {
  if (!counts.ok()) return counts.status();
  std::vector<TopicInfo> out;
  for (rq::TopicCounts& t : *counts) {
    const TopicInfo& i = t.info;
    if (i.delayed + i.ready + i.reserved + i.buried > 0 || i.paused)
      out.push_back(std::move(t.info));
  }
  AddWaiting(&out, /*add_missing=*/true);
  std::sort(out.begin(), out.end(),
            [](const TopicInfo& a, const TopicInfo& b) { return a.name < b.name; });
  return out;
}

Result<std::vector<TopicInfo>> RedisQueue::Topics() {
  return TopicsOf(Call<Result<std::vector<rq::TopicCounts>>>(
      [&](rq::TopicsDone done) { return rq::MakeTopics(std::nullopt, std::move(done)); }));
}

void RedisQueue::TopicsAsync(TopicsCallback done) {
  Submit(rq::MakeTopics(std::nullopt,
                        [this, done = std::move(done)](Result<std::vector<rq::TopicCounts>> r) {
                          done(TopicsOf(std::move(r)));
                        }),
         /*wait=*/false);
}

Result<TopicInfo> RedisQueue::TopicOf(std::string_view topic,
                                      Result<std::vector<rq::TopicCounts>> counts) {
  if (!counts.ok()) return counts.status();
  std::vector<TopicInfo> one;
  for (rq::TopicCounts& t : *counts) {
    if (t.info.name == topic) one.push_back(std::move(t.info));
  }
  if (one.empty()) {
    TopicInfo empty;
    empty.name = std::string(topic);
    one.push_back(std::move(empty));
  }
  AddWaiting(&one, /*add_missing=*/false);
  return std::move(one.front());
}

Result<TopicInfo> RedisQueue::Topic(std::string_view topic) {
  if (Status s = ValidateTopic(topic); !s.ok()) return s;
  return TopicOf(topic, Call<Result<std::vector<rq::TopicCounts>>>([&](rq::TopicsDone done) {
                   return rq::MakeTopics(std::string(topic), std::move(done));
                 }));
}

void RedisQueue::TopicAsync(std::string_view topic, TopicCallback done) {
  if (Status s = ValidateTopic(topic); !s.ok()) return done(std::move(s));
  Submit(rq::MakeTopics(
             std::string(topic),
             [this, name = std::string(topic), done = std::move(done)](
                 Result<std::vector<rq::TopicCounts>> r) { done(TopicOf(name, std::move(r))); }),
         /*wait=*/false);
}

Result<QueueStats> RedisQueue::StatsOf(Result<rq::StoreStats> store) {
  if (!store.ok()) return store.status();
  QueueStats s = store->stats;
  std::set<std::string>& names = store->topics;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, tickets] : topic_waiters_) names.insert(name);
  s.topics = names.size();
  s.waiting = waiting_;
  return s;
}

Result<QueueStats> RedisQueue::Stats() {
  return StatsOf(Call<Result<rq::StoreStats>>(
      [&](rq::StatsDone done) { return rq::MakeStats(std::move(done)); }));
}

void RedisQueue::StatsAsync(StatsCallback done) {
  Submit(rq::MakeStats([this, done = std::move(done)](Result<rq::StoreStats> r) {
           done(StatsOf(std::move(r)));
         }),
         /*wait=*/false);
}

// --- subscriptions and the push ledger ------------------------------------------------

void RedisQueue::PutSubscriptionAsync(const Subscription& s, SubscriptionCallback done) {
  if (Status st = ValidateSubscription(s); !st.ok()) return done(std::move(st));
  Submit(rq::MakePutSubscription(s, std::move(done)), /*wait=*/false);
}

void RedisQueue::DeleteSubscriptionAsync(std::string_view name, std::string_view url,
                                         CountCallback done) {
  if (Status st = ValidateSubscriptionName(name); !st.ok()) return done(std::move(st));
  Submit(rq::MakeDeleteSubscription(name, url, std::move(done)), /*wait=*/false);
}

void RedisQueue::SubscriptionsAsync(std::string_view name, SubscriptionsCallback done) {
  if (!name.empty()) {
    if (Status st = ValidateSubscriptionName(name); !st.ok()) return done(std::move(st));
  }
  Submit(rq::MakeListSubscriptions(name, std::move(done)), /*wait=*/false);
}

PushLedger* RedisQueue::push_ledger() { return ledger_.get(); }

// --- schedules -------------------------------------------------------------------------

void RedisQueue::PutScheduleAsync(const Schedule& s, ScheduleCallback done) {
  if (Status st = ValidateScheduleDefinition(s); !st.ok()) return done(std::move(st));
  Submit(rq::MakePutSchedule(s, std::move(done)), /*wait=*/false);
}

void RedisQueue::DeleteScheduleAsync(std::string_view name, ScheduleCallback done) {
  if (Status st = ValidateScheduleName(name); !st.ok()) return done(std::move(st));
  Submit(rq::MakeDeleteSchedule(name, std::move(done)), /*wait=*/false);
}

void RedisQueue::SchedulesAsync(std::string_view name, SchedulesCallback done) {
  if (!name.empty()) {
    if (Status st = ValidateScheduleName(name); !st.ok()) return done(std::move(st));
  }
  Submit(rq::MakeListSchedules(name, std::move(done)), /*wait=*/false);
}

void RedisQueue::FireScheduleAsync(const ScheduleFiring& f, ScheduleFiredCallback done) {
  if (Status st = ValidateScheduleName(f.name); !st.ok()) return done(std::move(st));
  // Checked before the claim: a job the FIRE step refused would leave the
  // claim applied and its PENDING never finished.
  for (size_t i = 0; i < f.jobs.size(); ++i) {
    const JobSpec& job = f.jobs[i];
    Status st = job.id.empty() ? InvalidArgument("id: a firing's job needs one")
                               : ValidateJobSpec(job, ctx_->limits);
    if (!st.ok()) {
      return done(Status(st.code(), "jobs[" + std::to_string(i) + "]: " + st.message()));
    }
  }
  for (const std::string& id : f.withdraw) {
    if (Status st = ValidateId(id); !st.ok())
      return done(InvalidArgument("withdraw: " + st.message()));
  }
  Submit(rq::MakeFireSchedule(f, std::move(done)), /*wait=*/false);
}

}  // namespace delayq
