package console

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Entry kinds.
const (
	KindCall  = "call"  // a tool call's audit record
	KindAdmin = "admin" // an admin change's audit record
	KindLog   = "log"   // a log record (INFO and above)
)

// Entry is one line of the live tail: a tool call, an admin change or a
// log record.
type Entry struct {
	Time     time.Time     `json:"time"`
	Kind     string        `json:"kind"`
	Identity string        `json:"identity,omitempty"`
	Server   string        `json:"server,omitempty"`
	Tool     string        `json:"tool,omitempty"`
	Outcome  string        `json:"outcome,omitempty"` // a call's; an admin action; a log level
	Duration time.Duration `json:"-"`
	Millis   int64         `json:"ms,omitempty"`
	Text     string        `json:"text,omitempty"` // a call's error, an admin target and detail, a log message and attributes
}

// tailSize is how many entries a new page of the tail shows.
const tailSize = 200

// chartSeconds is how many seconds the overview's chart shows.
const chartSeconds = 60

// Tail is what the console sees of the gateway as it runs: the recent
// audit and log entries, a stream of them for each open live tail, calls
// and errors per second, and each server's calls, errors and latency. It
// costs one atomic load per entry until the console is first opened.
type Tail struct {
	on atomic.Bool // the console has been opened

	mu    sync.Mutex
	ring  []Entry // the last tailSize entries, oldest first once full
	next  int
	subs  map[chan Entry]struct{}
	secs  [chartSeconds]second
	since time.Time
	perUp map[string]*serverStats
	now   func() time.Time
}

// second is one second's calls and errors.
type second struct {
	unix          int64
	calls, errors int
}

// serverStats are one upstream's calls since the console was opened.
type serverStats struct {
	Calls, Errors int
	total         time.Duration
	LastError     string
	LastErrorAt   time.Time
}

// NewTail returns a tail that records nothing until Start.
func NewTail() *Tail { return &Tail{now: time.Now} }

// Start makes the tail record (the console calls it on its first page).
func (t *Tail) Start() {
	if t == nil || t.on.Load() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ring == nil {
		t.ring = make([]Entry, 0, tailSize)
		t.perUp = map[string]*serverStats{}
		t.since = t.now()
	}
	t.on.Store(true)
}

// Publish records e and hands it to every open stream. A stream that
// does not keep up loses entries; the gateway never waits.
func (t *Tail) Publish(e Entry) {
	if t == nil || !t.on.Load() {
		return
	}
	if e.Time.IsZero() {
		e.Time = t.now()
	}
	e.Time = e.Time.UTC()
	e.Millis = e.Duration.Milliseconds()
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.ring) < tailSize {
		t.ring = append(t.ring, e)
	} else {
		t.ring[t.next] = e
		t.next = (t.next + 1) % tailSize
	}
	if e.Kind == KindCall {
		t.count(e)
	}
	for ch := range t.subs {
		select {
		case ch <- e:
		default:
		}
	}
}

// failed says whether a call's outcome is an error.
func failed(outcome string) bool { return outcome != "ok" }

func (t *Tail) count(e Entry) {
	sec := e.Time.Unix()
	b := &t.secs[sec%chartSeconds]
	if b.unix != sec {
		*b = second{unix: sec}
	}
	b.calls++
	st := t.perUp[e.Server]
	if st == nil {
		st = &serverStats{}
		t.perUp[e.Server] = st
	}
	st.Calls++
	st.total += e.Duration
	if failed(e.Outcome) {
		b.errors++
		st.Errors++
		st.LastError, st.LastErrorAt = e.Outcome+": "+e.Text, e.Time
	}
}

// recent returns the entries kept, newest first, that f keeps.
func (t *Tail) recent(f filter) []Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Entry, 0, len(t.ring))
	for i := len(t.ring) - 1; i >= 0; i-- {
		e := t.ring[(t.next+i)%len(t.ring)]
		if f.keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// subscribe returns a channel of the entries published from now on.
func (t *Tail) subscribe() (<-chan Entry, func()) {
	ch := make(chan Entry, 64)
	t.mu.Lock()
	if t.subs == nil {
		t.subs = map[chan Entry]struct{}{}
	}
	t.subs[ch] = struct{}{}
	t.mu.Unlock()
	return ch, func() {
		t.mu.Lock()
		delete(t.subs, ch)
		t.mu.Unlock()
	}
}

// rates returns the calls and errors of each of the last chartSeconds
// whole seconds, oldest first.
func (t *Tail) rates() (calls, errors []int) {
	now := t.now().Unix()
	calls, errors = make([]int, chartSeconds), make([]int, chartSeconds)
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range chartSeconds {
		sec := now - chartSeconds + int64(i)
		if b := t.secs[sec%chartSeconds]; b.unix == sec {
			calls[i], errors[i] = b.calls, b.errors
		}
	}
	return calls, errors
}

// ServerStat is one upstream's calls since the console was opened.
type ServerStat struct {
	Calls, Errors int
	MeanMS        string
	LastError     string
	LastErrorAt   time.Time
}

func (t *Tail) serverStats() (map[string]ServerStat, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]ServerStat, len(t.perUp))
	for name, st := range t.perUp {
		s := ServerStat{Calls: st.Calls, Errors: st.Errors, LastError: st.LastError, LastErrorAt: st.LastErrorAt}
		if st.Calls > 0 {
			s.MeanMS = (st.total / time.Duration(st.Calls)).Round(10 * time.Microsecond).String()
		}
		out[name] = s
	}
	return out, t.since
}

// filter keeps the entries whose fields contain each value set
// (case-insensitively).
type filter struct {
	Kind, Server, Tool, Identity, Outcome string
}

func (f filter) keep(e Entry) bool {
	has := func(field, want string) bool {
		return want == "" || strings.Contains(strings.ToLower(field), strings.ToLower(want))
	}
	return (f.Kind == "" || f.Kind == e.Kind) && has(e.Server, f.Server) && has(e.Tool, f.Tool) &&
		has(e.Identity, f.Identity) && has(e.Outcome, f.Outcome)
}

// LogHandler returns a handler that passes every record to h and, once
// the console has been opened, the records at INFO and above to the tail.
func (t *Tail) LogHandler(h slog.Handler) slog.Handler { return &tailHandler{h: h, t: t} }

type tailHandler struct {
	h     slog.Handler
	t     *Tail
	attrs []slog.Attr // of WithAttrs, flattened under their groups
	group string
}

func (th *tailHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return th.h.Enabled(ctx, l) || (l >= slog.LevelInfo && th.t.on.Load())
}

func (th *tailHandler) Handle(ctx context.Context, r slog.Record) error {
	// The gateway's "audit" line is in the tail as its admin entry.
	if r.Level >= slog.LevelInfo && r.Message != "audit" && th.t.on.Load() {
		th.t.Publish(th.entry(r))
	}
	if th.h.Enabled(ctx, r.Level) {
		return th.h.Handle(ctx, r)
	}
	return nil
}

// entry is a log record as a tail entry: the message and its attributes
// as key=value text; server_name, tool_name and identity fill the fields
// of the same name.
func (th *tailHandler) entry(r slog.Record) Entry {
	e := Entry{Time: r.Time, Kind: KindLog, Outcome: strings.ToLower(r.Level.String())}
	var b strings.Builder
	b.WriteString(r.Message)
	add := func(prefix string, a slog.Attr) {
		k, v := prefix+a.Key, a.Value.Resolve().String()
		switch a.Key {
		case "server_name", "server":
			e.Server = v
		case "tool_name", "tool":
			e.Tool = v
		case "identity":
			e.Identity = v
		}
		b.WriteString(" " + k + "=" + v)
	}
	for _, a := range th.attrs {
		add("", a)
	}
	prefix := ""
	if th.group != "" {
		prefix = th.group + "."
	}
	r.Attrs(func(a slog.Attr) bool { add(prefix, a); return true })
	e.Text = b.String()
	return e
}

func (th *tailHandler) WithAttrs(as []slog.Attr) slog.Handler {
	n := *th
	n.h = th.h.WithAttrs(as)
	n.attrs = append([]slog.Attr(nil), th.attrs...)
	for _, a := range as {
		if th.group != "" {
			a.Key = th.group + "." + a.Key
		}
		n.attrs = append(n.attrs, a)
	}
	return &n
}

func (th *tailHandler) WithGroup(name string) slog.Handler {
	n := *th
	n.h = th.h.WithGroup(name)
	if th.group != "" {
		name = th.group + "." + name
	}
	n.group = name
	return &n
}
