package delayq

// Connections, their pools, and the failover rule every request follows (the C++ client's
// src/client/server_set.h, in Go):
//
// A request goes to the server that answered last (the first one at start) and moves on
// through the list, in order, when that one cannot take it:
//   - a connect that fails (refused, timed out, AUTH refused) marks the server down: later
//     connects to it fail at once until its backoff (50 ms doubling to 2 s, reset by a
//     connect that succeeds) lets one attempt through. Nothing was sent: every request moves on.
//   - a connection that breaks after the request was written (reset, closed, no reply within
//     the request timeout, a malformed reply) marks the server down too; the request may or may
//     not have run there. It moves on only when it is safe to repeat (retryAlways); otherwise
//     the call fails with ErrUnavailable saying so.
//   - an -UNAVAILABLE reply (that server's store is out of reach, or it is stopping) moves a
//     retryAlways request on as well, while there is a next server to try.
// When no server takes it: ErrUnavailable "no delayq server answered: 127.0.0.1:7701
// (connect: connection refused), ...", or ErrUnauthorized when a server refused the token.

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/delayq/delayq/clients/go/internal/resp"
)

// retryRule says whether a request may go to the next server after it was written to one
// whose reply was lost.
type retryRule int

const (
	retryAlways    retryRule = iota // safe to repeat (client.go says why, per call)
	retryUntilSent                  // not: moves on only while nothing was sent
)

const (
	backoffInitial = 50 * time.Millisecond
	backoffMax     = 2 * time.Second
)

// server is one address of the list, its idle connections and whether it is down.
type server struct {
	addr string
	tls  *tls.Config // nil: plaintext; else its ServerName is addr's host

	mu   sync.Mutex
	idle []*conn // GUARDED_BY(mu), most recently used last
	// The connect backoff, GUARDED_BY(mu): while failing, connects wait until retryAt.
	failing bool
	retryAt time.Time
	delay   time.Duration
	lastErr string
}

// tryStart is 0 when a connect may be tried now, else how long is left to wait. While the
// server is failing, a 0 claims the attempt: others asking meanwhile are told to wait.
func (s *server) tryStart() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.failing {
		return 0
	}
	now := time.Now()
	if now.Before(s.retryAt) {
		return s.retryAt.Sub(now)
	}
	s.retryAt = now.Add(s.delay)
	return 0
}

// failed marks the server down for the next backoff period, which doubles.
func (s *server) failed(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.delay == 0 {
		s.delay = backoffInitial
	}
	s.failing = true
	s.retryAt = time.Now().Add(s.delay)
	s.delay = minDuration(s.delay*2, backoffMax)
	s.lastErr = why
}

func (s *server) succeeded() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failing = false
	s.delay = backoffInitial
}

// closeIdle closes the server's idle connections, outside its lock.
func (s *server) closeIdle() {
	s.mu.Lock()
	idle := s.idle
	s.idle = nil
	s.mu.Unlock()
	for _, cn := range idle {
		cn.close()
	}
}

// conn is one RESP connection, used by one request at a time.
type conn struct {
	nc     net.Conn // what requests are read from and written to: raw, or TLS over it
	raw    net.Conn // the TCP connection
	bw     *bufio.Writer
	w      *resp.Writer
	r      *resp.Reader
	server int // index in Client.servers
}

func newConn(nc, raw net.Conn, server int) *conn {
	bw := bufio.NewWriterSize(nc, 16<<10)
	return &conn{nc: nc, raw: raw, bw: bw, w: resp.NewWriter(bw),
		r: resp.NewReader(bufio.NewReaderSize(nc, 16<<10), resp.Limits{}), server: server}
}

// close closes the TCP connection, without TLS's close_notify: a TLS Close would wait up to
// 5 s to send it, and the server takes the TCP end as the end without it.
func (c *conn) close() { c.raw.Close() }

// closeWrite shuts down the sending side: the server takes it as the client leaving. Over TLS,
// close_notify first (TLS's own end of the sending side), then the TCP FIN.
func (c *conn) closeWrite() {
	if tc, ok := c.nc.(*tls.Conn); ok {
		tc.CloseWrite()
	}
	if tc, ok := c.raw.(*net.TCPConn); ok {
		tc.CloseWrite()
	} else {
		c.raw.Close()
	}
}

// alive says whether an idle connection can still be used: nothing is owed on it, so anything
// readable (the server closed it: a restart, an idle timeout; stray bytes) or a socket error
// (a reset) means it cannot; a peek that would block means it can. A connection's deadline is
// not the socket's state: one that has passed (release clears it; this is a safeguard) is
// cleared and the peek made again, rather than read as the connection failing.
func (c *conn) alive() bool {
	if c.r.Buffered() > 0 {
		return false
	}
	sc, ok := c.raw.(syscall.Conn) // under TLS: a close_notify or a FIN is readable there too
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	for try := 0; try < 2; try++ {
		wouldBlock := false
		var buf [1]byte
		err = raw.Read(func(fd uintptr) bool {
			for {
				_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
				if err == syscall.EINTR {
					continue
				}
				// nil: bytes or EOF (0 bytes) to read; another errno: the socket failed.
				wouldBlock = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
				return true // never wait for readiness
			}
		})
		if errors.Is(err, os.ErrDeadlineExceeded) && try == 0 {
			c.nc.SetDeadline(time.Time{}) // the poller refused for the deadline, before any peek
			continue
		}
		return err == nil && wouldBlock
	}
	return false
}

// roundTrip writes cmds as one pipeline and reads their replies, within `timeout` and ctx.
func (c *conn) roundTrip(ctx context.Context, cmds [][]string, timeout time.Duration) ([]resp.Value, error) {
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c.nc.SetDeadline(deadline)
	if ctx.Done() != nil {
		stop := watch(ctx, func() { c.nc.SetDeadline(time.Unix(1, 0)) })
		defer stop()
	}
	for _, cmd := range cmds {
		c.w.Command(cmd...)
	}
	if err := c.w.Flush(); err != nil {
		return nil, err
	}
	replies := make([]resp.Value, len(cmds))
	for i := range replies {
		v, err := c.r.Read()
		if err != nil {
			return nil, err
		}
		replies[i] = v
	}
	return replies, nil
}

// watch runs onDone if ctx ends before the returned stop is called; stop returns once onDone
// can no longer run (so it never touches a connection someone else took meanwhile).
func watch(ctx context.Context, onDone func()) (stop func()) {
	quit := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case <-ctx.Done():
			onDone()
		case <-quit:
		}
	}()
	return func() {
		close(quit)
		<-exited
	}
}

// why words a connection's failure for messages: "connect: connection refused", "no reply
// within 5000 ms (request timeout)", "connection closed by the server".
func (c *Client) why(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed by the server"
	case errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return fmt.Sprintf("no reply within %d ms (request timeout)", c.requestTimeout.Milliseconds())
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	return err.Error()
}

// acquire is an idle connection of server i, or a new one (connected and authenticated).
func (c *Client) acquire(ctx context.Context, i int) (*conn, error) {
	s := c.servers[i]
	for {
		s.mu.Lock()
		n := len(s.idle)
		if n == 0 {
			s.mu.Unlock()
			break
		}
		cn := s.idle[n-1]
		s.idle = s.idle[:n-1]
		s.mu.Unlock()
		if cn.alive() {
			return cn, nil
		}
		cn.close()
	}
	return c.dial(ctx, i)
}

// errAuth marks a connect whose AUTH the server refused.
var errAuth = errors.New("AUTH refused")

func (c *Client) dial(ctx context.Context, i int) (*conn, error) {
	s := c.servers[i]
	if wait := s.tryStart(); wait > 0 {
		s.mu.Lock()
		last := s.lastErr
		s.mu.Unlock()
		return nil, fmt.Errorf("unreachable, next connect attempt in %d ms (last error: %s)",
			wait.Milliseconds(), last)
	}
	fail := func(why string) (*conn, error) {
		if ctxErr(ctx) != nil {
			return nil, ctxErr(ctx) // not the server's fault: it is not marked down
		}
		s.failed(why)
		return nil, errors.New(why)
	}
	d := net.Dialer{Timeout: c.connectTimeout}
	raw, err := d.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		return fail(c.why(err))
	}
	nc := raw
	if s.tls != nil {
		tc := tls.Client(raw, s.tls)
		raw.SetDeadline(time.Now().Add(c.connectTimeout))
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return fail("TLS handshake: " + c.connectWhy(err))
		}
		nc = tc
	}
	cn := newConn(nc, raw, i)
	// The first round trip: AUTH with a token. Over TLS, a PING without one: TLS 1.3 ends the
	// client's handshake before the server has checked its certificate, whose refusal comes
	// with the first read. So a refused certificate fails the connect, where nothing of the
	// request was sent and it can move on, not the request.
	var hello []string
	if c.authToken != "" {
		hello = []string{"AUTH", c.authToken}
	} else if s.tls != nil {
		hello = []string{"PING"}
	}
	if hello != nil {
		replies, err := cn.roundTrip(ctx, [][]string{hello}, c.connectTimeout)
		if err == nil && hello[0] == "AUTH" && replies[0].IsError() {
			err = fmt.Errorf("%w: %s", errAuth, replies[0].Text())
		}
		if err != nil {
			cn.close()
			why := err.Error()
			if !errors.Is(err, errAuth) {
				why = c.connectWhy(err)
			}
			if s.tls != nil && isRemoteAlert(err) {
				why = "TLS handshake refused by the server: " + why
			}
			return fail(why)
		}
	}
	s.succeeded()
	return cn, nil
}

// connectWhy words the failure of a connect's handshake or first round trip, as why does, a
// timeout being the connect timeout's.
func (c *Client) connectWhy(err error) string {
	var ne net.Error
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return fmt.Sprintf("not complete within %d ms (connect timeout)", c.connectTimeout.Milliseconds())
	}
	return c.why(err)
}

// isRemoteAlert: err is a TLS alert the server sent (crypto/tls's "remote error").
func isRemoteAlert(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error"
}

// release gives a connection back to its server's pool, its deadlines cleared (or closes it
// when the pool is full or the client closed).
func (c *Client) release(cn *conn) {
	// Without this, the deadline the last request set (now + RequestTimeout) would pass while
	// the connection is idle, and alive would find it unusable: every connection idle longer
	// than the request timeout redialed, with its AUTH.
	if err := cn.nc.SetDeadline(time.Time{}); err != nil {
		cn.close()
		return
	}
	s := c.servers[cn.server]
	s.mu.Lock()
	if !c.isClosed() && len(s.idle) < c.maxIdle {
		s.idle = append(s.idle, cn)
		cn = nil
	}
	s.mu.Unlock()
	if cn != nil {
		cn.close()
	}
}

// broken closes a connection that failed after its request was written, and marks its server
// down.
func (c *Client) broken(cn *conn, why string) {
	cn.close()
	c.servers[cn.server].failed(why)
}

// goingAway: server i answered that it is stopping. Its idle connections (which it is closing)
// are closed, and it is marked down, so the next request goes to the next server at once.
func (c *Client) goingAway(i int) {
	s := c.servers[i]
	s.closeIdle()
	s.failed("shutting down")
}

// ctxErr is ctx.Err(), or context.DeadlineExceeded once the deadline has passed (a connection's
// deadline, set to the context's, may fire before the context's own timer).
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// ctxError is the error of a call whose context ended: unavailable, unwrapping to ctxErr(ctx).
func ctxError(ctx context.Context, what string) *Error {
	err := ctxErr(ctx)
	if err == nil {
		err = context.Canceled
	}
	return unavailable(what+": "+err.Error(), err)
}

// run sends cmds as one pipeline to one server, by the failover rule above, and hands their
// replies to take, with whether an earlier attempt, on another server, may have run (its reply
// was lost). take's error is the call's.
func (c *Client) run(ctx context.Context, cmds [][]string, rule retryRule,
	take func(replies []resp.Value, repeated bool) error) error {
	if c.isClosed() {
		return errClosed
	}
	var tried []string
	unauthorized, repeated := false, false
	note := func(i int, why string) {
		tried = append(tried, c.servers[i].addr+" ("+why+")")
		unauthorized = unauthorized || strings.Contains(why, errAuth.Error())
	}
	ended := func() error {
		if repeated {
			return ctxError(ctx, "the request was sent, its reply lost, and it may have run")
		}
		return ctxError(ctx, "nothing was sent")
	}
	n := len(c.servers)
	first := int(c.preferred.Load())
	for k := 0; k < n; k++ {
		if ctxErr(ctx) != nil {
			return ended()
		}
		i := (first + k) % n
		cn, err := c.acquire(ctx, i)
		if err != nil {
			if ctxErr(ctx) == nil {
				note(i, err.Error())
			}
			continue
		}
		replies, err := cn.roundTrip(ctx, cmds, c.requestTimeout)
		if err != nil {
			if ctxErr(ctx) != nil {
				cn.close() // not the server's fault: leave it up
				return ctxError(ctx, "delayq server "+c.servers[i].addr+
					": the request was sent and may have run")
			}
			why := c.why(err)
			c.broken(cn, why)
			if rule == retryUntilSent {
				return unavailable("delayq server "+c.servers[i].addr+": "+why+
					"; the request was sent and may have run", err)
			}
			note(i, why)
			repeated = true
			c.repeats.Add(1)
			continue
		}
		if rule == retryAlways && k+1 < n && anyUnavailable(replies) {
			c.release(cn)
			note(i, "answered UNAVAILABLE")
			repeated = true
			continue
		}
		err = take(replies, repeated)
		if errors.Is(err, errMalformed) || protocolErrorReply(replies) {
			cn.close() // nothing after it on this connection can be trusted
		} else {
			c.release(cn)
		}
		c.preferred.Store(int64(i))
		return err
	}
	if ctxErr(ctx) != nil { // the last server's connect ended with the context
		return ended()
	}
	list := strings.Join(tried, ", ")
	if unauthorized {
		return &Error{Code: CodeUnauthorized, Message: "no delayq server accepted: " + list}
	}
	return unavailable("no delayq server answered: "+list, nil)
}

// send writes cmd to the first server that takes a connection, by the rule above, and returns
// the connection with its reply owed: for a reserve that waits. Once written, it is not sent
// again: a write that fails is ErrUnavailable (the command may have reached the server).
func (c *Client) send(ctx context.Context, cmd []string) (*conn, error) {
	if c.isClosed() {
		return nil, errClosed
	}
	var tried []string
	n := len(c.servers)
	first := int(c.preferred.Load())
	for k := 0; k < n; k++ {
		if ctxErr(ctx) != nil {
			return nil, ctxError(ctx, "nothing was sent")
		}
		i := (first + k) % n
		cn, err := c.acquire(ctx, i)
		if err != nil {
			if ctxErr(ctx) == nil {
				tried = append(tried, c.servers[i].addr+" ("+err.Error()+")")
			}
			continue
		}
		cn.nc.SetWriteDeadline(time.Now().Add(c.requestTimeout))
		cn.w.Command(cmd...)
		if err := cn.w.Flush(); err != nil {
			why := c.why(err)
			c.broken(cn, why)
			return nil, unavailable("delayq server "+c.servers[i].addr+": "+why+
				"; the request was sent and may have run", err)
		}
		c.preferred.Store(int64(i))
		return cn, nil
	}
	if ctxErr(ctx) != nil {
		return nil, ctxError(ctx, "nothing was sent")
	}
	return nil, unavailable("no delayq server answered: "+strings.Join(tried, ", "), nil)
}

func anyUnavailable(replies []resp.Value) bool {
	for _, r := range replies {
		if r.IsError() && strings.HasPrefix(r.Text(), "UNAVAILABLE") {
			return true
		}
	}
	return false
}

// protocolErrorReply: the server answered "-ERR Protocol error: ..." and closes the connection.
func protocolErrorReply(replies []resp.Value) bool {
	for _, r := range replies {
		if r.IsError() && strings.HasPrefix(r.Text(), "ERR Protocol error") {
			return true
		}
	}
	return false
}

func minDuration(a, b time.Duration) time.Duration {
	if a < b {
		return a
	}
	return b
}
