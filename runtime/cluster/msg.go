package cluster

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edge-mcp/edge-mcp/internal/limits"
)

// This file is how a replica talks to the others: every message (and
// every reply) sealed for its subject with the fleet's keys, every one
// received opened and checked before a handler sees it. A message that
// does not open is refused and logged once, here.

// Msg is a message another replica of the fleet sent, opened.
type Msg struct {
	Subject string
	Data    []byte // the body, opened
	reply   string
	n       *Node
}

// Respond answers a request, sealed for its reply subject.
func (m *Msg) Respond(body []byte) error {
	if m.reply == "" {
		return nil
	}
	return m.n.nc.Publish(m.reply, m.n.keys.SealMessage(m.reply, body))
}

// Keys are the fleet's sealing keys.
func (n *Node) Keys() *Keys { return n.keys }

// Route is the subject token that stands for a session id (Keys.Route).
func (n *Node) Route(id string) string { return n.keys.Route(id) }

// Publish sends body on subject, sealed.
func (n *Node) Publish(subject string, body []byte) error {
	return n.nc.Publish(subject, n.keys.SealMessage(subject, body))
}

// Request sends body on subject, sealed, and returns the opened reply. A
// reply that does not open is refused (logged) and answered as
// ErrForged.
func (n *Node) Request(ctx context.Context, subject string, body []byte) ([]byte, error) {
	reply, err := n.nc.RequestWithContext(ctx, subject, n.keys.SealMessage(subject, body))
	if err != nil {
		return nil, err
	}
	b, err := n.keys.OpenMessage(reply.Subject, reply.Data)
	if err != nil {
		n.refused("a reply on "+subject, reply.Subject, err)
		return nil, err
	}
	return b, nil
}

// Subscribe calls fn with every message on subject that a replica of the
// fleet sealed for it; what says what travels there, for the log line of
// a message refused.
func (n *Node) Subscribe(subject, what string, fn func(*Msg)) (*nats.Subscription, error) {
	return n.nc.Subscribe(subject, func(m *nats.Msg) {
		b, err := n.keys.OpenMessage(m.Subject, m.Data)
		if err != nil {
			n.refused(what, m.Subject, err)
			return // a forged request gets no answer: its sender times out
		}
		fn(&Msg{Subject: m.Subject, Data: b, reply: m.Reply, n: n})
	})
}

// refusals counts what was refused; log bounds the lines it logs.
type refusals struct {
	count atomic.Int64
	log   *limits.RateLimiter

	mu      sync.Mutex
	records map[string][8]byte // bucket/key → digest of the value refused last
}

// maxRefusedRecords caps the records remembered as refused.
const maxRefusedRecords = 4096

// again reports whether value is the one refused last under where (a
// record read again: counted, not logged again), and remembers it.
func (r *refusals) again(where string, value []byte) bool {
	sum := sha256.Sum256(value)
	var d [8]byte
	copy(d[:], sum[:])
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.records[where] == d {
		return true
	}
	if r.records == nil || len(r.records) >= maxRefusedRecords {
		r.records = map[string][8]byte{}
	}
	r.records[where] = d
	return false
}

// refused logs (at most 10 lines a second, bursts of 20) a message or
// record read from NATS that no replica of the fleet sealed, or a replay.
func (n *Node) refused(what, where string, err error) {
	n.refusal.count.Add(1)
	if ok, _ := n.refusal.log.Allow(""); !ok {
		return
	}
	reason := "not sealed by this fleet (no replica of it wrote this: someone else on NATS, or a replica with another cluster.secret)"
	if errors.Is(err, ErrReplayed) {
		reason = "stale or replayed (a replica wrote it, but earlier: a replay, a message held up too long, or clocks apart)"
	}
	n.log.Warn("cluster: refused "+what+" from NATS: "+reason, "subject", where, "err", err, "refused", n.refusal.count.Load())
}

// Refused is how many messages and records this replica refused.
func (n *Node) Refused() int64 { return n.refusal.count.Load() }

// OpenRecord opens the value of key in the fleet's bucket called what
// (Bucket(what)) and checks it against marks, when given: a record that
// does not open, or is older than one accepted before, is refused and
// logged once, here (read again, the same value is counted only).
func (n *Node) OpenRecord(what, key string, value []byte, marks *Watermarks) ([]byte, error) {
	bucket := n.Bucket(what)
	body, at, err := n.keys.OpenRecord(bucket, key, value)
	if err == nil && marks != nil {
		err = marks.Accept(bucket+"/"+key, at)
	}
	if err != nil {
		n.refusedRecord(bucket+"/"+key, value, err)
		return nil, err
	}
	return body, nil
}

// MaxRecordLag bounds how long after it was sealed a record read with
// OpenEntry may have been stored by the NATS server: a writer seals a
// record just before it writes it, so one stored later was put back by
// someone else (a replay). It allows for replica clocks behind the NATS
// server's by up to MaxMessageAge and for a write that long in flight.
const MaxRecordLag = 2 * MaxMessageAge

// OpenEntry opens a KV entry of the bucket called what as OpenRecord does
// and also refuses (ErrReplayed) one that the NATS server stored more
// than MaxRecordLag after it was sealed: a genuine record put back later,
// which a replica that never saw a newer record of its key could not
// tell from the newest by marks alone. The server stamps an entry when
// it stores it; a client with write access cannot set that time.
func (n *Node) OpenEntry(what string, e jetstream.KeyValueEntry, marks *Watermarks) ([]byte, error) {
	bucket, key := n.Bucket(what), e.Key()
	body, at, err := n.keys.OpenRecord(bucket, key, e.Value())
	if lag := e.Created().Sub(at); err == nil && lag > MaxRecordLag {
		err = fmt.Errorf("%w: stored %s after it was sealed (at most %s)", ErrReplayed, lag.Round(time.Millisecond), MaxRecordLag)
	}
	if err == nil && marks != nil {
		err = marks.Accept(bucket+"/"+key, at)
	}
	if err != nil {
		n.refusedRecord(bucket+"/"+key, e.Value(), err)
		return nil, err
	}
	return body, nil
}

// refusedRecord counts and logs (once per value) a record refused.
func (n *Node) refusedRecord(where string, value []byte, err error) {
	if n.refusal.again(where, value) {
		n.refusal.count.Add(1)
	} else {
		n.refused("a record", where, err)
	}
}

// SealRecordAfter seals body as key's value in the bucket called what,
// written after the newest record of key marks accepted (OpenRecord).
func (n *Node) SealRecordAfter(what, key string, body []byte, marks *Watermarks) []byte {
	bucket := n.Bucket(what)
	return n.keys.SealRecord(bucket, key, n.keys.Next(marks.Latest(bucket+"/"+key)), body)
}

// SealRecord seals body as key's value in the bucket called what, written
// after the record it replaces (prev: its sealed value; nil when none).
func (n *Node) SealRecord(what, key string, body, prev []byte) []byte {
	bucket := n.Bucket(what)
	var after time.Time
	if prev != nil {
		if _, at, err := n.keys.OpenRecord(bucket, key, prev); err == nil {
			after = at
		}
	}
	return n.keys.SealRecord(bucket, key, n.keys.Next(after), body)
}
