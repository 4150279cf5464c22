package resp

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func reader(s string) *Reader {
	return NewReader(bufio.NewReaderSize(strings.NewReader(s), 16), Limits{})
}

func TestReaderReadsEveryReplyShapeDelayqSends(t *testing.T) {
	in := "+OK\r\n-STALE receipt does not match\r\n:-42\r\n$5\r\nhello\r\n$-1\r\n*-1\r\n*0\r\n" +
		"*2\r\n*3\r\n$2\r\nid\r\n$0\r\n\r\n:7\r\n$1\r\nx\r\n"
	r := reader(in)
	want := []Value{
		{Kind: SimpleString, Str: []byte("OK")},
		{Kind: Error, Str: []byte("STALE receipt does not match")},
		{Kind: Integer, Int: -42},
		{Kind: BulkString, Str: []byte("hello")},
		{Kind: BulkString, Null: true},
		{Kind: Array, Null: true},
		{Kind: Array, Elems: []Value{}},
		{Kind: Array, Elems: []Value{
			{Kind: Array, Elems: []Value{
				{Kind: BulkString, Str: []byte("id")}, {Kind: BulkString, Str: []byte{}}, {Kind: Integer, Int: 7}}},
			{Kind: BulkString, Str: []byte("x")}}},
	}
	for i, w := range want {
		got, err := r.Read()
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, w) {
			t.Fatalf("reply %d: got %#v, want %#v", i, got, w)
		}
	}
	if _, err := r.Read(); err != io.EOF {
		t.Fatalf("after the last reply: %v, want io.EOF", err)
	}
}

func TestReaderRefusesWhatIsNotRESP2WithinLimits(t *testing.T) {
	limits := Limits{MaxBulk: 10, MaxArray: 3, MaxDepth: 2, MaxLine: 32}
	for _, in := range []string{
		"?x\r\n",                               // unknown type
		"+OK\n",                                // LF alone
		"\r\n",                                 // empty line
		":12a\r\n",                             // not a number
		":99999999999999999999\r\n",            // overflows int64
		"$11\r\n",                              // bulk over MaxBulk
		"$-2\r\n",                              // negative length
		"*4\r\n",                               // array over MaxArray
		"*1\r\n*1\r\n*1\r\n:1\r\n",             // nested deeper than MaxDepth
		"$3\r\nabcd\r\n",                       // no CRLF after the bytes
		"+" + strings.Repeat("a", 40) + "\r\n", // line over MaxLine
	} {
		r := NewReader(bufio.NewReaderSize(strings.NewReader(in), 16), limits)
		if _, err := r.Read(); !errors.Is(err, ErrProtocol) {
			t.Errorf("%q: got %v, want a protocol error", in, err)
		}
	}
	for _, in := range []string{"$5\r\nab", "*2\r\n:1\r\n", "+OK"} {
		if _, err := reader(in).Read(); err != io.ErrUnexpectedEOF {
			t.Errorf("%q: got %v, want io.ErrUnexpectedEOF", in, err)
		}
	}
}

func TestReaderReadsALongBulkStringAsItArrives(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789"), 50_000) // 500 kB: past eagerBulk
	in := append([]byte("$500000\r\n"), body...)
	in = append(in, "\r\n"...)
	got, err := NewReader(bufio.NewReader(bytes.NewReader(in)), Limits{}).Read()
	if err != nil || !bytes.Equal(got.Str, body) {
		t.Fatalf("got %d bytes, %v", len(got.Str), err)
	}
	// A declared length with nothing behind it allocates nothing like it.
	if _, err := reader("$100000000\r\nab").Read(); err != io.ErrUnexpectedEOF {
		t.Fatalf("got %v", err)
	}
}

func TestWriterWritesCommandsAsArraysOfBulkStrings(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(bufio.NewWriter(&buf))
	w.Command("ADD", "t", "*", "0", "60000", "a b\r\n")
	w.Command("PING")
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "*6\r\n$3\r\nADD\r\n$1\r\nt\r\n$1\r\n*\r\n$1\r\n0\r\n$5\r\n60000\r\n$5\r\na b\r\n\r\n*1\r\n$4\r\nPING\r\n"
	if buf.String() != want {
		t.Fatalf("got %q", buf.String())
	}
}

// FuzzReader: no input panics the reader or makes it allocate beyond what it reads; what it
// accepts, Append writes back to bytes that read the same.
func FuzzReader(f *testing.F) {
	for _, seed := range []string{
		"+OK\r\n", "-NOTFOUND job 'x' does not exist\r\n", ":1795283990203\r\n", "$-1\r\n", "*-1\r\n",
		"*1\r\n*10\r\n$2\r\nid\r\n$1\r\nt\r\n$0\r\n\r\n$24\r\n1a1ff4433920000000000001\r\n:1\r\n:60000\r\n:1024\r\n:1795283992196\r\n:1795284052198\r\n:0\r\n",
		"*3\r\n$2\r\nid\r\n$7\r\ndelayed\r\n:1795283992196\r\n",
		"$3\r\nab\r\n", "*2\r\n:1\r\n", ":-9223372036854775808\r\n", "$100000000\r\nab", "*99999999\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := NewReader(bufio.NewReaderSize(bytes.NewReader(in), 16), Limits{MaxBulk: 1 << 20, MaxArray: 1 << 12})
		for {
			v, err := r.Read()
			if err != nil {
				return
			}
			again, err := NewReader(bufio.NewReader(bytes.NewReader(Append(nil, v))), Limits{}).Read()
			if err != nil {
				t.Fatalf("%s: written back, it does not read: %v", v, err)
			}
			if !reflect.DeepEqual(normal(v), normal(again)) {
				t.Fatalf("read %#v, written back and read %#v", v, again)
			}
		}
	})
}

// normal makes empty and nil slices alike, for comparison.
func normal(v Value) Value {
	if len(v.Str) == 0 {
		v.Str = nil
	}
	if len(v.Elems) == 0 {
		v.Elems = nil
	}
	for i := range v.Elems {
		v.Elems[i] = normal(v.Elems[i])
	}
	return v
}
