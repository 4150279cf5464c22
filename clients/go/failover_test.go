package delayq

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/clients/go/internal/resp"
)

// twoServers runs a redis-server and two delayq servers on it (--store redis: the same jobs).
func twoServers(t *testing.T) (*testServer, *testServer) {
	redis := startRedis(t)
	args := []string{"--store", "redis", "--redis", "redis://" + redis, "--redis-prefix", "dq"}
	return startServer(t, args...), startServer(t, args...)
}

// One of two servers is killed while adds go on: every add the client acknowledged exists
// exactly once, and the adds in flight at the kill (retried on the other server under the same
// id and idempotency key) are neither lost nor doubled.
func TestFailoverAddsNeitherLostNorDoubled(t *testing.T) {
	t.Parallel()
	s1, s2 := twoServers(t)
	c := newClient(t, Options{Servers: []string{s1.addr, s2.addr}})
	ctx := ctxT(t)
	const producers, perProducer = 4, 150
	var mu sync.Mutex
	var acked []string
	var failures []error
	var wg sync.WaitGroup
	started := make(chan struct{})
	var once sync.Once
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := 0; i < perProducer; i++ {
				body := []byte(fmt.Sprintf("producer %d job %d", p, i))
				a, err := c.Add(ctx, Job{Topic: "failover", Body: body})
				mu.Lock()
				if err != nil {
					failures = append(failures, err)
				} else {
					acked = append(acked, a.ID)
				}
				n := len(acked)
				mu.Unlock()
				if n == producers*perProducer/3 {
					once.Do(func() { close(started) })
				}
			}
		}(p)
	}
	<-started
	s1.kill() // while the adds go on
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d adds failed with a server left, the first: %v", len(failures), failures[0])
	}
	if len(acked) != producers*perProducer {
		t.Fatalf("%d adds acknowledged, want %d", len(acked), producers*perProducer)
	}
	seen := map[string]bool{}
	for _, id := range acked {
		if seen[id] {
			t.Fatalf("id %s acknowledged twice", id)
		}
		seen[id] = true
		if _, err := c.Get(ctx, id); err != nil {
			t.Fatalf("acknowledged add %s: %v", id, err)
		}
	}
	t.Logf("%d adds, %d repeated after a lost reply", len(acked), c.repeats.Load())
	st := must(c.Stats(ctx))
	if st.Jobs != uint64(len(acked)) {
		t.Fatalf("the store holds %d jobs, %d adds were acknowledged", st.Jobs, len(acked))
	}
	// Later calls go to the server left at once (the dead one is marked down).
	start := time.Now()
	for i := 0; i < 20; i++ {
		check(t, c.Ping(ctx))
	}
	if time.Since(start) > time.Second {
		t.Fatalf("20 pings with one server down took %v", time.Since(start))
	}
}

// An add whose reply is lost after it ran is repeated on the next server under the same id
// and key: the server answers it as it answered the first, and the job is there once.
func TestAddRepeatedAfterALostReplyIsAddedOnce(t *testing.T) {
	t.Parallel()
	s1, s2 := twoServers(t)
	fake := startFake(t)
	// The fake server passes the ADD on to s1 (where it runs), then drops the connection.
	c := newClient(t, Options{Servers: []string{fake.addr(), s2.addr}})
	direct := newClient(t, Options{Servers: []string{s1.addr}})
	ctx := ctxT(t)
	errc := make(chan error, 1)
	var added Added
	go func() {
		var err error
		added, err = c.Add(ctx, Job{Topic: "lost", Body: []byte("once")})
		errc <- err
	}()
	conn, r := fake.accept(t)
	cmd := readCommand(t, r)
	if cmd[0] != "ADD" || cmd[2] == "*" || cmd[len(cmd)-3] != "IDEMPOTENCY" {
		t.Fatalf("sent %q: want a client-made id and idempotency key", cmd)
	}
	// Run the very same command on s1 (the first attempt ran), then lose the reply.
	id := cmd[2]
	check(t, direct.run(ctx, [][]string{cmd}, retryUntilSent, func(replies []resp.Value, _ bool) error {
		return replyError(replies[0])
	}))
	conn.Close()
	if err := <-errc; err != nil {
		t.Fatalf("add after a lost reply: %v", err)
	}
	if added.ID != id {
		t.Fatalf("added %q, sent %q", added.ID, id)
	}
	if st := must(direct.Stats(ctx)); st.Jobs != 1 || st.Added != 1 {
		t.Fatalf("after a repeated add: %d jobs, %d added", st.Jobs, st.Added)
	}
}

// A waiting reserve whose server shuts down moves to the next server for the rest of its
// wait, and gets the job added there.
func TestWaitingReserveMovesOnWhenItsServerShutsDown(t *testing.T) {
	t.Parallel()
	s1, s2 := twoServers(t)
	c := newClient(t, Options{Servers: []string{s1.addr, s2.addr}})
	on1 := newClient(t, Options{Servers: []string{s1.addr}})
	ctx := ctxT(t)
	type answer struct {
		jobs []*Delivery
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		jobs, err := c.Reserve(ctx, ReserveOptions{Topics: []string{"moving"}, Wait: 20 * time.Second})
		done <- answer{jobs, err}
	}()
	eventually(t, 5*time.Second, "the reserve waits on the first server", func() bool {
		return must(on1.Stats(ctx)).Waiting == 1
	})
	s1.terminate()
	on2 := newClient(t, Options{Servers: []string{s2.addr}})
	eventually(t, 5*time.Second, "the reserve waits on the second server", func() bool {
		return must(on2.Stats(ctx)).Waiting == 1
	})
	must(on2.Add(ctx, Job{Topic: "moving", ID: "m1"}))
	a := <-done
	if a.err != nil || len(a.jobs) != 1 || a.jobs[0].ID != "m1" {
		t.Fatalf("reserve across a shutdown: %+v, %v", a.jobs, a.err)
	}
}

// With one server, a waiting reserve cut short by its shutdown says so (IsShuttingDown).
func TestWaitingReserveOnAServerShuttingDownSaysSo(t *testing.T) {
	t.Parallel()
	srv, c, ctx := startWithClient(t)
	done := make(chan error, 1)
	go func() {
		_, err := c.Reserve(ctx, ReserveOptions{Topics: []string{"t"}, Wait: 20 * time.Second})
		done <- err
	}()
	eventually(t, 5*time.Second, "the reserve waits", func() bool { return must(c.Stats(ctx)).Waiting == 1 })
	srv.terminate()
	err := <-done
	if !IsShuttingDown(err) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("reserve on a server shutting down: %v", err)
	}
}
