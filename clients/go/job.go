package delayq

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Limits of docs/api.md §1, checked before anything is sent.
const (
	DefaultTTR      = 60 * time.Second
	DefaultPriority = 1024
	// The longest delay, and the longest pause: 100 years.
	MaxDelay     = 100 * 365 * 24 * time.Hour
	maxDelayMs   = 3153600000000
	maxTopicLen  = 200
	maxIDLen     = 256
	maxTTRMs     = math.MaxUint32
	minRunAtMs   = 1000000000000   // 2001-09-09
	maxRunAtMs   = 253402300799999 // 9999-12-31
	maxKeyLen    = 64
	receiptLen   = 24
	maxCount     = 1000
	maxTopics    = 100
	maxWait      = 24 * time.Hour
	maxWaitMs    = 86400000
	defaultCount = 1
)

// Force, given in place of a receipt to Finish, Release, Touch or Bury, acts on the job by id
// alone, whoever holds it (RESP's FORCE): an operator's tool. Such a call is not repeated on
// another server once sent, and answers ErrNotReserved for a job that is not reserved.
const Force = "FORCE"

// Job is what a producer adds. Only Topic is required.
type Job struct {
	// 1-200 bytes of [A-Za-z0-9._:-].
	Topic string
	// 1-256 bytes, no control characters, unique among live jobs. Empty: the client makes one
	// (32 hex digits, time-ordered), so that an add repeated after a lost reply is the same job.
	ID string
	// Any bytes, at most the server's --max-body (Options.MaxBody).
	Body []byte
	// Due after this long (>= 0, at most 100 years; rounded up to a millisecond). Give Delay
	// or RunAt, not both. Neither: due now.
	Delay time.Duration
	// Due at this time (2001-09-09 .. 9999-12-31; a past time is due now).
	RunAt time.Time
	// Time to run: how long a delivery lasts before the job is handed out again. 0: the
	// server's default, 60 s. At least 1 ms, at most 4294967295 ms.
	TTR time.Duration
	// Lower is served first, 0..4294967295. nil: 1024 (DefaultPriority). Priority(0) is the
	// most urgent.
	Priority *uint32
	// Deliveries before the job is buried. 0: unlimited.
	MaxAttempts uint32
	// When the id is live, re-create the job from this add instead of failing with ErrExists.
	Replace bool
	// Names this add request (1-64 bytes of [A-Za-z0-9_-]) so that repeating it changes
	// nothing within the server's dedup window (docs/api.md, "Idempotent adds"). Empty: the
	// client makes one per Add call, sent on every attempt of it.
	IdempotencyKey string
}

// Priority is a *uint32 for Job.Priority: delayq.Job{..., Priority: delayq.Priority(0)}.
func Priority(p uint32) *uint32 { return &p }

// State is a job's state.
type State string

const (
	StateDelayed  State = "delayed"
	StateReady    State = "ready"
	StateReserved State = "reserved"
	StateBuried   State = "buried"
)

// Added is what an add answered.
type Added struct {
	ID    string
	State State     // StateDelayed, or StateReady when due now
	RunAt time.Time // when it is due
}

// Delivery is a job handed out by Reserve: the RESP job array (docs/api.md §4), by index.
type Delivery struct {
	ID       string
	Topic    string
	Body     []byte
	Receipt  string // proof of this delivery, for Finish, Release, Touch, Bury, Unreserve
	Attempts uint32 // deliveries so far, this one included
	TTR      time.Duration
	Priority uint32
	RunAt    time.Time // when it was due
	// The server's estimate of the end of this delivery (zero from Peek).
	ReservedUntil time.Time
	MaxAttempts   uint32 // 0: unlimited
}

// Text is the body as a string.
func (d *Delivery) Text() string { return string(d.Body) }

// JSON decodes the body into v (encoding/json).
func (d *Delivery) JSON(v any) error { return json.Unmarshal(d.Body, v) }

// ReleaseBuries says whether a release of this delivery buries the job instead: its
// MaxAttempts are used up.
func (d *Delivery) ReleaseBuries() bool {
	return d.MaxAttempts != 0 && d.Attempts >= d.MaxAttempts
}

// JobInfo is a job as Get and Peek read it: the 13 fields of GET.
type JobInfo struct {
	ID            string
	Topic         string
	State         State
	Body          []byte
	Priority      uint32
	TTR           time.Duration
	MaxAttempts   uint32
	Attempts      uint32
	CreatedAt     time.Time
	RunAt         time.Time
	ReservedUntil time.Time // zero unless reserved
	Receipt       string    // empty unless reserved
	LastError     string    // the last release's error, the bury reason, or why it came back
}

// Text is the body as a string.
func (j *JobInfo) Text() string { return string(j.Body) }

// JSON decodes the body into v (encoding/json).
func (j *JobInfo) JSON(v any) error { return json.Unmarshal(j.Body, v) }

// ReserveOptions say what Reserve takes.
type ReserveOptions struct {
	// 1..100 topics; the best job across them comes first.
	Topics []string
	// How long to wait for a job when none is ready (0..24 h; rounded up to a millisecond).
	// 0: answer at once.
	Wait time.Duration
	// Jobs at most, 1..1000. 0: 1.
	Count int
}

// Stats is the server's STATS: the figures of /v1/stats (docs/api.md §2).
type Stats struct {
	Jobs, Delayed, Ready, Reserved, Buried, Topics, Waiting                       uint64
	Added, Replaced, Reserves, Finished, Deleted, Released, TimedOut, BuriedTotal uint64
	Kicked                                                                        uint64
	// Every field as the server sent it, those above included (connections, lateness, the
	// store's own figures).
	Fields map[string]string
}

// TopicStats is STATS topic.
type TopicStats struct {
	Topic                                     string
	Delayed, Ready, Reserved, Buried, Waiting uint64
	Paused                                    bool
	// How long the pause lasts still; negative: until Resume.
	PausedFor time.Duration
}

// --- validation: docs/api.md §1, with the server's words where it has them ----------------

func validateTopic(topic string) error {
	if topic == "" {
		return invalid("topic: required, 1-200 bytes of [A-Za-z0-9._:-]")
	}
	if len(topic) > maxTopicLen {
		return invalid(fmt.Sprintf("topic: %d bytes, at most 200 allowed", len(topic)))
	}
	for i := 0; i < len(topic); i++ {
		if !nameChar(topic[i]) {
			return invalid(fmt.Sprintf("topic: only [A-Za-z0-9._:-] allowed, found byte 0x%02x", topic[i]))
		}
	}
	return nil
}

func nameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '_' || c == ':' || c == '-'
}

func validateID(id string) error {
	if id == "" {
		return invalid("id: required")
	}
	if len(id) > maxIDLen {
		return invalid(fmt.Sprintf("id: %d bytes, at most 256 allowed", len(id)))
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x20 || id[i] == 0x7f {
			return invalid("id: control characters are not allowed")
		}
	}
	return nil
}

// validateReceipt: 24 hex digits, or Force where force is allowed.
func validateReceipt(receipt string, forceAllowed bool) error {
	if receipt == "" {
		return invalid("receipt: required — the receipt from the Reserve that handed the job out" +
			" (delayq.Force in its place acts by id alone)")
	}
	if receipt == Force {
		if forceAllowed {
			return nil
		}
		return invalid("receipt: Unreserve needs the delivery's receipt, not Force")
	}
	hex := len(receipt) == receiptLen
	for i := 0; hex && i < len(receipt); i++ {
		c := receipt[i]
		hex = c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
	}
	if hex {
		return nil
	}
	got := strconv.Itoa(len(receipt)) + " characters"
	if len(receipt) == receiptLen {
		got = "24 characters, not all hex digits"
	}
	return invalid("receipt: expected the 24 hex digits a reserve hands out, got " + got)
}

func validateKey(key string) error {
	if len(key) == 0 || len(key) > maxKeyLen {
		return invalid(fmt.Sprintf("idempotency_key: 1-64 bytes, got %d", len(key)))
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return invalid("idempotency_key: only [A-Za-z0-9_-] allowed")
		}
	}
	return nil
}

// ceilMs is d in whole milliseconds, rounded up: a positive duration is never 0.
func ceilMs(d time.Duration) int64 {
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond > 0 {
		ms++
	}
	return ms
}

// delayMs checks a delay (of a job, a release) and gives it in ms.
func delayMs(field string, d time.Duration) (int64, error) {
	if d < 0 {
		return 0, invalid(fmt.Sprintf("%s: must be >= 0, got %v", field, d))
	}
	if d > MaxDelay {
		return 0, invalid(fmt.Sprintf("%s: at most 100 years (%dms), got %v", field, int64(maxDelayMs), d))
	}
	return ceilMs(d), nil
}

// addCommand checks a job and makes its ADD ... WITHSTATE, its id and key filled in.
func addCommand(job *Job, maxBody int) ([]string, error) {
	if err := validateTopic(job.Topic); err != nil {
		return nil, err
	}
	if job.ID != "" {
		if err := validateID(job.ID); err != nil {
			return nil, err
		}
		if job.ID == "*" {
			return nil, invalid("id: '*' asks a server for a generated id; leave the id empty instead")
		}
	}
	if job.Delay != 0 && !job.RunAt.IsZero() {
		return nil, invalid("delay and run_at: give at most one of them")
	}
	delay, err := delayMs("delay", job.Delay)
	if err != nil {
		return nil, err
	}
	ttr := int64(DefaultTTR / time.Millisecond)
	if job.TTR != 0 {
		if job.TTR < time.Millisecond {
			return nil, invalid(fmt.Sprintf("ttr: at least 1ms, got %v", job.TTR))
		}
		if ttr = ceilMs(job.TTR); ttr > maxTTRMs {
			return nil, invalid(fmt.Sprintf("ttr: at most 4294967295ms, got %v", job.TTR))
		}
	}
	if job.IdempotencyKey != "" {
		if err := validateKey(job.IdempotencyKey); err != nil {
			return nil, err
		}
	}
	if maxBody > 0 && len(job.Body) > maxBody {
		return nil, &Error{Code: CodeTooLarge,
			Message: fmt.Sprintf("body: %d bytes, at most %d allowed", len(job.Body), maxBody)}
	}
	id := job.ID
	if id == "" {
		id = "*"
	}
	priority := uint32(DefaultPriority)
	if job.Priority != nil {
		priority = *job.Priority
	}
	cmd := []string{"ADD", job.Topic, id, strconv.FormatInt(delay, 10), strconv.FormatInt(ttr, 10),
		string(job.Body), "PRIORITY", strconv.FormatUint(uint64(priority), 10),
		"MAXATTEMPTS", strconv.FormatUint(uint64(job.MaxAttempts), 10)}
	if !job.RunAt.IsZero() {
		at := job.RunAt.UnixMilli()
		if at < minRunAtMs || at > maxRunAtMs {
			return nil, invalid(fmt.Sprintf("run_at: must be between 2001-09-09 and 9999-12-31, got %s",
				job.RunAt.UTC().Format(time.RFC3339Nano)))
		}
		cmd = append(cmd, "AT", strconv.FormatInt(at, 10))
	}
	if job.Replace {
		cmd = append(cmd, "REPLACE")
	}
	if job.IdempotencyKey != "" {
		cmd = append(cmd, "IDEMPOTENCY", job.IdempotencyKey)
	}
	return append(cmd, "WITHSTATE"), nil
}

// reserveCommand checks a reserve and makes its RESERVE.
func reserveCommand(o ReserveOptions) ([]string, int64, error) {
	if len(o.Topics) == 0 {
		return nil, 0, invalid("topics: give at least one topic")
	}
	if len(o.Topics) > maxTopics {
		return nil, 0, invalid(fmt.Sprintf("topics: at most 100 per reserve, got %d", len(o.Topics)))
	}
	for _, t := range o.Topics {
		if err := validateTopic(t); err != nil {
			return nil, 0, err
		}
	}
	count := o.Count
	if count == 0 {
		count = defaultCount
	}
	if count < 1 || count > maxCount {
		return nil, 0, invalid(fmt.Sprintf("count: must be 1..1000, got %d", o.Count))
	}
	if o.Wait < 0 || o.Wait > maxWait {
		return nil, 0, invalid(fmt.Sprintf("wait: must be 0..24h (1d), got %v", o.Wait))
	}
	wait := ceilMs(o.Wait)
	cmd := make([]string, 0, 6+len(o.Topics))
	cmd = append(cmd, "RESERVE")
	if wait > 0 {
		cmd = append(cmd, "TIMEOUT", strconv.FormatInt(wait, 10))
	}
	cmd = append(cmd, "COUNT", strconv.Itoa(count), "FROM")
	return append(cmd, o.Topics...), wait, nil
}

func msTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}
