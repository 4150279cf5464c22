// FrontEnd: what the HTTP and RESP front ends share on top of net::TcpServer
// — a ServingQueue (any store: the front ends never ask which), and reserves
// that may have to wait.
//
// A reserve is one Queue::ReserveAsync. Its answer may come inside that call
// (jobs were ready), later from the queue's own thread (a job fell due), or
// inside another connection's request that made a job ready. Only the first
// is written at once; the others are posted to the loop thread. While a
// reserve waits its connection is parked (Connection::waiting): requests
// pipelined behind it wait too, as with Redis's BLPOP, and are served once
// the answer is written. No thread is held per waiting reserve.
//
// A reserve takes no more than the connection can be sent: its batch is cut
// to ReserveByteBudget() bytes of bodies (ReserveRequest::max_bytes), well
// below the output limit that would drop the connection, and the rest stay
// ready. Jobs handed to a connection that closed before their reply was
// written whole (still in `out`, or not yet answered) go back at once,
// ready, their attempt not counted (Queue::Unreserve), rather than after
// their TTR: the client never saw them.
//
// Durability (a store with a log, driven by the loop): every request that
// changes something — through Await, or a reserve that takes jobs, at once
// or later — sets Connection::change_mark, so the connection's replies from
// then on wait until the change is durable under the fsync policy
// (net::OutputGate). A request that changes nothing (a read, a refused
// change) holds nothing: not even behind other connections' changes.
//
// Pipelining (a front end that asks for it: RESP). Then a connection is not
// parked while a store that answers later (Redis) works on its request: the
// reply's place is kept in its output (Connection::OpenHole) and the
// requests pipelined behind it run meanwhile, so one connection keeps many
// changes, or many reserves, in the store's rounds at once. Replies still
// leave in request order, and the answers of one round are written with one
// write per connection (AfterAnswer). Two rules keep the order of effects a client
// sees: a RESERVE does not start while changes of its connection are in
// flight (it must see them), and nothing but another RESERVE starts while a
// reserve is in flight (a reserve that waits holds back what follows, as
// BLPOP does). A request held back waits, unparsed, until those in flight
// have answered; so does every request past kMaxInFlight of them.
//
// Thread-safety: the loop thread owns the front end, except that the
// reserve callbacks it gives the queue may run on any thread; they only
// post to the loop. Destroy it on the loop thread, and only when no
// callback of its can be running on another thread: with a queue driven by
// the same loop (OpenOptions::caller_loop, as `delayq serve` runs), or
// after the queue has stopped.
#ifndef DELAYQ_SERVER_FRONT_END_H_
#define DELAYQ_SERVER_FRONT_END_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "net/event_loop.h"
#include "net/tcp_server.h"
#include "server/lateness.h"
#include "serving/serving_queue.h"

namespace delayq::push {
class Pusher;
}
namespace delayq::schedule {
class Scheduler;
}

namespace delayq::server {

class FrontEnd : public net::TcpHandler {
 public:
  ~FrontEnd() override;

  int port() const { return tcp_->port(); }
  size_t connections() const { return tcp_->connections(); }
  // Shutdown: stop accepting, answer waiting reserves kUnavailable
  // "shutting down: ..." (ShuttingDown(), errors.h; a reserve that already
  // took jobs is answered with them), serve the requests received before
  // the drain (pipelined behind them too; HTTP closes after its 503
  // instead), write what is owed, close (net::TcpServer::BeginDrain).
  // Drained() once every connection is gone.
  void BeginDrain() { tcp_->BeginDrain(); }
  bool Drained() const { return tcp_->Drained(); }
  net::TcpServer* tcp() { return tcp_.get(); }
  // Shutdown, once the loop has stopped: closes every connection (waiting
  // reserves are withdrawn) while the queue still exists. Then stop the
  // queue (its callbacks only post to the loop, which must still exist), and
  // only then destroy the front end.
  void CloseConnections() { tcp_.reset(); }
  // Where the lateness of timed deliveries is recorded (shared by the front
  // ends of one server; must outlive them). Null: not recorded.
  void set_lateness(LatenessHistogram* h) { lateness_ = h; }
  // Where the push subscriptions are registered, listed and removed
  // (PUT/GET/DELETE /v1/subscriptions, SUBSCRIPTION): the server's Pusher,
  // on the same loop; it must outlive the front end's connections. Null
  // (the default): push delivery is off, and those answer PushOff().
  void set_pusher(push::Pusher* p) { pusher_ = p; }
  // Where the schedules are created, read, changed and removed
  // (/v1/schedules, SCHEDULE): the server's Scheduler, on the same loop; it
  // must outlive the front end's connections. Null (the default): those
  // answer SchedulesOff(), and STATS has no schedule figures.
  void set_scheduler(schedule::Scheduler* s) { scheduler_ = s; }
  // What STATS and /v1/stats both end with: the due_lateness_* figures,
  // the scheduler's (wire::kSchedulerStatsFields) when there is one, then
  // StoreFields().
  std::vector<std::pair<std::string_view, uint64_t>> SharedStatsFields() const;
  // Jobs handed to connection `conn_id` whose reply may not have left yet
  // (given back if it closes first); 0 for no such connection. Those whose
  // reply has left are dropped as replies are added, so this stays small.
  size_t JobsInHand(uint64_t conn_id) const;

 protected:
  // Per-connection state of every front end.
  struct State : net::ConnectionState {
    uint64_t reserve_ticket = 0;  // non-zero while a reserve waits
    int64_t parked_at_ms = 0;     // wall clock, when it began to wait
    // The reserve asked to wait but started during the drain, which waits
    // for nothing: no jobs is then ShuttingDown(), not "no job".
    bool reserve_cut_short = false;
    // Pipelining: requests whose replies are still to come.
    struct InFlightReserve {
      uint64_t ticket;
      int64_t started_ms;  // wall clock
      bool cut_short;      // as reserve_cut_short
    };
    std::map<uint64_t, InFlightReserve> reserves;  // by hole serial
    uint32_t changes = 0;                          // Await calls in flight
    bool held_back = false;  // parked before a request that must wait for them
    bool answered = false;   // in FrontEnd::answered_
    // Jobs handed to this connection whose reply may not have been written
    // whole: each with where its reply ends, counted as Connection::written()
    // counts (given back by OnClose if written() has not reached it). The
    // written ones are dropped from the front as replies are added.
    struct Handed {
      uint64_t end;
      std::string id;
      std::string receipt;
    };
    std::deque<Handed> handed;
    int64_t reply_origin = -1;  // while a reply fills a hole: where it begins
  };
  // Requests in flight per connection at most, when pipelining.
  static constexpr size_t kMaxInFlight = 1024;

  // pipelining: see the header comment.
  FrontEnd(net::EventLoop* loop, ServingQueue* queue, bool pipelining = false);
  // Pipelining: whether the request about to run (a RESERVE or not) must
  // wait for those in flight. If so, parks c: call again for the same request
  // once c is resumed.
  bool HoldBack(net::Connection& c, bool is_reserve);
  // The store's own figures for STATS (ServingQueue::Figures): the
  // embedded store's log, the Redis store's rounds, none for memory.
  std::vector<std::pair<std::string_view, uint64_t>> StoreFields() const;

  // Binds the listener; call once from the subclass's factory.
  Status Listen(net::TcpServerOptions options);

  // Starts a reserve for c. AnswerReserve(c, result) writes the answer:
  // inside this call if the queue answers at once, otherwise later with c
  // parked meanwhile. While draining, reserves do not wait: one that asked
  // to and finds no job is answered ShuttingDown(). req.max_bytes
  // is the client's own bound (0: none), cut to ReserveByteBudget(). After
  // the client's FIN (c.peer_closed) no reserve starts: c is closing, with
  // no answer, and no job is taken.
  void StartReserve(net::Connection& c, ReserveRequest req);
  virtual void AnswerReserve(net::Connection& c, const Result<Deliveries>& result) = 0;
  // Bytes of bodies one reserve's reply may carry (ReserveRequest::max_bytes):
  // by default a quarter of the output limit, so the reply, its framing and
  // the replies pipelined before it fit. A protocol whose replies may grow
  // a body more than RESP does (JSON escaping) gives less.
  virtual uint64_t ReserveByteBudget() const;

  // Makes a queue call that answers through a callback (ServingQueue::AddAsync,
  // FinishAsync, ...): `call(done)` starts it, `Answer{}(*this, c, result)`
  // writes the reply (Answer: a type without state). Answered inside the call (the
  // in-process stores), the reply is written at once; answered later (Redis),
  // its place is kept when pipelining, else c is parked meanwhile and what
  // was pipelined behind it waits, as behind a reserve. A connection gone by
  // then gets nothing.
  template <typename T, typename Answer, typename Call>
  void Await(net::Connection& c, Call&& call);

  // net::TcpHandler
  void OnClose(net::Connection& c) override;
  bool AwaitsWork(const net::Connection& c) const override;
  void OnDrain(net::Connection& c) override;

  net::EventLoop* loop_;
  ServingQueue* queue_;
  // The queue's driver when the loop drives it (its Mark() says how far the
  // log's changes go), else null.
  QueueDriver* const driver_;
  uint64_t Mark() const { return driver_ != nullptr ? driver_->Mark() : 0; }
  // A request made changes if Mark() moved past `before`: c's replies from
  // now on wait for them.
  void NoteChange(net::Connection& c, uint64_t before) {
    if (uint64_t now = Mark(); now != before) c.change_mark = now;
  }
  std::unique_ptr<net::TcpServer> tcp_;
  LatenessHistogram* lateness_ = nullptr;
  push::Pusher* pusher_ = nullptr;  // null: push delivery is off
  // What the subscription requests answer while pusher_ is null.
  static Status PushOff() { return Unavailable("push delivery is off on this server"); }
  schedule::Scheduler* scheduler_ = nullptr;  // null: schedules are off
  // What the schedule requests answer while scheduler_ is null.
  static Status SchedulesOff() { return Unavailable("schedules are off on this server"); }

 private:
  void FinishReserve(uint64_t conn_id, Result<Deliveries> result);
  // A reserve's answer that came after ReserveAsync returned (it waited, or
  // the store answers later): posted to the loop.
  void ReserveAnsweredLater(uint64_t conn_id, uint64_t serial, Result<Deliveries> result);
  // AnswerReserve, noting the jobs handed over and where their reply ends.
  void AnswerTracked(net::Connection& c, Result<Deliveries> result);
  // Pipelining: the answer of the reserve whose reply goes in hole `serial`.
  void FinishInFlightReserve(uint64_t conn_id, uint64_t serial, Result<Deliveries> result);
  // Writes what `answer` appends to c.out into hole `serial` instead.
  template <typename F>
  void FillHole(net::Connection& c, uint64_t serial, F&& answer);
  // Await's answer that came after the call returned: posted to the loop.
  template <typename T, typename Answer>
  void AnswerLater(uint64_t conn_id, uint64_t serial, T r);
  // A reply came in. Once the answers that reached the loop together are
  // all in (a posted task later), writes what can be written, one write per
  // connection, and lets a request held back run if nothing holds it any
  // more.
  void AfterAnswer(net::Connection& c);
  void RunAfterAnswers();
  // Jobs of a reserve whose client left go back at once.
  void GiveBack(const Result<Deliveries>& result);
  // Records how late jobs that fell due during a wait begun at `since_ms`
  // are written.
  void RecordLateness(const Result<Deliveries>& result, int64_t since_ms);

  std::shared_ptr<bool> alive_;  // posted tasks check it: false once destroyed
  const bool pipelining_;
  std::vector<uint64_t> answered_;  // connections AfterAnswer is to serve
  std::string scratch_;             // FillHole's reply, its capacity kept

  // A queue call being made on this thread (Await, StartReserve), if any:
  // where its answer goes when the queue gives it inside the call, so the
  // reply is written at once. Per thread, so a queue that answers on a
  // thread of its own can never mistake its call for ours.
  struct Awaiting {
    const void* owner = nullptr;  // the FrontEnd
    uint64_t conn = 0;
    void* answer = nullptr;  // std::optional<T>*
  };
  // This thread's (a function, not a static thread_local member: g++ 12 with
  // UBSan resolves that member to null from other translation units).
  static Awaiting& awaiting();
  // While it lives, an answer `done` gets inside the call on this thread
  // lands in *now (Take says so); calls nest.
  template <typename T>
  struct InCall {
    InCall(const FrontEnd* owner, uint64_t conn, std::optional<T>* now) : outer(awaiting()) {
      awaiting() = {owner, conn, now};
    }
    ~InCall() { awaiting() = outer; }
    InCall(const InCall&) = delete;
    InCall& operator=(const InCall&) = delete;
    // In a callback: true if it runs inside the call `owner` makes for
    // `conn` on this thread, and then keeps `r` as that call's answer.
    static bool Take(const FrontEnd* owner, uint64_t conn, T& r) {
      Awaiting& a = awaiting();
      if (a.owner != owner || a.conn != conn) return false;
      static_cast<std::optional<T>*>(a.answer)->emplace(std::move(r));
      return true;
    }
    Awaiting outer;
  };
  // The callback a queue call gets: it keeps an answer given inside the call
  // (InCall), else hands it to (this->*Later)(conn, serial, answer) — on
  // whatever thread the queue answers. Two words of capture fit
  // std::function's inline storage, three do not: while both numbers fit 32
  // bits they travel packed in one, and a call allocates nothing.
  template <typename T, void (FrontEnd::*Later)(uint64_t, uint64_t, T)>
  std::function<void(T)> AnswerCallback(uint64_t conn, uint64_t serial) {
    if (conn <= UINT32_MAX && serial <= UINT32_MAX) {
      return [this, packed = conn << 32 | serial](T r) {
        if (InCall<T>::Take(this, packed >> 32, r)) return;
        (this->*Later)(packed >> 32, packed & UINT32_MAX, std::move(r));
      };
    }
    return [this, conn, serial](T r) {
      if (InCall<T>::Take(this, conn, r)) return;
      (this->*Later)(conn, serial, std::move(r));
    };
  }
};

template <typename F>
void FrontEnd::FillHole(net::Connection& c, uint64_t serial, F&& answer) {
  auto& s = static_cast<State&>(*c.state);
  int64_t at = c.HoleAt(serial);
  uint64_t origin = c.written() + (at < 0 ? c.out.size() : static_cast<uint64_t>(at));
  // Jobs whose reply has left are the client's now: dropped here too, or a
  // connection whose every reply fills a hole (a pipelining client of the
  // Redis store) would keep them all, and walk them all below per reply.
  while (!s.handed.empty() && s.handed.front().end <= c.written()) s.handed.pop_front();
  size_t before = s.handed.size();
  s.reply_origin = static_cast<int64_t>(origin);
  scratch_.clear();
  scratch_.swap(c.out);  // c.out: empty, scratch_'s capacity
  answer();              // appends the reply to it
  c.out.swap(scratch_);  // scratch_: the reply
  s.reply_origin = -1;
  c.FillHole(serial, scratch_);
  // Replies already behind the hole move back by the reply's length.
  for (size_t i = 0; i < before; ++i) {
    if (s.handed[i].end > origin) s.handed[i].end += scratch_.size();
  }
  scratch_.clear();
}

template <typename T, typename Answer, typename Call>
void FrontEnd::Await(net::Connection& c, Call&& call) {
  static_assert(std::is_empty_v<Answer>, "Answer must capture nothing");
  uint64_t conn_id = c.id;
  // The hole its reply takes if it comes later: the next one, since only
  // this thread opens holes.
  uint64_t serial = pipelining_ ? c.next_hole() : 0;
  // A change made by the call holds the connection's replies from here on
  // until it is durable (net::OutputGate); a read holds nothing.
  const uint64_t mark_before = Mark();
  std::optional<T> now;
  {
    InCall<T> in_call(this, conn_id, &now);
    call(AnswerCallback<T, &FrontEnd::AnswerLater<T, Answer>>(conn_id, serial));
  }
  NoteChange(c, mark_before);
  if (now) {
    Answer{}(*this, c, std::move(*now));
    return;
  }
  if (serial == 0) {
    c.waiting = true;
    return;
  }
  c.OpenHole();
  ++static_cast<State&>(*c.state).changes;
}

template <typename T, typename Answer>
void FrontEnd::AnswerLater(uint64_t conn_id, uint64_t serial, T r) {
  auto shared = std::make_shared<T>(std::move(r));
  loop_->Post([this, conn_id, serial, alive = alive_, shared] {
    if (!*alive) return;
    net::Connection* conn = tcp_->Find(conn_id);
    if (conn == nullptr) return;
    if (serial == 0) {
      conn->waiting = false;
      Answer{}(*this, *conn, std::move(*shared));
      tcp_->Resume(*conn);  // writes the answer, then serves what was pipelined behind it
      return;
    }
    --static_cast<State&>(*conn->state).changes;
    FillHole(*conn, serial, [&] { Answer{}(*this, *conn, std::move(*shared)); });
    AfterAnswer(*conn);
  });
}

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_FRONT_END_H_
