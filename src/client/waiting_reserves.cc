// One thread, one poll(2) over every waiting connection, and a sender thread
// for the reserves the I/O thread itself starts. Ownership of a Pending's
// connection moves with its state, under mu_: kSending, the sender thread
// is connecting and writing it (a Cancel marks it kGone, and the sender
// withdraws it once sent); kFailed, the send failed and the I/O thread runs
// the callback; kWaiting, the I/O thread may poll and read it; kReading,
// the I/O thread is reading it (a Cancel waits for that read to end);
// kGone, whoever set it (the I/O thread with a whole reply, Cancel, Close)
// owns it alone and it has left waiting_.
#include "client/waiting_reserves.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "client/wire_codec.h"

namespace delayq::client {
namespace {

// a + b for b >= 0, INT64_MAX when it would overflow.
int64_t SaturatingAdd(int64_t a, int64_t b) { return a > INT64_MAX - b ? INT64_MAX : a + b; }

}  // namespace

struct WaitingReserves::Pending {
  uint64_t ticket = 0;
  ReserveCallback done;
  size_t server = 0;
  std::unique_ptr<redis::Connection> conn;
  int64_t deadline_ms = 0;  // steady clock: the wait plus the request timeout
  int64_t wait_ms = 0;
  ReserveRequest req;       // as asked, its wait capped (sent again on failover)
  int64_t wait_end_ms = 0;  // steady clock: when the wait asked for ends
  redis::Argv cmd;          // kSending: the RESERVE the sender thread is to send
  Status failure;           // kFailed: why it could not be sent
  Status going_away;        // failing over: the answer of the server shutting down
  enum class State {
    kSending,  // queued for (or in) the sender thread's Send
    kFailed,   // the send failed: the I/O thread runs `done` with `failure`
    kWaiting,
    kReading,
    kGone
  } state = State::kWaiting;  // GUARDED_BY(mu_)
};

Result<std::unique_ptr<WaitingReserves>> WaitingReserves::Create(ServerSet* servers,
                                                                 GiveBack give_back) {
  int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) return Internal(std::string("eventfd: ") + strerror(errno));
  auto w = std::unique_ptr<WaitingReserves>(new WaitingReserves(servers, std::move(give_back), fd));
  w->thread_ = std::thread([p = w.get()] { p->Run(); });
  w->sender_ = std::thread([p = w.get()] { p->SendLoop(); });
  return w;
}

WaitingReserves::WaitingReserves(ServerSet* servers, GiveBack give_back, int wake_fd)
    : servers_(servers), give_back_(std::move(give_back)), wake_fd_(wake_fd) {}

WaitingReserves::~WaitingReserves() {
  Close();
  close(wake_fd_);
}

void WaitingReserves::Wake() {
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
}

uint64_t WaitingReserves::Start(const ReserveRequest& asked, ReserveCallback done) {
  ReserveRequest req = asked;
  req.wait_ms = std::min(req.wait_ms, kMaxWaitMs);
  const Status closing = Unavailable("the queue is closing");
  {
    std::lock_guard lock(mu_);
    if (closed_) {
      done(closing);
      return 0;
    }
    // Inside a callback: the sender thread connects and writes, so the
    // I/O thread never waits on a connect (or a server that hangs).
    if (std::this_thread::get_id() == io_thread_) {
      auto p = std::make_shared<Pending>();
      p->done = std::move(done);
      p->wait_ms = req.wait_ms;
      p->req = req;
      p->wait_end_ms = SaturatingAdd(redis::SteadyMs(), req.wait_ms);
      p->cmd = ReserveCommand(req);
      p->state = Pending::State::kSending;
      p->ticket = next_ticket_++;
      waiting_[p->ticket] = p;
      to_send_.push_back(p);
      send_cv_.notify_one();
      return p->ticket;
    }
  }
  auto sent = servers_->Send(ReserveCommand(req));
  if (!sent.ok()) {
    done(sent.status());
    return 0;
  }
  auto p = std::make_shared<Pending>();
  p->done = std::move(done);
  p->server = sent->server;
  p->conn = std::move(sent->conn);
  p->wait_ms = req.wait_ms;
  p->req = req;
  p->wait_end_ms = SaturatingAdd(redis::SteadyMs(), req.wait_ms);
  p->deadline_ms =
      SaturatingAdd(SaturatingAdd(redis::SteadyMs(), req.wait_ms), servers_->request_timeout_ms());
  {
    std::lock_guard lock(mu_);
    if (!closed_) {
      p->ticket = next_ticket_++;
      waiting_[p->ticket] = p;
    }
  }
  if (p->ticket == 0) {
    p->conn.reset();
    p->done(closing);
    return 0;
  }
  Wake();
  return p->ticket;
}

bool WaitingReserves::Cancel(uint64_t ticket) {
  std::shared_ptr<Pending> p;
  Pending::State was;
  {
    std::unique_lock lock(mu_);
    auto it = waiting_.find(ticket);
    if (it == waiting_.end()) return false;
    p = it->second;
    read_done_.wait(lock, [&] { return p->state != Pending::State::kReading; });
    if (p->state == Pending::State::kGone) return false;  // answered meanwhile
    was = p->state;
    p->state = Pending::State::kGone;
    waiting_.erase(ticket);
  }
  // Still sending: the sender thread withdraws it once sent. Failed to
  // send: nothing to withdraw.
  if (was != Pending::State::kWaiting) return true;
  Wake();  // stop polling it
  Withdraw(*p);
  return true;
}

void WaitingReserves::Withdraw(Pending& p) {
  // FIN: the server withdraws the reserve and closes; or the reply was
  // already on its way, and its jobs go back.
  if (p.conn->fd() >= 0) shutdown(p.conn->fd(), SHUT_WR);
  std::vector<redis::Reply> got;
  if (p.conn->set_command_timeout_ms(servers_->request_timeout_ms()).ok() &&
      p.conn->Receive(1, &got).ok() && !got.empty()) {
    auto jobs = ParseDeliveries(got[0]);
    if (jobs.ok() && !jobs->empty()) give_back_(*jobs);
  }
  p.conn.reset();
}

void WaitingReserves::SendLoop() {
  for (;;) {
    std::shared_ptr<Pending> p;
    {
      std::unique_lock lock(mu_);
      send_cv_.wait(lock, [&] { return closed_ || !to_send_.empty(); });
      if (closed_) return;  // Close answers what is left
      p = std::move(to_send_.front());
      to_send_.pop_front();
      if (p->state == Pending::State::kGone) continue;  // cancelled before it was sent
    }
    auto sent = servers_->Send(p->cmd);
    bool cancelled;
    {
      std::lock_guard lock(mu_);
      cancelled = p->state == Pending::State::kGone;
      if (sent.ok()) {
        p->server = sent->server;
        p->conn = std::move(sent->conn);
        p->deadline_ms = SaturatingAdd(SaturatingAdd(redis::SteadyMs(), p->wait_ms),
                                       servers_->request_timeout_ms());
      }
      // Closed meanwhile: Close answers it, once this thread has ended.
      if (!cancelled && !closed_) {
        p->state = sent.ok() ? Pending::State::kWaiting : Pending::State::kFailed;
        if (!sent.ok()) p->failure = sent.status();
        // Failing over from a server shutting down: its answer first, so
        // the message still begins with kShuttingDownPrefix.
        if (!sent.ok() && !p->going_away.ok()) {
          p->failure =
              Unavailable(p->going_away.message() +
                          "; no other server took the reserve: " + sent.status().message());
        }
      }
    }
    if (cancelled && p->conn) Withdraw(*p);
    if (!cancelled) Wake();
  }
}

void WaitingReserves::Close() {
  {
    std::lock_guard lock(mu_);
    if (closed_) return;
    closed_ = true;
  }
  Wake();
  send_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (sender_.joinable()) sender_.join();
  std::unordered_map<uint64_t, std::shared_ptr<Pending>> left;
  {
    std::lock_guard lock(mu_);
    left.swap(waiting_);
    to_send_.clear();  // each of them is in `left` too
    for (auto& [ticket, p] : left) p->state = Pending::State::kGone;
  }
  read_done_.notify_all();
  for (auto& [ticket, p] : left) {
    p->conn.reset();  // the server withdraws the reserve
    p->done(Unavailable("the queue is closing"));
  }
}

void WaitingReserves::Run() {
  {
    std::lock_guard lock(mu_);
    io_thread_ = std::this_thread::get_id();
  }
  std::vector<pollfd> fds;
  std::vector<std::shared_ptr<Pending>> polled;
  std::vector<std::shared_ptr<Pending>> failed;
  for (;;) {
    fds.assign(1, pollfd{wake_fd_, POLLIN, 0});
    polled.clear();
    failed.clear();
    int64_t next = INT64_MAX;
    {
      std::lock_guard lock(mu_);
      if (closed_) return;
      for (auto it = waiting_.begin(); it != waiting_.end();) {
        const std::shared_ptr<Pending>& p = it->second;
        if (p->state == Pending::State::kFailed) {  // the sender could not send it
          p->state = Pending::State::kGone;
          failed.push_back(p);
          it = waiting_.erase(it);
          continue;
        }
        if (p->state == Pending::State::kWaiting) {
          fds.push_back(pollfd{p->conn->fd(), POLLIN, 0});
          polled.push_back(p);
          next = std::min(next, p->deadline_ms);
        }
        ++it;
      }
    }
    if (!failed.empty()) {
      for (const std::shared_ptr<Pending>& p : failed) p->done(p->failure);
      continue;  // callbacks may have started or cancelled reserves
    }
    int timeout = -1;
    if (next != INT64_MAX) {
      timeout = static_cast<int>(std::clamp<int64_t>(next - redis::SteadyMs(), 0, INT_MAX));
    }
    if (poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) return;
    if (fds[0].revents != 0) {
      uint64_t n;
      (void)!read(wake_fd_, &n, sizeof n);
    }
    const int64_t now = redis::SteadyMs();
    for (size_t i = 0; i < polled.size(); ++i) {
      Serve(polled[i], fds[i + 1].revents != 0, now);
    }
  }
}

void WaitingReserves::Serve(const std::shared_ptr<Pending>& p, bool readable, int64_t now_ms) {
  if (!readable && now_ms < p->deadline_ms) return;
  {
    std::lock_guard lock(mu_);
    if (p->state != Pending::State::kWaiting) return;  // cancelled meanwhile
    p->state = Pending::State::kReading;
  }
  std::vector<redis::Reply> got;
  Status st = readable ? p->conn->ReadSome(&got)
                       : Unavailable("no reply within " + std::to_string(p->wait_ms) + " ms + " +
                                     std::to_string(servers_->request_timeout_ms()) +
                                     " ms (its wait and the request timeout)");
  const bool whole = !st.ok() || !got.empty();
  // The server's shutdown cut the wait short: it is going away. With
  // another server, the reserve goes there at once for what is left of its
  // wait (sent by the sender thread: a connect never holds this thread);
  // else the caller gets the answer, naming the server.
  // The reply is parsed once, here: the answer below is this parse.
  std::optional<Result<Deliveries>> said;
  Status going_away;
  if (st.ok() && got.size() == 1) {
    said = ParseDeliveries(got[0]);
    if (!said->ok() && IsShuttingDown(said->status())) {
      going_away = Unavailable(said->status().message() + " (delayq server " +
                               servers_->Name(p->server) + ")");
      servers_->GoingAway(p->server, std::move(p->conn));
    }
  }
  const int64_t left = p->wait_end_ms - redis::SteadyMs();
  bool failing_over = false;
  {
    std::lock_guard lock(mu_);
    if (!going_away.ok() && servers_->size() > 1 && left > 0 && !closed_) {
      failing_over = true;
      p->state = Pending::State::kSending;
      p->going_away = going_away;
      p->wait_ms = left;
      p->req.wait_ms = left;
      p->cmd = ReserveCommand(p->req);
      to_send_.push_back(p);
      send_cv_.notify_one();
    } else {
      p->state = whole ? Pending::State::kGone : Pending::State::kWaiting;
      if (whole) waiting_.erase(p->ticket);
    }
  }
  read_done_.notify_all();
  if (failing_over || !whole) return;
  if (!going_away.ok()) {
    p->done(std::move(going_away));
    return;
  }
  if (!st.ok()) {
    std::string why = st.message();
    const std::string prefix = p->conn->name() + ": ";
    if (why.starts_with(prefix)) why = why.substr(prefix.size());
    servers_->Broken(p->server, std::move(p->conn), why);
    p->done(Unavailable("delayq server " + servers_->Name(p->server) + ": " + why +
                        "; the reserve's reply was lost (jobs it may have taken come back "
                        "after their TTR)"));
    return;
  }
  Result<Deliveries> r =
      said.has_value() ? std::move(*said) : Malformed("RESERVE", "one reply", got[1]);
  if (r.ok() || r.status().code() != Code::kUnavailable) {
    servers_->Release(p->server, std::move(p->conn));
  } else {
    p->conn.reset();  // malformed: closed
  }
  p->done(std::move(r));
}

}  // namespace delayq::client
