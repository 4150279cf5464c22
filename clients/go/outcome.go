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
// next ones between half and all of d, and none less than Base nor more than Cap. Zero fields
// take the defaults, as the C++ worker's.
type Backoff struct {
	Base   time.Duration // Default: 1 s.
	Factor float64       // >= 1. Default: 2.
	Cap    time.Duration // >= Base, at most 100 years. Default: 10 min.
}

func (b Backoff) withDefaults() Backoff {
	if b.Base == 0 {
		b.Base = time.Second
	}
	if b.Factor == 0 {
		b.Factor = 2
	}
	if b.Cap == 0 {
		b.Cap = 10 * time.Minute
		if b.Base > b.Cap {
			b.Cap = b.Base
		}
	}
	return b
}

func (b Backoff) check() error {
	switch {
	case b.Base < 0:
		return invalid(fmt.Sprintf("backoff.base: must be >= 0, got %v", b.Base))
	case !(b.Factor >= 1) || math.IsInf(b.Factor, 0):
		return invalid(fmt.Sprintf("backoff.factor: must be a finite number >= 1, got %v", b.Factor))
	case b.Cap < b.Base:
		return invalid(fmt.Sprintf("backoff.cap: must be >= backoff.base (%v), got %v", b.Base, b.Cap))
	case b.Cap > MaxDelay:
		return invalid(fmt.Sprintf("backoff.cap: at most 100 years, got %v", b.Cap))
	}
	return nil
}

// BackoffDelay is the delay of attempt `attempts` (0 is read as 1) with random in [0, 1] (0:
// the shortest delay, 1: the longest; clamped): the C++ worker's BackoffDelayMs, to the
// millisecond. Zero fields of b take the defaults.
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
