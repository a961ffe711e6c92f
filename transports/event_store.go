package transports

import (
	"strconv"
	"strings"
	"sync"

	"github.com/edge-mcp/edge-mcp/internal/budget"
)

// Resumption of the streamable HTTP server's event streams.
//
// Every event a [StreamableServer] writes on an event stream (the standalone
// GET stream or the text/event-stream answer of a POST) carries an SSE id
// "<stream>-<seq>": stream is 0 for the standalone stream and a per-session
// number for each POST stream; seq is a per-session counter, so ids are
// unique within a session and ordered. Clients must treat them as opaque.
//
// The events are also kept, newest last, in the session's eventStore, which
// a GET carrying Last-Event-ID replays: see [StreamableServerOptions].

const (
	// defaultEventStoreSize is the number of events a session keeps when
	// StreamableServerOptions.EventStoreSize is zero.
	defaultEventStoreSize = 256
	// maxEventStoreBytes caps the data a session's store keeps whatever
	// its size in events: the oldest events go first.
	maxEventStoreBytes = 4 << 20
	// storedEventOverhead is what the budget charges for one stored event
	// besides its data: the storedEvent and its slot.
	storedEventOverhead = 64
	// resumeRetryMillis is the reconnection time, in milliseconds, sent
	// with a "retry:" field on resumable streams.
	resumeRetryMillis = 1000
)

// storedEvent is one event written on a stream. data is never modified once
// stored, so replays may share it.
type storedEvent struct {
	stream uint64
	seq    uint64
	data   []byte
}

// eventStore is the bounded history of one session's events. It is guarded
// by the session's mu and lives as long as the session.
//
// Besides its own bounds, it charges what it keeps to the budget account
// of the session's identity (nil: none): an event over the account's
// share or the process total first drops the oldest events of that
// identity (the events of its older sessions, then this session's
// oldest), and is not kept when that is not enough (a client resuming
// from before it gets a fresh stream, as for any event no longer stored).
type eventStore struct {
	max   int
	bytes int
	acct  *budget.Account
	mu    *sync.Mutex   // the session's, for Reclaim; nil: Reclaim gives nothing
	dead  bool          // closed with its session: keeps nothing more
	ents  []storedEvent // oldest first
	// lost holds, per stream, the seq of the newest evicted event of that
	// stream; a stream missing from lost lost nothing after lostFloor.
	lost      map[uint64]uint64
	lostFloor uint64
}

func newEventStore(size int, acct *budget.Account) *eventStore {
	if size < 0 {
		return nil
	}
	if size == 0 {
		size = defaultEventStoreSize
	}
	return &eventStore{max: size, acct: acct, lost: make(map[uint64]uint64)}
}

// add stores a copy of data as event seq of stream, evicting the oldest
// events beyond the bounds.
func (es *eventStore) add(stream, seq uint64, data []byte) {
	if es.dead {
		return
	}
	if !es.charge(eventCost(data)) {
		// No room: the event is not kept, as if evicted at once.
		es.acct.Refused(budget.Resumption)
		es.lost[stream] = seq
		es.boundLost()
		return
	}
	es.ents = append(es.ents, storedEvent{stream: stream, seq: seq, data: append([]byte(nil), data...)})
	es.bytes += len(data)
	n, bytes := 0, es.bytes
	for len(es.ents)-n > es.max || (bytes > maxEventStoreBytes && len(es.ents)-n > 1) {
		es.acct.Credit(budget.Resumption, eventCost(es.ents[n].data))
		bytes -= len(es.ents[n].data)
		n++
	}
	es.evict(n)
}

// charge takes cost bytes of the budget for a new event, making room
// oldest first: the identity's older sessions, then this one's. An event
// larger than the identity's whole share gets no room made for it.
func (es *eventStore) charge(cost int64) bool {
	if es.acct.Charge(budget.Resumption, cost) {
		return true
	}
	if cost > es.acct.Limit() {
		return false
	}
	if es.acct.Reclaim(cost, es) > 0 && es.acct.Charge(budget.Resumption, cost) {
		return true
	}
	n, charged := 0, false
	for ; !charged && n < len(es.ents); n++ {
		es.acct.Credit(budget.Resumption, eventCost(es.ents[n].data))
		charged = es.acct.Charge(budget.Resumption, cost)
	}
	es.acct.Dropped(budget.Resumption, n)
	es.evict(n)
	return charged
}

// Reclaim gives back at least need bytes of the budget, dropping the
// oldest events, unless the session is busy (its lock is held).
func (es *eventStore) Reclaim(need int64) int64 {
	if es.mu == nil || !es.mu.TryLock() {
		return 0
	}
	defer es.mu.Unlock()
	var got int64
	n := 0
	for ; got < need && n < len(es.ents); n++ {
		c := eventCost(es.ents[n].data)
		es.acct.Credit(budget.Resumption, c)
		got += c
	}
	es.acct.Dropped(budget.Resumption, n)
	es.evict(n)
	return got
}

// eventCost is what the budget is charged for keeping an event of data.
func eventCost(data []byte) int64 { return int64(len(data) + storedEventOverhead) }

// evict removes the n oldest events, whose charges are credited already,
// and remembers what each stream lost.
func (es *eventStore) evict(n int) {
	if n == 0 {
		return
	}
	for _, e := range es.ents[:n] {
		es.bytes -= len(e.data)
		es.lost[e.stream] = max(es.lost[e.stream], e.seq) // an event not kept may be newer
	}
	k := copy(es.ents, es.ents[n:])
	clear(es.ents[k:])
	es.ents = es.ents[:k]
	es.boundLost()
}

// close credits everything the store keeps and makes it keep nothing
// more; its session has ended.
func (es *eventStore) close() {
	if es == nil || es.dead {
		return
	}
	es.acct.Credit(budget.Resumption, int64(es.bytes+len(es.ents)*storedEventOverhead))
	es.dead = true
	es.ents, es.bytes = nil, 0
}

// boundLost keeps the map of lost events bounded.
func (es *eventStore) boundLost() {
	if len(es.lost) > es.max {
		// Keep the map bounded: forget per-stream detail and assume every
		// stream may have lost events up to the newest eviction.
		for _, s := range es.lost {
			es.lostFloor = max(es.lostFloor, s)
		}
		clear(es.lost)
	}
}

// after returns the stored events of stream newer than seq, oldest first,
// and whether events of that stream newer than seq were evicted.
func (es *eventStore) after(stream, seq uint64) ([]storedEvent, bool) {
	gap := seq < es.lostFloor
	if l, ok := es.lost[stream]; ok && seq < l {
		gap = true
	}
	var out []storedEvent
	for _, e := range es.ents {
		if e.stream == stream && e.seq > seq {
			out = append(out, e)
		}
	}
	return out, gap
}

// formatEventID returns the SSE id of event seq of stream.
func formatEventID(stream, seq uint64) string {
	b := make([]byte, 0, 24)
	b = strconv.AppendUint(b, stream, 10)
	b = append(b, '-')
	b = strconv.AppendUint(b, seq, 10)
	return string(b)
}

// parseEventID parses an id made by formatEventID: two decimal numbers
// without sign or leading zeros, joined by '-'.
func parseEventID(id string) (stream, seq uint64, ok bool) {
	a, b, found := strings.Cut(id, "-")
	if !found {
		return 0, 0, false
	}
	stream, ok1 := parseDecimal(a)
	seq, ok2 := parseDecimal(b)
	return stream, seq, ok1 && ok2
}

func parseDecimal(s string) (uint64, bool) {
	if s == "" || len(s) > 1 && s[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}
