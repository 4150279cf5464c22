// FrontEnd: what the HTTP and RESP front ends share on top of net::TcpServer
// — a Queue, and reserves that may have to wait.
//
// A reserve is one Queue::ReserveAsync. Its answer may come inside that call
// (jobs were ready), later from the queue's own thread (a job fell due), or
// inside another connection's request that made a job ready. Only the first
// is written at once; the others are posted to the loop thread. While a
// reserve waits its connection is parked (Connection::waiting): requests
// pipelined behind it wait too, as with Redis's BLPOP, and are served once
// the answer is written. No thread is held per waiting reserve.
//
// Jobs handed to a connection that closed before they could be written are
// released at once rather than after their TTR.
//
// Thread-safety: the loop thread owns the front end, except that the
// reserve callbacks it gives the queue may run on any thread; they only
// post to the loop. Destroy it on the loop thread, and only when no
// callback of its can be running on another thread: with a queue driven by
// the same loop (QueueOptions::caller_loop, as `delayq serve` runs), or
// after the queue has stopped.
#ifndef DELAYQ_SERVER_FRONT_END_H_
#define DELAYQ_SERVER_FRONT_END_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>

#include "delayq/queue.h"
#include "net/event_loop.h"
#include <utility>
#include <vector>

#include "net/tcp_server.h"
#include "server/lateness.h"

namespace delayq::server {

class FrontEnd : public net::TcpHandler {
 public:
  ~FrontEnd() override;

  int port() const { return tcp_->port(); }
  size_t connections() const { return tcp_->connections(); }
  // Shutdown: stop accepting, answer waiting reserves (empty), write what is
  // owed, close. Drained() once every connection is gone.
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

 protected:
  // Per-connection state of every front end.
  struct State : net::ConnectionState {
    uint64_t reserve_ticket = 0;  // non-zero while a reserve waits
    int64_t parked_at_ms = 0;     // wall clock, when it began to wait
  };

  FrontEnd(net::EventLoop* loop, Queue* queue);
  // The embedded store's figures for STATS (empty for other stores):
  // log_writes, log_syncs, log_bytes, disk_bytes, log_segments, live_bytes,
  // rewritten_bytes, removed_segments, reused_files, recovered_records, recovery_ms,
  // store_failing (1 while the log cannot write).
  std::vector<std::pair<std::string_view, uint64_t>> StoreFields() const;
  // What STATS and /v1/stats both end with: the due_lateness_* figures,
  // then StoreFields().
  std::vector<std::pair<std::string_view, uint64_t>> SharedStatsFields() const;
  // Binds the listener; call once from the subclass's factory.
  Status Listen(net::TcpServerOptions options);

  // Starts a reserve for c. AnswerReserve(c, result) writes the answer:
  // inside this call if the queue answers at once, otherwise later with c
  // parked meanwhile. While draining, reserves do not wait.
  void StartReserve(net::Connection& c, ReserveRequest req);
  virtual void AnswerReserve(net::Connection& c, Result<Deliveries> result) = 0;

  // Makes a queue call that answers through a callback (Queue::AddAsync,
  // FinishAsync, ...): `call(done)` starts it, `Answer{}(*this, c, result)`
  // writes the reply (Answer: a type without state). Answered inside the call (the
  // in-process stores), the reply is written at once; answered later (Redis),
  // c is parked meanwhile and what was pipelined behind it waits, as behind
  // a reserve. A connection gone by then gets nothing.
  template <typename T, typename Answer, typename Call>
  void Await(net::Connection& c, Call&& call);

  // net::TcpHandler
  void OnClose(net::Connection& c) override;
  void OnDrain(net::Connection& c) override;

  net::EventLoop* loop_;
  Queue* queue_;
  std::unique_ptr<net::TcpServer> tcp_;
  LatenessHistogram* lateness_ = nullptr;

 private:
  void FinishReserve(uint64_t conn_id, Result<Deliveries> result);

  std::shared_ptr<bool> alive_;  // posted tasks check it: false once destroyed

  // The Await being made on this thread, if any: where its answer goes when
  // the queue gives it inside the call.
  struct Awaiting {
    const void* owner = nullptr;  // the FrontEnd
    uint64_t conn = 0;
    void* answer = nullptr;  // std::optional<T>*
  };
  // This thread's (a function, not a static thread_local member: g++ 12 with
  // UBSan resolves that member to null from other translation units).
  static Awaiting& awaiting();
};

template <typename T, typename Answer, typename Call>
void FrontEnd::Await(net::Connection& c, Call&& call) {
  static_assert(std::is_empty_v<Answer>, "Answer must capture nothing");
  uint64_t conn_id = c.id;
  std::optional<T> now;
  Awaiting& current = awaiting();
  Awaiting outer = current;
  current = {this, conn_id, &now};
  // Captures fit std::function's inline storage: no allocation per call.
  call(std::function<void(T)>([this, conn_id](T r) {
    Awaiting& in_call = awaiting();  // the thread `done` runs on
    if (in_call.owner == this && in_call.conn == conn_id) {
      static_cast<std::optional<T>*>(in_call.answer)->emplace(std::move(r));
      return;
    }
    auto shared = std::make_shared<T>(std::move(r));
    loop_->Post([this, conn_id, alive = alive_, shared] {
      if (!*alive) return;
      net::Connection* conn = tcp_->Find(conn_id);
      if (conn == nullptr) return;
      conn->waiting = false;
      Answer{}(*this, *conn, std::move(*shared));
      tcp_->Resume(*conn);  // writes the answer, then serves what was pipelined behind it
    });
  }));
  current = outer;
  if (now) {
    Answer{}(*this, c, std::move(*now));
    return;
  }
  c.waiting = true;
}

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_FRONT_END_H_
