package delayq

import (
	"errors"
	"strconv"
	"time"

	"github.com/delayq/delayq/clients/go/internal/resp"
)

// errMalformed is the cause of a reply this client cannot read: the connection it came on is
// closed, as nothing after it can be trusted.
var errMalformed = errors.New("malformed reply")

func malformed(command, expected string, got resp.Value) *Error {
	return unavailable("malformed reply to "+command+": expected "+expected+", got "+got.String(), errMalformed)
}

// replyError is the error of an error reply, nil for any other.
func replyError(v resp.Value) error {
	if v.IsError() {
		return serverError(v.Text())
	}
	return nil
}

// parseOK reads +OK (or +FORCED).
func parseOK(command string, v resp.Value) error {
	if err := replyError(v); err != nil {
		return err
	}
	if v.Kind == resp.SimpleString && (v.Text() == "OK" || v.Text() == "FORCED") {
		return nil
	}
	return malformed(command, "+OK", v)
}

// parseAdded reads ADD ... WITHSTATE's [id, state, run_at_ms].
func parseAdded(v resp.Value) (Added, error) {
	if err := replyError(v); err != nil {
		return Added{}, err
	}
	e := v.Elems
	if v.Kind != resp.Array || len(e) < 3 || e[0].Kind != resp.BulkString || e[1].Kind != resp.BulkString {
		return Added{}, malformed("ADD", "[id, state, run_at_ms]", v)
	}
	at, ok := number(e[2])
	state := State(e[1].Text())
	if !ok || (state != StateDelayed && state != StateReady) {
		return Added{}, malformed("ADD", "[id, state, run_at_ms]", v)
	}
	return Added{ID: e[0].Text(), State: state, RunAt: msTime(at)}, nil
}

// number reads an integer reply, or a bulk string of digits (RESP2 maps carry numbers so).
func number(v resp.Value) (int64, bool) {
	switch {
	case v.Null:
		return 0, false
	case v.Kind == resp.Integer:
		return v.Int, true
	case v.Kind == resp.BulkString:
		n, err := strconv.ParseInt(v.Text(), 10, 64)
		return n, err == nil
	}
	return 0, false
}

func uint32Of(v resp.Value) (uint32, bool) {
	n, ok := number(v)
	return uint32(n), ok && n >= 0 && n <= 1<<32-1
}

func text(v resp.Value) (string, bool) {
	if v.Kind != resp.BulkString || v.Null {
		return "", false
	}
	return v.Text(), true
}

// parseDelivery reads a job array: id, topic, body, receipt, attempts, ttr_ms, priority,
// run_at_ms, reserved_until_ms, max_attempts. Older servers sent 5, then 9 elements.
func parseDelivery(command string, v resp.Value) (*Delivery, error) {
	e := v.Elems
	bad := func() (*Delivery, error) {
		return nil, malformed(command, "a job array [id, topic, body, receipt, attempts, ...]", v)
	}
	if v.Kind != resp.Array || len(e) < 5 {
		return bad()
	}
	d := &Delivery{}
	var ok1, ok2, ok3, ok4, ok5 bool
	d.ID, ok1 = text(e[0])
	d.Topic, ok2 = text(e[1])
	ok3 = e[2].Kind == resp.BulkString && !e[2].Null
	d.Body = e[2].Str
	if d.Body == nil {
		d.Body = []byte{}
	}
	d.Receipt, ok4 = text(e[3])
	d.Attempts, ok5 = uint32Of(e[4])
	if !(ok1 && ok2 && ok3 && ok4 && ok5) {
		return bad()
	}
	if len(e) >= 9 {
		ttr, ok1 := number(e[5])
		prio, ok2 := uint32Of(e[6])
		runAt, ok3 := number(e[7])
		until, ok4 := number(e[8])
		if !(ok1 && ok2 && ok3 && ok4) {
			return bad()
		}
		d.TTR, d.Priority = time.Duration(ttr)*time.Millisecond, prio
		d.RunAt, d.ReservedUntil = msTime(runAt), msTime(until)
	}
	if len(e) >= 10 {
		var ok bool
		if d.MaxAttempts, ok = uint32Of(e[9]); !ok {
			return bad()
		}
	}
	return d, nil
}

// parseDeliveries reads RESERVE's answer: an array of job arrays, or a null array.
func parseDeliveries(v resp.Value) ([]*Delivery, error) {
	if err := replyError(v); err != nil {
		return nil, err
	}
	if v.Null {
		return nil, nil
	}
	if v.Kind != resp.Array {
		return nil, malformed("RESERVE", "an array of jobs or nil", v)
	}
	out := make([]*Delivery, 0, len(v.Elems))
	for _, job := range v.Elems {
		d, err := parseDelivery("RESERVE", job)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// pairs walks a flat array of field/value pairs.
func pairs(command string, v resp.Value, set func(name string, value resp.Value) bool) error {
	if err := replyError(v); err != nil {
		return err
	}
	if v.Kind != resp.Array || v.Null || len(v.Elems)%2 != 0 {
		return malformed(command, "a flat array of field/value pairs", v)
	}
	for i := 0; i < len(v.Elems); i += 2 {
		name, ok := text(v.Elems[i])
		if !ok {
			return malformed(command, "a field name", v.Elems[i])
		}
		if !set(name, v.Elems[i+1]) {
			return malformed(command, "a valid value of '"+name+"'", v.Elems[i+1])
		}
	}
	return nil
}

// parseJob reads GET's 13 pairs; a null array is not_found.
func parseJob(id string, v resp.Value) (*JobInfo, error) {
	if err := replyError(v); err != nil {
		return nil, err
	}
	if v.Null {
		return nil, &Error{Code: CodeNotFound, Message: "job '" + id + "' does not exist"}
	}
	j := &JobInfo{}
	var ms = func(v resp.Value, out *time.Time) bool {
		n, ok := number(v)
		*out = msTime(n)
		return ok
	}
	err := pairs("GET", v, func(name string, v resp.Value) bool {
		var ok bool
		switch name {
		case "id":
			j.ID, ok = text(v)
		case "topic":
			j.Topic, ok = text(v)
		case "state":
			var s string
			s, ok = text(v)
			j.State = State(s)
		case "body":
			ok = v.Kind == resp.BulkString && !v.Null
			j.Body = v.Str
			if j.Body == nil {
				j.Body = []byte{}
			}
		case "priority":
			j.Priority, ok = uint32Of(v)
		case "ttr_ms":
			var n int64
			n, ok = number(v)
			j.TTR = time.Duration(n) * time.Millisecond
		case "max_attempts":
			j.MaxAttempts, ok = uint32Of(v)
		case "attempts":
			j.Attempts, ok = uint32Of(v)
		case "created_at_ms":
			ok = ms(v, &j.CreatedAt)
		case "run_at_ms":
			ok = ms(v, &j.RunAt)
		case "reserved_until_ms":
			ok = ms(v, &j.ReservedUntil)
		case "receipt":
			j.Receipt, ok = text(v)
		case "last_error":
			j.LastError, ok = text(v)
		default:
			ok = true // a field this client does not know yet
		}
		return ok
	})
	if err != nil {
		return nil, err
	}
	if j.ID == "" || j.State == "" {
		return nil, malformed("GET", "a job with id and state", v)
	}
	return j, nil
}

func parseStats(v resp.Value) (*Stats, error) {
	s := &Stats{Fields: map[string]string{}}
	counters := map[string]*uint64{
		"jobs": &s.Jobs, "delayed": &s.Delayed, "ready": &s.Ready, "reserved": &s.Reserved,
		"buried": &s.Buried, "topics": &s.Topics, "waiting": &s.Waiting, "added": &s.Added,
		"replaced": &s.Replaced, "reserves": &s.Reserves, "finished": &s.Finished,
		"deleted": &s.Deleted, "released": &s.Released, "timed_out": &s.TimedOut,
		"buried_total": &s.BuriedTotal, "kicked": &s.Kicked,
	}
	err := pairs("STATS", v, func(name string, v resp.Value) bool {
		if v.Kind == resp.Integer {
			s.Fields[name] = strconv.FormatInt(v.Int, 10)
		} else {
			s.Fields[name] = v.Text()
		}
		if out, ok := counters[name]; ok {
			n, ok := number(v)
			*out = uint64(n)
			return ok && n >= 0
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

func parseTopicStats(v resp.Value) (*TopicStats, error) {
	t := &TopicStats{}
	err := pairs("STATS topic", v, func(name string, v resp.Value) bool {
		var n int64
		ok := true
		switch name {
		case "topic":
			t.Topic, ok = text(v)
		case "delayed", "ready", "reserved", "buried", "waiting", "paused", "paused_for_ms":
			n, ok = number(v)
		}
		switch name {
		case "delayed":
			t.Delayed = uint64(n)
		case "ready":
			t.Ready = uint64(n)
		case "reserved":
			t.Reserved = uint64(n)
		case "buried":
			t.Buried = uint64(n)
		case "waiting":
			t.Waiting = uint64(n)
		case "paused":
			t.Paused = n != 0
		case "paused_for_ms":
			t.PausedFor = time.Duration(n) * time.Millisecond
		}
		return ok
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

func parseNames(v resp.Value) ([]string, error) {
	if err := replyError(v); err != nil {
		return nil, err
	}
	if v.Kind != resp.Array || v.Null {
		return nil, malformed("TOPICS", "an array of names", v)
	}
	names := make([]string, 0, len(v.Elems))
	for _, e := range v.Elems {
		name, ok := text(e)
		if !ok {
			return nil, malformed("TOPICS", "a topic name", e)
		}
		names = append(names, name)
	}
	return names, nil
}

func parseCount(command string, v resp.Value) (int, error) {
	if err := replyError(v); err != nil {
		return 0, err
	}
	if v.Kind != resp.Integer || v.Int < 0 {
		return 0, malformed(command, "a count", v)
	}
	return int(v.Int), nil
}
