// Each call validates what it can, becomes one RESP command (wire_codec.h),
// and goes through ServerSet::Run, which picks the server and applies the
// retry rule named at the call; reserves that wait go to WaitingReserves.
#include "client/remote_queue.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <utility>

#include "client/wire_codec.h"

namespace delayq::client {
namespace {

// The receipt argument of FINISH, RELEASE, TOUCH, BURY: FORCE for "by id alone".
std::string ReceiptArg(std::string_view receipt) {
  return receipt.empty() ? std::string("FORCE") : std::string(receipt);
}

// Receipt-bearing changes may be repeated; by id alone they may not.
Retry RetryFor(std::string_view receipt) {
  return receipt.empty() ? Retry::kUntilSent : Retry::kAlways;
}

Repeat RepeatFor(const Ack& ack) {
  return ack.kind == Ack::Kind::kFinish ? Repeat::kGoneIsDone : Repeat::kAsIs;
}

Status AfterRepeat(Status s, bool repeated, Repeat repeat) {
  if (!repeated || s.ok() || s.code() == Code::kUnavailable) return s;
  if (repeat == Repeat::kGoneIsDone && s.code() == Code::kNotFound) return Status::Ok();
  return Status(s.code(), s.message() +
                              " (after a lost reply: the first attempt, on another server, may "
                              "have done it)");
}

// FINISH, RELEASE or BURY for an ack, once the checks every queue makes
// pass.
Result<redis::Argv> AckCommand(const Ack& a) {
  if (Status v = ValidateReceipt(a.receipt); !v.ok()) return v;
  redis::Argv cmd;
  switch (a.kind) {
    case Ack::Kind::kFinish:
      return redis::Argv{"FINISH", a.id, ReceiptArg(a.receipt)};
    case Ack::Kind::kRelease:
      if (a.delay_ms < 0) return InvalidArgument("delay_ms: must be >= 0");
      if (a.delay_ms > kMaxDelayMs) return InvalidArgument("delay_ms: at most 100 years");
      cmd = {"RELEASE", a.id, std::to_string(a.delay_ms), ReceiptArg(a.receipt)};
      break;
    case Ack::Kind::kBury:
      cmd = {"BURY", a.id, ReceiptArg(a.receipt)};
      break;
  }
  if (!a.text.empty()) {
    cmd.emplace_back("ERROR");
    cmd.push_back(a.text);
  }
  return cmd;
}

std::string_view PeekState(JobState state) {
  switch (state) {
    case JobState::kReady:
      return "READY";
    case JobState::kDelayed:
      return "DELAYED";
    case JobState::kBuried:
      return "BURIED";
    case JobState::kReserved:
      break;
  }
  return "";
}

std::string RandomTag() {
  std::random_device rd;
  const uint64_t tag = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  char hex[17];
  snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(tag));
  return hex;
}

}  // namespace

Result<std::unique_ptr<RemoteQueue>> RemoteQueue::Open(const QueueOptions& options) {
  auto servers = ServerSet::Create(options);
  if (!servers.ok()) return servers.status();
  auto q = std::unique_ptr<RemoteQueue>(new RemoteQueue(options, std::move(servers).value()));
  RemoteQueue* self = q.get();
  auto waiting = WaitingReserves::Create(self->servers_.get(), [self](const Deliveries& jobs) {
    for (const Delivery& d : jobs) (void)self->Unreserve(d.id, d.receipt);
  });
  if (!waiting.ok()) return waiting.status();
  q->waiting_ = std::move(waiting).value();
  return q;
}

RemoteQueue::RemoteQueue(const QueueOptions& options, std::unique_ptr<ServerSet> servers)
    : limits_(options.limits),
      clock_(options.clock ? options.clock : SystemClock()),
      servers_(std::move(servers)),
      id_tag_(RandomTag()) {}

RemoteQueue::~RemoteQueue() {
  if (waiting_) waiting_->Close();
}

std::string RemoteQueue::NewId() {
  int64_t ms;
  uint32_t seq;
  {
    std::lock_guard lock(id_mu_);
    const int64_t now = std::max<int64_t>(clock_->NowMs(), 0);
    if (now > id_ms_) {
      id_ms_ = now;
      id_seq_ = 0;
    } else if (++id_seq_ > 0xffff) {  // 65536 ids in one ms: borrow the next ms
      ++id_ms_;
      id_seq_ = 0;
    }
    ms = id_ms_;
    seq = id_seq_;
  }
  char head[17];
  snprintf(head, sizeof head, "%012llx%04x",
           static_cast<unsigned long long>(ms) & 0xffffffffffffULL, seq);
  return std::string(head) + id_tag_;
}

std::string RemoteQueue::NewIdempotencyKey() {
  char n[17];
  snprintf(n, sizeof n, "%016llx",
           static_cast<unsigned long long>(adds_.fetch_add(1, std::memory_order_relaxed)));
  return id_tag_ + n;
}

template <typename T, typename Parse>
Result<T> RemoteQueue::RunParsed(const redis::Argv& cmd, Retry retry, Parse parse) {
  std::optional<Result<T>> out;
  Status st = servers_->Run({&cmd, 1}, retry, [&](std::vector<redis::Reply>& replies, bool) {
    out.emplace(parse(replies[0]));
    return out->status();
  });
  if (!out) return st;  // no server answered
  return std::move(*out);
}

Status RemoteQueue::RunOk(const redis::Argv& cmd, Retry retry, Repeat repeat) {
  return servers_->Run({&cmd, 1}, retry, [&](std::vector<redis::Reply>& replies, bool repeated) {
    return AfterRepeat(ParseOk(cmd[0], replies[0]), repeated, repeat);
  });
}

Result<AddResult> RemoteQueue::Add(const JobSpec& spec) {
  if (Status v = ValidateJobSpec(spec, limits_); !v.ok()) return v;
  if (spec.id == "*") {
    return InvalidArgument("id: '*' asks a server for a generated id; leave the id empty instead");
  }
  JobSpec sent = spec;
  // One key for every attempt of this call: the server answers a retry
  // whose first attempt ran as that attempt was answered (see the header).
  // A caller's own key with no id is sent as such ("*"): the server then
  // names the job by the key alone, so repeating the call is safe too.
  if (sent.idempotency_key.empty()) {
    sent.idempotency_key = NewIdempotencyKey();
    if (sent.id.empty()) sent.id = NewId();
  }
  const redis::Argv cmd = AddCommand(sent);
  std::optional<Result<AddResult>> out;
  Status st = servers_->Run({&cmd, 1}, Retry::kAlways, [&](auto& replies, bool repeated) {
    Result<AddResult> r = ParseAdded(replies[0]);
    if (!r.ok() && r.status().code() == Code::kExists && repeated && !sent.replace) {
      // Our own first attempt, whose reply was lost, if the job is ours.
      auto job = Get(sent.id);
      if (job.ok() && job->topic == sent.topic && job->body == sent.body) {
        r = AddResult{sent.id,
                      job->state == JobState::kDelayed ? JobState::kDelayed : JobState::kReady,
                      job->run_at_ms};
      }
    }
    out.emplace(std::move(r));
    return out->status();
  });
  if (!out) return st;
  return std::move(*out);
}

uint64_t RemoteQueue::ReserveAsync(const ReserveRequest& req, ReserveCallback done) {
  if (Status v = ValidateReserveRequest(req); !v.ok()) {
    done(v);
    return 0;
  }
  // RESERVE has no field for it; reserving with the jobs' own TTR instead
  // would hold them longer than the caller asked.
  if (req.ttr_ms != 0) {
    done(InvalidArgument("ttr_ms: not supported over the network"));
    return 0;
  }
  if (req.wait_ms > 0) return waiting_->Start(req, std::move(done));
  done(RunParsed<Deliveries>(ReserveCommand(req), Retry::kUntilSent,
                             [](const redis::Reply& r) { return ParseDeliveries(r); }));
  return 0;
}

bool RemoteQueue::CancelReserve(uint64_t ticket) { return waiting_->Cancel(ticket); }

Status RemoteQueue::Unreserve(std::string_view id, std::string_view receipt) {
  if (receipt.empty()) {
    return InvalidArgument("receipt: required to unreserve (only the delivery it names is undone)");
  }
  if (Status v = ValidateReceipt(receipt); !v.ok()) return v;
  return RunOk({"UNRESERVE", std::string(id), std::string(receipt)}, Retry::kAlways, Repeat::kAsIs);
}

Status RemoteQueue::Finish(std::string_view id, std::string_view receipt) {
  return RunAck({Ack::Kind::kFinish, std::string(id), std::string(receipt), 0, {}});
}

Status RemoteQueue::Delete(std::string_view id) {
  return RunOk({"DELETE", std::string(id)}, Retry::kUntilSent, Repeat::kAsIs);
}

Status RemoteQueue::Release(std::string_view id, std::string_view receipt, int64_t delay_ms,
                            std::string_view error) {
  return RunAck(
      {Ack::Kind::kRelease, std::string(id), std::string(receipt), delay_ms, std::string(error)});
}

Status RemoteQueue::Touch(std::string_view id, std::string_view receipt) {
  if (Status v = ValidateReceipt(receipt); !v.ok()) return v;
  return RunOk({"TOUCH", std::string(id), ReceiptArg(receipt)}, RetryFor(receipt), Repeat::kAsIs);
}

Status RemoteQueue::Bury(std::string_view id, std::string_view receipt, std::string_view reason) {
  return RunAck({Ack::Kind::kBury, std::string(id), std::string(receipt), 0, std::string(reason)});
}

Status RemoteQueue::RunAck(const Ack& ack) {
  auto cmd = AckCommand(ack);
  if (!cmd.ok()) return cmd.status();
  return RunOk(*cmd, RetryFor(ack.receipt), RepeatFor(ack));
}

// One pipeline, one round trip. Acks the client refuses (a bad receipt or
// delay) are answered here and not sent; the rest go together, and are
// retried together on the next server when receipts allow it.
std::vector<Status> RemoteQueue::Acknowledge(std::span<const Ack> acks) {
  std::vector<Status> out(acks.size());
  std::vector<redis::Argv> cmds;
  std::vector<size_t> sent;  // cmds[k] is acks[sent[k]]
  cmds.reserve(acks.size());
  sent.reserve(acks.size());
  Retry retry = Retry::kAlways;
  for (size_t i = 0; i < acks.size(); ++i) {
    auto cmd = AckCommand(acks[i]);
    if (!cmd.ok()) {
      out[i] = cmd.status();
      continue;
    }
    cmds.push_back(std::move(cmd).value());
    sent.push_back(i);
    if (RetryFor(acks[i].receipt) == Retry::kUntilSent) retry = Retry::kUntilSent;
  }
  if (cmds.empty()) return out;
  Status st = servers_->Run(cmds, retry, [&](std::vector<redis::Reply>& replies, bool repeated) {
    Status unreadable;
    for (size_t k = 0; k < cmds.size(); ++k) {
      const Ack& a = acks[sent[k]];
      Status s = AfterRepeat(ParseOk(cmds[k][0], replies[k]), repeated, RepeatFor(a));
      if (s.code() == Code::kUnavailable && unreadable.ok()) unreadable = s;
      out[sent[k]] = std::move(s);
    }
    return unreadable;
  });
  if (!st.ok()) {
    for (size_t i : sent) out[i] = st;
  }
  return out;
}

Status RemoteQueue::Kick(std::string_view id) {
  return RunOk({"KICK", std::string(id)}, Retry::kUntilSent, Repeat::kAsIs);
}

Result<uint64_t> RemoteQueue::KickTopic(std::string_view topic, uint64_t n) {
  if (Status v = ValidateTopic(topic); !v.ok()) return v;
  n = std::min<uint64_t>(n, INT64_MAX);
  return RunParsed<uint64_t>({"KICKTOPIC", std::string(topic), std::to_string(n)},
                             Retry::kUntilSent,
                             [](const redis::Reply& r) { return ParseCount("KICKTOPIC", r); });
}

Result<JobInfo> RemoteQueue::Get(std::string_view id) {
  return RunParsed<JobInfo>({"GET", std::string(id)}, Retry::kAlways,
                            [id](const redis::Reply& r) { return ParseJob(id, r); });
}

// PEEK answers a delivery, without the job's state, last_error and
// timestamps: the job is read whole with GET. A job that leaves the state
// between the two (reserved, finished) is peeked again, a few times.
Result<JobInfo> RemoteQueue::Peek(std::string_view topic, JobState state) {
  if (state == JobState::kReserved) {
    return InvalidArgument("state: peek shows ready, delayed or buried jobs, not reserved ones");
  }
  if (Status v = ValidateTopic(topic); !v.ok()) return v;
  const redis::Argv cmd{"PEEK", std::string(topic), std::string(PeekState(state))};
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto peeked = RunParsed<std::optional<Delivery>>(
        cmd, Retry::kAlways, [](const redis::Reply& r) -> Result<std::optional<Delivery>> {
          if (r.is_error()) return StatusOf(r);
          if (r.is_nil()) return std::optional<Delivery>();
          auto d = ParseDelivery("PEEK", r);
          if (!d.ok()) return d.status();
          return std::optional<Delivery>(std::move(d).value());
        });
    if (!peeked.ok()) return peeked.status();
    if (!*peeked) break;
    auto job = Get((*peeked)->id);
    if (job.ok() && job->state == state) return job;
    if (!job.ok() && job.status().code() != Code::kNotFound) return job.status();
  }
  return NotFound("topic '" + std::string(topic) + "' has no " + std::string(StateName(state)) +
                  " job");
}

Status RemoteQueue::Pause(std::string_view topic, int64_t duration_ms) {
  if (Status v = ValidateTopic(topic); !v.ok()) return v;
  if (duration_ms < 0) return InvalidArgument("duration_ms: must be >= 0 (0 = until resumed)");
  duration_ms = std::min(duration_ms, kMaxDelayMs);
  return RunOk({"PAUSE", std::string(topic), std::to_string(duration_ms)}, Retry::kAlways,
               Repeat::kAsIs);
}

Status RemoteQueue::Resume(std::string_view topic) {
  if (Status v = ValidateTopic(topic); !v.ok()) return v;
  return RunOk({"RESUME", std::string(topic)}, Retry::kAlways, Repeat::kAsIs);
}

// TOPICS names them; each one's counts come from STATS topic, all in one
// pipeline after it (one more round trip, whatever the number of topics).
Result<std::vector<TopicInfo>> RemoteQueue::Topics() {
  auto names = RunParsed<std::vector<std::string>>(
      {"TOPICS"}, Retry::kAlways, [](const redis::Reply& r) { return ParseNames(r); });
  if (!names.ok() || names->empty()) {
    if (!names.ok()) return names.status();
    return std::vector<TopicInfo>{};
  }
  std::vector<redis::Argv> cmds;
  for (const std::string& name : *names) cmds.push_back({"STATS", name});
  std::vector<TopicInfo> out;
  Status st = servers_->Run(cmds, Retry::kAlways, [&](std::vector<redis::Reply>& replies, bool) {
    out.clear();
    for (const redis::Reply& r : replies) {
      auto t = ParseTopic(r);
      if (!t.ok()) return t.status();
      out.push_back(std::move(t).value());
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

Result<TopicInfo> RemoteQueue::Topic(std::string_view topic) {
  if (Status v = ValidateTopic(topic); !v.ok()) return v;
  return RunParsed<TopicInfo>({"STATS", std::string(topic)}, Retry::kAlways,
                              [](const redis::Reply& r) { return ParseTopic(r); });
}

Result<QueueStats> RemoteQueue::Stats() {
  return RunParsed<QueueStats>({"STATS"}, Retry::kAlways,
                               [](const redis::Reply& r) { return ParseStats(r); });
}

}  // namespace delayq::client
