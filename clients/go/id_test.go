package delayq

import (
	"strconv"
	"testing"
	"time"
)

// Generated ids: 12 hex digits of ms, 4 of a counter, the client's 16-digit tag; keys: the tag
// and a counter.
func TestGeneratedIDsAndKeys(t *testing.T) {
	c := must(New(Options{Servers: []string{"127.0.0.1:1"}}))
	a, b := c.newID(), c.newID()
	ms, err := strconv.ParseInt(a[:12], 16, 64)
	if len(a) != 32 || a[16:] != c.tag || b <= a || err != nil || time.Since(time.UnixMilli(ms)).Abs() > 5*time.Second {
		t.Fatalf("ids %s, %s (tag %s)", a, b, c.tag)
	}
	if k := c.newKey(); k != c.tag+"0000000000000000" || validateKey(k) != nil {
		t.Fatalf("key %s", k)
	}
	if k := c.newKey(); k != c.tag+"0000000000000001" {
		t.Fatalf("key %s", k)
	}
}
