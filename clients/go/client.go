// Package delayq is the Go client and worker of delayq, a delay queue server
// (docs/api.md in the delayq repository): a Client that adds, reserves and acknowledges jobs
// over the Redis protocol (RESP) with failover over a list of servers, and a Worker that runs
// a handler per topic with retries, backoff, touches and a graceful stop, as the C++
// delayq::Worker does.
//
//	client, err := delayq.New(delayq.Options{}) // $DELAYQ_SERVER, else 127.0.0.1:7701
//	added, err := client.Add(ctx, delayq.Job{Topic: "orders.close", Body: body, Delay: 30 * time.Minute})
//
// Every call takes a context: its deadline bounds the call's connects and requests (besides
// Options.ConnectTimeout and Options.RequestTimeout), and its end abandons the call. Errors
// are *Error values matched with errors.Is against ErrNotFound, ErrStaleReceipt, ... (errors.go).
//
// A Client is safe for use by any number of goroutines at once, and should be shared: it keeps
// a pool of connections per server.
package delayq

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq/clients/go/internal/resp"
)

// DefaultServer is the server used when neither Options.Servers nor DELAYQ_SERVER names one.
const DefaultServer = "127.0.0.1:7701"

// Options configure a Client. The zero value is usable: the servers and the token come from
// the environment.
type Options struct {
	// The servers' RESP addresses, "host:port" (a missing port is 7701; IPv6 as "[::1]:7701").
	// An element may itself be a comma-separated list: []string{"a:7701,b:7701"}. Several
	// servers are for failover, not sharding: they must serve the same jobs (--store redis,
	// one Redis behind them all). Empty: $DELAYQ_SERVER (comma-separated), else
	// 127.0.0.1:7701.
	Servers []string
	// Sent as AUTH on every connection (the servers' --auth-token). Empty:
	// $DELAYQ_AUTH_TOKEN, else none.
	AuthToken string
	// Speak TLS to the servers (their --tls-cert-file): every connection, each server's
	// certificate checked against TLSCAFile (else the system's trust store) and against the
	// host of its address, a DNS name or an IP address SAN. False: $DELAYQ_TLS (on unless 0,
	// no or false; empty counts as unset).
	TLS bool
	// The CA (PEM) that signed the servers' certificates. Empty: $DELAYQ_CACERT, else the
	// system's trust store. With TLS only.
	TLSCAFile string
	// This client's certificate (PEM) and its key, for servers that ask for one
	// (--tls-ca-cert-file: mutual TLS); both or neither. Empty: $DELAYQ_CERT and $DELAYQ_KEY.
	// With TLS only.
	TLSCertFile string
	TLSKeyFile  string
	// Bound on each TCP connect and its AUTH. Default: 1 s.
	ConnectTimeout time.Duration
	// Bound on each request's reply; a waiting Reserve gets its wait on top. Default: 5 s.
	RequestTimeout time.Duration
	// Idle connections kept per server. Default: 64.
	MaxIdleConns int
	// Largest body Add sends; a larger one is refused with ErrTooLarge before it is sent.
	// Default: 262144, the server's default --max-body; set it to the servers' own if they
	// differ. -1: no check here (the server's check remains).
	MaxBody int
}

// Client talks to one or more delayq servers. Make one with New, share it, Close it at the end.
type Client struct {
	servers        []*server
	preferred      atomic.Int64 // the server that answered last
	authToken      string
	connectTimeout time.Duration
	requestTimeout time.Duration
	maxIdle        int
	maxBody        int

	idMu  sync.Mutex
	idMs  int64  // GUARDED_BY(idMu): ms of the last generated id
	idSeq uint32 // GUARDED_BY(idMu): its counter within that ms
	tag   string // 16 hex digits, random per Client
	adds  atomic.Uint64
	// Requests repeated on the next server after a lost reply (for tests).
	repeats atomic.Uint64

	mu      sync.Mutex
	closed  bool           // GUARDED_BY(mu)
	waiting map[*conn]bool // GUARDED_BY(mu): connections of waiting reserves, for Close
}

var errClosed = unavailable("the client is closed", nil)

// New makes a client. It connects to nothing yet: a server that is down (or whose certificate
// does not check) shows on the first call. Errors: ErrInvalidArgument naming "servers", the
// timeout or the TLS option at fault (a TLS file given with TLS off, a certificate without its
// key or the reverse, a file that cannot be read).
func New(o Options) (*Client, error) {
	servers := o.Servers
	if len(servers) == 0 {
		if env := strings.TrimSpace(os.Getenv("DELAYQ_SERVER")); env != "" {
			servers = []string{env}
		} else {
			servers = []string{DefaultServer}
		}
	}
	addrs, err := parseServers(servers)
	if err != nil {
		return nil, err
	}
	if o.AuthToken == "" {
		o.AuthToken = os.Getenv("DELAYQ_AUTH_TOKEN")
	}
	tlsConf, err := tlsConfig(&o)
	if err != nil {
		return nil, err
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = time.Second
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = 5 * time.Second
	}
	if o.ConnectTimeout < 0 {
		return nil, invalid(fmt.Sprintf("connect_timeout: must be > 0, got %v", o.ConnectTimeout))
	}
	if o.RequestTimeout < 0 {
		return nil, invalid(fmt.Sprintf("request_timeout: must be > 0, got %v", o.RequestTimeout))
	}
	if o.MaxIdleConns <= 0 {
		o.MaxIdleConns = 64
	}
	if o.MaxBody == 0 {
		o.MaxBody = 262144
	}
	var tag [8]byte
	if _, err := rand.Read(tag[:]); err != nil {
		return nil, &Error{Code: CodeInternal, Message: "cannot read random bytes: " + err.Error()}
	}
	c := &Client{authToken: o.AuthToken, connectTimeout: o.ConnectTimeout,
		requestTimeout: o.RequestTimeout, maxIdle: o.MaxIdleConns, maxBody: o.MaxBody,
		tag: hex.EncodeToString(tag[:]), waiting: map[*conn]bool{}}
	for _, a := range addrs {
		c.servers = append(c.servers, &server{addr: a, tls: serverTLS(tlsConf, a)})
	}
	return c, nil
}

// parseServers reads "host:port[,host:port...]" elements; a missing port is 7701.
func parseServers(list []string) ([]string, error) {
	var out []string
	for _, element := range list {
		for _, part := range strings.Split(element, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				return nil, invalid(fmt.Sprintf("servers: empty address in %q (expected host:port[,host:port...])", element))
			}
			if strings.HasSuffix(part, "]") || !strings.Contains(part, ":") {
				part += ":7701"
			}
			host, port, err := net.SplitHostPort(part)
			if err != nil {
				return nil, invalid(fmt.Sprintf("servers: bad address %q: %v", part, err))
			}
			if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" {
				return nil, invalid(fmt.Sprintf("servers: bad address %q: expected host:port, the port 1..65535", part))
			}
			out = append(out, part)
		}
	}
	return out, nil
}

// Servers are the addresses the client uses, in order.
func (c *Client) Servers() []string {
	out := make([]string, len(c.servers))
	for i, s := range c.servers {
		out[i] = s.addr
	}
	return out
}

// Close closes every connection; a waiting Reserve returns ErrUnavailable (the server
// withdraws it). Later calls return ErrUnavailable. Idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	waiting := c.waiting
	c.waiting = map[*conn]bool{}
	c.mu.Unlock()
	for cn := range waiting {
		cn.close()
	}
	for _, s := range c.servers {
		s.closeIdle()
	}
	return nil
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// newID is a generated job id: 12 hex digits of wall-clock ms, 4 of a counter within the ms,
// the client's 16-digit random tag. Unique, and time-ordered for one client.
func (c *Client) newID() string {
	c.idMu.Lock()
	now := time.Now().UnixMilli()
	if now > c.idMs {
		c.idMs, c.idSeq = now, 0
	} else if c.idSeq++; c.idSeq > 0xffff { // 65536 ids in one ms: borrow the next ms
		c.idMs++
		c.idSeq = 0
	}
	ms, seq := c.idMs, c.idSeq
	c.idMu.Unlock()
	var b [32]byte
	putHex(b[:12], uint64(ms))
	putHex(b[12:16], uint64(seq))
	copy(b[16:], c.tag)
	return string(b[:])
}

// newKey is an idempotency key, one per Add call: the client's tag and a counter.
func (c *Client) newKey() string {
	var b [32]byte
	copy(b[:16], c.tag)
	putHex(b[16:], c.adds.Add(1)-1)
	return string(b[:])
}

// putHex writes the low 4*len(dst) bits of v as lowercase hex digits, zero-padded.
func putHex(dst []byte, v uint64) {
	const digits = "0123456789abcdef"
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = digits[v&15]
		v >>= 4
	}
}

// afterRepeat reads the error of a request repeated after a lost reply: a finish answered
// not_found means the job is gone, what the first attempt may have done; other errors say the
// first attempt may have done it.
func afterRepeat(err error, repeated, goneIsDone bool) error {
	e, ok := err.(*Error)
	if !repeated || !ok || e.Code == CodeUnavailable {
		return err
	}
	if goneIsDone && e.Code == CodeNotFound {
		return nil
	}
	return &Error{Code: e.Code, Message: e.Message +
		" (after a lost reply: the first attempt, on another server, may have done it)"}
}

// one runs a single command and hands its reply to parse.
func (c *Client) one(ctx context.Context, cmd []string, rule retryRule, parse func(v resp.Value, repeated bool) error) error {
	return c.run(ctx, [][]string{cmd}, rule, func(replies []resp.Value, repeated bool) error {
		return parse(replies[0], repeated)
	})
}

// ok runs a command answered +OK.
func (c *Client) ok(ctx context.Context, cmd []string, rule retryRule, goneIsDone bool) error {
	return c.one(ctx, cmd, rule, func(v resp.Value, repeated bool) error {
		return afterRepeat(parseOK(cmd[0], v), repeated, goneIsDone)
	})
}

// Add adds a job. Repeated on the next server after a lost reply, always: under the same id
// (one the client makes when Job.ID is empty) and the same idempotency key (one per call), the
// server answers a repeat whose first attempt ran as that attempt was answered, so the job is
// added at most once. A repeat that still meets ErrExists counts as success when the live job
// has this topic and body.
//
// Errors: ErrInvalidArgument (naming the field; nothing sent), ErrExists (the id is live and
// Replace is not set), ErrTooLarge, ErrUnavailable, ErrUnauthorized.
func (c *Client) Add(ctx context.Context, job Job) (Added, error) {
	added, errs := c.AddMany(ctx, []Job{job})
	return added[0], errs[0]
}

// AddMany adds jobs as one pipeline: one round trip for them all, each added (or refused) as
// Add would, its answer at its index. A job refused before sending (ErrInvalidArgument,
// ErrTooLarge) leaves the others to go; when no server takes the pipeline, every job sent gets
// that error. Repeated together on the next server after a lost reply, each under its own id
// and key, so none is added twice.
func (c *Client) AddMany(ctx context.Context, jobs []Job) ([]Added, []error) {
	out := make([]Added, len(jobs))
	errs := make([]error, len(jobs))
	cmds := make([][]string, 0, len(jobs))
	sent := make([]int, 0, len(jobs)) // cmds[k] is jobs[sent[k]]
	jobs = append([]Job(nil), jobs...)
	for i := range jobs {
		job := &jobs[i]
		if job.IdempotencyKey == "" {
			job.IdempotencyKey = c.newKey()
			if job.ID == "" {
				job.ID = c.newID()
			}
		}
		cmd, err := addCommand(job, c.maxBody)
		if err != nil {
			errs[i] = err
			continue
		}
		cmds = append(cmds, cmd)
		sent = append(sent, i)
	}
	if len(cmds) == 0 {
		return out, errs
	}
	answered := false
	err := c.run(ctx, cmds, retryAlways, func(replies []resp.Value, repeated bool) error {
		answered = true
		var unreadable error
		for k, v := range replies {
			i := sent[k]
			out[i], errs[i] = c.added(ctx, &jobs[i], v, repeated)
			if unreadable == nil && errors.Is(errs[i], errMalformed) {
				unreadable = errs[i]
			}
		}
		return unreadable
	})
	if err != nil && !answered {
		for _, i := range sent {
			errs[i] = err
		}
	}
	return out, errs
}

// added reads the answer to job's ADD. A repeat after a lost reply that meets ErrExists is our
// own first attempt when the live job has our topic and body.
func (c *Client) added(ctx context.Context, job *Job, v resp.Value, repeated bool) (Added, error) {
	added, err := parseAdded(v)
	if codeOf(err) == CodeExists && repeated && !job.Replace && job.ID != "" {
		if j, gerr := c.Get(ctx, job.ID); gerr == nil && j.Topic == job.Topic && bytes.Equal(j.Body, job.Body) {
			state := StateReady
			if j.State == StateDelayed {
				state = StateDelayed
			}
			return Added{ID: job.ID, State: state, RunAt: j.RunAt}, nil
		}
	}
	return added, err
}

// Reserve takes up to o.Count ready jobs of o.Topics, best first, waiting up to o.Wait for one
// when none is ready; none in time: an empty slice and no error. Each delivery must be
// finished, released, buried or unreserved before its TTR runs out (Touch extends it), or
// the job is handed out again.
//
// A reserve that waits holds a connection of its own. Ending ctx withdraws it: the client shuts
// down the connection's sending side, which the server takes as the client leaving, and gives
// back (Unreserve) any job whose reply was already on its way; the call returns an error
// unwrapping to ctx.Err() and holds no job. A server that stops while the reserve waits (its
// "shutting down" answer) is left for the next server in the list, for what is left of the
// wait. Not repeated once its reply is lost: jobs it may have taken come back after their TTR.
//
// Errors: ErrInvalidArgument, ErrUnavailable, ErrUnauthorized.
func (c *Client) Reserve(ctx context.Context, o ReserveOptions) ([]*Delivery, error) {
	cmd, wait, err := reserveCommand(o)
	if err != nil {
		return nil, err
	}
	if wait > 0 {
		return c.reserveWaiting(ctx, o, time.Duration(wait)*time.Millisecond)
	}
	var jobs []*Delivery
	err = c.one(ctx, cmd, retryUntilSent, func(v resp.Value, _ bool) (err error) {
		jobs, err = parseDeliveries(v)
		return err
	})
	return jobs, err
}

// ackCmd is one FINISH, RELEASE or BURY.
type ackCmd struct {
	kind    AckKind
	id      string
	receipt string
	delayMs int64  // RELEASE
	text    string // RELEASE's error, BURY's reason
}

func (a *ackCmd) command() []string {
	var cmd []string
	switch a.kind {
	case AckFinish:
		return []string{"FINISH", a.id, a.receipt}
	case AckRelease:
		cmd = []string{"RELEASE", a.id, strconv.FormatInt(a.delayMs, 10), a.receipt}
	case AckBury:
		cmd = []string{"BURY", a.id, a.receipt}
	}
	if a.text != "" {
		cmd = append(cmd, "ERROR", a.text)
	}
	return cmd
}

// acknowledge sends acks as one pipeline: one round trip for them all. With receipts they are
// repeated together on the next server after a lost reply, as each would be alone; with Force
// among them, not. The answers are in the order of acks.
func (c *Client) acknowledge(ctx context.Context, acks []ackCmd) []error {
	out := make([]error, len(acks))
	cmds := make([][]string, 0, len(acks))
	sent := make([]int, 0, len(acks)) // cmds[k] is acks[sent[k]]
	rule := retryAlways
	for i := range acks {
		a := &acks[i]
		if err := validateReceipt(a.receipt, true); err != nil {
			out[i] = err
			continue
		}
		if err := validateID(a.id); err != nil {
			out[i] = err
			continue
		}
		cmds = append(cmds, a.command())
		sent = append(sent, i)
		if a.receipt == Force {
			rule = retryUntilSent
		}
	}
	if len(cmds) == 0 {
		return out
	}
	answered := false
	err := c.run(ctx, cmds, rule, func(replies []resp.Value, repeated bool) error {
		answered = true
		var unreadable error
		for k, v := range replies {
			a := &acks[sent[k]]
			err := afterRepeat(parseOK(cmds[k][0], v), repeated, a.kind == AckFinish)
			if unreadable == nil && codeOf(err) == CodeUnavailable {
				unreadable = err
			}
			out[sent[k]] = err
		}
		return unreadable
	})
	if err != nil && !answered { // no server took them
		for _, i := range sent {
			out[i] = err
		}
	}
	return out
}

func (c *Client) ack(ctx context.Context, a ackCmd) error {
	return c.acknowledge(ctx, []ackCmd{a})[0]
}

// Finish acknowledges a delivery: the job is done and gone. With the receipt it is repeated on
// the next server after a lost reply; a repeat answered ErrNotFound counts as done.
//
// Errors: ErrStaleReceipt (not this delivery's any more: its TTR ran out and another worker
// has it), ErrNotFound, ErrNotReserved (Force on a job not reserved), ErrInvalidArgument,
// ErrUnavailable.
func (c *Client) Finish(ctx context.Context, id, receipt string) error {
	return c.ack(ctx, ackCmd{kind: AckFinish, id: id, receipt: receipt})
}

// Release gives a delivery back: the job is due again after delay (0: at once), counted as an
// attempt; lastError (may be empty) is kept as its last_error. A job whose MaxAttempts are used
// up is buried instead. Errors as Finish's.
func (c *Client) Release(ctx context.Context, id, receipt string, delay time.Duration, lastError string) error {
	ms, err := delayMs("delay", delay)
	if err != nil {
		return err
	}
	return c.ack(ctx, ackCmd{kind: AckRelease, id: id, receipt: receipt, delayMs: ms, text: lastError})
}

// Bury sets a delivery's job aside, reason as its last_error, until Kick or Delete.
// Errors as Finish's.
func (c *Client) Bury(ctx context.Context, id, receipt, reason string) error {
	return c.ack(ctx, ackCmd{kind: AckBury, id: id, receipt: receipt, text: reason})
}

// Touch restarts a delivery's full TTR from now. Errors as Finish's.
func (c *Client) Touch(ctx context.Context, id, receipt string) error {
	if err := validateReceipt(receipt, true); err != nil {
		return err
	}
	if err := validateID(id); err != nil {
		return err
	}
	rule := retryAlways
	if receipt == Force {
		rule = retryUntilSent
	}
	return c.ok(ctx, []string{"TOUCH", id, receipt}, rule, false)
}

// Unreserve gives back a delivery whose work never began: ready again at once, in its place in
// line, the attempt not counted. Needs the receipt (not Force). Errors as Finish's.
func (c *Client) Unreserve(ctx context.Context, id, receipt string) error {
	if err := validateReceipt(receipt, false); err != nil {
		return err
	}
	if err := validateID(id); err != nil {
		return err
	}
	return c.ok(ctx, []string{"UNRESERVE", id, receipt}, retryAlways, false)
}

// unreserveAll gives jobs back in one pipeline, bounded by the request timeout whatever the
// caller's context: for a reserve withdrawn while its reply was on the way, and a worker's stop.
func (c *Client) unreserveAll(jobs []*Delivery) []error {
	cmds := make([][]string, len(jobs))
	for i, d := range jobs {
		cmds[i] = []string{"UNRESERVE", d.ID, d.Receipt}
	}
	return c.pipelineOK(context.Background(), cmds)
}

// pipelineOK sends commands answered +OK, all with a receipt (safe to repeat), as one
// pipeline; their answers in order.
func (c *Client) pipelineOK(ctx context.Context, cmds [][]string) []error {
	out := make([]error, len(cmds))
	if len(cmds) == 0 {
		return out
	}
	answered := false
	err := c.run(ctx, cmds, retryAlways, func(replies []resp.Value, repeated bool) error {
		answered = true
		var unreadable error
		for i, v := range replies {
			out[i] = afterRepeat(parseOK(cmds[i][0], v), repeated, false)
			if unreadable == nil && codeOf(out[i]) == CodeUnavailable {
				unreadable = out[i]
			}
		}
		return unreadable
	})
	if err != nil && !answered {
		for i := range out {
			out[i] = err
		}
	}
	return out
}

// Delete removes a job in any state. Not repeated once sent (by id alone, a repeat could
// delete a job added again meanwhile). Errors: ErrNotFound, ErrUnavailable.
func (c *Client) Delete(ctx context.Context, id string) error {
	if err := validateID(id); err != nil {
		return err
	}
	return c.ok(ctx, []string{"DELETE", id}, retryUntilSent, false)
}

// Kick makes a buried or delayed job ready now. Not repeated once sent. Errors: ErrNotFound,
// ErrInvalidArgument (the job is ready or reserved), ErrUnavailable.
func (c *Client) Kick(ctx context.Context, id string) error {
	if err := validateID(id); err != nil {
		return err
	}
	return c.ok(ctx, []string{"KICK", id}, retryUntilSent, false)
}

// KickTopic makes up to n buried jobs of topic ready; it returns how many. Not repeated once
// sent.
func (c *Client) KickTopic(ctx context.Context, topic string, n int) (int, error) {
	if err := validateTopic(topic); err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, invalid(fmt.Sprintf("n: must be >= 0, got %d", n))
	}
	var kicked int
	err := c.one(ctx, []string{"KICKTOPIC", topic, strconv.Itoa(n)}, retryUntilSent,
		func(v resp.Value, _ bool) (err error) {
			kicked, err = parseCount("KICKTOPIC", v)
			return err
		})
	return kicked, err
}

// Get reads a job. Errors: ErrNotFound, ErrUnavailable.
func (c *Client) Get(ctx context.Context, id string) (*JobInfo, error) {
	if err := validateID(id); err != nil {
		return nil, err
	}
	var job *JobInfo
	err := c.one(ctx, []string{"GET", id}, retryAlways, func(v resp.Value, _ bool) (err error) {
		job, err = parseJob(id, v)
		return err
	})
	return job, err
}

// Peek reads the next job of topic in state (StateReady, StateDelayed or StateBuried): the
// one a reserve would take next, the next to fall due, the oldest buried. Errors: ErrNotFound
// when there is none, ErrInvalidArgument.
func (c *Client) Peek(ctx context.Context, topic string, state State) (*JobInfo, error) {
	if err := validateTopic(topic); err != nil {
		return nil, err
	}
	if state != StateReady && state != StateDelayed && state != StateBuried {
		return nil, invalid(fmt.Sprintf("state: peek shows ready, delayed or buried jobs, not %q", state))
	}
	cmd := []string{"PEEK", topic, strings.ToUpper(string(state))}
	// PEEK answers a delivery without the job's state and times: the job is read whole with
	// GET. One that leaves the state between the two is peeked again, a few times.
	for attempt := 0; attempt < 5; attempt++ {
		var peeked *Delivery
		err := c.one(ctx, cmd, retryAlways, func(v resp.Value, _ bool) (err error) {
			if err = replyError(v); err != nil || v.Null {
				return err
			}
			peeked, err = parseDelivery("PEEK", v)
			return err
		})
		if err != nil {
			return nil, err
		}
		if peeked == nil {
			break
		}
		job, err := c.Get(ctx, peeked.ID)
		if err == nil && job.State == state {
			return job, nil
		}
		if err != nil && codeOf(err) != CodeNotFound {
			return nil, err
		}
	}
	return nil, &Error{Code: CodeNotFound, Message: fmt.Sprintf("topic '%s' has no %s job", topic, state)}
}

// Stats reads the server's figures (STATS).
func (c *Client) Stats(ctx context.Context) (*Stats, error) {
	var s *Stats
	err := c.one(ctx, []string{"STATS"}, retryAlways, func(v resp.Value, _ bool) (err error) {
		s, err = parseStats(v)
		return err
	})
	return s, err
}

// TopicStats reads one topic's figures (STATS topic).
func (c *Client) TopicStats(ctx context.Context, topic string) (*TopicStats, error) {
	if err := validateTopic(topic); err != nil {
		return nil, err
	}
	var t *TopicStats
	err := c.one(ctx, []string{"STATS", topic}, retryAlways, func(v resp.Value, _ bool) (err error) {
		t, err = parseTopicStats(v)
		return err
	})
	return t, err
}

// Topics names the topics that have jobs, waiting reserves or a pause, sorted.
func (c *Client) Topics(ctx context.Context) ([]string, error) {
	var names []string
	err := c.one(ctx, []string{"TOPICS"}, retryAlways, func(v resp.Value, _ bool) (err error) {
		names, err = parseNames(v)
		return err
	})
	return names, err
}

// Pause stops topic handing out jobs for d (0: until Resume; at most 100 years). Its jobs still
// fall due; reserves on it wait.
func (c *Client) Pause(ctx context.Context, topic string, d time.Duration) error {
	if err := validateTopic(topic); err != nil {
		return err
	}
	ms, err := delayMs("duration", d)
	if err != nil {
		return err
	}
	return c.ok(ctx, []string{"PAUSE", topic, strconv.FormatInt(ms, 10)}, retryAlways, false)
}

// Resume ends a pause; waiting reserves are served at once.
func (c *Client) Resume(ctx context.Context, topic string) error {
	if err := validateTopic(topic); err != nil {
		return err
	}
	return c.ok(ctx, []string{"RESUME", topic}, retryAlways, false)
}

// Ping checks that a server answers (and, with a token, accepts it).
func (c *Client) Ping(ctx context.Context) error {
	return c.one(ctx, []string{"PING"}, retryAlways, func(v resp.Value, _ bool) error {
		if err := replyError(v); err != nil {
			return err
		}
		if v.Kind != resp.SimpleString || v.Text() != "PONG" {
			return malformed("PING", "+PONG", v)
		}
		return nil
	})
}
