package transports

import (
	"bytes"
	"sync"
	"testing"

	"github.com/edge-mcp/edge-mcp/internal/budget"
)

func TestParseEventID(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in          string
		stream, seq uint64
		ok          bool
	}{
		{"0-1", 0, 1, true},
		{"12-345", 12, 345, true},
		{"18446744073709551615-0", 1<<64 - 1, 0, true},
		{"18446744073709551616-0", 0, 0, false},
		{"", 0, 0, false},
		{"1", 0, 0, false},
		{"1-", 0, 0, false},
		{"-1", 0, 0, false},
		{"1-2-3", 0, 0, false},
		{"01-2", 0, 0, false},
		{"1-+2", 0, 0, false},
		{" 1-2", 0, 0, false},
		{"1_2", 0, 0, false},
		{"a-b", 0, 0, false},
	} {
		stream, seq, ok := parseEventID(c.in)
		if ok != c.ok || ok && (stream != c.stream || seq != c.seq) {
			t.Errorf("parseEventID(%q) = %d, %d, %v; want %d, %d, %v", c.in, stream, seq, ok, c.stream, c.seq, c.ok)
		}
	}
}

func FuzzParseEventID(f *testing.F) {
	for _, s := range []string{"0-1", "3-17", "", "x", "1-2-3", "00-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		stream, seq, ok := parseEventID(s)
		if ok && formatEventID(stream, seq) != s {
			t.Errorf("parseEventID(%q) accepted a non-canonical id (%d, %d)", s, stream, seq)
		}
		if back, back2, ok2 := parseEventID(formatEventID(stream, seq)); !ok2 || back != stream || back2 != seq {
			t.Errorf("round trip of (%d, %d) failed", stream, seq)
		}
	})
}

func TestEventStoreBounded(t *testing.T) {
	t.Parallel()
	es := newEventStore(8, nil)
	for i := uint64(1); i <= 1000; i++ {
		es.add(i%3, i, []byte("data"))
		if len(es.ents) > 8 || len(es.lost) > 8 {
			t.Fatalf("after %d events: %d stored, %d lost entries", i, len(es.ents), len(es.lost))
		}
	}
	got, gap := es.after(1000%3, 991)
	if gap || len(got) == 0 || got[len(got)-1].seq != 1000 {
		t.Errorf("after(991) = %d events, gap %v", len(got), gap)
	}
	if _, gap := es.after(1, 1); !gap {
		t.Error("after(1): no gap reported for evicted events")
	}

	big := bytes.Repeat([]byte("x"), 1<<20)
	es = newEventStore(0, nil)
	for i := uint64(1); i <= 20; i++ {
		es.add(0, i, big)
		if es.bytes > maxEventStoreBytes {
			t.Fatalf("after %d MiB events: %d bytes stored", i, es.bytes)
		}
	}
	if len(es.ents) == 0 || es.ents[len(es.ents)-1].seq != 20 {
		t.Error("the newest event is not stored")
	}
	if newEventStore(-1, nil) != nil {
		t.Error("a negative size did not disable the store")
	}
	if es := newEventStore(0, nil); es.max != defaultEventStoreSize {
		t.Errorf("default size %d", es.max)
	}
}

func TestEventStoreStreamsApart(t *testing.T) {
	t.Parallel()
	es := newEventStore(4, nil)
	es.add(0, 1, []byte("a"))
	es.add(1, 2, []byte("b"))
	es.add(0, 3, []byte("c"))
	got, gap := es.after(0, 1)
	if gap || len(got) != 1 || string(got[0].data) != "c" {
		t.Errorf("after(0, 1) = %v, %v", got, gap)
	}
	// Evicting stream 1's event leaves stream 0 whole.
	for i := uint64(4); i <= 6; i++ {
		es.add(0, i, []byte("d"))
	}
	if _, gap := es.after(1, 0); !gap {
		t.Error("stream 1 lost its event without a gap")
	}
	if got, gap := es.after(0, 3); gap || len(got) != 3 {
		t.Errorf("stream 0 after 3 = %d events, gap %v", len(got), gap)
	}
}

// TestEventStoreBudget: stores of one identity's sessions share its
// budget account; over it a store takes room from the identity's older
// sessions first, then drops its own oldest events, and an event it
// cannot make room for is not kept (a resume gets a gap). Everything is
// credited back when the stores close.
func TestEventStoreBudget(t *testing.T) {
	t.Parallel()
	const size = 1000
	pool := budget.New(10*(size+storedEventOverhead), 4*(size+storedEventOverhead))
	acct := pool.Acquire("mallory", true)
	open := func(acct *budget.Account) *eventStore {
		es := newEventStore(0, acct)
		es.mu = new(sync.Mutex)
		acct.Register(es)
		return es
	}
	a, b := open(acct), open(acct)
	data := bytes.Repeat([]byte("x"), size)
	for i := uint64(1); i <= 3; i++ {
		a.add(0, i, data)
	}
	for i := uint64(1); i <= 3; i++ {
		b.add(0, i, data)
	}
	// b got room for 1, then took it from a, the older session.
	if len(a.ents) != 1 || a.ents[0].seq != 3 || len(b.ents) != 3 {
		t.Fatalf("a keeps %d, b keeps %d events; want 1 (the newest) and 3", len(a.ents), len(b.ents))
	}
	if _, gap := a.after(0, 1); !gap {
		t.Error("a lost event 2 without a gap")
	}
	b.add(0, 4, data) // b is the newest: nothing of a is left to take but its last
	b.add(0, 5, data) // then b's own oldest
	if len(a.ents) != 0 || len(b.ents) != 4 || b.ents[0].seq != 2 {
		t.Fatalf("a keeps %d, b keeps %d events from %d; want 0 and 4 from 2", len(a.ents), len(b.ents), b.ents[0].seq)
	}
	b.add(0, 6, make([]byte, 10*size)) // larger than the whole share: not kept, nothing given up for it
	if len(b.ents) != 4 {
		t.Errorf("b keeps %d events after one larger than the share, want its 4", len(b.ents))
	}
	b.add(0, 7, make([]byte, 4*size)) // nearly the whole share: all b's older events go for it
	if len(b.ents) != 1 || b.ents[0].seq != 7 {
		t.Errorf("b keeps %d events, want only the last", len(b.ents))
	}
	if _, gap := b.after(0, 5); !gap {
		t.Error("an event not kept left no gap")
	}
	other := open(pool.Acquire("alice", true))
	other.add(0, 1, data)
	if len(other.ents) != 1 {
		t.Error("another identity could not store an event")
	}
	st := pool.Stats().Stores[budget.Resumption]
	if st.Dropped != 8 || st.Refused != 1 {
		t.Errorf("dropped %d, refused %d; want 8 (3 of a, 5 of b) and 1", st.Dropped, st.Refused)
	}
	for _, es := range []*eventStore{a, b, other} {
		es.close()
		es.acct.Unregister(es)
	}
	if acct.Used() != 0 || pool.Stats().Used != 0 {
		t.Errorf("after close: account %d, pool %d bytes", acct.Used(), pool.Stats().Used)
	}
}
