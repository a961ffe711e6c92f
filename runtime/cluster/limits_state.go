package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// bucketState is one key's shared token bucket as stored in KV.
type bucketState struct {
	// Tokens in the bucket at At.
	Tokens float64 `json:"t"`
	// At is when Tokens were counted (Unix nanoseconds).
	At int64 `json:"at"`
	// By maps the replicas that took a lease lately to when (Unix ms).
	By map[string]int64 `json:"by,omitempty"`
}

// maxStateMembers bounds the replicas a state names.
const maxStateMembers = 64

// decodeState reads a KV value written by some replica. It is untrusted:
// anything that is not a well-formed state is an error (the caller logs it
// and starts the bucket afresh), never a panic.
func decodeState(b []byte) (bucketState, error) {
	var st bucketState
	if err := json.Unmarshal(b, &st); err != nil {
		return bucketState{}, fmt.Errorf("decoding a rate bucket: %w", err)
	}
	switch {
	case math.IsNaN(st.Tokens) || math.IsInf(st.Tokens, 0) || st.Tokens < 0:
		return bucketState{}, fmt.Errorf("rate bucket: tokens %v", st.Tokens)
	case st.At <= 0:
		return bucketState{}, fmt.Errorf("rate bucket: time %d", st.At)
	case len(st.By) > maxStateMembers:
		return bucketState{}, fmt.Errorf("rate bucket: %d replicas", len(st.By))
	}
	for r := range st.By {
		if r == "" || len(r) > 128 {
			return bucketState{}, fmt.Errorf("rate bucket: replica name of %d bytes", len(r))
		}
	}
	return st, nil
}

// refill counts the tokens the bucket has at now (at most burst), plus
// back given back.
func (st *bucketState) refill(now time.Time, rps float64, burst, back int) {
	if elapsed := now.UnixNano() - st.At; elapsed > 0 { // a clock behind adds nothing
		st.Tokens += rps * float64(elapsed) / 1e9
	}
	st.Tokens = math.Min(st.Tokens+float64(back), float64(burst))
	st.At = max(st.At, now.UnixNano())
}

// mark records replica taking a lease at now, forgets replicas not seen
// for memberWindow, and returns how many remain.
func (st *bucketState) mark(replica string, now time.Time) int {
	if st.By == nil {
		st.By = map[string]int64{}
	}
	st.By[replica] = now.UnixMilli()
	cut := now.Add(-memberWindow).UnixMilli()
	for r, at := range st.By {
		if at < cut {
			delete(st.By, r)
		}
	}
	return len(st.By)
}

// takeOnce is one read and compare-and-set of key's shared bucket.
func (r *Limiter) takeOnce(ctx context.Context, kv jetstream.KeyValue, key, replica string, back int, now time.Time) (taken, time.Duration, error) {
	st := bucketState{Tokens: float64(r.burst), At: now.UnixNano()}
	var rev uint64
	e, err := kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return taken{}, 0, fmt.Errorf("reading rate bucket %q: %w", key, err)
	default:
		rev = e.Revision()
		body, oerr := r.l.node.Load().OpenRecord("rates", key, e.Value(), nil)
		if oerr != nil {
			st = bucketState{Tokens: float64(r.burst), At: now.UnixNano()} // refused (logged): afresh
		} else if st, err = decodeState(body); err != nil {
			r.l.log.Warn("cluster: refusing a shared rate bucket that does not decode; starting it afresh", "key", key, "err", err)
			st = bucketState{Tokens: float64(r.burst), At: now.UnixNano()}
		}
	}
	st.refill(now, r.rps, r.burst, back)
	members := st.mark(replica, now)
	r.l.seen(members)
	got := min(r.lease, int(st.Tokens))
	var wait time.Duration
	if got == 0 {
		wait = time.Duration((1 - st.Tokens) / r.rps * float64(time.Second))
		if back == 0 && rev != 0 {
			return taken{members: members}, wait, nil // nothing to write
		}
	}
	st.Tokens -= float64(got)
	b, _ := json.Marshal(&st)
	var prev []byte
	if rev != 0 {
		prev = e.Value()
	}
	b = r.l.node.Load().SealRecord("rates", key, b, prev)
	if rev == 0 {
		_, err = kv.Create(ctx, key, b)
	} else {
		_, err = kv.Update(ctx, key, b, rev)
	}
	if err != nil {
		return taken{}, 0, fmt.Errorf("writing rate bucket %q: %w", key, err)
	}
	return taken{tokens: got, members: members}, wait, nil
}

// seen records the members of the key taken last.
func (l *Limits) seen(members int) { l.membersSeen.Store(int32(min(members, maxStateMembers))) }
