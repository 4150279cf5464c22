// WaitingReserves: reserves that wait on a server, held by one I/O thread.
//
// A RESERVE with a TIMEOUT parks its connection on the server until it is
// answered (RESP answers in order), so each waiting reserve owns one
// connection, taken from the ServerSet's pool. The calling thread connects
// and writes the RESERVE (so a ticket means the server has the request) —
// except the I/O thread itself (a callback asking again, as a Worker does):
// its reserves are connected and written by a sender thread of this
// object's, so no connect, however long it hangs, holds up the replies of
// the other waiting reserves. The I/O thread poll(2)s every waiting
// connection, plus an eventfd that wakes it for a new one, reads each reply
// as it arrives, gives the connection back to the pool and runs the
// callback. A reserve gets a
// deadline of its wait plus the request timeout: no reply by then is
// kUnavailable, and the connection is closed.
//
// Cancel withdraws the reserve on the server before it returns: it shuts
// down the connection's sending side, which the server takes as the client
// leaving (it withdraws the reserve and closes), and reads what comes back.
// A reply already on its way — jobs handed out just before — is given back
// at once through `give_back` (UNRESERVE: ready again, the attempt not
// counted), so a cancelled reserve takes no job.
//
// A reply that never comes (a server killed, a connection reset) is
// kUnavailable and is not retried: jobs the server may have handed to it
// come back after their TTR. A reply that says the server is shutting down
// (IsShuttingDown: it took nothing) is: the server is marked down
// (ServerSet::GoingAway) and, with another server in the list and time
// left of the wait, the reserve is sent again, by the sender thread, for
// that time; otherwise `done` gets the server's answer, naming it.
//
// Thread-safety: every method may be called from any thread, including from
// inside a callback (which runs on the I/O thread, or inside Start when it
// fails at once, or inside Close). A give_back runs on the thread of the
// Cancel, or on the sender thread for a reserve cancelled while it was
// being sent.
#ifndef DELAYQ_CLIENT_WAITING_RESERVES_H_
#define DELAYQ_CLIENT_WAITING_RESERVES_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "client/server_set.h"
#include "delayq/queue.h"

namespace delayq::client {

class WaitingReserves {
 public:
  using GiveBack = std::function<void(const Deliveries&)>;

  // Starts the I/O thread. *servers must outlive this object.
  // Errors: kInternal when the eventfd or thread cannot be made.
  static Result<std::unique_ptr<WaitingReserves>> Create(ServerSet* servers, GiveBack give_back);
  // Close(), then frees.
  ~WaitingReserves();
  WaitingReserves(const WaitingReserves&) = delete;
  WaitingReserves& operator=(const WaitingReserves&) = delete;

  // The longest wait a server takes (it refuses a longer RESERVE TIMEOUT),
  // and the cap of the in-process stores: a day.
  static constexpr int64_t kMaxWaitMs = 86'400'000;

  // Sends `asked` (validated, wait_ms > 0) to a server. A wait over
  // kMaxWaitMs waits kMaxWaitMs, as on every store (then answers no jobs).
  // Returns its ticket; or 0 after running `done` inside this call, with
  // kUnavailable, when no server took it or this is closed. Called on the
  // I/O thread (inside a callback), it returns the ticket at once, and a
  // send that fails reaches `done` later, on the I/O thread.
  uint64_t Start(const ReserveRequest& asked, ReserveCallback done);
  // Queue::CancelReserve: true when `done` will never run (the server has
  // withdrawn the reserve, or its jobs were given back).
  bool Cancel(uint64_t ticket);
  // Stops the I/O thread, closes every waiting connection and answers each
  // waiting reserve kUnavailable on this thread. Later Starts are answered
  // kUnavailable at once. Idempotent.
  void Close();

 private:
  struct Pending;

  WaitingReserves(ServerSet* servers, GiveBack give_back, int wake_fd);
  void Run();       // the I/O thread
  void SendLoop();  // the sender thread: sends reserves started on the I/O thread
  void Wake();
  // Takes back a sent reserve no one will read (Cancel): half-close, read
  // what comes, give back its jobs. Blocks up to the request timeout.
  void Withdraw(Pending& p);
  // Reads (or times out) one waiting reserve the I/O thread found ready.
  void Serve(const std::shared_ptr<Pending>& p, bool readable, int64_t now_ms);

  ServerSet* const servers_;
  const GiveBack give_back_;
  const int wake_fd_;  // eventfd: a new reserve, a cancel, Close

  std::mutex mu_;
  std::condition_variable read_done_;  // a Pending left kReading
  std::condition_variable send_cv_;    // to_send_ grew, or Close
  // State below is protected by mu_.
  std::unordered_map<uint64_t, std::shared_ptr<Pending>> waiting_;
  std::deque<std::shared_ptr<Pending>> to_send_;  // kSending, in order
  std::thread::id io_thread_;                     // set by Run
  uint64_t next_ticket_ = 1;
  bool closed_ = false;

  std::thread thread_;  // started last
  std::thread sender_;
};

}  // namespace delayq::client

#endif  // DELAYQ_CLIENT_WAITING_RESERVES_H_
