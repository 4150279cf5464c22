package delayq

// Worker runs a handler per topic over a Client, as the C++ delayq::Worker does
// (include/delayq/worker.h in the delayq repository; its defaults, backoff, touches, batched
// acknowledgements and stop order). How it works:
//
// Every job the worker holds is a heldJob in held, from the reserve that brought it until its
// outcome has been applied (or it was given back). Jobs not yet started wait in `waiting`, in
// the order the server gave them; one starts (a goroutine of its own) as soon as its topic has
// a free slot. A slot is a job waiting or running: the reserve loop asks for the free slots.
//
// The reserve loop keeps at most one RESERVE open (long-poll, ReserveWait), over the topics
// with room, for as many jobs as there are free slots (at most 1000). When a topic that was
// left out (it was full) gains room while the reserve waits, the reserve is withdrawn and made
// again over every topic with room.
//
// Outcomes become acks in `acks`. One goroutine at a time sends them (flushing), as one
// pipeline: the handler goroutines that finish meanwhile add theirs to the next batch and end.
// An ack answered unavailable or internal (a lost reply, a server out of reach) waits in
// `retry` and is sent again after 100 ms, doubling to 5 s; its job is touched meanwhile. A
// final answer concludes a job: OnAcknowledged, then it leaves held.
//
// The timer goroutine touches held jobs every half TTR (a failed touch sooner), all touches
// due at once in one pipeline, and moves acks from retry back to acks when their time comes.
//
// State shared by these goroutines is under mu; no Client call is made with mu held.

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"time"
)

// AckKind is what a handler's outcome asked of the queue.
type AckKind int

const (
	AckFinish  AckKind = iota // success: FINISH
	AckRelease                // a retry: RELEASE (the server buries a job out of attempts)
	AckBury                   // BURY
)

func (k AckKind) String() string {
	switch k {
	case AckFinish:
		return "finish"
	case AckRelease:
		return "release"
	case AckBury:
		return "bury"
	}
	return fmt.Sprintf("AckKind(%d)", int(k))
}

// StoppedError is the last_error of a job whose handler still ran when Run's drain ended.
const StoppedError = "worker stopped while the handler ran"

const (
	maxConcurrency  = 1024
	maxReserveRetry = 5 * time.Second
	touchRetryBase  = 100 * time.Millisecond
	ackRetryBase    = 100 * time.Millisecond
	ackRetryMax     = 5 * time.Second
)

// WorkerOptions configure a Worker. Zero fields take the defaults.
type WorkerOptions struct {
	// Handlers running at once, over all topics: 1..1024. Default: 4.
	Concurrency int
	// How long one reserve waits for a job before the worker asks again (at most 24 h).
	// Default: 30 s.
	ReserveWait time.Duration
	// After a reserve fails (no server answered), the worker asks again after this, doubling
	// up to 5 s while it keeps failing. A wait a server's shutdown ended is asked again at
	// once (on the next server). Default: 100 ms.
	ReserveRetry time.Duration
	// How long Run lets running handlers finish once its context ends, their jobs touched
	// meanwhile; the jobs of handlers still running then are released at once with
	// StoppedError. Default: 30 s. Negative: no drain.
	Drain time.Duration
	// Called once per handler outcome with the server's final answer to its ack: nil; an
	// ErrNotFound or ErrStaleReceipt (the job was gone or no longer this delivery's: its TTR
	// ran out and another worker has it); or, when the drain ended first, the last transient
	// error. kind is what the outcome asked (an AckRelease answered nil for which
	// job.ReleaseBuries() left the job buried). Not called for jobs the worker gave back. It
	// may run on several goroutines at once and must be quick: other acks wait behind it.
	OnAcknowledged func(job *Delivery, kind AckKind, err error)
	// The backoff's jitter: a number in [0, 1] (clamped) per retry. Called one at a time.
	// Default: uniform random, seeded per worker. Tests set a constant.
	Random func() float64
}

// TopicOptions configure one topic's handler. Zero fields take the defaults.
type TopicOptions struct {
	// Handlers of this topic running at once, at most. 0: up to the worker's Concurrency.
	Concurrency int
	// The zero Backoff{}: 1 s, x2, at most 10 min (DefaultBackoff). Any other value is taken
	// as written, every field (Backoff{Factor: 1}: retried at once); Handle refuses one that
	// is not valid.
	Backoff Backoff
}

// WorkerStats are a worker's figures since NewWorker.
type WorkerStats struct {
	Handled    uint64 // handlers that returned or panicked
	Succeeded  uint64 // ... with nil, and the finish was accepted
	Retried    uint64 // ... with a retry (or an error, a panic), and released
	Exhausted  uint64 // ... of those, the ones the server buried: their MaxAttempts used up
	Buried     uint64 // ... with Bury, and buried
	Touched    uint64 // touches accepted
	Running    uint64 // handlers running now
	Held       uint64 // jobs reserved and not yet started
	Reserves   uint64 // reserves made
	AckBatches uint64 // ack pipelines sent (each carries 1 or more outcomes)
	GivenBack  uint64 // jobs given back by the stop (Unreserve, or Release with StoppedError)
	// Client calls the worker made that failed (each try), and the last one's error.
	Errors    uint64
	LastError string
}

// Worker runs handlers for topics. Make one with NewWorker, register handlers with Handle,
// then Run it.
type Worker struct {
	client *Client
	opts   WorkerOptions
	topics []*topicEntry
	byName map[string]*topicEntry
	// The first error of Handle, returned by Run.
	handleErr error

	rngMu sync.Mutex
	rng   *rand.Rand

	mu            sync.Mutex
	started       bool
	stopping      bool
	drainOver     bool // the drain's deadline passed: acks are not sent again
	held          map[*heldJob]struct{}
	waiting       []*heldJob
	running       int
	acking        int
	acks          []*heldJob // outcomes to send, in the order their handlers returned
	flushing      bool       // a goroutine is sending acks
	retry         []*heldJob // acks answered with a transient error, to send again at ackRetryAt
	ackRetryAt    time.Time
	ackRetryDelay time.Duration // the last resend's delay; 0 once an ack is taken
	// The open reserve.
	reserveCancel context.CancelFunc
	openTopics    map[*topicEntry]bool
	rotation      int // first topic of the next reserve (over 100 topics)
	// The timer.
	timerArmed   time.Time
	idleInterval time.Duration // how far ahead the timer sleeps when nothing is held
	touching     int           // touch pipelines under way
	changed      chan struct{} // closed and replaced when held shrinks while stopping
	stats        WorkerStats

	wakeReserve chan struct{} // slots freed, or stopping
	kickTimer   chan struct{} // an earlier deadline
	baseCtx     context.Context

	// Tests: called before each ack batch is sent, without mu.
	beforeAckBatch func(n int)
}

type topicEntry struct {
	name    string
	handler HandlerFunc
	backoff Backoff
	limit   int
	// GUARDED_BY(Worker.mu):
	held    int // jobs of this topic held (any state)
	running int // of which running their handler
	acking  int // of which done, their outcome not yet acknowledged
}

// busy is the slots of this topic taken: jobs waiting or running.
func (t *topicEntry) busy() int { return t.held - t.acking }

type jobState int

const (
	stateWaiting   jobState = iota // reserved, not started: in waiting
	stateRunning                   // its handler runs
	stateAcking                    // its handler returned; its ack waits, or is on its way
	stateAbandoned                 // given back while its handler ran
)

type heldJob struct {
	d     *Delivery
	topic *topicEntry
	// GUARDED_BY(Worker.mu):
	state      jobState
	touchAt    time.Time     // its next touch (or touch retry)
	heldSince  time.Time     // its reservation last known to start a full TTR
	touchRetry time.Duration // the last failed touch's retry delay; 0: none failed
	lost       bool          // a touch found the delivery over: touch no more
	resend     bool          // in retry, its ack to be sent again: touched meanwhile
	ack        ackCmd
	lastErr    error // the last answer to its ack
	cancel     context.CancelFunc
}

// NewWorker makes a worker over client, not started. Errors in o are returned by Run.
func NewWorker(client *Client, o WorkerOptions) *Worker {
	if o.Concurrency == 0 {
		o.Concurrency = 4
	}
	if o.ReserveWait == 0 {
		o.ReserveWait = 30 * time.Second
	}
	if o.ReserveRetry == 0 {
		o.ReserveRetry = 100 * time.Millisecond
	}
	if o.Drain == 0 {
		o.Drain = 30 * time.Second
	}
	return &Worker{
		client:       client,
		opts:         o,
		byName:       map[string]*topicEntry{},
		rng:          rand.New(rand.NewSource(time.Now().UnixNano())),
		held:         map[*heldJob]struct{}{},
		changed:      make(chan struct{}),
		wakeReserve:  make(chan struct{}, 1),
		kickTimer:    make(chan struct{}, 1),
		idleInterval: DefaultTTR / 2,
	}
}

// Handle registers the handler of topic. At most one TopicOptions. Call before Run. Errors
// (ErrInvalidArgument): a bad topic name, a nil handler, bad options, a topic that already has
// a handler, a worker already running; Run returns the first of them too, so a program may
// leave Handle's error unchecked.
func (w *Worker) Handle(topic string, handler HandlerFunc, opts ...TopicOptions) error {
	err := w.handle(topic, handler, opts)
	if err != nil && w.handleErr == nil {
		w.handleErr = err
	}
	return err
}

func (w *Worker) handle(topic string, handler HandlerFunc, opts []TopicOptions) error {
	w.mu.Lock()
	started := w.started
	w.mu.Unlock()
	if started {
		return invalid("Handle after Run: register handlers first")
	}
	if err := validateTopic(topic); err != nil {
		return err
	}
	if handler == nil {
		return invalid("the handler of topic '" + topic + "' is nil")
	}
	if len(opts) > 1 {
		return invalid("Handle takes at most one TopicOptions")
	}
	var o TopicOptions
	if len(opts) == 1 {
		o = opts[0]
	}
	backoff := o.Backoff.withDefaults()
	if err := backoff.check(); err != nil {
		return err
	}
	if o.Concurrency < 0 {
		return invalid(fmt.Sprintf("concurrency: must be >= 0, got %d", o.Concurrency))
	}
	if _, dup := w.byName[topic]; dup {
		return invalid("topic '" + topic + "' already has a handler")
	}
	limit := w.opts.Concurrency
	if o.Concurrency > 0 && o.Concurrency < limit {
		limit = o.Concurrency
	}
	t := &topicEntry{name: topic, handler: handler, backoff: backoff, limit: limit}
	w.topics = append(w.topics, t)
	w.byName[topic] = t
	return nil
}

func (w *Worker) check() error {
	o := w.opts
	switch {
	case o.Concurrency < 1 || o.Concurrency > maxConcurrency:
		return invalid(fmt.Sprintf("concurrency: must be 1..1024, got %d", o.Concurrency))
	case o.ReserveWait < 0 || o.ReserveWait > maxWait:
		return invalid(fmt.Sprintf("reserve_wait: must be > 0 and at most 24h, got %v", o.ReserveWait))
	case o.ReserveRetry < 0:
		return invalid(fmt.Sprintf("reserve_retry: must be > 0, got %v", o.ReserveRetry))
	case w.handleErr != nil:
		return w.handleErr
	case len(w.topics) == 0:
		return invalid("no handlers: call Handle before Run")
	}
	return nil
}

// Run reserves and handles jobs until ctx ends, then stops, in this order: no more reserves
// (the waiting one is withdrawn); jobs reserved but not started are given back at once, their
// attempt not counted (Unreserve); running handlers may finish, and their outcomes are sent,
// for up to WorkerOptions.Drain, their jobs touched meanwhile; the jobs of handlers still
// running then are released with delay 0 and StoppedError (the next worker gets them at once;
// the attempt counts: the handler did run), and their handlers' contexts are cancelled; their
// outcomes are ignored. Run returns once nothing is held, without waiting for such handlers.
//
// ctx's values reach the handlers' contexts; its end does not cancel them (the drain is theirs).
// Errors: ErrInvalidArgument for bad options or Handle calls, or a second Run; nil after a stop.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.check(); err != nil {
		return err
	}
	w.mu.Lock()
	if w.started {
		w.mu.Unlock()
		return invalid("a worker runs once")
	}
	w.started = true
	w.baseCtx = detached{ctx}
	w.mu.Unlock()
	reserveDone := make(chan struct{})
	timerQuit, timerDone := make(chan struct{}), make(chan struct{})
	go w.timerLoop(timerQuit, timerDone)
	go w.reserveLoop(reserveDone)
	<-ctx.Done()
	w.stop(reserveDone)
	close(timerQuit)
	<-timerDone
	return nil
}

// Stats are the worker's figures now; any goroutine may call it at any time.
func (w *Worker) Stats() WorkerStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stats
	s.Running = uint64(w.running)
	s.Held = uint64(len(w.waiting))
	return s
}

// detached keeps a context's values and drops its end: the handlers' base context.
type detached struct{ parent context.Context }

func (detached) Deadline() (time.Time, bool) { return time.Time{}, false }
func (detached) Done() <-chan struct{}       { return nil }
func (detached) Err() error                  { return nil }
func (d detached) Value(key any) any         { return d.parent.Value(key) }

func (w *Worker) random() float64 {
	w.rngMu.Lock()
	defer w.rngMu.Unlock()
	if w.opts.Random != nil {
		return w.opts.Random()
	}
	return w.rng.Float64()
}

// REQUIRES: mu.
func (w *Worker) noteErrorLocked(err error) {
	w.stats.Errors++
	w.stats.LastError = err.Error()
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// REQUIRES: mu. Wakes a stop waiting for held jobs to end.
func (w *Worker) notifyLocked() {
	if w.stopping {
		close(w.changed)
		w.changed = make(chan struct{})
	}
}

// --- reserving --------------------------------------------------------------------------

func (w *Worker) reserveLoop(done chan struct{}) {
	defer close(done)
	retryDelay := w.opts.ReserveRetry
	var retryAt time.Time
	for {
		req, ctx, ok := w.nextReserve(retryAt)
		if !ok {
			return
		}
		start := time.Now()
		jobs, err := w.client.Reserve(ctx, req)
		withdrawn := ctx.Err() != nil
		now := time.Now()
		w.mu.Lock()
		w.reserveCancel() // releases the context's resources
		w.reserveCancel = nil
		if err != nil {
			if withdrawn { // by the stop (the loop ends), or to add a topic that gained room
				w.mu.Unlock()
				continue
			}
			w.noteErrorLocked(err)
			if IsShuttingDown(err) {
				// The server ended the wait because it is going away (the client has
				// moved on from it, to another server if it has one): ask again at once; a
				// failure after that backs off from the base as usual.
				retryAt, retryDelay = now, w.opts.ReserveRetry
			} else {
				retryAt = now.Add(retryDelay)
				retryDelay = minDuration(retryDelay*2, maxDuration(maxReserveRetry, w.opts.ReserveRetry))
			}
			w.mu.Unlock()
			continue
		}
		retryDelay = w.opts.ReserveRetry
		if w.stopping { // answered as the stop came: not ours to start
			w.mu.Unlock()
			w.giveBack(jobs)
			return
		}
		if len(jobs) == 0 && now.Sub(start) < req.Wait/2 {
			retryAt = now.Add(retryDelay) // answered at once with nothing: not in a loop
		}
		w.holdLocked(jobs, now)
		w.mu.Unlock()
	}
}

// nextReserve waits until a reserve should open (not before retryAt) and opens its context;
// false when the worker stops.
func (w *Worker) nextReserve(retryAt time.Time) (ReserveOptions, context.Context, bool) {
	for {
		w.mu.Lock()
		if w.stopping {
			w.mu.Unlock()
			return ReserveOptions{}, nil, false
		}
		wait := time.Until(retryAt)
		if wait <= 0 {
			if req, ok := w.buildReserveLocked(); ok {
				ctx, cancel := context.WithCancel(context.Background())
				w.reserveCancel = cancel
				w.stats.Reserves++
				w.mu.Unlock()
				return req, ctx, true
			}
		}
		w.mu.Unlock()
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-w.wakeReserve:
			case <-t.C:
			}
			t.Stop()
		} else {
			<-w.wakeReserve
		}
	}
}

// buildReserveLocked: the reserve to open now, if any. REQUIRES: mu.
func (w *Worker) buildReserveLocked() (ReserveOptions, bool) {
	slots := w.opts.Concurrency
	busy := len(w.held) - w.acking
	// Slots are free once their handlers return; their acks may still be on the way, up to a
	// worker's worth.
	if busy >= slots || len(w.held) >= 2*slots {
		return ReserveOptions{}, false
	}
	room := 0
	topics := make([]string, 0, len(w.topics))
	open := map[*topicEntry]bool{}
	n := len(w.topics)
	for i := 0; i < n && len(topics) < maxTopics; i++ {
		t := w.topics[(w.rotation+i)%n]
		if t.busy() >= t.limit {
			continue
		}
		room += t.limit - t.busy()
		topics = append(topics, t.name)
		open[t] = true
	}
	if room == 0 {
		return ReserveOptions{}, false
	}
	w.rotation = (w.rotation + 1) % n
	w.openTopics = open
	count := minInt(minInt(slots-busy, 2*slots-len(w.held)), minInt(room, maxCount))
	return ReserveOptions{Topics: topics, Wait: w.opts.ReserveWait, Count: count}, true
}

// reopenLocked withdraws the open reserve when a topic it left out has room now, so that topic
// is not left out until the wait runs out; the reserve loop asks again. REQUIRES: mu.
func (w *Worker) reopenLocked() {
	if w.reserveCancel == nil || w.stopping || len(w.openTopics) >= maxTopics ||
		len(w.held)-w.acking >= w.opts.Concurrency {
		return
	}
	for _, t := range w.topics {
		if !w.openTopics[t] && t.busy() < t.limit {
			w.reserveCancel()
			return
		}
	}
}

// holdLocked takes a reserve's jobs and starts those whose topic has room. REQUIRES: mu.
func (w *Worker) holdLocked(jobs []*Delivery, now time.Time) {
	kick := false
	for _, d := range jobs {
		t := w.byName[d.Topic]
		if t == nil { // not asked for: a server's bug
			w.noteErrorLocked(&Error{Code: CodeInternal, Message: fmt.Sprintf(
				"reserve handed out job '%s' of topic '%s', which the worker did not ask for", d.ID, d.Topic)})
			go w.client.unreserveAll([]*Delivery{d})
			continue
		}
		h := &heldJob{d: d, topic: t, heldSince: now, touchAt: now.Add(touchInterval(d))}
		w.idleInterval = touchInterval(d)
		w.held[h] = struct{}{}
		t.held++
		w.waiting = append(w.waiting, h)
		kick = kick || h.touchAt.Before(w.timerArmed)
	}
	if kick {
		signal(w.kickTimer)
	}
	w.dispatchLocked()
}

func touchInterval(d *Delivery) time.Duration {
	ttr := d.TTR
	if ttr <= 0 {
		ttr = DefaultTTR
	}
	return maxDuration(time.Millisecond, ttr/2)
}

// dispatchLocked starts the waiting jobs whose topic has room. REQUIRES: mu.
func (w *Worker) dispatchLocked() {
	if w.stopping || len(w.waiting) == 0 {
		return
	}
	kept := w.waiting[:0]
	for _, h := range w.waiting {
		if h.topic.running >= h.topic.limit {
			kept = append(kept, h)
			continue
		}
		h.state = stateRunning
		h.topic.running++
		w.running++
		ctx, cancel := context.WithCancel(w.baseCtx)
		h.cancel = cancel
		go w.runHandler(ctx, h)
	}
	for i := len(kept); i < len(w.waiting); i++ {
		w.waiting[i] = nil
	}
	w.waiting = kept
}

// --- handling ---------------------------------------------------------------------------

func (w *Worker) runHandler(ctx context.Context, h *heldJob) {
	err := call(ctx, h.topic.handler, h.d)
	a := ackCmd{kind: AckFinish, id: h.d.ID, receipt: h.d.Receipt}
	if err != nil {
		var o *Outcome
		if !errors.As(err, &o) {
			o = &Outcome{delay: -1, err: err}
		}
		a.text = o.lastError()
		switch {
		case o.bury:
			a.kind = AckBury
		case o.delay >= 0:
			a.kind, a.delayMs = AckRelease, ceilMs(o.delay)
		default:
			a.kind, a.delayMs = AckRelease, ceilMs(BackoffDelay(h.topic.backoff, h.d.Attempts, w.random()))
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	h.topic.running--
	w.running--
	w.stats.Handled++
	if h.state == stateAbandoned { // the stop gave it back: its outcome is not ours to apply
		delete(w.held, h)
		h.topic.held--
		w.notifyLocked()
		return
	}
	h.cancel()
	h.state = stateAcking
	h.topic.acking++
	w.acking++
	h.ack = a
	w.acks = append(w.acks, h)
	// A slot is free: a job waiting for it starts, a reserve asks for more.
	w.dispatchLocked()
	w.reopenLocked()
	signal(w.wakeReserve)
	if !w.flushing {
		w.flushLocked()
	}
}

// call runs a handler, a panic read as a retry with its text.
func call(ctx context.Context, handler HandlerFunc, d *Delivery) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = Retry(fmt.Errorf("panic: %v", p))
		}
	}()
	return handler(ctx, d)
}

// flushLocked sends acks, one batch per round trip, until none is left, and applies the
// answers. REQUIRES: mu held, !flushing; mu is released around the round trips.
func (w *Worker) flushLocked() {
	w.flushing = true
	for len(w.acks) > 0 {
		batch := w.acks
		w.acks = nil
		cmds := make([]ackCmd, len(batch))
		for i, h := range batch {
			cmds[i] = h.ack
		}
		w.stats.AckBatches++
		w.mu.Unlock()
		if w.beforeAckBatch != nil {
			w.beforeAckBatch(len(batch))
		}
		answers := w.client.acknowledge(context.Background(), cmds)
		w.mu.Lock()
		w.answeredLocked(batch, answers)
		signal(w.wakeReserve)
	}
	w.flushing = false
}

// transient: answers after which an ack is sent again. Unavailable: no server could be reached,
// or the reply was lost (the ack may or may not have been applied); internal: the server's
// store failed. Resending is safe: an ack carries its receipt, so one already applied is
// answered not_found or stale_receipt, never applied twice.
func transient(err error) bool {
	code := codeOf(err)
	return code == CodeUnavailable || code == CodeInternal
}

// deliveryOver: answers that say a delivery is over for its worker (finished, released, given
// back, or its TTR ran out and another worker has it; or the job is gone).
func deliveryOver(err error) bool {
	code := codeOf(err)
	return code == CodeStaleReceipt || code == CodeNotFound || code == CodeNotReserved
}

// answeredLocked applies the answers to a batch of acks. REQUIRES: mu (released around
// OnAcknowledged).
func (w *Worker) answeredLocked(batch []*heldJob, answers []error) {
	var done []*heldJob
	for k, h := range batch {
		err := answers[k]
		if err == nil {
			w.ackRetryDelay = 0
			switch h.ack.kind {
			case AckFinish:
				w.stats.Succeeded++
			case AckRelease:
				w.stats.Retried++
				if h.d.ReleaseBuries() {
					w.stats.Exhausted++
				}
			case AckBury:
				w.stats.Buried++
			}
		} else {
			w.noteErrorLocked(err)
			if transient(err) {
				if !w.drainOver {
					h.resend, h.lastErr = true, err
					w.retry = append(w.retry, h)
					continue
				}
				err = givenUp(err)
			}
		}
		h.lastErr = err
		done = append(done, h)
	}
	if len(w.retry) > 0 && w.ackRetryAt.IsZero() {
		if w.ackRetryDelay == 0 {
			w.ackRetryDelay = ackRetryBase
		} else {
			w.ackRetryDelay = minDuration(w.ackRetryDelay*2, ackRetryMax)
		}
		w.ackRetryAt = time.Now().Add(w.ackRetryDelay)
		if w.ackRetryAt.Before(w.timerArmed) {
			signal(w.kickTimer)
		}
	}
	w.concludeLocked(done)
}

// concludeLocked reports each outcome to OnAcknowledged, then lets go of its job. REQUIRES: mu
// (released around OnAcknowledged; the jobs stay held until reported, so a stop waits).
func (w *Worker) concludeLocked(done []*heldJob) {
	if len(done) == 0 {
		return
	}
	if hook := w.opts.OnAcknowledged; hook != nil {
		w.mu.Unlock()
		for _, h := range done {
			hook(h.d, h.ack.kind, h.lastErr)
		}
		w.mu.Lock()
	}
	for _, h := range done {
		h.topic.acking--
		h.topic.held--
		w.acking--
		delete(w.held, h)
	}
	w.notifyLocked()
}

// --- the timer: touches and ack resends ---------------------------------------------------

func (w *Worker) timerLoop(quit, done chan struct{}) {
	defer close(done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		var touches []*heldJob
		flush := false
		w.mu.Lock()
		next := now.Add(w.idleInterval)
		for h := range w.held {
			// A running job keeps its reservation until its handler returns or the stop gives
			// it back; one whose ack waits to be sent again, until the server takes it.
			if h.lost || h.state == stateAbandoned || (h.state == stateAcking && !h.resend) {
				continue
			}
			if !h.touchAt.After(now) {
				touches = append(touches, h)
				h.touchAt = now.Add(touchInterval(h.d))
			}
			if h.touchAt.Before(next) {
				next = h.touchAt
			}
		}
		if len(w.retry) > 0 {
			if !now.Before(w.ackRetryAt) {
				for _, h := range w.retry {
					h.resend = false
					w.acks = append(w.acks, h)
				}
				w.retry = nil
				w.ackRetryAt = time.Time{}
				flush = !w.flushing // a goroutine sending acks now takes them in its loop
			} else if w.ackRetryAt.Before(next) {
				next = w.ackRetryAt
			}
		}
		if len(touches) == 0 && !flush {
			w.timerArmed = next
			w.mu.Unlock()
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			timer.Reset(next.Sub(now))
			select {
			case <-timer.C:
			case <-w.kickTimer:
			case <-quit:
				return
			}
			continue
		}
		w.touching++
		w.mu.Unlock()
		if len(touches) > 0 {
			w.touch(touches, now)
		}
		w.mu.Lock()
		w.touching--
		if flush && !w.flushing && len(w.acks) > 0 {
			w.flushLocked()
		}
		w.notifyLocked()
		w.mu.Unlock()
	}
}

// touch sends the touches due as one pipeline and applies the answers: an accepted touch
// restarts the job's TTR; a transient failure is tried again within what is left of it; an
// answer that the delivery is over ends its touches.
func (w *Worker) touch(jobs []*heldJob, sentAt time.Time) {
	cmds := make([][]string, len(jobs))
	for i, h := range jobs {
		cmds[i] = []string{"TOUCH", h.d.ID, h.d.Receipt}
	}
	answers := w.client.pipelineOK(context.Background(), cmds)
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, h := range jobs {
		err := answers[i]
		_, isHeld := w.held[h]
		if err == nil {
			w.stats.Touched++
			if isHeld && h.state != stateAbandoned && sentAt.After(h.heldSince) {
				h.heldSince = sentAt
				h.touchRetry = 0
			}
			continue
		}
		// Given back, or its outcome applied, while the touch was on its way: no news.
		if !isHeld || h.state == stateAbandoned || (h.state == stateAcking && deliveryOver(err)) {
			continue
		}
		w.noteErrorLocked(err)
		if deliveryOver(err) {
			h.lost = true
			continue
		}
		// Transient, as far as the worker can tell: try again soon, before the reservation runs
		// out (and, past it, until the server says it is over).
		if h.touchRetry == 0 {
			h.touchRetry = touchRetryBase
		} else {
			h.touchRetry = minDuration(h.touchRetry*2, touchInterval(h.d))
		}
		ttr := h.d.TTR
		if ttr <= 0 {
			ttr = DefaultTTR
		}
		left := h.heldSince.Add(ttr).Sub(now)
		retry := h.touchRetry
		if left > 0 {
			retry = minDuration(retry, left/2)
		}
		h.touchAt = now.Add(maxDuration(time.Millisecond, retry))
	}
}

// --- stopping ---------------------------------------------------------------------------

func (w *Worker) stop(reserveDone chan struct{}) {
	w.mu.Lock()
	w.stopping = true
	if w.reserveCancel != nil {
		w.reserveCancel()
	}
	w.mu.Unlock()
	signal(w.wakeReserve)
	<-reserveDone // what a reserve answered during the stop is given back

	// Jobs held, not started: back to ready at once, their attempt not counted.
	w.mu.Lock()
	unstarted := w.waiting
	w.waiting = nil
	for _, h := range unstarted {
		delete(w.held, h)
		h.topic.held--
	}
	w.mu.Unlock()
	jobs := make([]*Delivery, len(unstarted))
	for i, h := range unstarted {
		jobs[i] = h.d
	}
	w.giveBack(jobs)

	// Handlers finish, acks are sent (and sent again), jobs are touched.
	drain := w.opts.Drain
	if drain < 0 {
		drain = 0
	}
	w.waitUntil(func() bool { return len(w.held) == 0 }, time.Now().Add(drain))

	// Past the deadline: give back the jobs of the handlers still running, give up the acks
	// still failing.
	w.mu.Lock()
	w.drainOver = true
	var running []ackCmd
	for h := range w.held {
		if h.state == stateRunning {
			h.state = stateAbandoned
			h.cancel()
			running = append(running, ackCmd{kind: AckRelease, id: h.d.ID, receipt: h.d.Receipt, text: StoppedError})
		}
	}
	abandoned := w.retry
	w.retry = nil
	w.ackRetryAt = time.Time{}
	for _, h := range abandoned {
		h.resend = false
		h.lastErr = givenUp(h.lastErr)
		w.noteErrorLocked(h.lastErr)
	}
	w.concludeLocked(abandoned)
	w.mu.Unlock()
	if len(running) > 0 {
		answers := w.client.acknowledge(context.Background(), running)
		w.mu.Lock()
		w.stats.GivenBack += uint64(len(running))
		for _, err := range answers {
			if err != nil {
				w.noteErrorLocked(err)
			}
		}
		w.mu.Unlock()
	}
	// Outcomes being sent now end with their round trip; abandoned handlers are not waited for.
	w.waitUntil(func() bool {
		for h := range w.held {
			if h.state != stateAbandoned {
				return false
			}
		}
		return w.touching == 0
	}, time.Time{})
}

// givenUp is the answer OnAcknowledged gets for an ack still failing when the drain ended.
func givenUp(last error) error {
	return &Error{Code: codeOf(last), cause: last,
		Message: "the worker stopped before the server took the outcome; the last try: " + errorMessage(last)}
}

func errorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	if err == nil {
		return ""
	}
	return err.Error()
}

// giveBack unreserves jobs the worker will not start (their attempt not counted).
func (w *Worker) giveBack(jobs []*Delivery) {
	if len(jobs) == 0 {
		return
	}
	answers := w.client.unreserveAll(jobs)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stats.GivenBack += uint64(len(jobs))
	for _, err := range answers {
		if err != nil {
			w.noteErrorLocked(err)
		}
	}
}

// waitUntil waits until pred (called under mu) holds or until deadline (zero: none).
func (w *Worker) waitUntil(pred func() bool, deadline time.Time) bool {
	for {
		w.mu.Lock()
		if pred() {
			w.mu.Unlock()
			return true
		}
		changed := w.changed
		w.mu.Unlock()
		if deadline.IsZero() {
			<-changed
			continue
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		t := time.NewTimer(left)
		select {
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

func minInt(a, b int) int {
	if a < b {
		return a
	}
	return b
}

func maxDuration(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}
