#include "server/front_end.h"

#include <time.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "schedule/scheduler.h"
#include "server/errors.h"
#include "wire/fields.h"

namespace delayq::server {
namespace {

// A reserve that asked to wait, cut short by the drain: no jobs is not "no
// job" but the server going away.
Result<Deliveries> CutShort(Result<Deliveries> r, bool cut_short) {
  if (cut_short && r.ok() && r->empty()) return ShuttingDown();
  return r;
}

int64_t WallNowUs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

}  // namespace

FrontEnd::Awaiting& FrontEnd::awaiting() {
  thread_local Awaiting a;
  return a;
}

FrontEnd::FrontEnd(net::EventLoop* loop, ServingQueue* queue, bool pipelining)
    : loop_(loop),
      queue_(queue),
      driver_(queue->driver()),
      alive_(std::make_shared<bool>(true)),
      pipelining_(pipelining) {}

FrontEnd::~FrontEnd() {
  *alive_ = false;
  tcp_.reset();  // closes connections (OnClose withdraws their reserves) while we still exist
}

Status FrontEnd::Listen(net::TcpServerOptions options) {
  auto tcp = net::TcpServer::Create(loop_, this, std::move(options));
  if (!tcp.ok()) return tcp.status();
  tcp_ = std::move(tcp).value();
  return Status::Ok();
}

bool FrontEnd::HoldBack(net::Connection& c, bool is_reserve) {
  if (!pipelining_ || c.holes() == 0) return false;
  auto& s = static_cast<State&>(*c.state);
  bool hold = c.holes() >= kMaxInFlight || (is_reserve ? s.changes > 0 : !s.reserves.empty());
  if (hold) {
    s.held_back = true;
    c.waiting = true;
  }
  return hold;
}

void FrontEnd::AfterAnswer(net::Connection& c) {
  auto& s = static_cast<State&>(*c.state);
  if (s.answered) return;
  s.answered = true;
  answered_.push_back(c.id);
  // Answers reach the loop in batches (a store's round): the task runs after
  // the batch, so each connection gets one write for all its answers in it.
  if (answered_.size() == 1) {
    loop_->Post([this, alive = alive_] {
      if (*alive) RunAfterAnswers();
    });
  }
}

void FrontEnd::RunAfterAnswers() {
  std::vector<uint64_t> ids;
  ids.swap(answered_);
  for (uint64_t id : ids) {
    net::Connection* c = tcp_->Find(id);
    if (c == nullptr) continue;
    auto& s = static_cast<State&>(*c->state);
    s.answered = false;
    if (s.held_back) {
      // Let the request held back try again: it holds back once more if what
      // it waits for is still in flight.
      s.held_back = false;
      c->waiting = false;
      tcp_->Resume(*c);  // writes what it can, then serves what was pipelined behind
      continue;
    }
    tcp_->Flush(*c);
  }
  if (answered_.empty()) {  // keep the capacity
    ids.clear();
    answered_.swap(ids);
  }
}

uint64_t FrontEnd::ReserveByteBudget() const {
  return std::max<uint64_t>(tcp_->options().max_output_bytes / 4, 1);
}

void FrontEnd::AnswerTracked(net::Connection& c, Result<Deliveries> r) {
  auto& s = static_cast<State&>(*c.state);
  // Jobs whose reply has left are the client's now. Not while a hole is
  // filled: FillHole then holds indexes into `handed`.
  if (s.reply_origin < 0) {
    while (!s.handed.empty() && s.handed.front().end <= c.written()) s.handed.pop_front();
  }
  uint64_t origin = s.reply_origin >= 0 ? static_cast<uint64_t>(s.reply_origin) : c.written();
  AnswerReserve(c, r);
  if (!r.ok()) return;
  // Moved, not copied: the reply is written, the deliveries are done with.
  uint64_t end = origin + c.out.size();
  for (Delivery& d : *r) {
    s.handed.push_back(State::Handed{end, std::move(d.id), std::move(d.receipt)});
  }
}

void FrontEnd::StartReserve(net::Connection& c, ReserveRequest req) {
  // The client sent its FIN before this reserve could start (it came with
  // the FIN, or behind others): it is gone, as one whose reserve waits at
  // its FIN is (AwaitsWork). Answered at once, its jobs would be written to
  // a socket no one reads — the write succeeds, so OnClose could not tell —
  // and stay reserved until their TTR. It takes none; nothing after it runs.
  if (c.peer_closed) {
    c.closing = true;
    return;
  }
  const bool cut_short = tcp_->draining() && req.wait_ms > 0;
  if (tcp_->draining()) req.wait_ms = 0;
  // The client's own bound (RESP's MAXBYTES), if tighter than the server's.
  const uint64_t budget = ReserveByteBudget();
  req.max_bytes = req.max_bytes == 0 ? budget : std::min(req.max_bytes, budget);
  uint64_t conn_id = c.id;
  // The hole its reply takes if it comes later (pipelining).
  uint64_t serial = pipelining_ ? c.next_hole() : 0;
  const uint64_t mark_before = Mark();
  std::optional<Result<Deliveries>> now;
  uint64_t ticket = 0;
  {
    InCall<Result<Deliveries>> in_call(this, conn_id, &now);
    ticket = queue_->ReserveAsync(
        req, AnswerCallback<Result<Deliveries>, &FrontEnd::ReserveAnsweredLater>(conn_id, serial));
  }
  NoteChange(c, mark_before);  // the reservations made, if any
  if (now) {
    AnswerTracked(c, CutShort(std::move(*now), cut_short));
    return;
  }
  auto& s = static_cast<State&>(*c.state);
  int64_t now_ms = WallNowUs() / 1000;
  if (serial != 0) {
    c.OpenHole();
    s.reserves.emplace(serial, State::InFlightReserve{ticket, now_ms, cut_short});
    return;
  }
  s.reserve_ticket = ticket;
  s.parked_at_ms = now_ms;
  s.reserve_cut_short = cut_short;
  c.waiting = true;
}

void FrontEnd::ReserveAnsweredLater(uint64_t conn_id, uint64_t serial, Result<Deliveries> r) {
  auto shared = std::make_shared<Result<Deliveries>>(std::move(r));
  loop_->Post([this, conn_id, serial, alive = alive_, shared] {
    if (!*alive) return;
    if (serial != 0) {
      FinishInFlightReserve(conn_id, serial, std::move(*shared));
    } else {
      FinishReserve(conn_id, std::move(*shared));
    }
  });
}

void FrontEnd::GiveBack(const Result<Deliveries>& r) {
  if (!r.ok()) return;
  // Asynchronous: a store that answers later is not waited for here.
  for (const Delivery& d : *r) queue_->UnreserveAsync(d.id, d.receipt, [](const Status&) {});
}

void FrontEnd::RecordLateness(const Result<Deliveries>& r, int64_t since_ms) {
  if (lateness_ == nullptr || !r.ok() || r->empty()) return;
  // Jobs that fell due while this reserve waited: how late they are, now
  // that they are about to be written.
  int64_t now_us = WallNowUs();
  for (const Delivery& d : *r) {
    if (d.run_at_ms >= since_ms) lateness_->Record(now_us - d.run_at_ms * 1000);
  }
}

void FrontEnd::FinishReserve(uint64_t conn_id, Result<Deliveries> r) {
  net::Connection* c = tcp_->Find(conn_id);
  if (c == nullptr) {
    // The client left while its jobs were on the way: give them back now
    // rather than after their TTR.
    GiveBack(r);
    return;
  }
  auto& s = static_cast<State&>(*c->state);
  s.reserve_ticket = 0;
  r = CutShort(std::move(r), std::exchange(s.reserve_cut_short, false));
  c->waiting = false;
  // Its reservations were logged before this ran: the answer waits for them.
  if (r.ok() && !r->empty()) NoteChange(*c, 0);
  RecordLateness(r, s.parked_at_ms);
  AnswerTracked(*c, std::move(r));
  tcp_->Resume(*c);  // writes the answer, then serves what was pipelined behind it
}

void FrontEnd::FinishInFlightReserve(uint64_t conn_id, uint64_t serial, Result<Deliveries> r) {
  net::Connection* c = tcp_->Find(conn_id);
  if (c == nullptr) {
    GiveBack(r);
    return;
  }
  auto& s = static_cast<State&>(*c->state);
  auto it = s.reserves.find(serial);
  if (it == s.reserves.end()) {  // answered already (OnDrain withdrew it)
    GiveBack(r);
    return;
  }
  RecordLateness(r, it->second.started_ms);
  r = CutShort(std::move(r), it->second.cut_short);
  s.reserves.erase(it);
  // Its reservations were logged before this ran: the answer waits for
  // them, as FinishReserve's does (Connection::FillHole holds the bytes
  // already stamped around the hole for them too).
  if (r.ok() && !r->empty()) NoteChange(*c, 0);
  FillHole(*c, serial, [&] { AnswerTracked(*c, std::move(r)); });
  AfterAnswer(*c);
}

void FrontEnd::OnClose(net::Connection& c) {
  auto& s = static_cast<State&>(*c.state);
  // Not waited for: a reserve that already took jobs answers later and,
  // finding no connection, gives them back (GiveBack).
  if (s.reserve_ticket != 0) queue_->AbandonReserve(s.reserve_ticket);
  s.reserve_ticket = 0;
  for (const auto& [serial, r] : s.reserves) queue_->AbandonReserve(r.ticket);
  s.reserves.clear();
  // Handed over but never sent whole: the client cannot have them.
  for (const State::Handed& h : s.handed) {
    if (h.end > c.written()) queue_->UnreserveAsync(h.id, h.receipt, [](const Status&) {});
  }
  s.handed.clear();
}

bool FrontEnd::AwaitsWork(const net::Connection& c) const {
  const auto& s = static_cast<const State&>(*c.state);
  return s.reserve_ticket != 0 || !s.reserves.empty();
}

void FrontEnd::OnDrain(net::Connection& c) {
  auto& s = static_cast<State&>(*c.state);
  // Withdrawn before any job came: the server going away, never "no job"
  // (ShuttingDown()). If the cancel loses the race, the answer — jobs, or
  // none because the wait ran out — is already on its way to the loop and
  // FinishReserve writes it.
  if (s.reserve_ticket != 0 && queue_->CancelReserve(s.reserve_ticket)) {
    FinishReserve(c.id, ShuttingDown());
    return;
  }
  bool answered = false;
  for (auto it = s.reserves.begin(); it != s.reserves.end();) {
    if (queue_->CancelReserve(it->second.ticket)) {
      uint64_t serial = it->first;
      it = s.reserves.erase(it);
      FillHole(c, serial, [&] { AnswerReserve(c, ShuttingDown()); });
      answered = true;
    } else {
      ++it;
    }
  }
  if (answered) AfterAnswer(c);
}

std::vector<std::pair<std::string_view, uint64_t>> FrontEnd::StoreFields() const {
  return queue_->Figures().fields;
}

size_t FrontEnd::JobsInHand(uint64_t conn_id) const {
  net::Connection* c = tcp_->Find(conn_id);
  return c == nullptr ? 0 : static_cast<const State&>(*c->state).handed.size();
}

std::vector<std::pair<std::string_view, uint64_t>> FrontEnd::SharedStatsFields() const {
  const LatenessHistogram empty;
  const LatenessHistogram& late = lateness_ != nullptr ? *lateness_ : empty;
  std::vector<std::pair<std::string_view, uint64_t>> out = {
      {"due_lateness_count", late.count()},
      {"due_lateness_p50_us", late.QuantileUs(0.5)},
      {"due_lateness_p99_us", late.QuantileUs(0.99)},
      {"due_lateness_p999_us", late.QuantileUs(0.999)},
      {"due_lateness_max_us", late.max_us()},
  };
  if (scheduler_ != nullptr) {
    const schedule::SchedulerStats st = scheduler_->stats();
    for (const auto& f : wire::kSchedulerStatsFields<schedule::SchedulerStats>) {
      out.emplace_back(f.name, f.get(st).u);
    }
  }
  for (const auto& field : StoreFields()) out.push_back(field);
  return out;
}

}  // namespace delayq::server
