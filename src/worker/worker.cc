// Worker (include/delayq/worker.h). How it works:
//
// Every job the worker holds is a Held entry in held_, from the reserve's
// callback until its outcome has been applied (or it was given back). Held
// jobs not yet started wait in waiting_ (in the order the queue gave them);
// a handler thread takes the first whose topic has room. A slot is a job
// waiting or running (BusyLocked): a reserve asks for the free slots, plus
// what the worker reads ahead (ahead_: outcomes acknowledged in the last
// kAheadWindowMs), and holds off while the acks in flight would take it
// past twice the threads plus ahead_.
//
// Outcomes become acks in acks_ (kAcking jobs, still held). One thread at a
// time sends them (FlushAcks, Queue::Acknowledge, then Pump); the others add
// to the next batch and go on. A thread may leave its ack waiting for a
// batch (DeferAckLocked) while it has a next job; the timer sends acks that
// waited kAckDelayMs, and a thread sends them before it sleeps. Acks
// answered with a transient error wait in retry_ (their jobs still held,
// kAcking with `resend`, and touched) until the timer moves them back to
// acks_ at ack_retry_at_; a final answer concludes a job (Conclude:
// on_acknowledged, then it leaves held_).
//
// Handler threads sleep on work_cv_ and are woken one at a time
// (WakeLocked): a thread that takes a job while more wait wakes the next.
//
// At most one reserve is open (reserving_). Pump() opens one when there are
// free slots and topics with room; it is called after every event that can
// free a slot (a handler's outcome applied, a batch arriving, Start, a retry
// timer). A reserve answered inside ReserveAsync itself (jobs were ready) is
// followed by the next in the same Pump loop, not by recursion; one
// answered later is followed by the timer's Pump (pump_due_). The open
// reserve names the topics that had room when it was made; when another
// topic gains room while it waits (its handlers finished), Pump withdraws it
// (CancelReserve) and asks again, so a topic that was full is not left out
// until the wait runs out.
//
// The timer thread touches held jobs every half TTR (a failed touch sooner:
// Touched), re-opens a reserve after a failed one, resends failed acks, and
// makes the Queue calls a reserve's callback must not make: the next
// reserve, and give-backs of jobs that arrived during Stop. It sleeps on
// timer_cv_ until its earliest deadline (real clock) or until the manual
// clock moves (Clock::Subscribe), an earlier deadline appears
// (timer_kick_), or the worker quits. So that a batch of jobs does not wake
// it each time, it stays armed at least half a TTR ahead when it holds
// nothing.
//
// Lock order: the clock's lock (its Subscribe callback) may take mu_, so the
// clock is never read with mu_ held; neither is the queue called with mu_
// held (its callbacks take mu_). OnReserved, the reserve's callback, calls
// no Queue method: it may run on the queue's own thread (the network
// client's I/O thread, which would stall every waiting reserve meanwhile).
#include "delayq/worker.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <list>
#include <mutex>
#include <random>
#include <string_view>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace delayq {

int64_t BackoffDelayMs(const Backoff& backoff, uint32_t attempts, double random) {
  // 0 * factor^n is NaN once factor^n overflows: a zero base is zero.
  if (backoff.base_ms <= 0) return 0;
  if (attempts == 0) attempts = 1;
  if (!(random >= 0)) random = 0;  // also NaN
  random = std::min(random, 1.0);
  // Any factor > 1 reaches the cap (at most 100 years, base >= 1 ms) well
  // before 2^12 steps; the clamp only keeps pow's exponent small.
  const uint32_t steps = std::min<uint32_t>(attempts - 1, 4096);
  double d =
      static_cast<double>(backoff.base_ms) * std::pow(backoff.factor, static_cast<double>(steps));
  const double cap = static_cast<double>(backoff.cap_ms);
  if (!(d <= cap)) d = cap;  // also inf and NaN
  const auto jittered = static_cast<int64_t>(d / 2 + random * (d / 2));
  return std::clamp(jittered, backoff.base_ms, backoff.cap_ms);
}

namespace {

constexpr uint32_t kMaxThreads = 1024;
constexpr int64_t kMaxReserveRetryMs = 5000;
constexpr int64_t kNever = INT64_MAX;
constexpr std::string_view kStoppedError = "worker stopped while the handler ran";
// Reading ahead (see BuildReserve): a worker holds, beyond its threads, as
// many jobs as its handlers finished in the last window, at most
// kMaxReserveCount.
constexpr int64_t kAheadWindowMs = 10;
// Acks of fast handlers (a worker reading ahead) may wait for a batch of
// this many while the thread goes on with its next job; never longer than
// kAckDelayMs (the timer sends them then).
constexpr size_t kAckBatch = 16;
constexpr int64_t kAckDelayMs = 1;

Status CheckBackoff(const Backoff& b) {
  if (b.base_ms < 0) return InvalidArgument("backoff.base_ms must be >= 0");
  if (!(b.factor >= 1.0) || !std::isfinite(b.factor)) {
    return InvalidArgument("backoff.factor must be a finite number >= 1");
  }
  if (b.cap_ms < b.base_ms) return InvalidArgument("backoff.cap_ms must be >= backoff.base_ms");
  if (b.cap_ms > kMaxDelayMs) return InvalidArgument("backoff.cap_ms must be at most 100 years");
  return Status();
}

int64_t TouchInterval(const Delivery& d) { return std::max<int64_t>(1, d.ttr_ms / 2); }

// A failed touch is tried again after kTouchRetryMs, doubling while it
// keeps failing, but never later than half of what is left of the TTR.
constexpr int64_t kTouchRetryMs = 100;

// Answers that say a delivery is over for its worker: its receipt no longer
// names the job's reservation (finished, released, given back, or its TTR
// ran out and it was handed out again), or the job is gone. Nothing sent
// with that receipt can succeed again. (kNotReserved is what a store says of
// a job not reserved when no receipt is checked; read the same way.)
bool DeliveryOver(const Status& s) {
  return s.code() == Code::kStaleReceipt || s.code() == Code::kNotFound ||
         s.code() == Code::kNotReserved;
}

// Answers after which an ack is sent again: they say nothing about the ack
// itself. kUnavailable: the queue could not be reached, or the connection
// broke before the answer came (the ack may or may not have been applied).
// kInternal: the store failed (a log it could not write) or the answer
// could not be read. Resending is safe because an ack carries its receipt:
// one already applied is answered kNotFound or kStaleReceipt, never applied
// twice. Every other answer is final (kInvalidArgument, kUnauthorized, ...
// would be answered the same again).
bool Transient(const Status& s) {
  return s.code() == Code::kUnavailable || s.code() == Code::kInternal;
}

// Acks answered with a transient error are sent again after kAckRetryMs,
// doubling up to kMaxAckRetryMs while they keep failing.
constexpr int64_t kAckRetryMs = 100;
constexpr int64_t kMaxAckRetryMs = 5000;

// The thread that is inside Pump's ReserveAsync call, so the callback, when
// run inline, leaves the next reserve to that loop.
thread_local const void* tls_pumping = nullptr;

}  // namespace

class Worker::Impl {
 public:
  Impl(Queue& queue, WorkerOptions options)
      : queue_(queue),
        options_(std::move(options)),
        clock_(options_.clock ? options_.clock : SystemClock()),
        rng_(std::random_device{}()),
        retry_ms_(options_.reserve_retry_ms) {}

  ~Impl() {
    Stop(0);
    {
      std::lock_guard<std::mutex> l(mu_);
      quit_ = true;
    }
    work_cv_.notify_all();
    timer_cv_.notify_all();
    for (std::thread& t : threads_) t.join();
    if (timer_.joinable()) timer_.join();
    if (clock_token_ != 0) clock_->Unsubscribe(clock_token_);
  }

  Status Handle(std::string topic, Handler handler, TopicOptions options);
  Status Start();
  void Stop(int64_t drain_ms);
  WorkerStats Stats() const;

 private:
  enum class State : unsigned char {
    kWaiting,    // reserved, not started: in waiting_
    kRunning,    // its handler runs
    kAcking,     // its handler returned; its outcome waits for (or is in) Acknowledge
    kAbandoned,  // Stop gave it back while its handler ran
  };
  struct Held {
    Delivery delivery;
    size_t topic = 0;      // index in topics_
    int64_t touch_at = 0;  // monotonic ms of its next touch (or touch retry)
    // Monotonic ms its reservation was last known to start a full TTR: the
    // reserve's answer, or the sending of the last touch accepted.
    int64_t held_since = 0;
    int64_t touch_retry_ms = 0;  // the last failed touch's retry delay; 0: none failed
    // Written under mu_, except kRunning -> kAcking by the handler's thread
    // (a compare-exchange racing Stop's kRunning -> kAbandoned).
    std::atomic<State> state{State::kWaiting};
    bool lost = false;  // a touch found the delivery over: touch no more
    // kAcking, its ack answered with a transient error: in retry_, to be
    // sent again, and touched meanwhile. GUARDED_BY(mu_).
    bool resend = false;
  };
  using HeldIt = std::list<Held>::iterator;
  struct Topic {
    std::string name;
    Handler handler;
    TopicOptions options;
    uint32_t limit = 0;  // concurrency, resolved
    // GUARDED_BY(mu_):
    uint32_t held = 0;     // jobs of this topic held (any state)
    uint32_t running = 0;  // of which running their handler
    uint32_t acking = 0;   // of which done, their outcome not yet acknowledged
    // Jobs that take a slot of this topic: waiting or running.
    uint32_t busy() const { return held - acking; }
  };

  void RunThread();
  void RunTimer();
  // Opens a reserve if one should be open and none is. REQUIRES: l holds
  // mu_; it is released around queue calls and held again on return.
  void Pump(std::unique_lock<std::mutex>& l);
  // REQUIRES: mu_. True if the open reserve leaves out a topic with room.
  bool ShouldReopenLocked() const;
  // REQUIRES: mu_. Fills `req` (and open_topics_) and returns true if a
  // reserve should open.
  bool BuildReserve(ReserveRequest* req);
  void OnReserved(uint64_t seq, Result<Deliveries> result);
  // REQUIRES: mu_. The first waiting job whose topic has room, or false.
  bool PickLocked(HeldIt* it);
  Outcome RunHandler(const Handler& handler, const Delivery& d);
  // Takes the outcome of a handler that ran unlocked: its ack joins acks_,
  // and this thread sends them unless another one is at it. Returns with l
  // holding mu_.
  void Finished(HeldIt it, const Outcome& outcome, std::unique_lock<std::mutex>& l);
  // REQUIRES: l holds mu_, !flushing_. Sends acks_ (Queue::Acknowledge, one
  // batch at a time) until none is left, and applies the answers.
  void FlushAcks(std::unique_lock<std::mutex>& l);
  // An outcome whose ack has its final answer (or was given up).
  struct Concluded {
    HeldIt job;
    Ack::Kind kind;
    Status answer;
  };
  // REQUIRES: l holds mu_. Applies the answers to a batch sent at `now`:
  // counts them, keeps the transient failures in retry_ (unless the drain
  // is over), and concludes the rest.
  void AnsweredLocked(std::vector<Ack>& batch, const std::vector<HeldIt>& jobs,
                      const std::vector<Status>& answers, int64_t now,
                      std::unique_lock<std::mutex>& l);
  // REQUIRES: l holds mu_ (released around on_acknowledged). Reports each
  // outcome to on_acknowledged, then lets go of its job.
  void Conclude(std::vector<Concluded>& done, std::unique_lock<std::mutex>& l);
  // REQUIRES: mu_. Moves the acks waiting in retry_ back to acks_.
  void ResendLocked();
  // REQUIRES: mu_. Wakes one sleeping handler thread for jobs waiting here,
  // unless one is already on its way.
  void WakeLocked();
  // REQUIRES: mu_. Jobs held that take a slot (waiting or running).
  size_t BusyLocked() const { return held_.size() - acking_; }
  // REQUIRES: mu_. Counts `done` outcomes acknowledged at `now` towards
  // ahead_.
  void PaceLocked(int64_t now, size_t done);
  // REQUIRES: mu_, an ack just added to acks_ and none being sent. Whether
  // it may wait for more (the handler's thread then goes on): only while
  // the worker reads ahead (its handlers are fast), the batch is small and
  // a job waits here for this thread. Arms the timer for kAckDelayMs.
  bool DeferAckLocked();
  double Random();
  // REQUIRES: mu_.
  void NoteError(const Status& s);
  // REQUIRES: mu_. Applies the queue's answer `s`, at `now`, to the touch
  // of delivery (id, receipt) sent at `sent_at`: an accepted touch restarts
  // the job's TTR; a transient failure is retried within what is left of
  // it; an answer that the delivery is over ends its touches.
  void Touched(const std::string& id, const std::string& receipt, int64_t sent_at, int64_t now,
               const Status& s);
  // Gives jobs back with Unreserve (not started, not counted).
  void Unreserve(const std::vector<Delivery>& jobs);
  // REQUIRES: mu_ not held. Waits on stop_cv_ until pred() holds, or until
  // the worker's clock reaches `deadline` (kNever: no deadline); returns
  // pred()'s last value.
  template <typename Pred>
  bool WaitStop(Pred pred, int64_t deadline);

  Queue& queue_;
  const WorkerOptions options_;
  const std::shared_ptr<Clock> clock_;
  int clock_token_ = 0;
  // Written by Handle before Start, read-only afterwards (no lock needed
  // then; the counters in each Topic are guarded by mu_).
  std::vector<Topic> topics_;
  std::unordered_map<std::string, size_t> topic_index_;
  std::vector<std::thread> threads_;
  std::thread timer_;

  std::mutex rng_mu_;
  std::mt19937_64 rng_;  // GUARDED_BY(rng_mu_)

  mutable std::mutex mu_;
  std::condition_variable work_cv_;   // handler threads: a job to start; quit
  std::condition_variable timer_cv_;  // the timer: clock moved, earlier deadline; quit
  std::condition_variable stop_cv_;   // Stop: a job or a reserve ended; clock moved
  // State below is protected by mu_.
  std::list<Held> held_;
  std::deque<HeldIt> waiting_;
  bool started_ = false;
  bool stopping_ = false;
  bool quit_ = false;
  uint32_t sleeping_ = 0;  // handler threads waiting on work_cv_
  uint32_t waking_ = 0;    // of which woken for work, not yet back
  uint32_t running_ = 0;   // handlers running (abandoned ones included)
  // Outcomes to acknowledge: held jobs in kAcking, in the order their
  // handlers returned; acks_[i] is ack_jobs_[i]'s. One thread at a time
  // sends them (flushing_), the others add to the next batch meanwhile.
  std::vector<Ack> acks_;
  std::vector<HeldIt> ack_jobs_;
  bool flushing_ = false;
  // Acks answered with a transient error (their jobs kAcking, resend set),
  // sent again by the timer at ack_retry_at_ (kNever: none waits).
  struct Retry {
    Ack ack;
    HeldIt job;
    Status last;  // the last answer
  };
  std::vector<Retry> retry_;
  int64_t ack_retry_at_ = kNever;
  int64_t ack_retry_ms_ = 0;  // the last resend's delay; 0 once an ack is taken
  bool drain_over_ = false;   // Stop's deadline passed: acks are not resent
  uint32_t acking_ = 0;       // held jobs in kAcking
  // Reading ahead: jobs held beyond the threads, at most. Outcomes
  // acknowledged in the last full window of kAheadWindowMs (none when the
  // last window is older), counted from pace_start_.
  uint32_t ahead_ = 0;
  int64_t pace_start_ = 0;
  uint32_t pace_done_ = 0;
  int64_t now_ = 0;           // the worker's clock as last read (monotonic ms)
  int64_t ack_due_ = kNever;  // acks_ waiting (not being sent) go by then
  // The open reserve.
  bool reserving_ = false;
  uint64_t reserve_seq_ = 0;
  uint64_t ticket_ = 0;            // its ticket once ReserveAsync returned it
  std::vector<bool> open_topics_;  // by topic index: in the open reserve
  // Left by OnReserved (which makes no Queue call) for the timer: jobs to
  // give back (Unreserve), and the next reserve to open.
  std::vector<Delivery> give_back_;
  bool pump_due_ = false;
  bool giving_back_ = false;    // the timer is giving back jobs now
  size_t rotation_ = 0;         // first topic of the next reserve (> kMaxReserveTopics topics)
  bool retry_pending_ = false;  // a reserve failed: the timer re-opens it at retry_at_
  int64_t retry_at_ = 0;
  int64_t retry_ms_;
  // The timer.
  std::atomic<uint64_t> clock_moves_{0};  // written under mu_ (no lost wake-up)
  bool timer_kick_ = false;
  int64_t timer_armed_ = 0;                    // monotonic ms the timer sleeps until
  int64_t idle_interval_ = kDefaultTtrMs / 2;  // the timer's horizon when nothing is held
  int touching_ = 0;                           // touches under way
  WorkerStats stats_;
};

Result<std::unique_ptr<Worker>> Worker::Create(Queue& queue, WorkerOptions options) {
  if (options.threads < 1 || options.threads > kMaxThreads) {
    return InvalidArgument("threads must be 1.." + std::to_string(kMaxThreads));
  }
  if (options.reserve_wait_ms <= 0) return InvalidArgument("reserve_wait_ms must be > 0");
  if (options.reserve_retry_ms <= 0) return InvalidArgument("reserve_retry_ms must be > 0");
  return std::unique_ptr<Worker>(new Worker(std::make_unique<Impl>(queue, std::move(options))));
}

Worker::Worker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Worker::~Worker() = default;

Status Worker::Handle(std::string topic, Handler handler, TopicOptions options) {
  return impl_->Handle(std::move(topic), std::move(handler), options);
}
Status Worker::Start() { return impl_->Start(); }
void Worker::Stop(int64_t drain_ms) { impl_->Stop(drain_ms); }
WorkerStats Worker::Stats() const { return impl_->Stats(); }

Status Worker::Impl::Handle(std::string topic, Handler handler, TopicOptions options) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (started_ || stopping_)
      return InvalidArgument("Handle after Start: register handlers first");
  }
  if (Status s = ValidateTopic(topic); !s.ok()) return s;
  if (!handler) return InvalidArgument("the handler of topic '" + topic + "' is empty");
  if (Status s = CheckBackoff(options.backoff); !s.ok()) return s;
  if (topic_index_.count(topic) != 0) {
    return InvalidArgument("topic '" + topic + "' already has a handler");
  }
  Topic t;
  t.name = topic;
  t.handler = std::move(handler);
  t.limit =
      options.concurrency == 0 ? options_.threads : std::min(options.concurrency, options_.threads);
  t.options = options;
  topic_index_.emplace(std::move(topic), topics_.size());
  topics_.push_back(std::move(t));
  return Status();
}

Status Worker::Impl::Start() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (started_ || stopping_) return InvalidArgument("a worker starts once");
    if (topics_.empty()) return InvalidArgument("no handlers: call Handle before Start");
    started_ = true;
  }
  if (!clock_->IsRealTime()) {
    clock_token_ = clock_->Subscribe([this] {
      std::lock_guard<std::mutex> l(mu_);
      clock_moves_.fetch_add(1, std::memory_order_relaxed);
      timer_cv_.notify_all();
      stop_cv_.notify_all();
    });
  }
  try {
    timer_ = std::thread([this] { RunTimer(); });
    threads_.reserve(options_.threads);
    for (uint32_t i = 0; i < options_.threads; ++i) threads_.emplace_back([this] { RunThread(); });
  } catch (const std::system_error& e) {
    {
      std::lock_guard<std::mutex> l(mu_);
      stopping_ = true;  // the destructor joins what did start
      quit_ = true;
    }
    work_cv_.notify_all();
    timer_cv_.notify_all();
    return Internal(std::string("cannot start the worker's threads: ") + e.what());
  }
  std::unique_lock<std::mutex> l(mu_);
  Pump(l);
  return Status();
}

bool Worker::Impl::ShouldReopenLocked() const {
  if (!reserving_ || ticket_ == 0 || stopping_ || BusyLocked() >= options_.threads + ahead_) {
    return false;
  }
  size_t open = 0;
  for (bool in : open_topics_) open += in ? 1 : 0;
  if (open >= kMaxReserveTopics) return false;  // a full list rotates instead
  for (size_t i = 0; i < topics_.size(); ++i) {
    if (!open_topics_[i] && topics_[i].busy() < topics_[i].limit + ahead_) return true;
  }
  return false;
}

bool Worker::Impl::BuildReserve(ReserveRequest* req) {
  if (!started_ || stopping_ || reserving_ || retry_pending_) return false;
  // Slots are free once their jobs' handlers return; their acks may still
  // be on the way, up to a thread's worth. Beyond the threads, the worker
  // reads ahead as many jobs as it handled in the last kAheadWindowMs: jobs
  // that wait here about that long at its pace (slow handlers: none).
  const size_t busy = BusyLocked();
  const size_t slots = size_t{options_.threads} + ahead_;
  const size_t cap = slots + options_.threads;
  if (busy >= slots || held_.size() >= cap) return false;
  // Every thread has a job in hand: top the read-ahead up once half of it
  // is gone, not one job at a time.
  if (busy >= options_.threads && slots - busy < (size_t{ahead_} + 1) / 2) return false;
  uint64_t room = 0;
  const size_t n = topics_.size();
  open_topics_.assign(n, false);
  for (size_t i = 0; i < n && req->topics.size() < kMaxReserveTopics; ++i) {
    const size_t k = (rotation_ + i) % n;
    const Topic& t = topics_[k];
    const uint64_t limit = uint64_t{t.limit} + ahead_;
    if (t.busy() >= limit) continue;
    room += limit - t.busy();
    req->topics.push_back(t.name);
    open_topics_[k] = true;
  }
  if (room == 0) return false;
  rotation_ = (rotation_ + 1) % n;
  req->count = static_cast<uint32_t>(
      std::min<uint64_t>({slots - busy, cap - held_.size(), room, kMaxReserveCount}));
  req->wait_ms = options_.reserve_wait_ms;
  return true;
}

void Worker::Impl::Pump(std::unique_lock<std::mutex>& l) {
  for (;;) {
    if (ShouldReopenLocked()) {
      // A topic that had no room when the open reserve was made has room
      // now: withdraw it and ask again for every topic with room.
      const uint64_t open_seq = reserve_seq_;
      const uint64_t open_ticket = ticket_;
      l.unlock();
      const bool cancelled = queue_.CancelReserve(open_ticket);
      l.lock();
      if (!cancelled) return;  // answered: its callback pumps
      if (reserving_ && reserve_seq_ == open_seq) reserving_ = false;
      stop_cv_.notify_all();
    }
    ReserveRequest req;
    if (!BuildReserve(&req)) return;
    reserving_ = true;
    const uint64_t seq = ++reserve_seq_;
    ticket_ = 0;
    ++stats_.reserves;
    l.unlock();
    tls_pumping = this;
    const uint64_t ticket = queue_.ReserveAsync(
        req, [this, seq](Result<Deliveries> r) { OnReserved(seq, std::move(r)); });
    tls_pumping = nullptr;
    l.lock();
    if (!reserving_ || reserve_seq_ != seq) continue;  // answered already: top up
    ticket_ = ticket;
    // Open and waiting. Once more round the loop: a topic may have gained
    // room while it was being opened, unseen by a Pump that found no ticket
    // to cancel yet.
    if (!stopping_) continue;
    // Stop came while we were opening it, and found no ticket to cancel.
    l.unlock();
    const bool cancelled = queue_.CancelReserve(ticket);
    l.lock();
    if (cancelled && reserving_ && reserve_seq_ == seq) {
      reserving_ = false;
      stop_cv_.notify_all();
    }
    return;
  }
}

void Worker::Impl::OnReserved(uint64_t seq, Result<Deliveries> result) {
  const int64_t now = clock_->MonotonicMs();
  const bool inline_answer = tls_pumping == this;
  {
    std::lock_guard<std::mutex> l(mu_);
    now_ = std::max(now_, now);
    if (reserve_seq_ == seq) {
      reserving_ = false;
      ticket_ = 0;
    }
    if (!result.ok()) {
      NoteError(result.status());
      retry_pending_ = true;
      if (IsShuttingDown(result.status())) {
        // The server ended the wait because it is going away: reserve again
        // at once (the network client has dropped its connections to it, so
        // this reconnects, to another server if it has one); a failure after
        // that backs off from the base as usual.
        retry_at_ = now;
        retry_ms_ = options_.reserve_retry_ms;
      } else {
        retry_at_ = now + retry_ms_;
        retry_ms_ =
            std::min(retry_ms_ * 2, std::max(kMaxReserveRetryMs, options_.reserve_retry_ms));
      }
      timer_kick_ = true;
      timer_cv_.notify_all();
    } else if (stopping_) {
      for (Delivery& d : *result) give_back_.push_back(std::move(d));
    } else {
      retry_ms_ = options_.reserve_retry_ms;
      if (result->empty() && inline_answer) {
        // Answered at once with nothing despite the wait: ask again later,
        // not in a loop.
        retry_pending_ = true;
        retry_at_ = now + retry_ms_;
        timer_kick_ = true;
        timer_cv_.notify_all();
      }
      for (Delivery& d : *result) {
        auto t = topic_index_.find(d.topic);
        if (t == topic_index_.end()) {  // not asked for: a store's bug
          NoteError(Internal("reserve handed out job '" + d.id + "' of topic '" + d.topic +
                             "', which the worker did not ask for"));
          give_back_.push_back(std::move(d));
          continue;
        }
        Held& h = held_.emplace_back();
        h.topic = t->second;
        h.held_since = now;
        h.touch_at = now + TouchInterval(d);
        idle_interval_ = TouchInterval(d);
        h.delivery = std::move(d);
        ++topics_[h.topic].held;
        waiting_.push_back(std::prev(held_.end()));
        if (h.touch_at < timer_armed_) {
          timer_kick_ = true;
          timer_cv_.notify_all();
        }
      }
      WakeLocked();
    }
    // No Queue call here: this may be the queue's own thread (a network
    // client's I/O thread, which serves every waiting reserve) or a caller
    // of the queue inside its call. Give-backs and the next reserve are
    // left to the timer; answered inside Pump's own call, the next reserve
    // is Pump's (its loop goes on).
    if (!inline_answer && !stopping_) pump_due_ = true;
    if (pump_due_ || !give_back_.empty()) {
      timer_kick_ = true;
      timer_cv_.notify_all();
    }
    if (stopping_) stop_cv_.notify_all();
  }
}

void Worker::Impl::Unreserve(const std::vector<Delivery>& jobs) {
  for (const Delivery& d : jobs) {
    Status s = queue_.Unreserve(d.id, d.receipt);
    std::lock_guard<std::mutex> l(mu_);
    ++stats_.given_back;
    if (!s.ok()) NoteError(s);
  }
}

void Worker::Impl::NoteError(const Status& s) {
  ++stats_.errors;
  stats_.last_error = s.ToString();
}

bool Worker::Impl::PickLocked(HeldIt* it) {
  for (auto w = waiting_.begin(); w != waiting_.end(); ++w) {
    Topic& t = topics_[(*w)->topic];
    if (t.running >= t.limit) continue;
    *it = *w;
    waiting_.erase(w);
    return true;
  }
  return false;
}

void Worker::Impl::WakeLocked() {
  if (waiting_.empty() || sleeping_ == 0 || waking_ > 0) return;
  ++waking_;
  work_cv_.notify_one();
}

void Worker::Impl::RunThread() {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    HeldIt it;
    for (;;) {
      if (quit_) return;
      if (!stopping_ && PickLocked(&it)) break;
      if (!acks_.empty() && !flushing_) {  // deferred acks go before this thread sleeps
        FlushAcks(l);
        continue;
      }
      ++sleeping_;
      work_cv_.wait(l);
      --sleeping_;
      if (waking_ > 0) --waking_;
    }
    it->state.store(State::kRunning, std::memory_order_relaxed);
    ++topics_[it->topic].running;
    ++running_;
    // More to start: one more thread, which wakes the next if there is
    // still more (one at a time, so fast handlers keep few threads awake).
    WakeLocked();
    l.unlock();
    const Outcome outcome = RunHandler(topics_[it->topic].handler, it->delivery);
    Finished(it, outcome, l);
    Pump(l);
  }
}

Outcome Worker::Impl::RunHandler(const Handler& handler, const Delivery& d) {
  try {
    return handler(d);
  } catch (const std::exception& e) {
    return Outcome::Retry(e.what());
  } catch (...) {
    return Outcome::Retry("the handler threw something that is not a std::exception");
  }
}

double Worker::Impl::Random() {
  std::lock_guard<std::mutex> l(rng_mu_);
  if (options_.random) return options_.random();
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
}

void Worker::Impl::Finished(HeldIt it, const Outcome& outcome, std::unique_lock<std::mutex>& l) {
  const Delivery& d = it->delivery;
  const Topic& topic = topics_[it->topic];
  Ack ack;
  switch (outcome.kind()) {
    case Outcome::Kind::kSuccess:
      ack.kind = Ack::Kind::kFinish;
      break;
    case Outcome::Kind::kRetry:
      ack.kind = Ack::Kind::kRelease;
      ack.delay_ms = outcome.delay_ms() >= 0
                         ? outcome.delay_ms()
                         : BackoffDelayMs(topic.options.backoff, d.attempts, Random());
      ack.text = outcome.text();
      break;
    case Outcome::Kind::kBury:
      ack.kind = Ack::Kind::kBury;
      ack.text = outcome.text();
      break;
  }
  // Stop turns kRunning into kAbandoned (under mu_) if it gives the job
  // back first; then the outcome is not ours to apply.
  State running = State::kRunning;
  const bool abandoned = !it->state.compare_exchange_strong(running, State::kAcking);
  l.lock();
  Topic& t = topics_[it->topic];
  --t.running;
  --running_;
  ++stats_.handled;
  if (abandoned) {
    --t.held;
    held_.erase(it);
    if (stopping_) stop_cv_.notify_all();
    return;
  }
  ++t.acking;
  ++acking_;
  // Copies: the timer may touch the job while its ack waits for a resend,
  // and on_acknowledged gets the delivery.
  ack.id = it->delivery.id;
  ack.receipt = it->delivery.receipt;
  acks_.push_back(std::move(ack));
  ack_jobs_.push_back(it);
  if (!flushing_ && !DeferAckLocked()) FlushAcks(l);
}

void Worker::Impl::PaceLocked(int64_t now, size_t done) {
  if (now - pace_start_ >= kAheadWindowMs) {
    const bool last = now - pace_start_ < 2 * kAheadWindowMs;  // the window just ended
    ahead_ = last ? std::min<uint32_t>(pace_done_, kMaxReserveCount) : 0;
    pace_start_ = now;
    pace_done_ = 0;
  }
  pace_done_ += static_cast<uint32_t>(done);
}

bool Worker::Impl::DeferAckLocked() {
  // On a manual clock the timer would send them only when the clock moves.
  if (stopping_ || ahead_ == 0 || acks_.size() >= kAckBatch || !clock_->IsRealTime()) {
    return false;
  }
  bool next_job = false;
  for (HeldIt w : waiting_) {
    const Topic& t = topics_[w->topic];
    if (t.running < t.limit) {
      next_job = true;
      break;
    }
  }
  if (!next_job) return false;
  if (acks_.size() == 1) {
    ack_due_ = now_ + kAckDelayMs;
    if (ack_due_ < timer_armed_) {
      timer_kick_ = true;
      timer_cv_.notify_all();
    }
  }
  return true;
}

void Worker::Impl::FlushAcks(std::unique_lock<std::mutex>& l) {
  flushing_ = true;
  ack_due_ = kNever;
  std::vector<Ack> batch;
  std::vector<HeldIt> jobs;
  while (!acks_.empty()) {
    batch.swap(acks_);
    jobs.swap(ack_jobs_);
    // This thread is away for the queue's answer (a round trip, over the
    // network): jobs waiting here need another.
    WakeLocked();
    ++stats_.ack_batches;
    l.unlock();
    std::vector<Status> answers = queue_.Acknowledge(batch);
    const int64_t now = clock_->MonotonicMs();  // not under mu_ (lock order)
    l.lock();
    now_ = std::max(now_, now);
    PaceLocked(now, jobs.size());
    answers.resize(jobs.size(), Internal("Acknowledge answered too few"));
    AnsweredLocked(batch, jobs, answers, now, l);
    batch.clear();
    jobs.clear();
    // Slots freed: top up before the next batch.
    Pump(l);
  }
  flushing_ = false;
}

void Worker::Impl::AnsweredLocked(std::vector<Ack>& batch, const std::vector<HeldIt>& jobs,
                                  const std::vector<Status>& answers, int64_t now,
                                  std::unique_lock<std::mutex>& l) {
  std::vector<Concluded> done;
  for (size_t k = 0; k < jobs.size(); ++k) {
    const Status& s = answers[k];
    if (s.ok()) {
      ack_retry_ms_ = 0;
      switch (batch[k].kind) {
        case Ack::Kind::kFinish:
          ++stats_.succeeded;
          break;
        case Ack::Kind::kRelease:
          ++stats_.retried;
          if (ReleaseBuries(jobs[k]->delivery)) ++stats_.exhausted;
          break;
        case Ack::Kind::kBury:
          ++stats_.buried;
          break;
      }
    } else {
      NoteError(s);
      if (Transient(s) && !drain_over_) {
        jobs[k]->resend = true;
        retry_.push_back({std::move(batch[k]), jobs[k], s});
        continue;
      }
    }
    done.push_back({jobs[k], batch[k].kind, s});
  }
  if (!retry_.empty() && ack_retry_at_ == kNever) {
    ack_retry_ms_ = ack_retry_ms_ == 0 ? kAckRetryMs : std::min(ack_retry_ms_ * 2, kMaxAckRetryMs);
    ack_retry_at_ = now + ack_retry_ms_;
    if (ack_retry_at_ < timer_armed_) {
      timer_kick_ = true;
      timer_cv_.notify_all();
    }
  }
  Conclude(done, l);
}

void Worker::Impl::Conclude(std::vector<Concluded>& done, std::unique_lock<std::mutex>& l) {
  if (done.empty()) return;
  if (options_.on_acknowledged) {
    // The jobs stay held (kAcking, not in retry_: nobody else reads or
    // erases them) until reported, so Stop returns only after.
    l.unlock();
    for (const Concluded& c : done) options_.on_acknowledged(c.job->delivery, c.kind, c.answer);
    l.lock();
  }
  for (const Concluded& c : done) {
    Topic& t = topics_[c.job->topic];
    --t.acking;
    --t.held;
    --acking_;
    held_.erase(c.job);
  }
  done.clear();
  if (stopping_) stop_cv_.notify_all();
}

void Worker::Impl::ResendLocked() {
  for (Retry& r : retry_) {
    r.job->resend = false;
    acks_.push_back(std::move(r.ack));
    ack_jobs_.push_back(r.job);
  }
  retry_.clear();
  ack_retry_at_ = kNever;
}

void Worker::Impl::RunTimer() {
  struct Touch {
    std::string id, receipt;
    int64_t sent_at;
  };
  std::vector<Touch> touches;
  std::vector<Delivery> give_back;
  for (;;) {
    const uint64_t seen = clock_moves_.load(std::memory_order_relaxed);
    const int64_t now = clock_->MonotonicMs();
    bool pump = false;
    bool flush = false;
    touches.clear();
    give_back.clear();
    {
      std::unique_lock<std::mutex> l(mu_);
      if (quit_) return;
      now_ = std::max(now_, now);
      timer_kick_ = false;
      if (retry_pending_ && now >= retry_at_) {
        retry_pending_ = false;
        pump = true;
      }
      if (pump_due_) {
        pump_due_ = false;
        pump = true;
      }
      if (!give_back_.empty()) {
        give_back.swap(give_back_);
        giving_back_ = true;
      }
      int64_t next = retry_pending_ ? retry_at_ : kNever;
      for (Held& h : held_) {
        const State st = h.state.load();
        // Stop's drain included: a running job keeps its reservation until
        // its handler returns or Stop gives it back (kAbandoned); one whose
        // ack waits to be sent again, until the queue takes it.
        if (h.lost || st == State::kAbandoned || (st == State::kAcking && !h.resend)) continue;
        if (h.touch_at <= now) {
          touches.push_back({h.delivery.id, h.delivery.receipt, now});
          h.touch_at = now + TouchInterval(h.delivery);
        }
        next = std::min(next, h.touch_at);
      }
      if (!retry_.empty()) {
        if (now >= ack_retry_at_) {
          ResendLocked();  // a thread sending acks now takes them in its loop
          flush = !flushing_;
        } else {
          next = std::min(next, ack_retry_at_);
        }
      }
      if (!acks_.empty() && !flushing_) {
        if (now >= ack_due_) {
          flush = true;
        } else {
          next = std::min(next, ack_due_);
        }
      }
      if (touches.empty() && !pump && !flush && give_back.empty()) {
        timer_armed_ = next != kNever ? next : now + idle_interval_;
        if (clock_->IsRealTime()) {
          timer_cv_.wait_for(l, std::chrono::milliseconds(timer_armed_ - now),
                             [&] { return quit_ || timer_kick_; });
        } else {
          timer_cv_.wait(l, [&] {
            return quit_ || timer_kick_ || clock_moves_.load(std::memory_order_relaxed) != seen;
          });
        }
        continue;
      }
      touching_ = static_cast<int>(touches.size());
    }
    for (const Touch& t : touches) {
      Status s = queue_.Touch(t.id, t.receipt);
      const int64_t answered = clock_->MonotonicMs();  // not under mu_ (lock order)
      std::lock_guard<std::mutex> l(mu_);
      --touching_;
      Touched(t.id, t.receipt, t.sent_at, answered, s);
      if (stopping_) stop_cv_.notify_all();
    }
    if (!give_back.empty()) {
      Unreserve(give_back);
      std::lock_guard<std::mutex> l(mu_);
      giving_back_ = false;
      stop_cv_.notify_all();
    }
    if (flush) {  // a handler outran the acks it left waiting
      std::unique_lock<std::mutex> l(mu_);
      if (!acks_.empty() && !flushing_) FlushAcks(l);
    }
    if (pump) {
      std::unique_lock<std::mutex> l(mu_);
      Pump(l);
    }
  }
}

void Worker::Impl::Touched(const std::string& id, const std::string& receipt, int64_t sent_at,
                           int64_t now, const Status& s) {
  auto it = std::find_if(held_.begin(), held_.end(), [&](const Held& h) {
    return h.delivery.id == id && h.delivery.receipt == receipt;
  });
  const State st = it == held_.end() ? State::kAbandoned : it->state.load();
  if (s.ok()) {
    ++stats_.touched;
    if (st == State::kAbandoned) return;
    it->held_since = std::max(it->held_since, sent_at);
    it->touch_retry_ms = 0;
    return;
  }
  // Stop gave the job back, or its outcome was applied, while the touch
  // was on its way: its answer is no news.
  if (st == State::kAbandoned || (st == State::kAcking && DeliveryOver(s))) return;
  NoteError(s);
  Held& h = *it;
  if (DeliveryOver(s)) {
    h.lost = true;
    return;
  }
  // Transient, as far as the worker can tell: try again soon, before the
  // reservation runs out (and, past it, until the queue says it is over).
  h.touch_retry_ms = h.touch_retry_ms == 0
                         ? kTouchRetryMs
                         : std::min(h.touch_retry_ms * 2, TouchInterval(h.delivery));
  const int64_t left = h.held_since + h.delivery.ttr_ms - now;
  h.touch_at = now + std::max<int64_t>(
                         1, left > 0 ? std::min(h.touch_retry_ms, left / 2) : h.touch_retry_ms);
}

template <typename Pred>
bool Worker::Impl::WaitStop(Pred pred, int64_t deadline) {
  for (;;) {
    const uint64_t seen = clock_moves_.load(std::memory_order_relaxed);
    const int64_t now = clock_->MonotonicMs();
    std::unique_lock<std::mutex> l(mu_);
    if (pred()) return true;
    if (now >= deadline) return false;
    if (clock_->IsRealTime()) {
      const int64_t wait = deadline == kNever ? 1000 : std::min<int64_t>(deadline - now, 1000);
      stop_cv_.wait_for(l, std::chrono::milliseconds(wait));
    } else {
      stop_cv_.wait(l,
                    [&] { return pred() || clock_moves_.load(std::memory_order_relaxed) != seen; });
    }
  }
}

void Worker::Impl::Stop(int64_t drain_ms) {
  const int64_t start = clock_->MonotonicMs();
  const int64_t deadline =
      drain_ms <= 0 ? start : (drain_ms > kNever - start ? kNever : start + drain_ms);
  uint64_t ticket = 0;
  {
    std::unique_lock<std::mutex> l(mu_);
    if (stopping_) return;
    stopping_ = true;
    if (!started_) return;
    ticket = reserving_ ? ticket_ : 0;
    if (!acks_.empty() && !flushing_) FlushAcks(l);  // no more waits for a batch
  }
  work_cv_.notify_all();
  if (ticket != 0 && queue_.CancelReserve(ticket)) {
    std::lock_guard<std::mutex> l(mu_);
    reserving_ = false;
  }
  // No reserve open, no touch under way, what a reserve answered during the
  // Stop given back (by the timer): what is held is final.
  WaitStop([this] { return !reserving_ && touching_ == 0 && give_back_.empty() && !giving_back_; },
           kNever);
  std::vector<Delivery> unstarted;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (HeldIt it : waiting_) {
      unstarted.push_back(std::move(it->delivery));
      --topics_[it->topic].held;
      held_.erase(it);
    }
    waiting_.clear();
  }
  Unreserve(unstarted);
  // Handlers finish, acks are sent (and sent again), jobs are touched.
  WaitStop([this] { return held_.empty(); }, deadline);
  // Past the deadline: give back the jobs of the handlers still running,
  // give up the acks still failing.
  std::vector<Delivery> running;
  {
    std::unique_lock<std::mutex> l(mu_);
    drain_over_ = true;
    for (Held& h : held_) {
      State was = State::kRunning;
      if (!h.state.compare_exchange_strong(was, State::kAbandoned)) continue;
      running.push_back(h.delivery);
    }
    std::vector<Concluded> given_up;
    for (Retry& r : retry_) {
      r.job->resend = false;
      Status s(r.last.code(),
               "the worker stopped before the queue took the outcome; the last try: " +
                   r.last.message());
      NoteError(s);
      given_up.push_back({r.job, r.ack.kind, std::move(s)});
    }
    retry_.clear();
    ack_retry_at_ = kNever;
    Conclude(given_up, l);
  }
  for (const Delivery& d : running) {
    Status s = queue_.Release(d.id, d.receipt, 0, kStoppedError);
    std::lock_guard<std::mutex> l(mu_);
    ++stats_.given_back;
    if (!s.ok()) NoteError(s);
  }
  // Outcomes being applied now (kAcking) end with their queue call.
  WaitStop(
      [this] {
        return std::all_of(held_.begin(), held_.end(),
                           [](const Held& h) { return h.state.load() == State::kAbandoned; });
      },
      kNever);
  {
    std::lock_guard<std::mutex> l(mu_);
    quit_ = true;
  }
  work_cv_.notify_all();
  timer_cv_.notify_all();
}

WorkerStats Worker::Impl::Stats() const {
  std::lock_guard<std::mutex> l(mu_);
  WorkerStats s = stats_;
  s.running = running_;
  s.held = waiting_.size();
  return s;
}

}  // namespace delayq
