// Package resp is the small part of RESP2 (the Redis protocol, as docs/api.md §4 describes
// delayq's use of it) that the delayq client speaks: commands written as arrays of bulk
// strings, and replies read as simple strings, errors, integers, bulk strings and arrays,
// null included.
//
// The reader trusts nothing it reads: every length is bounded (Limits), nesting is bounded,
// and a bulk string longer than 64 KiB is read as it arrives rather than allocated from its
// declared length, so a broken or hostile peer costs at most what it actually sends.
// FuzzReader checks that no input makes it panic or accept what it cannot write back.
package resp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Kind is the type of a reply.
type Kind byte

const (
	SimpleString Kind = '+'
	Error        Kind = '-'
	Integer      Kind = ':'
	BulkString   Kind = '$'
	Array        Kind = '*'
)

// Value is one reply. Bulk strings and simple strings and errors keep their bytes in Str;
// integers in Int; arrays their elements in Elems. Null is set for RESP2's null bulk string
// ($-1) and null array (*-1), with Kind saying which.
type Value struct {
	Kind  Kind
	Null  bool
	Str   []byte
	Int   int64
	Elems []Value
}

// Text is Str as a string.
func (v Value) Text() string { return string(v.Str) }

// IsError says whether the reply is an error ("-PREFIX message").
func (v Value) IsError() bool { return v.Kind == Error }

// String shows a reply for messages, as redis-cli would, shortened to ~120 bytes.
func (v Value) String() string {
	var s string
	switch {
	case v.Null:
		s = "(nil)"
	case v.Kind == SimpleString:
		s = string(v.Str)
	case v.Kind == Error:
		s = "(error) " + string(v.Str)
	case v.Kind == Integer:
		s = "(integer) " + strconv.FormatInt(v.Int, 10)
	case v.Kind == BulkString:
		s = strconv.Quote(string(v.Str))
	case v.Kind == Array:
		s = "["
		for i, e := range v.Elems {
			if i > 0 {
				s += ", "
			}
			s += e.String()
			if len(s) > 120 {
				break
			}
		}
		s += "]"
	default:
		s = fmt.Sprintf("(kind %q)", byte(v.Kind))
	}
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return s
}

// Limits bound what a Reader accepts. Zero fields take the defaults.
type Limits struct {
	// Longest bulk string. Default: 128 MiB (a server's --max-body is at most 64 MiB).
	MaxBulk int64
	// Most elements of one array. Default: 1 << 20.
	MaxArray int64
	// Deepest nesting of arrays: 1 is an array of scalars. Default: 8 (delayq's replies
	// nest 2 deep).
	MaxDepth int
	// Longest line of a simple string, error or integer, CRLF included. Default: 64 KiB.
	MaxLine int
}

const (
	defaultMaxBulk  = 128 << 20
	defaultMaxArray = 1 << 20
	defaultMaxDepth = 8
	defaultMaxLine  = 64 << 10
	// Bulk strings up to this size are allocated from their declared length; longer ones
	// grow as their bytes arrive.
	eagerBulk = 64 << 10
	// Bulk strings up to slabBulk bytes (CRLF included) are cut from blocks of slabSize, so a
	// block is kept alive by any string cut from it: at most slabSize per string kept.
	slabBulk = 512
	slabSize = 8 << 10
)

// ErrProtocol is wrapped by every error the Reader returns for bytes that are not RESP2
// within its Limits. The connection cannot be used after it.
var ErrProtocol = errors.New("resp: protocol error")

func protocolError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...))
}

// Reader reads replies from a buffered stream.
type Reader struct {
	br     *bufio.Reader
	limits Limits
	slab   []byte // what is left of the block small bulk strings are cut from
}

// NewReader reads from br within limits.
func NewReader(br *bufio.Reader, limits Limits) *Reader {
	if limits.MaxBulk <= 0 {
		limits.MaxBulk = defaultMaxBulk
	}
	if limits.MaxArray <= 0 {
		limits.MaxArray = defaultMaxArray
	}
	if limits.MaxDepth <= 0 {
		limits.MaxDepth = defaultMaxDepth
	}
	if limits.MaxLine <= 0 {
		limits.MaxLine = defaultMaxLine
	}
	return &Reader{br: br, limits: limits}
}

// Buffered is how many bytes are read ahead and not yet consumed.
func (r *Reader) Buffered() int { return r.br.Buffered() }

// Read reads one reply. Errors: the stream's (io.EOF before the first byte of a reply,
// io.ErrUnexpectedEOF within one, timeouts), or one wrapping ErrProtocol.
func (r *Reader) Read() (Value, error) {
	return r.read(1)
}

func (r *Reader) read(depth int) (Value, error) {
	line, err := r.line()
	if err != nil {
		return Value{}, err
	}
	kind, rest := Kind(line[0]), line[1:]
	switch kind {
	case SimpleString, Error:
		return Value{Kind: kind, Str: append([]byte(nil), rest...)}, nil
	case Integer:
		n, err := parseInt(rest)
		if err != nil {
			return Value{}, err
		}
		return Value{Kind: Integer, Int: n}, nil
	case BulkString:
		n, err := parseLength(rest, r.limits.MaxBulk, "bulk string")
		if err != nil {
			return Value{}, err
		}
		if n < 0 {
			return Value{Kind: BulkString, Null: true}, nil
		}
		b, err := r.bulk(n)
		if err != nil {
			return Value{}, err
		}
		return Value{Kind: BulkString, Str: b}, nil
	case Array:
		n, err := parseLength(rest, r.limits.MaxArray, "array")
		if err != nil {
			return Value{}, err
		}
		if n < 0 {
			return Value{Kind: Array, Null: true}, nil
		}
		if depth > r.limits.MaxDepth {
			return Value{}, protocolError("arrays nested deeper than %d", r.limits.MaxDepth)
		}
		// Not allocated from the declared length: a hostile count costs only what arrives.
		elems := make([]Value, 0, min64(n, 1024))
		for i := int64(0); i < n; i++ {
			e, err := r.read(depth + 1)
			if err != nil {
				return Value{}, unexpected(err)
			}
			elems = append(elems, e)
		}
		return Value{Kind: Array, Elems: elems}, nil
	default:
		return Value{}, protocolError("unknown reply type byte 0x%02x", line[0])
	}
}

// line reads one CRLF-terminated line, without the CRLF; never empty.
func (r *Reader) line() ([]byte, error) {
	var out []byte
	for {
		chunk, err := r.br.ReadSlice('\n')
		if len(out)+len(chunk) > r.limits.MaxLine {
			return nil, protocolError("line longer than %d bytes", r.limits.MaxLine)
		}
		if err == bufio.ErrBufferFull {
			out = append(out, chunk...)
			continue
		}
		if err != nil {
			if len(out)+len(chunk) > 0 {
				return nil, unexpected(err)
			}
			return nil, err
		}
		if out != nil {
			out = append(out, chunk...)
		} else {
			out = chunk
		}
		break
	}
	if len(out) < 3 || out[len(out)-2] != '\r' {
		return nil, protocolError("line %q does not end in CRLF or is empty", shorten(out))
	}
	return out[:len(out)-2], nil
}

// bulk reads n bytes and the CRLF after them.
func (r *Reader) bulk(n int64) ([]byte, error) {
	var b []byte
	if n+2 <= slabBulk {
		// Small strings (ids, receipts, short bodies) share a slab: one allocation for many.
		if len(r.slab) < int(n)+2 {
			r.slab = make([]byte, slabSize)
		}
		b, r.slab = r.slab[:n+2:n+2], r.slab[n+2:]
		if _, err := io.ReadFull(r.br, b); err != nil {
			return nil, unexpected(err)
		}
	} else if n <= eagerBulk {
		b = make([]byte, n+2)
		if _, err := io.ReadFull(r.br, b); err != nil {
			return nil, unexpected(err)
		}
	} else {
		b = make([]byte, 0, eagerBulk)
		for int64(len(b)) < n+2 {
			if len(b) == cap(b) {
				grown := make([]byte, len(b), min64(int64(cap(b))*2, n+2))
				copy(grown, b)
				b = grown
			}
			m, err := r.br.Read(b[len(b):cap(b)])
			b = b[:len(b)+m]
			if err != nil {
				return nil, unexpected(err)
			}
		}
	}
	if b[n] != '\r' || b[n+1] != '\n' {
		return nil, protocolError("bulk string of %d bytes not followed by CRLF", n)
	}
	return b[:n:n], nil
}

// unexpected turns an EOF inside a reply into io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// parseInt reads a RESP integer: an optional '-' and 1-19 decimal digits, in int64.
func parseInt(b []byte) (int64, error) {
	neg := len(b) > 0 && b[0] == '-'
	digits := b
	if neg {
		digits = b[1:]
	}
	if len(digits) == 0 || len(digits) > 19 {
		return 0, protocolError("bad integer %q", shorten(b))
	}
	var n uint64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, protocolError("bad integer %q", shorten(b))
		}
		n = n*10 + uint64(c-'0')
	}
	if (!neg && n > 1<<63-1) || (neg && n > 1<<63) {
		return 0, protocolError("integer %q out of range", shorten(b))
	}
	if neg {
		return int64(-n), nil
	}
	return int64(n), nil
}

// parseLength reads the length of a bulk string or array: -1 (null) or 0..max.
func parseLength(b []byte, max int64, what string) (int64, error) {
	n, err := parseInt(b)
	if err != nil {
		return 0, err
	}
	if n < -1 || n > max {
		return 0, protocolError("%s length %d outside -1..%d", what, n, max)
	}
	return n, nil
}

func shorten(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}

func min64(a, b int64) int64 {
	if a < b {
		return a
	}
	return b
}

// Writer writes commands to a buffered stream; nothing is sent until Flush.
type Writer struct {
	bw  *bufio.Writer
	num []byte // scratch for decimal lengths
}

// NewWriter writes to bw.
func NewWriter(bw *bufio.Writer) *Writer { return &Writer{bw: bw, num: make([]byte, 0, 20)} }

// Command writes one command: an array of bulk strings, its name first.
func (w *Writer) Command(args ...string) error {
	w.header('*', len(args))
	for _, a := range args {
		w.header('$', len(a))
		w.bw.WriteString(a)
		w.bw.WriteString("\r\n")
	}
	return nil
}

// Flush sends what was written.
func (w *Writer) Flush() error { return w.bw.Flush() }

func (w *Writer) header(kind byte, n int) {
	w.bw.WriteByte(kind)
	w.num = strconv.AppendInt(w.num[:0], int64(n), 10)
	w.bw.Write(w.num)
	w.bw.WriteString("\r\n")
}

// Append adds v's RESP2 encoding to dst: the inverse of Read, for tests and fuzzing.
func Append(dst []byte, v Value) []byte {
	if v.Null {
		return append(dst, byte(v.Kind), '-', '1', '\r', '\n')
	}
	dst = append(dst, byte(v.Kind))
	switch v.Kind {
	case SimpleString, Error:
		dst = append(dst, v.Str...)
	case Integer:
		dst = strconv.AppendInt(dst, v.Int, 10)
	case BulkString:
		dst = strconv.AppendInt(dst, int64(len(v.Str)), 10)
		dst = append(dst, '\r', '\n')
		dst = append(dst, v.Str...)
	case Array:
		dst = strconv.AppendInt(dst, int64(len(v.Elems)), 10)
		dst = append(dst, '\r', '\n')
		for _, e := range v.Elems {
			dst = Append(dst, e)
		}
		return dst
	}
	return append(dst, '\r', '\n')
}
