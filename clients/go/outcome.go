package delayq

import (
	"context"
	"fmt"
	"math"
	"time"
)

// HandlerFunc handles one delivery. What it returns decides what becomes of the job:
//
//	nil                         success: the job is finished (gone)
//	delayq.Retry(err)           released, due again after the topic's backoff; err's text
//	                            becomes the job's last_error
//	delayq.RetryIn(d, err)      released, due again after d
//	delayq.Bury(reason)         buried, reason as its last_error, until kicked
//	any other error             as Retry(err)
//	a panic                     as Retry with the panic's text ("panic: ...")
//
// The outcomes may be wrapped (fmt.Errorf("...: %w", delayq.Bury("bad order"))): the worker
// finds them with errors.As. ctx is cancelled when the worker gives the job back while the
// handler still runs (the end of Run's drain); the handler should then return.
type HandlerFunc func(ctx context.Context, job *Delivery) error

// Outcome is the error type of Retry, RetryIn and Bury: a handler's decision other than
// success.
type Outcome struct {
	bury  bool
	delay time.Duration // retry: the delay asked for; < 0: the topic's backoff
	err   error         // retry: the error, as last_error
	text  string        // bury: the reason
}

// Retry asks for the job to be tried again after the topic's backoff for this attempt, with
// err's text (may be nil) as its last_error.
func Retry(err error) error { return &Outcome{delay: -1, err: err} }

// RetryIn asks for the job to be tried again after d (< 0: the topic's backoff), with err's
// text (may be nil) as its last_error.
func RetryIn(d time.Duration, err error) error {
	if d < 0 {
		d = -1
	}
	return &Outcome{delay: d, err: err}
}

// Bury asks for the job to be set aside, reason as its last_error, until it is kicked.
func Bury(reason string) error { return &Outcome{bury: true, text: reason} }

func (o *Outcome) Error() string {
	switch {
	case o.bury:
		return "bury: " + o.text
	case o.delay >= 0:
		return fmt.Sprintf("retry in %v: %s", o.delay, o.lastError())
	default:
		return "retry: " + o.lastError()
	}
}

// Unwrap is the error of a retry.
func (o *Outcome) Unwrap() error { return o.err }

func (o *Outcome) lastError() string {
	if o.bury {
		return o.text
	}
	if o.err == nil {
		return ""
	}
	return o.err.Error()
}

// Backoff is a topic's exponential backoff for retries: the n-th attempt (Delivery.Attempts)
// that asks for a retry waits
//
//	d = min(Cap, Base * Factor^(n-1)),
//
// jittered uniformly to [d/2, d] but never below Base: the first retry waits Base exactly, the
// next ones between half and all of d, and none less than Base nor more than Cap. A Base of 0
// waits 0 at every attempt (a retry is due at once), as the C++ worker's base_ms 0.
//
// The zero Backoff{} is the default: 1 s, x2, at most 10 min (DefaultBackoff). Any other value
// is taken as written, every field: a field left out is 0, not its default, and a value that
// is not valid (Factor < 1, Cap < Base, a negative Base) is refused by Worker.Handle (and Run)
// with ErrInvalidArgument naming the field. To change one field, start from DefaultBackoff():
//
//	b := delayq.DefaultBackoff()
//	b.Base = 200 * time.Millisecond
//	// or all of them: delayq.Backoff{Base: 0, Factor: 1, Cap: 0} retries at once, always
type Backoff struct {
	Base   time.Duration // >= 0; 0: no wait. Default: 1 s.
	Factor float64       // a finite number >= 1. Default: 2.
	Cap    time.Duration // >= Base, at most 100 years. Default: 10 min.
}

// DefaultBackoff is the backoff of the zero Backoff{}: 1 s, x2, at most 10 min, the C++
// worker's defaults.
func DefaultBackoff() Backoff {
	return Backoff{Base: time.Second, Factor: 2, Cap: 10 * time.Minute}
}

// withDefaults is DefaultBackoff() for the zero Backoff{}, else b as it is.
func (b Backoff) withDefaults() Backoff {
	if b == (Backoff{}) {
		return DefaultBackoff()
	}
	return b
}

// leftOut is added to the error of a field that is 0, perhaps left out meaning its default.
func leftOut(zero bool) string {
	if !zero {
		return ""
	}
	return " (only the zero Backoff{} takes the defaults; start from delayq.DefaultBackoff() to change some fields)"
}

// check refuses a Backoff that is not valid (after withDefaults), naming the field.
func (b Backoff) check() error {
	switch {
	case b.Base < 0:
		return invalid(fmt.Sprintf("backoff.base: must be >= 0, got %v", b.Base))
	case !(b.Factor >= 1) || math.IsInf(b.Factor, 0):
		return invalid(fmt.Sprintf("backoff.factor: must be a finite number >= 1, got %v%s", b.Factor, leftOut(b.Factor == 0)))
	case b.Cap < b.Base:
		return invalid(fmt.Sprintf("backoff.cap: must be >= backoff.base (%v), got %v%s", b.Base, b.Cap, leftOut(b.Cap == 0)))
	case b.Cap > MaxDelay:
		return invalid(fmt.Sprintf("backoff.cap: at most 100 years, got %v", b.Cap))
	}
	return nil
}

// BackoffDelay is the delay of attempt `attempts` (0 is read as 1) with random in [0, 1] (0:
// the shortest delay, 1: the longest; clamped): the C++ worker's BackoffDelayMs, to the
// millisecond. The zero Backoff{} is DefaultBackoff(); any other b is taken as written, and
// should be valid (Worker.Handle checks): a Base of 0 gives 0.
func BackoffDelay(b Backoff, attempts uint32, random float64) time.Duration {
	b = b.withDefaults()
	baseMs, capMs := ceilMs(b.Base), ceilMs(b.Cap)
	if baseMs <= 0 {
		return 0
	}
	if attempts == 0 {
		attempts = 1
	}
	if !(random >= 0) { // also NaN
		random = 0
	}
	random = math.Min(random, 1)
	// Any factor > 1 reaches the cap well before 2^12 steps; the bound keeps Pow's exponent small.
	steps := attempts - 1
	if steps > 4096 {
		steps = 4096
	}
	d := float64(baseMs) * math.Pow(b.Factor, float64(steps))
	if !(d <= float64(capMs)) { // also +Inf and NaN
		d = float64(capMs)
	}
	jittered := int64(d/2 + random*(d/2))
	if jittered < baseMs {
		jittered = baseMs
	}
	if jittered > capMs {
		jittered = capMs
	}
	return time.Duration(jittered) * time.Millisecond
}
