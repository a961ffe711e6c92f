package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edge-mcp/edge-mcp/policy/intercept"
	"github.com/edge-mcp/edge-mcp/runtime/cluster"
)

// icStateBucket is the bucket of interceptor session state under the
// fleet's prefix.
const icStateBucket = "icstate"

// InterceptorState is the fleet's policy/intercept.SessionStore: the
// session state of stateful interceptors (a guard's memory of a session)
// in the JetStream KV bucket "<fleet>_icstate", so that a session's next
// request on another replica, or on a recycled module instance, finds
// it. Records are sealed by the fleet's keys like every fleet record (a
// NATS user without them can neither read nor forge one, nor move one
// to another key), keyed by a hash of the session and the interceptor
// (no session id in NATS), each at most intercept.MaxState, and live as
// long as a session token (the bucket's TTL). While the replica is not
// in the fleet or NATS is unreachable, state is kept in this process
// (bounded) and the fleet's copy is used again when NATS is back.
//
// An update is atomic across the fleet: one at a time per state on this
// replica (StateLocks), and written only over the revision it read
// (compare-and-set); when another replica wrote in between, the update
// reads the newer state and runs again, so neither change is lost.
//
// A genuine older record put back by someone with NATS write access (a
// replay: a guard would forget a read) is refused when read, failing the
// interceptor's call: its sealed write time is older than the newest one
// this replica accepted for the key (cluster.Watermarks), or the NATS
// server stored it more than cluster.MaxRecordLag after it was sealed
// (which a replica that never saw the newer record can check too). Each
// write is sealed later than the record it replaces and lands only over
// that record's revision, so a replay slipped in between fails the write
// and is refused on the read again.
type InterceptorState struct {
	f     *Fleet
	local intercept.MemoryStore
	locks intercept.StateLocks
	marks cluster.Watermarks // newest record accepted, per key

	mu sync.Mutex
	kv jetstream.KeyValue
}

// maxStateAttempts bounds the reads and writes of one update that keep
// finding the state changed by another replica; between two, the update
// waits a random moment under stateBackoff(attempt), so that writers
// racing on one key spread out instead of colliding again (12 concurrent
// calls of one session over three replicas ran out of 8 attempts without
// it). The call's deadline bounds the whole.
const maxStateAttempts = 32

// stateBackoff is the longest wait before attempt n+1 (1 ms doubling,
// at most 32 ms).
func stateBackoff(n int) time.Duration { return time.Millisecond << min(n, 5) }

// InterceptorState returns the fleet's interceptor state store (usable
// before Join: it uses NATS once the replica is in the fleet).
func (f *Fleet) InterceptorState() *InterceptorState { return &InterceptorState{f: f} }

// stateKey is the KV key of interceptor's state in session.
func stateKey(session, interceptor string) string {
	sum := sha256.Sum256([]byte(session + "\x00" + interceptor))
	return hex.EncodeToString(sum[:16])
}

// bucket returns the bucket, making it; nil when NATS cannot be used.
func (s *InterceptorState) bucket(ctx context.Context) (*cluster.Node, jetstream.KeyValue, error) {
	n := s.f.Node()
	if n == nil || !n.Connected() {
		return nil, nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kv != nil {
		return n, s.kv, nil
	}
	kv, err := n.JetStream().CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: n.Bucket(icStateBucket), TTL: n.SessionTTL(),
		MaxValueSize: intercept.MaxState + 1024, Description: "interceptor session state (sealed)"})
	if err != nil {
		return nil, nil, fmt.Errorf("opening bucket %q: %w", n.Bucket(icStateBucket), err)
	}
	s.kv = kv
	return n, kv, nil
}

// Update runs fn on interceptor's state in session and writes its
// result over the revision it read, again on a newer state when another
// replica wrote meanwhile.
func (s *InterceptorState) Update(ctx context.Context, session, interceptor string, wait time.Duration, fn func(json.RawMessage) (json.RawMessage, error)) error {
	n, kv, err := s.bucket(ctx)
	if err != nil {
		return err
	}
	if kv == nil {
		return s.local.Update(ctx, session, interceptor, wait, fn)
	}
	unlock, err := s.locks.Lock(ctx, session+"\x00"+interceptor, wait)
	if err != nil {
		return err
	}
	defer unlock()
	key := stateKey(session, interceptor)
	for attempt := range maxStateAttempts {
		state, rev, err := s.load(ctx, n, kv, key)
		if err != nil {
			return err
		}
		next, err := fn(state)
		if err != nil || next == nil {
			return err
		}
		where := n.Bucket(icStateBucket) + "/" + key
		at := n.Keys().Next(s.marks.Latest(where))
		sealed := n.Keys().SealRecord(n.Bucket(icStateBucket), key, at, next)
		if rev == 0 {
			_, err = kv.Create(ctx, key, sealed)
		} else {
			_, err = kv.Update(ctx, key, sealed, rev)
		}
		switch {
		case err == nil:
			return s.marks.Accept(where, at) // the record just replaced is older now
		case !cluster.IsConflict(err):
			s.forget()
			return fmt.Errorf("writing interceptor state: %w", err)
		}
		select {
		case <-time.After(rand.N(stateBackoff(attempt))):
		case <-ctx.Done():
			return fmt.Errorf("writing interceptor state: %w", ctx.Err())
		}
	}
	return fmt.Errorf("writing interceptor state: changed by other replicas %d times meanwhile", maxStateAttempts)
}

// load reads key's state and its revision (0: none).
func (s *InterceptorState) load(ctx context.Context, n *cluster.Node, kv jetstream.KeyValue, key string) (json.RawMessage, uint64, error) {
	e, err := kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return nil, 0, nil
	case err != nil:
		s.forget()
		return nil, 0, fmt.Errorf("reading interceptor state: %w", err)
	}
	body, err := n.OpenEntry(icStateBucket, e, &s.marks)
	if err != nil {
		return nil, 0, fmt.Errorf("interceptor state in NATS refused: %w", err)
	}
	return body, e.Revision(), nil
}

// forget drops the bound bucket after an error (it may be gone).
func (s *InterceptorState) forget() {
	s.mu.Lock()
	s.kv = nil
	s.mu.Unlock()
}
