package delayq

import (
	"errors"
	"strings"
)

// The error codes of docs/api.md §6, as Error.Code holds them.
const (
	CodeInvalidArgument = "invalid_argument" // RESP -INVALID: bad input; the message names the field
	CodeNotFound        = "not_found"        // -NOTFOUND: no live job with that id
	CodeExists          = "exists"           // -EXISTS: add of a live id without Replace
	CodeStaleReceipt    = "stale_receipt"    // -STALE: the receipt is not the job's current delivery
	CodeNotReserved     = "not_reserved"     // -NOTRESERVED: a Force change on a job not reserved
	CodeTooLarge        = "too_large"        // -TOOLARGE: a body over the server's --max-body
	CodeUnauthorized    = "unauthorized"     // -NOAUTH: a missing or wrong token
	CodeUnavailable     = "unavailable"      // -UNAVAILABLE, no server answered, a reply lost
	CodeInternal        = "internal"         // -ERR and anything else
)

// Error is every error the client and the worker return: a code from docs/api.md §6 and a
// message, the server's own text when a server answered. errors.Is matches it against the
// sentinel of its code (ErrNotFound, ...); errors.As gives the message:
//
//	if errors.Is(err, delayq.ErrStaleReceipt) { ... }  // another worker has the job now
//	var e *delayq.Error
//	if errors.As(err, &e) { log.Print(e.Code, e.Message) }
//
// A failure of the network (a refused connect, a lost reply, a context that ended) is
// CodeUnavailable, and unwraps to its cause: errors.Is(err, context.DeadlineExceeded) holds
// for a call whose context's deadline passed.
type Error struct {
	Code    string // one of the Code* constants
	Message string // e.g. "job 'order-43' does not exist"
	cause   error
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "delayq: " + e.Code
	}
	return "delayq: " + e.Code + ": " + e.Message
}

// Is matches the sentinel of e's code (ErrNotFound for CodeNotFound, ...).
func (e *Error) Is(target error) bool {
	s, ok := target.(sentinel)
	return ok && string(s) == e.Code
}

// Unwrap is the cause of a network failure (a *net.OpError, context.Canceled, ...), or nil.
func (e *Error) Unwrap() error { return e.cause }

// sentinel is the type of the Err* values: a code alone.
type sentinel string

func (s sentinel) Error() string { return "delayq: " + string(s) }

// The sentinels, one per code, for errors.Is.
var (
	ErrInvalidArgument error = sentinel(CodeInvalidArgument)
	ErrNotFound        error = sentinel(CodeNotFound)
	ErrExists          error = sentinel(CodeExists)
	ErrStaleReceipt    error = sentinel(CodeStaleReceipt)
	ErrNotReserved     error = sentinel(CodeNotReserved)
	ErrTooLarge        error = sentinel(CodeTooLarge)
	ErrUnauthorized    error = sentinel(CodeUnauthorized)
	ErrUnavailable     error = sentinel(CodeUnavailable)
	ErrInternal        error = sentinel(CodeInternal)
)

// The RESP error prefixes of docs/api.md §6, read back into codes.
var prefixCodes = map[string]string{
	"INVALID":     CodeInvalidArgument,
	"NOTFOUND":    CodeNotFound,
	"EXISTS":      CodeExists,
	"STALE":       CodeStaleReceipt,
	"NOTRESERVED": CodeNotReserved,
	"TOOLARGE":    CodeTooLarge,
	"NOAUTH":      CodeUnauthorized,
	"UNAVAILABLE": CodeUnavailable,
}

// serverError reads an error reply, "PREFIX message": the message is the server's text after
// its prefix. ERR (an unknown command, a wrong argument count, a protocol error) is internal,
// its prefix removed as the others' are; any other prefix is internal too, the whole text kept
// (the prefix is then the only sign of what it was).
func serverError(text string) *Error {
	prefix, rest, _ := strings.Cut(text, " ")
	if code, ok := prefixCodes[prefix]; ok {
		return &Error{Code: code, Message: rest}
	}
	if prefix == "ERR" && rest != "" {
		return &Error{Code: CodeInternal, Message: rest}
	}
	return &Error{Code: CodeInternal, Message: text}
}

func invalid(message string) *Error { return &Error{Code: CodeInvalidArgument, Message: message} }

func unavailable(message string, cause error) *Error {
	return &Error{Code: CodeUnavailable, Message: message, cause: cause}
}

// codeOf is err's code, or "" for nil and errors that are not *Error.
func codeOf(err error) string {
	if err == nil {
		return ""
	}
	if e, ok := err.(*Error); ok {
		return e.Code
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// shuttingDownPrefix begins the message of a server's -UNAVAILABLE to a waiting reserve when it
// is stopping (docs/api.md §5, "Graceful shutdown").
const shuttingDownPrefix = "shutting down: "

// IsShuttingDown says whether err is a server's answer that it is stopping: an unavailable
// error whose message begins "shutting down: ". A reserve that gets it should go elsewhere
// (or wait for the restart), not poll.
func IsShuttingDown(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == CodeUnavailable && strings.HasPrefix(e.Message, shuttingDownPrefix)
}
