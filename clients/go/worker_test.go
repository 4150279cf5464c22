package delayq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// acked records what OnAcknowledged heard.
type acked struct {
	mu    sync.Mutex
	calls []ackCall
}

type ackCall struct {
	id   string
	kind AckKind
	err  error
	at   time.Time
}

func (a *acked) hook(job *Delivery, kind AckKind, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, ackCall{job.ID, kind, err, time.Now()})
}

func (a *acked) list() []ackCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]ackCall(nil), a.calls...)
}

func (a *acked) count() int { return len(a.list()) }

// running is a worker started by startWorker; stop cancels its Run and waits for it.
type running struct {
	w      *Worker
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

func startWorker(t *testing.T, w *Worker) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{w: w, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- w.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	r.once.Do(func() {
		r.cancel()
		select {
		case r.err = <-r.done:
		case <-time.After(40 * time.Second):
			r.err = errors.New("Run did not return")
		}
	})
	if r.err != nil {
		t.Fatalf("Run: %v", r.err)
	}
}

func TestWorkerFinishesRetriesAndBuries(t *testing.T) {
	onEachStore(t, workerOutcomes)
}

func workerOutcomes(t *testing.T, srv *testServer) {
	c := newClient(t, Options{Servers: []string{srv.addr}})
	ctx := ctxT(t)
	var a acked
	w := NewWorker(c, WorkerOptions{Concurrency: 4, OnAcknowledged: a.hook, Random: func() float64 { return 1 }})
	var handlerReturned sync.Map // id -> time the handler returned its retry
	check(t, w.Handle("outcomes", func(ctx context.Context, job *Delivery) error {
		defer handlerReturned.Store(fmt.Sprintf("%s/%d", job.ID, job.Attempts), time.Now())
		switch job.Text() {
		case "ok":
			return nil
		case "error":
			if job.Attempts == 1 {
				return errors.New("payment service busy") // retried after the backoff's base
			}
			return nil
		case "retry-in":
			if job.Attempts == 1 {
				return RetryIn(400*time.Millisecond, errors.New("later"))
			}
			return nil
		case "panic":
			if job.Attempts == 1 {
				var m map[string]int
				m["x"] = 1 // a panic: a retry with its text
			}
			return nil
		case "bury":
			return fmt.Errorf("giving up: %w", Bury("cannot parse the order"))
		}
		return errors.New("unexpected body " + job.Text())
	}, TopicOptions{Backoff: Backoff{Base: 300 * time.Millisecond, Factor: 2, Cap: time.Minute}}))
	for _, body := range []string{"ok", "error", "retry-in", "panic", "bury"} {
		must(c.Add(ctx, Job{Topic: "outcomes", ID: body, Body: []byte(body)}))
	}
	startWorker(t, w)
	eventually(t, 10*time.Second, "every outcome acknowledged", func() bool { return a.count() == 8 })

	// The released jobs were due again after their delay: base for the first retry, the
	// RetryIn's delay; their last_error the handler's error or panic.
	byKey := map[string]ackCall{}
	for _, call := range a.list() {
		if call.err != nil {
			t.Fatalf("ack of %s: %v", call.id, call.err)
		}
		byKey[call.id+"/"+call.kind.String()] = call
	}
	for _, tc := range []struct {
		id    string
		delay time.Duration
	}{{"error", 300 * time.Millisecond}, {"retry-in", 400 * time.Millisecond}, {"panic", 300 * time.Millisecond}} {
		if _, ok := byKey[tc.id+"/release"]; !ok {
			t.Fatalf("%s: no release acknowledged: %v", tc.id, a.list())
		}
		if _, ok := byKey[tc.id+"/finish"]; !ok {
			t.Fatalf("%s: no finish after the retry: %v", tc.id, a.list())
		}
	}
	if _, ok := byKey["bury/bury"]; !ok {
		t.Fatalf("no bury: %v", a.list())
	}
	job := must(c.Get(ctx, "bury"))
	if job.State != StateBuried || job.LastError != "cannot parse the order" {
		t.Fatalf("buried: %+v", job)
	}
	s := w.Stats()
	if s.Handled != 8 || s.Succeeded != 4 || s.Retried != 3 || s.Buried != 1 || s.Exhausted != 0 {
		t.Fatalf("stats: %+v", s)
	}
}

// A retry's delay is visible as the job's run_at, its error as last_error.
func TestWorkerRetryDelayAndErrorShowOnTheJob(t *testing.T) {
	t.Parallel()
	_, c, ctx := startWithClient(t)
	type seen struct {
		job  *JobInfo
		sent time.Time
	}
	results := make(chan seen, 8)
	var returned sync.Map
	w := NewWorker(c, WorkerOptions{Random: func() float64 { return 0 },
		OnAcknowledged: func(d *Delivery, kind AckKind, err error) {
			if kind == AckRelease && err == nil {
				at, _ := returned.Load(d.ID)
				results <- seen{must(c.Get(context.Background(), d.ID)), at.(time.Time)}
			}
		}})
	check(t, w.Handle("delays", func(ctx context.Context, job *Delivery) error {
		defer returned.Store(job.ID, time.Now())
		switch job.ID {
		case "plain":
			return errors.New("smtp timeout")
		case "panics":
			panic("nil order")
		}
		return RetryIn(2*time.Second, errors.New("rate limited"))
	}, TopicOptions{Backoff: Backoff{Base: 5 * time.Second, Factor: 3, Cap: time.Minute}}))
	must(c.Add(ctx, Job{Topic: "delays", ID: "plain"}))
	must(c.Add(ctx, Job{Topic: "delays", ID: "panics"}))
	must(c.Add(ctx, Job{Topic: "delays", ID: "retry-in"}))
	startWorker(t, w)
	want := map[string]struct {
		delay time.Duration
		text  string
	}{"plain": {5 * time.Second, "smtp timeout"}, "panics": {5 * time.Second, "panic: nil order"},
		"retry-in": {2 * time.Second, "rate limited"}}
	for range want {
		var r seen
		select {
		case r = <-results:
		case <-time.After(10 * time.Second):
			t.Fatal("no release acknowledged")
		}
		w := want[r.job.ID]
		if r.job.State != StateDelayed || r.job.LastError != w.text || r.job.Attempts != 1 {
			t.Fatalf("released %s: %+v", r.job.ID, r.job)
		}
		// Due the delay after the release was sent (which follows the handler's return).
		late := r.job.RunAt.Sub(r.sent.Add(w.delay))
		if late < -5*time.Millisecond || late > time.Second {
			t.Fatalf("%s due %v after its handler returned, want %v", r.job.ID, r.job.RunAt.Sub(r.sent), w.delay)
		}
	}
}

// BackoffDelay is the C++ worker's formula: base exactly at first, then jittered to [d/2, d]
// but never below base nor above cap.
func TestBackoffDelayFollowsTheCppFormula(t *testing.T) {
	b := Backoff{Base: time.Second, Factor: 2, Cap: 10 * time.Second}
	for _, tc := range []struct {
		attempts uint32
		random   float64
		want     time.Duration
	}{
		{0, 1, time.Second}, {1, 0, time.Second}, {1, 1, time.Second},
		{2, 0, time.Second}, {2, 1, 2 * time.Second}, {3, 0, 2 * time.Second}, {3, 0.5, 3 * time.Second},
		{3, 1, 4 * time.Second}, {5, 1, 10 * time.Second}, {5, 0, 5 * time.Second}, {100, 1, 10 * time.Second},
		{1 << 31, 0.25, 6250 * time.Millisecond}, {3, -1, 2 * time.Second}, {3, 7, 4 * time.Second},
	} {
		if got := BackoffDelay(b, tc.attempts, tc.random); got != tc.want {
			t.Errorf("attempt %d, random %v: %v, want %v", tc.attempts, tc.random, got, tc.want)
		}
	}
	if got := BackoffDelay(Backoff{}, 2, 1); got != 2*time.Second {
		t.Errorf("defaults, attempt 2: %v", got)
	}
	if got := BackoffDelay(Backoff{}, 100, 1); got != 10*time.Minute {
		t.Errorf("defaults, attempt 100: %v", got)
	}
}

// Only the zero Backoff{} takes the defaults: any other is taken as written, so a Base of 0
// retries at once (the C++ worker's base_ms 0), and a field left out or out of range is refused
// by Handle and Run, naming it, not replaced.
func TestBackoffIsTakenAsWrittenUnlessZero(t *testing.T) {
	if d := DefaultBackoff(); d != (Backoff{Base: time.Second, Factor: 2, Cap: 10 * time.Minute}) {
		t.Fatalf("DefaultBackoff: %+v", d)
	}
	for _, b := range []Backoff{{Factor: 1}, {Factor: 2, Cap: time.Minute}, {Factor: 3}} {
		for _, attempts := range []uint32{1, 2, 10} {
			if got := BackoffDelay(b, attempts, 1); got != 0 {
				t.Errorf("%+v, attempt %d: %v, want 0 (base 0)", b, attempts, got)
			}
		}
	}
	c := newClient(t, Options{Servers: []string{"127.0.0.1:1"}})
	handler := func(context.Context, *Delivery) error { return nil }
	for _, tc := range []struct {
		b    Backoff
		want string
	}{
		{Backoff{Base: time.Second}, "backoff.factor: must be a finite number >= 1, got 0 (only the zero Backoff{} takes the defaults"},
		{Backoff{Base: time.Second, Factor: 2}, "backoff.cap: must be >= backoff.base (1s), got 0s (only the zero Backoff{}"},
		{Backoff{Cap: time.Minute}, "backoff.factor: must be a finite number >= 1, got 0"},
		{Backoff{Factor: 0.99, Cap: time.Minute}, "backoff.factor: must be a finite number >= 1, got 0.99"},
		{Backoff{Factor: -2, Cap: time.Minute}, "backoff.factor: must be a finite number >= 1, got -2"},
		{Backoff{Base: -time.Millisecond, Factor: 2, Cap: time.Minute}, "backoff.base: must be >= 0, got -1ms"},
		{Backoff{Factor: 1, Cap: -time.Second}, "backoff.cap: must be >= backoff.base (0s), got -1s"},
		{Backoff{Base: time.Second, Factor: 2, Cap: MaxDelay + time.Hour}, "backoff.cap: at most 100 years"},
	} {
		w := NewWorker(c, WorkerOptions{})
		err := w.Handle("t", handler, TopicOptions{Backoff: tc.b})
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Handle with %+v: %v, want %q", tc.b, err, tc.want)
		}
		done, cancel := context.WithCancel(context.Background())
		cancel() // a Run that accepted the backoff stops at once
		if err := w.Run(done); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run with %+v: %v, want %q", tc.b, err, tc.want)
		}
	}
	w := NewWorker(c, WorkerOptions{})
	for i, b := range []Backoff{{}, {Factor: 1}, {Base: 0, Factor: 2, Cap: time.Minute}, DefaultBackoff(),
		{Base: time.Second, Factor: 1, Cap: time.Second}} {
		if err := w.Handle(fmt.Sprintf("t%d", i), handler, TopicOptions{Backoff: b}); err != nil {
			t.Errorf("Handle with %+v: %v", b, err)
		}
	}
	if got := w.byName["t0"].backoff; got != DefaultBackoff() {
		t.Errorf("the zero Backoff{}: %+v", got)
	}
	if got := w.byName["t2"].backoff; got != (Backoff{Base: 0, Factor: 2, Cap: time.Minute}) {
		t.Errorf("base 0 kept as written: %+v", got)
	}
}

// A topic whose backoff's Base is 0 has its failed jobs due again at once.
func TestWorkerWithZeroBaseRetriesAtOnce(t *testing.T) {
	t.Parallel()
	_, c, ctx := startWithClient(t)
	released := make(chan *JobInfo, 1)
	w := NewWorker(c, WorkerOptions{Random: func() float64 { return 1 },
		OnAcknowledged: func(d *Delivery, kind AckKind, err error) {
			if kind == AckRelease && err == nil {
				released <- must(c.Get(context.Background(), d.ID))
			}
		}})
	attempts := make(chan time.Time, 4)
	check(t, w.Handle("at.once", func(ctx context.Context, job *Delivery) error {
		attempts <- time.Now()
		if job.Attempts == 1 {
			return errors.New("try again")
		}
		return nil
	}, TopicOptions{Backoff: Backoff{Factor: 1}}))
	must(c.Add(ctx, Job{Topic: "at.once", ID: "j"}))
	startWorker(t, w)
	first := <-attempts
	var job *JobInfo
	select {
	case job = <-released:
	case <-time.After(10 * time.Second):
		t.Fatal("no release acknowledged")
	}
	if job.State == StateDelayed || job.RunAt.Sub(first) > 500*time.Millisecond {
		t.Fatalf("released with base 0: %+v, due %v after the first attempt", job, job.RunAt.Sub(first))
	}
	select {
	case second := <-attempts:
		if d := second.Sub(first); d > 700*time.Millisecond {
			t.Fatalf("the retry came %v after the first attempt, want at once (base 0)", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no second attempt")
	}
}

// A job out of attempts is buried by its last release, counted as exhausted.
func TestWorkerExhaustsMaxAttempts(t *testing.T) {
	t.Parallel()
	_, c, ctx := startWithClient(t)
	var a acked
	w := NewWorker(c, WorkerOptions{OnAcknowledged: a.hook})
	check(t, w.Handle("tries", func(ctx context.Context, job *Delivery) error {
		return Retry(fmt.Errorf("attempt %d failed", job.Attempts))
	}, TopicOptions{Backoff: Backoff{Base: 50 * time.Millisecond, Factor: 2, Cap: time.Minute}}))
	must(c.Add(ctx, Job{Topic: "tries", ID: "x", MaxAttempts: 2}))
	startWorker(t, w)
	eventually(t, 10*time.Second, "two releases acknowledged", func() bool { return a.count() == 2 })
	job := must(c.Get(ctx, "x"))
	if job.State != StateBuried || job.Attempts != 2 || !strings.Contains(job.LastError, "attempt 2 failed") ||
		!strings.Contains(job.LastError, "max_attempts (2) used up") {
		t.Fatalf("out of attempts: %+v", job)
	}
	if s := w.Stats(); s.Retried != 2 || s.Exhausted != 1 {
		t.Fatalf("stats: %+v", s)
	}
}

// A handler that outlives its TTR keeps its job: touched every half TTR, never redelivered.
func TestWorkerTouchesAtHalfTheTTR(t *testing.T) {
	t.Parallel()
	_, c, ctx := startWithClient(t)
	var a acked
	var mu sync.Mutex
	deliveries := 0
	w := NewWorker(c, WorkerOptions{OnAcknowledged: a.hook})
	check(t, w.Handle("slow", func(ctx context.Context, job *Delivery) error {
		mu.Lock()
		deliveries++
		mu.Unlock()
		time.Sleep(2500 * time.Millisecond)
		return nil
	}))
	must(c.Add(ctx, Job{Topic: "slow", ID: "long", TTR: time.Second}))
	startWorker(t, w)
	eventually(t, 10*time.Second, "the finish acknowledged", func() bool { return a.count() == 1 })
	if call := a.list()[0]; call.err != nil || call.kind != AckFinish {
		t.Fatalf("finish of a job that outlived its TTR: %+v", call)
	}
	mu.Lock()
	defer mu.Unlock()
	if deliveries != 1 {
		t.Fatalf("delivered %d times", deliveries)
	}
	if s := w.Stats(); s.Touched < 3 || s.Errors != 0 {
		t.Fatalf("stats: %+v (want a touch every 500 ms)", s)
	}
	if st := must(c.Stats(ctx)); st.TimedOut != 0 || st.Finished != 1 {
		t.Fatalf("server stats: %+v", st)
	}
}

// Outcomes that come in while an ack batch is on its way go together in the next one: one
// pipeline, one round trip, of finishes, releases and buries.
func TestWorkerBatchesAcks(t *testing.T) {
	t.Parallel()
	_, c, ctx := startWithClient(t)
	const n = 12
	for i := 0; i < n; i++ {
		must(c.Add(ctx, Job{Topic: "batch", ID: fmt.Sprint(i)}))
	}
	var a acked
	w := NewWorker(c, WorkerOptions{Concurrency: n, OnAcknowledged: a.hook})
	all := make(chan struct{})
	var started sync.WaitGroup
	started.Add(n)
	go func() { started.Wait(); close(all) }()
	var batches []int
	w.beforeAckBatch = func(size int) {
		batches = append(batches, size)
		// The first batch waits until every handler has returned.
		waitFor(10*time.Second, func() bool { return w.Stats().Handled == n })
	}
	check(t, w.Handle("batch", func(ctx context.Context, job *Delivery) error {
		started.Done()
		<-all
		i, _ := strconv.Atoi(job.ID)
		switch i % 3 {
		case 0:
			return nil
		case 1:
			return RetryIn(time.Hour, errors.New("later"))
		}
		return Bury("no")
	}))
	startWorker(t, w)
	eventually(t, 10*time.Second, "every outcome acknowledged", func() bool { return a.count() == n })
	if s := w.Stats(); s.AckBatches != 2 || len(batches) != 2 || batches[0] != 1 || batches[1] != n-1 {
		t.Fatalf("ack batches %v, stats %+v", batches, s)
	}
	st := must(c.Stats(ctx))
	if st.Finished != 4 || st.Released != 4 || st.BuriedTotal != 4 {
		t.Fatalf("server stats: %+v", st)
	}
}

// A stop while a handler runs: the handler finishes within the drain and its outcome is
// acknowledged; the waiting reserve is withdrawn.
func TestWorkerStopDrainsRunningHandlers(t *testing.T) {
	t.Parallel()
	_, c, ctx := startWithClient(t)
	var a acked
	inHandler := make(chan struct{})
	w := NewWorker(c, WorkerOptions{Concurrency: 2, OnAcknowledged: a.hook})
	check(t, w.Handle("drain", func(ctx context.Context, job *Delivery) error {
		close(inHandler)
		time.Sleep(300 * time.Millisecond)
		return ctx.Err() // nil: the drain does not cancel it
	}))
	must(c.Add(ctx, Job{Topic: "drain", ID: "d1"}))
	r := startWorker(t, w)
	<-inHandler
	eventually(t, 5*time.Second, "the next reserve waits", func() bool { return must(c.Stats(ctx)).Waiting == 1 })
	r.stop(t)
	calls := a.list()
	if len(calls) != 1 || calls[0].kind != AckFinish || calls[0].err != nil {
		t.Fatalf("acknowledged: %+v", calls)
	}
	if _, err := c.Get(ctx, "d1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a drained job: %v", err)
	}
	if st := must(c.Stats(ctx)); st.Waiting != 0 {
		t.Fatalf("a reserve still waits after the stop: %+v", st)
	}
}

// A handler longer than the drain: its job is released with StoppedError, its context
// cancelled, and Run returns without waiting for it.
func TestWorkerStopReleasesWhatOutlivesTheDrain(t *testing.T) {
	t.Parallel()
	_, c, ctx := startWithClient(t)
	var a acked
	inHandler := make(chan struct{})
	cancelled := make(chan struct{})
	release := make(chan struct{})
	w := NewWorker(c, WorkerOptions{Drain: 200 * time.Millisecond, OnAcknowledged: a.hook})
	check(t, w.Handle("stuck", func(ctx context.Context, job *Delivery) error {
		close(inHandler)
		<-ctx.Done()
		close(cancelled)
		<-release // returns after Run did
		return nil
	}))
	must(c.Add(ctx, Job{Topic: "stuck", ID: "s1"}))
	r := startWorker(t, w)
	<-inHandler
	start := time.Now()
	r.stop(t)
	if took := time.Since(start); took < 200*time.Millisecond || took > 3*time.Second {
		t.Fatalf("stop took %v with a 200 ms drain", took)
	}
	select {
	case <-cancelled:
	default:
		t.Fatal("the handler's context was not cancelled")
	}
	job := must(c.Get(ctx, "s1"))
	if job.State != StateReady || job.LastError != StoppedError || job.Attempts != 1 {
		t.Fatalf("released at the drain's end: %+v", job)
	}
	close(release)
	eventually(t, 5*time.Second, "the abandoned handler returns", func() bool { return w.Stats().Running == 0 })
	if n := a.count(); n != 0 {
		t.Fatalf("an abandoned handler's outcome was acknowledged: %+v", a.list())
	}
	if s := w.Stats(); s.GivenBack != 1 || s.Handled != 1 || s.Succeeded != 0 {
		t.Fatalf("stats: %+v", s)
	}
}

// Jobs held but not started are given back at the stop, their attempt not counted.
func TestWorkerStopUnreservesHeldJobs(t *testing.T) {
	t.Parallel()
	_, c, ctx := startWithClient(t)
	for i := 0; i < 4; i++ {
		must(c.Add(ctx, Job{Topic: "narrow", ID: fmt.Sprint("n", i)}))
	}
	inHandler := make(chan string, 4)
	w := NewWorker(c, WorkerOptions{Concurrency: 4})
	// One reserve over both topics takes 4 jobs of "narrow", which runs one at a time.
	check(t, w.Handle("narrow", func(ctx context.Context, job *Delivery) error {
		inHandler <- job.ID
		time.Sleep(200 * time.Millisecond)
		return nil
	}, TopicOptions{Concurrency: 1}))
	check(t, w.Handle("wide", func(ctx context.Context, job *Delivery) error { return nil }))
	r := startWorker(t, w)
	first := <-inHandler
	eventually(t, 5*time.Second, "three jobs held, not started", func() bool { return w.Stats().Held == 3 })
	r.stop(t)
	for i := 0; i < 4; i++ {
		id := fmt.Sprint("n", i)
		if id == first {
			if _, err := c.Get(ctx, id); !errors.Is(err, ErrNotFound) {
				t.Fatalf("the running job was not finished in the drain: %v", err)
			}
			continue
		}
		job := must(c.Get(ctx, id))
		if job.State != StateReady || job.Attempts != 0 {
			t.Fatalf("a held job after the stop: %+v", job)
		}
	}
	if s := w.Stats(); s.GivenBack != 3 || s.Succeeded != 1 {
		t.Fatalf("stats: %+v", s)
	}
}

// An ack answered unavailable (the server out of reach) is sent again until the server takes
// it, its job touched meanwhile; the handler does not run again.
func TestWorkerResendsAcksAfterAnOutage(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	p := startProxy(t, srv.addr)
	c := newClient(t, Options{Servers: []string{p.addr()}})
	direct := newClient(t, Options{Servers: []string{srv.addr}})
	ctx := ctxT(t)
	var a acked
	w := NewWorker(c, WorkerOptions{OnAcknowledged: a.hook})
	ran := make(chan struct{}, 4)
	proceed := make(chan struct{})
	check(t, w.Handle("outage", func(ctx context.Context, job *Delivery) error {
		ran <- struct{}{}
		<-proceed
		return nil
	}))
	must(c.Add(ctx, Job{Topic: "outage", ID: "o1", TTR: 2 * time.Second}))
	startWorker(t, w)
	<-ran
	p.setDown(true)
	close(proceed) // its finish fails: the server is out of reach
	eventually(t, 5*time.Second, "failed tries of the ack", func() bool { return w.Stats().Errors >= 2 })
	if a.count() != 0 {
		t.Fatalf("an ack that failed was concluded: %+v", a.list())
	}
	if job := must(direct.Get(ctx, "o1")); job.State != StateReserved {
		t.Fatalf("during the outage: %+v", job)
	}
	p.setDown(false)
	eventually(t, 10*time.Second, "the finish acknowledged", func() bool { return a.count() == 1 })
	if call := a.list()[0]; call.err != nil || call.kind != AckFinish {
		t.Fatalf("resent finish: %+v", call)
	}
	if len(ran) != 0 {
		t.Fatal("the handler ran again")
	}
	if _, err := direct.Get(ctx, "o1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after the resent finish: %v", err)
	}
	if s := w.Stats(); s.Succeeded != 1 || s.AckBatches < 2 {
		t.Fatalf("stats: %+v", s)
	}
}

func TestWorkerRefusesBadOptions(t *testing.T) {
	c := must(New(Options{Servers: []string{"127.0.0.1:1"}}))
	ctx := context.Background()
	handler := func(context.Context, *Delivery) error { return nil }
	if err := NewWorker(c, WorkerOptions{}).Run(ctx); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "no handlers") {
		t.Errorf("no handlers: %v", err)
	}
	w := NewWorker(c, WorkerOptions{Concurrency: 2000})
	w.Handle("t", handler)
	if err := w.Run(ctx); !strings.Contains(err.Error(), "concurrency: must be 1..1024") {
		t.Errorf("concurrency: %v", err)
	}
	w = NewWorker(c, WorkerOptions{})
	for _, tc := range []struct {
		err  error
		want string
	}{
		{w.Handle("bad topic", handler), "topic: only [A-Za-z0-9._:-] allowed"},
		{w.Handle("t", nil), "the handler of topic 't' is nil"},
		{w.Handle("t", handler, TopicOptions{Backoff: Backoff{Factor: 0.5, Cap: time.Second}}), "backoff.factor: must be a finite number >= 1, got 0.5"},
		{w.Handle("t", handler, TopicOptions{Backoff: Backoff{Base: time.Minute, Factor: 2, Cap: time.Second}}), "backoff.cap: must be >= backoff.base (1m0s), got 1s"},
		{w.Handle("t", handler, TopicOptions{Concurrency: -1}), "concurrency: must be >= 0"},
	} {
		if !errors.Is(tc.err, ErrInvalidArgument) || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("got %v, want %q", tc.err, tc.want)
		}
	}
	check(t, w.Handle("t", handler))
	if err := w.Handle("t", handler); err == nil || !strings.Contains(err.Error(), "already has a handler") {
		t.Errorf("a second handler: %v", err)
	}
	// Run returns the first Handle error.
	if err := w.Run(ctx); err == nil || !strings.Contains(err.Error(), "topic: only") {
		t.Errorf("Run after a failed Handle: %v", err)
	}
}

// A topic that was full when the waiting reserve was made is not left out until the wait runs
// out: when it gains room, the reserve is withdrawn and made again over both topics.
func TestWorkerReopensTheReserveWhenAFullTopicGainsRoom(t *testing.T) {
	t.Parallel()
	_, c, ctx := startWithClient(t)
	started := make(chan string, 4)
	proceed := make(chan struct{})
	w := NewWorker(c, WorkerOptions{Concurrency: 4, ReserveWait: 20 * time.Second})
	check(t, w.Handle("one.at.a.time", func(ctx context.Context, job *Delivery) error {
		started <- job.ID
		if job.ID == "first" {
			<-proceed
		}
		return nil
	}, TopicOptions{Concurrency: 1}))
	check(t, w.Handle("other", func(ctx context.Context, job *Delivery) error { return nil }))
	must(c.Add(ctx, Job{Topic: "one.at.a.time", ID: "first"}))
	startWorker(t, w)
	if id := <-started; id != "first" {
		t.Fatalf("started %s", id)
	}
	// The reserve now waits on "other" alone.
	eventually(t, 5*time.Second, "a reserve waits", func() bool { return must(c.Stats(ctx)).Waiting == 1 })
	must(c.Add(ctx, Job{Topic: "one.at.a.time", ID: "second"}))
	time.Sleep(50 * time.Millisecond) // a reserve that included the full topic would take it now
	if job := must(c.Get(ctx, "second")); job.State != StateReady {
		t.Fatalf("a full topic's job was reserved: %+v", job)
	}
	close(proceed)
	select {
	case id := <-started:
		if id != "second" {
			t.Fatalf("started %s", id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the topic that gained room waited for the reserve's 20 s")
	}
}

// Reserves that fail (the server out of reach) are tried again after 100 ms, doubling; once
// the server is back, jobs flow.
func TestWorkerRetriesFailedReserves(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	p := startProxy(t, srv.addr)
	p.setDown(true)
	c := newClient(t, Options{Servers: []string{p.addr()}})
	direct := newClient(t, Options{Servers: []string{srv.addr}})
	ctx := ctxT(t)
	done := make(chan string, 1)
	w := NewWorker(c, WorkerOptions{})
	check(t, w.Handle("back", func(ctx context.Context, job *Delivery) error {
		done <- job.ID
		return nil
	}))
	start := time.Now()
	startWorker(t, w)
	// Tries at about 0, 100 and 300 ms: the third comes no sooner than the two waits.
	eventually(t, 10*time.Second, "three failed reserves", func() bool { return w.Stats().Errors >= 3 })
	s := w.Stats()
	if elapsed := time.Since(start); elapsed < 300*time.Millisecond || !strings.Contains(s.LastError, "unavailable") {
		t.Fatalf("three failed reserves after %v (backoff 100 ms, doubling): %+v", elapsed, s)
	}
	must(direct.Add(ctx, Job{Topic: "back", ID: "b1"}))
	p.setDown(false)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("no job handled once the server was back")
	}
}

// Acks still failing when the drain ends are given up: OnAcknowledged hears the last error.
func TestWorkerGivesUpFailingAcksAtTheDrainsEnd(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	p := startProxy(t, srv.addr)
	c := newClient(t, Options{Servers: []string{p.addr()}})
	ctx := ctxT(t)
	var a acked
	inHandler := make(chan struct{})
	proceed := make(chan struct{})
	w := NewWorker(c, WorkerOptions{Drain: 300 * time.Millisecond, OnAcknowledged: a.hook})
	check(t, w.Handle("unlucky", func(ctx context.Context, job *Delivery) error {
		close(inHandler)
		<-proceed
		return nil
	}))
	must(c.Add(ctx, Job{Topic: "unlucky", ID: "u1"}))
	r := startWorker(t, w)
	<-inHandler
	p.setDown(true)
	close(proceed)
	eventually(t, 5*time.Second, "a failed ack", func() bool { return w.Stats().Errors > 0 })
	r.stop(t)
	calls := a.list()
	if len(calls) != 1 || calls[0].kind != AckFinish || !errors.Is(calls[0].err, ErrUnavailable) ||
		!strings.Contains(calls[0].err.Error(), "the worker stopped before the server took the outcome") {
		t.Fatalf("acknowledged: %+v", calls)
	}
}

// A touch that fails for want of a server is tried again soon (100 ms, doubling), within the
// TTR: the job stays this worker's.
func TestWorkerRetriesFailedTouches(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	p := startProxy(t, srv.addr)
	c := newClient(t, Options{Servers: []string{p.addr()}})
	ctx := ctxT(t)
	var a acked
	inHandler := make(chan struct{})
	w := NewWorker(c, WorkerOptions{OnAcknowledged: a.hook})
	check(t, w.Handle("flaky", func(ctx context.Context, job *Delivery) error {
		close(inHandler)
		waitFor(10*time.Second, func() bool { return w.Stats().Touched > 0 }) // after the outage
		return nil
	}))
	must(c.Add(ctx, Job{Topic: "flaky", ID: "f1", TTR: 2 * time.Second}))
	startWorker(t, w)
	<-inHandler
	p.setDown(true)
	eventually(t, 5*time.Second, "a failed touch", func() bool { return w.Stats().Errors > 0 })
	p.setDown(false)
	eventually(t, 10*time.Second, "the finish acknowledged", func() bool { return a.count() == 1 })
	if call := a.list()[0]; call.err != nil {
		t.Fatalf("finish after a touch retried: %+v", call)
	}
}

// A touch answered not_found (the job deleted meanwhile) ends the job's touches; its outcome
// is refused too, and OnAcknowledged says so.
func TestWorkerStopsTouchingAJobThatIsGone(t *testing.T) {
	t.Parallel()
	_, c, ctx := startWithClient(t)
	var a acked
	inHandler := make(chan struct{})
	w := NewWorker(c, WorkerOptions{OnAcknowledged: a.hook})
	check(t, w.Handle("gone", func(ctx context.Context, job *Delivery) error {
		close(inHandler)
		waitFor(10*time.Second, func() bool { return w.Stats().Errors > 0 }) // a touch refused
		time.Sleep(400 * time.Millisecond)                                   // two more touch intervals: none is sent
		return nil
	}))
	must(c.Add(ctx, Job{Topic: "gone", ID: "g1", TTR: 200 * time.Millisecond}))
	startWorker(t, w)
	<-inHandler
	check(t, c.Delete(ctx, "g1"))
	eventually(t, 10*time.Second, "the outcome answered", func() bool { return a.count() == 1 })
	if call := a.list()[0]; !errors.Is(call.err, ErrNotFound) {
		t.Fatalf("finish of a deleted job: %+v", call)
	}
	if s := w.Stats(); s.Errors != 2 || s.Succeeded != 0 || !strings.Contains(s.LastError, "not_found") {
		t.Fatalf("stats (one touch and the finish failed): %+v", s)
	}
}
