package delayq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/clients/go/internal/resp"
)

// Every call of the client, on the memory and the embedded store.
func TestClientCallsOnEachStore(t *testing.T) {
	onEachStore(t, func(t *testing.T, srv *testServer) {
		exerciseClient(t, ctxT(t), newClient(t, Options{Servers: []string{srv.addr}}))
	})
}

func exerciseClient(t *testing.T, ctx context.Context, c *Client) {
	check(t, c.Ping(ctx))

	// Add: a generated id (32 hex digits, time-ordered), due now.
	a := must(c.Add(ctx, Job{Topic: "calls", Body: []byte("one")}))
	if len(a.ID) != 32 || a.State != StateReady || time.Since(a.RunAt) > time.Minute {
		t.Fatalf("add: %+v", a)
	}
	b := must(c.Add(ctx, Job{Topic: "calls", Body: []byte("two")}))
	if b.ID <= a.ID {
		t.Fatalf("ids not time-ordered: %s then %s", a.ID, b.ID)
	}
	// Every field.
	before := time.Now()
	d := must(c.Add(ctx, Job{Topic: "calls", ID: "order-1", Body: []byte(`{"order":1}`),
		Delay: time.Hour, TTR: 90 * time.Second, Priority: Priority(7), MaxAttempts: 3}))
	if d.ID != "order-1" || d.State != StateDelayed || d.RunAt.Before(before.Add(time.Hour-time.Second)) {
		t.Fatalf("add: %+v", d)
	}
	job := must(c.Get(ctx, "order-1"))
	if job.Topic != "calls" || job.State != StateDelayed || job.Text() != `{"order":1}` ||
		job.Priority != 7 || job.TTR != 90*time.Second || job.MaxAttempts != 3 || job.Attempts != 0 ||
		job.CreatedAt.Before(before.Add(-time.Second)) || !job.RunAt.Equal(d.RunAt) ||
		!job.ReservedUntil.IsZero() || job.Receipt != "" {
		t.Fatalf("get: %+v", job)
	}
	var order struct{ Order int }
	if err := job.JSON(&order); err != nil || order.Order != 1 {
		t.Fatalf("json: %v %+v", err, order)
	}
	// RunAt, and Replace.
	at := time.Now().Add(2 * time.Hour).Truncate(time.Millisecond)
	must(c.Add(ctx, Job{Topic: "calls", ID: "order-2", RunAt: at}))
	if _, err := c.Add(ctx, Job{Topic: "calls", ID: "order-2"}); !errors.Is(err, ErrExists) {
		t.Fatalf("add of a live id: %v", err)
	}
	r := must(c.Add(ctx, Job{Topic: "calls", ID: "order-2", RunAt: at.Add(time.Hour), Replace: true}))
	if !r.RunAt.Equal(at.Add(time.Hour)) {
		t.Fatalf("replace: %+v, want run_at %v", r, at.Add(time.Hour))
	}
	// An application's own idempotency key: a repeat changes nothing.
	k1 := must(c.Add(ctx, Job{Topic: "calls", ID: "keyed", IdempotencyKey: "k-1"}))
	k2 := must(c.Add(ctx, Job{Topic: "calls", ID: "keyed", IdempotencyKey: "k-1"}))
	if k1 != k2 {
		t.Fatalf("idempotent repeat: %+v then %+v", k1, k2)
	}

	// Peek, Topics, TopicStats.
	p := must(c.Peek(ctx, "calls", StateReady))
	if p.ID != a.ID || p.State != StateReady {
		t.Fatalf("peek ready: %+v", p)
	}
	if p := must(c.Peek(ctx, "calls", StateDelayed)); p.ID != "order-1" {
		t.Fatalf("peek delayed: %+v", p)
	}
	if _, err := c.Peek(ctx, "calls", StateBuried); !errors.Is(err, ErrNotFound) {
		t.Fatalf("peek buried: %v", err)
	}
	if names := must(c.Topics(ctx)); len(names) != 1 || names[0] != "calls" {
		t.Fatalf("topics: %v", names)
	}
	ts := must(c.TopicStats(ctx, "calls"))
	if ts.Topic != "calls" || ts.Ready != 3 || ts.Delayed != 2 || ts.Paused {
		t.Fatalf("topic stats: %+v", ts)
	}

	// Reserve, Touch, Release with a delay, Unreserve, Finish.
	got := must(c.Reserve(ctx, ReserveOptions{Topics: []string{"calls"}, Count: 2}))
	if len(got) != 2 || got[0].ID != a.ID || got[1].ID != b.ID {
		t.Fatalf("reserve: %+v", got)
	}
	first := got[0]
	if first.Topic != "calls" || first.Text() != "one" || len(first.Receipt) != 24 || first.Attempts != 1 ||
		first.TTR != DefaultTTR || first.Priority != DefaultPriority ||
		first.ReservedUntil.Before(time.Now().Add(50*time.Second)) {
		t.Fatalf("delivery: %+v", first)
	}
	check(t, c.Touch(ctx, first.ID, first.Receipt))
	released := time.Now()
	check(t, c.Release(ctx, first.ID, first.Receipt, 10*time.Minute, "smtp timeout"))
	job = must(c.Get(ctx, first.ID))
	if job.State != StateDelayed || job.LastError != "smtp timeout" || job.Attempts != 1 ||
		job.RunAt.Before(released.Add(10*time.Minute-time.Second)) {
		t.Fatalf("released: %+v", job)
	}
	// Unreserve: ready again, the attempt not counted.
	second := got[1]
	check(t, c.Unreserve(ctx, second.ID, second.Receipt))
	if job := must(c.Get(ctx, second.ID)); job.State != StateReady || job.Attempts != 0 {
		t.Fatalf("unreserved: %+v", job)
	}
	if err := c.Finish(ctx, second.ID, second.Receipt); !errors.Is(err, ErrStaleReceipt) {
		t.Fatalf("finish after unreserve: %v", err)
	}
	again := must(c.Reserve(ctx, ReserveOptions{Topics: []string{"calls"}, Wait: time.Second}))
	if len(again) != 1 || again[0].ID != second.ID || again[0].Receipt == second.Receipt {
		t.Fatalf("reserve again: %+v", again)
	}
	check(t, c.Finish(ctx, again[0].ID, again[0].Receipt))
	if _, err := c.Get(ctx, second.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get after finish: %v", err)
	}

	// Bury, Peek buried, Kick, KickTopic.
	got = must(c.Reserve(ctx, ReserveOptions{Topics: []string{"calls"}}))
	check(t, c.Bury(ctx, got[0].ID, got[0].Receipt, "cannot parse"))
	if p := must(c.Peek(ctx, "calls", StateBuried)); p.ID != got[0].ID || p.LastError != "cannot parse" {
		t.Fatalf("peek buried: %+v", p)
	}
	check(t, c.Kick(ctx, got[0].ID))
	if job := must(c.Get(ctx, got[0].ID)); job.State != StateReady {
		t.Fatalf("kicked: %+v", job)
	}
	got = must(c.Reserve(ctx, ReserveOptions{Topics: []string{"calls"}}))
	check(t, c.Bury(ctx, got[0].ID, got[0].Receipt, ""))
	if n := must(c.KickTopic(ctx, "calls", 10)); n != 1 {
		t.Fatalf("kicktopic: %d", n)
	}
	// Force: by id alone.
	got = must(c.Reserve(ctx, ReserveOptions{Topics: []string{"calls"}}))
	check(t, c.Touch(ctx, got[0].ID, Force))
	check(t, c.Finish(ctx, got[0].ID, Force))

	// Pause, Resume; a reserve on a paused topic waits.
	check(t, c.Pause(ctx, "calls", 0))
	if ts := must(c.TopicStats(ctx, "calls")); !ts.Paused || ts.PausedFor >= 0 {
		t.Fatalf("paused: %+v", ts)
	}
	check(t, c.Kick(ctx, "order-1"))
	if got := must(c.Reserve(ctx, ReserveOptions{Topics: []string{"calls"}, Wait: 50 * time.Millisecond})); len(got) != 0 {
		t.Fatalf("reserve on a paused topic: %+v", got)
	}
	check(t, c.Pause(ctx, "calls", time.Hour))
	if ts := must(c.TopicStats(ctx, "calls")); !ts.Paused || ts.PausedFor <= 59*time.Minute {
		t.Fatalf("paused for an hour: %+v", ts)
	}
	check(t, c.Resume(ctx, "calls"))

	// Delete, Stats.
	check(t, c.Delete(ctx, "order-2"))
	if err := c.Delete(ctx, "order-2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	st := must(c.Stats(ctx))
	if st.Finished != 2 || st.Deleted != 1 || st.Kicked != 3 || st.Added < 5 || st.Jobs != st.Ready+st.Delayed+st.Reserved+st.Buried ||
		st.Fields["connections"] == "" {
		t.Fatalf("stats: %+v", st)
	}
}

// AddMany: one pipeline; a job refused before sending leaves the others to go.
func TestAddManyAddsInOnePipeline(t *testing.T) {
	t.Parallel()
	_, c, ctx := startWithClient(t)
	must(c.Add(ctx, Job{Topic: "many", ID: "taken"}))
	added, errs := c.AddMany(ctx, []Job{
		{Topic: "many", Body: []byte("a")},
		{Topic: "bad topic"},
		{Topic: "many", ID: "taken"},
		{Topic: "many", ID: "m3", Delay: time.Hour},
	})
	if errs[0] != nil || len(added[0].ID) != 32 || added[0].State != StateReady {
		t.Fatalf("job 0: %+v %v", added[0], errs[0])
	}
	if !errors.Is(errs[1], ErrInvalidArgument) || !errors.Is(errs[2], ErrExists) {
		t.Fatalf("jobs 1, 2: %v, %v", errs[1], errs[2])
	}
	if errs[3] != nil || added[3].ID != "m3" || added[3].State != StateDelayed {
		t.Fatalf("job 3: %+v %v", added[3], errs[3])
	}
	if st := must(c.Stats(ctx)); st.Jobs != 3 {
		t.Fatalf("jobs: %d", st.Jobs)
	}
}

// Each server error code comes back as its own sentinel, with the server's message.
func TestEveryErrorCodeIsItsOwnType(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--max-body", "1000", "--auth-token", "s3cret")
	c := newClient(t, Options{Servers: []string{srv.addr}, AuthToken: "s3cret", MaxBody: -1})
	ctx := ctxT(t)
	must(c.Add(ctx, Job{Topic: "errs", ID: "a"}))
	must(c.Add(ctx, Job{Topic: "errs", ID: "later", Delay: time.Hour}))
	got := must(c.Reserve(ctx, ReserveOptions{Topics: []string{"errs"}}))
	stale := got[0].Receipt
	check(t, c.Release(ctx, "a", stale, 0, ""))

	cases := []struct {
		name     string
		err      error
		sentinel error
		code     string
		message  string
	}{
		{"invalid", c.Kick(ctx, "a"), ErrInvalidArgument, CodeInvalidArgument, "job 'a' is ready; only buried or delayed jobs can be kicked"},
		{"not_found", c.Delete(ctx, "nope"), ErrNotFound, CodeNotFound, "job 'nope' does not exist"},
		{"exists", second(c.Add(ctx, Job{Topic: "errs", ID: "a"})), ErrExists, CodeExists, "job 'a' already exists (add with replace to update it)"},
		{"stale_receipt", c.Finish(ctx, "a", stale), ErrStaleReceipt, CodeStaleReceipt, "receipt does not match the current reservation of job 'a'"},
		{"not_reserved", c.Finish(ctx, "later", Force), ErrNotReserved, CodeNotReserved, "job 'later' is delayed, not reserved"},
		{"too_large", second(c.Add(ctx, Job{Topic: "errs", Body: make([]byte, 1500)})), ErrTooLarge, CodeTooLarge, "body: 1500 bytes, at most 1000 allowed"},
		{"unauthorized", newClient(t, Options{Servers: []string{srv.addr}, AuthToken: "wrong"}).Ping(ctx), ErrUnauthorized, CodeUnauthorized, "invalid token"},
		{"unauthorized without a token", second(newClient(t, Options{Servers: []string{srv.addr}, AuthToken: ""}).Stats(ctx)), ErrUnauthorized, CodeUnauthorized, "Authentication required"},
		{"unavailable", newClient(t, Options{Servers: []string{fmt.Sprintf("127.0.0.1:%d", freePort(t))}}).Ping(ctx), ErrUnavailable, CodeUnavailable, "no delayq server answered: 127.0.0.1:"},
	}
	all := []error{ErrInvalidArgument, ErrNotFound, ErrExists, ErrStaleReceipt, ErrNotReserved,
		ErrTooLarge, ErrUnauthorized, ErrUnavailable, ErrInternal}
	for _, tc := range cases {
		checkError(t, tc.name, tc.err, tc.sentinel, tc.code, tc.message, all)
	}

	// internal: -ERR and anything else, from a server that answers so.
	fake := startFake(t)
	fc := newClient(t, Options{Servers: []string{fake.addr()}})
	done := make(chan error)
	go func() { done <- fc.Ping(ctx) }()
	conn, r := fake.accept(t)
	readCommand(t, r)
	conn.Write([]byte("-ERR something broke\r\n"))
	err := <-done
	checkError(t, "internal", err, ErrInternal, CodeInternal, "something broke", all)
	// The message is the server's own text, its prefix removed as the other codes' are.
	if e := (*Error)(nil); !errors.As(err, &e) || e.Message != "something broke" ||
		err.Error() != "delayq: internal: something broke" {
		t.Errorf("-ERR: message %q (%v), want the server's text without ERR", e.Message, err)
	}
	// The real server's -ERR (an unknown command) reads the same way.
	var unknown error
	unknown = c.one(ctx, []string{"NOSUCHCOMMAND"}, retryAlways, func(v resp.Value, _ bool) error {
		return replyError(v)
	})
	if e := (*Error)(nil); !errors.As(unknown, &e) || e.Code != CodeInternal ||
		strings.HasPrefix(e.Message, "ERR") || !strings.Contains(e.Message, "NOSUCHCOMMAND") {
		t.Errorf("unknown command: %#v", unknown)
	}
	// Another prefix the client does not know keeps its whole text: the prefix is its meaning.
	if e := serverError("WRONGTYPE not a job"); e.Code != CodeInternal || e.Message != "WRONGTYPE not a job" {
		t.Errorf("unknown prefix: %#v", e)
	}
}

func second[T any](_ T, err error) error { return err }

func checkError(t *testing.T, name string, err, sentinel error, code, message string, all []error) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Errorf("%s: %v is not %v", name, err, sentinel)
		return
	}
	for _, other := range all {
		if other != sentinel && errors.Is(err, other) {
			t.Errorf("%s: %v is also %v", name, err, other)
		}
	}
	var e *Error
	if !errors.As(err, &e) || e.Code != code || !strings.Contains(e.Message, message) {
		t.Errorf("%s: got %#v, want code %s and a message with %q", name, err, code, message)
	}
}

// Bad input is refused before anything is sent, naming the field.
func TestBadInputIsRefusedBeforeSending(t *testing.T) {
	t.Parallel()
	fake := startFake(t) // any connection to it fails the test
	c := newClient(t, Options{Servers: []string{fake.addr()}})
	ctx := ctxT(t)
	ok := strings.Repeat("a", 24)
	long := make([]string, 101)
	for i := range long {
		long[i] = "t"
	}
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"empty topic", second(c.Add(ctx, Job{})), "topic: required"},
		{"topic with a space", second(c.Add(ctx, Job{Topic: "orders close"})), "topic: only [A-Za-z0-9._:-] allowed, found byte 0x20"},
		{"long topic", second(c.Add(ctx, Job{Topic: strings.Repeat("t", 201)})), "topic: 201 bytes, at most 200 allowed"},
		{"negative delay", second(c.Add(ctx, Job{Topic: "t", Delay: -time.Millisecond})), "delay: must be >= 0, got -1ms"},
		{"delay and run_at", second(c.Add(ctx, Job{Topic: "t", Delay: time.Second, RunAt: time.Now()})), "delay and run_at: give at most one of them"},
		{"run_at in 1970", second(c.Add(ctx, Job{Topic: "t", RunAt: time.Unix(1795659700, 0).Add(-50 * 365 * 24 * time.Hour)})), "run_at: must be between 2001-09-09 and 9999-12-31"},
		{"ttr under 1ms", second(c.Add(ctx, Job{Topic: "t", TTR: time.Microsecond})), "ttr: at least 1ms"},
		{"negative ttr", second(c.Add(ctx, Job{Topic: "t", TTR: -time.Second})), "ttr: at least 1ms"},
		{"ttr too long", second(c.Add(ctx, Job{Topic: "t", TTR: 50 * 24 * time.Hour})), "ttr: at most 4294967295ms"},
		{"id *", second(c.Add(ctx, Job{Topic: "t", ID: "*"})), "id: '*' asks a server for a generated id"},
		{"id with a control character", second(c.Add(ctx, Job{Topic: "t", ID: "a\nb"})), "id: control characters are not allowed"},
		{"bad idempotency key", second(c.Add(ctx, Job{Topic: "t", IdempotencyKey: "a b"})), "idempotency_key: only [A-Za-z0-9_-] allowed"},
		{"no topics", second(c.Reserve(ctx, ReserveOptions{})), "topics: give at least one topic"},
		{"too many topics", second(c.Reserve(ctx, ReserveOptions{Topics: long})), "topics: at most 100 per reserve"},
		{"count 1001", second(c.Reserve(ctx, ReserveOptions{Topics: []string{"t"}, Count: 1001})), "count: must be 1..1000, got 1001"},
		{"negative count", second(c.Reserve(ctx, ReserveOptions{Topics: []string{"t"}, Count: -1})), "count: must be 1..1000, got -1"},
		{"negative wait", second(c.Reserve(ctx, ReserveOptions{Topics: []string{"t"}, Wait: -1})), "wait: must be 0..24h"},
		{"wait over a day", second(c.Reserve(ctx, ReserveOptions{Topics: []string{"t"}, Wait: 25 * time.Hour})), "wait: must be 0..24h"},
		{"short receipt", c.Finish(ctx, "x", "abc"), "receipt: expected the 24 hex digits a reserve hands out, got 3 characters"},
		{"receipt not hex", c.Touch(ctx, "x", strings.Repeat("g", 24)), "receipt: expected the 24 hex digits a reserve hands out, got 24 characters, not all hex digits"},
		{"no receipt", c.Bury(ctx, "x", "", "why"), "receipt: required"},
		{"unreserve with force", c.Unreserve(ctx, "x", Force), "receipt: Unreserve needs the delivery's receipt, not Force"},
		{"negative release delay", c.Release(ctx, "x", ok, -time.Second, ""), "delay: must be >= 0, got -1s"},
		{"empty id", c.Finish(ctx, "", ok), "id: required"},
		{"touch: empty id", c.Touch(ctx, "", ok), "id: required"},
		{"touch: id with a control character", c.Touch(ctx, "a\r\nb", ok), "id: control characters are not allowed"},
		{"touch with force: empty id", c.Touch(ctx, "", Force), "id: required"},
		{"unreserve: empty id", c.Unreserve(ctx, "", ok), "id: required"},
		{"unreserve: id with a control character", c.Unreserve(ctx, "a\x00b", ok), "id: control characters are not allowed"},
		{"unreserve: long id", c.Unreserve(ctx, strings.Repeat("i", 257), ok), "id: 257 bytes, at most 256 allowed"},
		{"negative kicktopic", second(c.KickTopic(ctx, "t", -1)), "n: must be >= 0, got -1"},
		{"peek reserved", second(c.Peek(ctx, "t", StateReserved)), "state: peek shows ready, delayed or buried jobs"},
		{"negative pause", c.Pause(ctx, "t", -time.Second), "duration: must be >= 0"},
		{"bad topic of stats", second(c.TopicStats(ctx, "a/b")), "topic: only [A-Za-z0-9._:-] allowed, found byte 0x2f"},
	}
	for _, tc := range cases {
		var e *Error
		if !errors.Is(tc.err, ErrInvalidArgument) || !errors.As(tc.err, &e) || !strings.Contains(e.Message, tc.want) {
			t.Errorf("%s: got %v, want invalid_argument with %q", tc.name, tc.err, tc.want)
		}
	}
	// A body over Options.MaxBody (the server's default --max-body) is too_large, unsent.
	if _, err := c.Add(ctx, Job{Topic: "t", Body: make([]byte, 262145)}); !errors.Is(err, ErrTooLarge) ||
		!strings.Contains(err.Error(), "body: 262145 bytes, at most 262144 allowed") {
		t.Errorf("large body: %v", err)
	}
	// Bad options.
	for _, o := range []Options{{Servers: []string{"a:7701,"}}, {Servers: []string{"a:99999"}}, {RequestTimeout: -1}} {
		if _, err := New(o); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("New(%+v): %v", o, err)
		}
	}
	select {
	case <-fake.conns:
		t.Fatal("a call with bad input connected to the server")
	default:
	}
}

func TestServersComeFromTheOptionsElseTheEnvironment(t *testing.T) {
	t.Setenv("DELAYQ_SERVER", "10.0.0.5:7701, 10.0.0.6")
	t.Setenv("DELAYQ_AUTH_TOKEN", "from-env")
	c := must(New(Options{}))
	if got := strings.Join(c.Servers(), ","); got != "10.0.0.5:7701,10.0.0.6:7701" || c.authToken != "from-env" {
		t.Fatalf("from the environment: %s %q", got, c.authToken)
	}
	c = must(New(Options{Servers: []string{"a:1,b", "[::1]:7702"}, AuthToken: "mine"}))
	if got := strings.Join(c.Servers(), ","); got != "a:1,b:7701,[::1]:7702" || c.authToken != "mine" {
		t.Fatalf("from the options: %s %q", got, c.authToken)
	}
	t.Setenv("DELAYQ_SERVER", "")
	c = must(New(Options{}))
	if got := strings.Join(c.Servers(), ","); got != DefaultServer {
		t.Fatalf("default: %s", got)
	}
}

// Cancelling a waiting reserve withdraws it on the server: it takes no job.
func TestCancelledWaitingReserveTakesNoJob(t *testing.T) {
	t.Parallel()
	_, c, ctx := startWithClient(t)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.Reserve(rctx, ReserveOptions{Topics: []string{"withdrawn"}, Wait: 20 * time.Second})
		done <- err
	}()
	eventually(t, 5*time.Second, "the reserve waits on the server", func() bool {
		return must(c.Stats(ctx)).Waiting == 1
	})
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrUnavailable) {
			t.Fatalf("cancelled reserve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled reserve did not return")
	}
	eventually(t, 5*time.Second, "the server withdraws the reserve", func() bool {
		return must(c.Stats(ctx)).Waiting == 0
	})
	must(c.Add(ctx, Job{Topic: "withdrawn", ID: "w1"}))
	if job := must(c.Get(ctx, "w1")); job.State != StateReady {
		t.Fatalf("the job went to a withdrawn reserve: %+v", job)
	}

	// A context's deadline ends the wait the same way.
	dctx, dcancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer dcancel()
	start := time.Now()
	_, err := c.Reserve(dctx, ReserveOptions{Topics: []string{"empty"}, Wait: 20 * time.Second})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 3*time.Second {
		t.Fatalf("reserve past its context's deadline: %v after %v", err, time.Since(start))
	}
}

// A reply with jobs already on its way when the reserve is cancelled: the jobs are given back
// with UNRESERVE.
func TestCancelledReserveGivesBackJobsAlreadySent(t *testing.T) {
	t.Parallel()
	fake := startFake(t)
	c := newClient(t, Options{Servers: []string{fake.addr()}})
	rctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Reserve(rctx, ReserveOptions{Topics: []string{"t"}, Wait: 20 * time.Second})
		done <- err
	}()
	conn, r := fake.accept(t)
	if cmd := readCommand(t, r); cmd[0] != "RESERVE" || cmd[1] != "TIMEOUT" || cmd[2] != "20000" {
		t.Fatalf("sent %q", cmd)
	}
	cancel()
	// The client shuts down its sending side (FIN): it reads EOF here.
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := r.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("after the cancel, the client sent more: %d, %v", n, err)
	}
	receipt := "1a1ff4433920000000000001"
	conn.Write([]byte("*1\r\n*10\r\n$2\r\nj1\r\n$1\r\nt\r\n$0\r\n\r\n$24\r\n" + receipt +
		"\r\n:1\r\n:60000\r\n:1024\r\n:1795283992196\r\n:1795284052198\r\n:0\r\n"))
	conn.Close()
	back, br := fake.accept(t)
	if cmd := readCommand(t, br); strings.Join(cmd, " ") != "UNRESERVE j1 "+receipt {
		t.Fatalf("sent %q, want UNRESERVE", cmd)
	}
	back.Write([]byte("+OK\r\n"))
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled reserve: %v", err)
	}
}

// A request's deadline comes from its context or the request timeout, whichever is sooner; a
// reply that never comes is unavailable, and a request that may have run is not repeated.
func TestTimeoutsBoundRequests(t *testing.T) {
	t.Parallel()
	fake := startFake(t)
	c := newClient(t, Options{Servers: []string{fake.addr()}, RequestTimeout: 200 * time.Millisecond})
	start := time.Now()
	errc := make(chan error, 1)
	go func() { errc <- c.Delete(context.Background(), "x") }()
	fake.accept(t) // and never answer
	err := <-errc
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "no reply within 200 ms") ||
		!strings.Contains(err.Error(), "may have run") || time.Since(start) > 3*time.Second {
		t.Fatalf("delete without a reply: %v after %v", err, time.Since(start))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	c2 := newClient(t, Options{Servers: []string{fake.addr()}})
	go func() { errc <- c2.Ping(ctx) }()
	fake.accept(t)
	if err := <-errc; !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("ping past its context's deadline: %v", err)
	}
	// A malformed reply: unavailable, and the connection is closed.
	go func() { errc <- c2.Ping(context.Background()) }()
	conn, r := fake.accept(t)
	readCommand(t, r)
	conn.Write([]byte(":5\r\n"))
	if err := <-errc; !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "malformed reply to PING") {
		t.Fatalf("malformed reply: %v", err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.ReadByte(); err == nil {
		t.Fatal("the connection of a malformed reply stays open")
	}
}

// Close ends a waiting reserve and every later call.
func TestCloseEndsWaitingReservesAndLaterCalls(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c, err := New(Options{Servers: []string{srv.addr}})
	check(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := c.Reserve(context.Background(), ReserveOptions{Topics: []string{"t"}, Wait: 20 * time.Second})
		done <- err
	}()
	probe := newClient(t, Options{Servers: []string{srv.addr}})
	eventually(t, 5*time.Second, "the reserve waits", func() bool {
		return must(probe.Stats(context.Background())).Waiting == 1
	})
	check(t, c.Close())
	if err := <-done; !errors.Is(err, ErrUnavailable) {
		t.Fatalf("reserve after close: %v", err)
	}
	if err := c.Ping(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("ping after close: %v", err)
	}
}

// A connection the server closed while it sat idle (an idle timeout, a restart) is not used.
func TestIdleConnectionClosedByTheServerIsReplaced(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--idle-timeout", "100ms")
	c := newClient(t, Options{Servers: []string{srv.addr}})
	check(t, c.Ping(context.Background()))
	eventually(t, 5*time.Second, "the server closes the idle connection", func() bool {
		s := c.servers[0]
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.idle) == 1 && !s.idle[0].alive()
	})
	// DELETE is not repeated once sent: on the dead connection it would fail.
	if err := c.Delete(context.Background(), "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete after the idle connection closed: %v", err)
	}
}

// clientID is the server's CLIENT ID of the connection a request from c goes on.
func clientID(t *testing.T, c *Client) int64 {
	t.Helper()
	var id int64
	check(t, c.one(ctxT(t), []string{"CLIENT", "ID"}, retryAlways, func(v resp.Value, _ bool) error {
		if err := replyError(v); err != nil {
			return err
		}
		if v.Kind != resp.Integer {
			return malformed("CLIENT ID", "an integer", v)
		}
		id = v.Int
		return nil
	}))
	return id
}

// A pooled connection idle for longer than the request timeout is used again: the deadline of
// its last request does not outlive the request (every touch, at half a TTR, would otherwise
// redial, with its AUTH).
func TestPooledConnectionOutlivesTheRequestTimeout(t *testing.T) {
	t.Parallel()
	srv := startServer(t, "--auth-token", "s3cret")
	c := newClient(t, Options{Servers: []string{srv.addr}, AuthToken: "s3cret",
		RequestTimeout: 200 * time.Millisecond})
	first := clientID(t, c)
	time.Sleep(500 * time.Millisecond) // idle for more than the request timeout
	if again := clientID(t, c); again != first {
		t.Fatalf("after %v idle, a new connection (CLIENT ID %d, was %d): the pool was not used",
			500*time.Millisecond, again, first)
	}
	// A waiting reserve's connection too, once answered (its deadline was the wait's).
	_, err := c.Reserve(ctxT(t), ReserveOptions{Topics: []string{"none"}, Wait: 50 * time.Millisecond})
	check(t, err)
	time.Sleep(400 * time.Millisecond)
	if again := clientID(t, c); again != first {
		t.Fatalf("after a waiting reserve, a new connection (CLIENT ID %d, was %d)", again, first)
	}
	// alive() reads the socket, not the deadline: a connection whose deadline has passed is
	// alive while its server keeps it open.
	s := c.servers[0]
	s.mu.Lock()
	if len(s.idle) != 1 {
		s.mu.Unlock()
		t.Fatalf("%d idle connections, want 1", len(s.idle))
	}
	cn := s.idle[0]
	s.mu.Unlock()
	cn.nc.SetDeadline(time.Unix(1, 0))
	if !cn.alive() {
		t.Fatal("an open connection whose deadline passed is not alive")
	}
	if again := clientID(t, c); again != first {
		t.Fatalf("after a passed deadline, a new connection (CLIENT ID %d, was %d)", again, first)
	}
}
