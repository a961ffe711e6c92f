package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

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
// NATS user without them can neither read nor forge one), keyed by a hash
// of the session and the interceptor (no session id in NATS), each at
// most intercept.MaxState, and live as long as a session token (the
// bucket's TTL). While the replica is not in the fleet or NATS is
// unreachable, state is kept in this process (bounded) and the fleet's
// copy is used again when NATS is back.
type InterceptorState struct {
	f     *Fleet
	local intercept.MemoryStore

	mu sync.Mutex
	kv jetstream.KeyValue
}

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

// Load returns interceptor's state in session, or nil.
func (s *InterceptorState) Load(ctx context.Context, session, interceptor string) (json.RawMessage, error) {
	n, kv, err := s.bucket(ctx)
	if err != nil || kv == nil {
		if err == nil {
			return s.local.Load(ctx, session, interceptor)
		}
		return nil, err
	}
	key := stateKey(session, interceptor)
	e, err := kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return nil, nil
	case err != nil:
		s.forget()
		return nil, fmt.Errorf("reading interceptor state: %w", err)
	}
	body, err := n.OpenRecord(icStateBucket, key, e.Value(), nil)
	if err != nil {
		return nil, fmt.Errorf("interceptor state in NATS does not open with the fleet's keys: %w", err)
	}
	return body, nil
}

// Store keeps state as interceptor's state in session.
func (s *InterceptorState) Store(ctx context.Context, session, interceptor string, state json.RawMessage) error {
	n, kv, err := s.bucket(ctx)
	if err != nil || kv == nil {
		if err == nil {
			return s.local.Store(ctx, session, interceptor, state)
		}
		return err
	}
	key := stateKey(session, interceptor)
	if _, err := kv.Put(ctx, key, n.SealRecord(icStateBucket, key, state, nil)); err != nil {
		s.forget()
		return fmt.Errorf("writing interceptor state: %w", err)
	}
	return nil
}

// forget drops the bound bucket after an error (it may be gone).
func (s *InterceptorState) forget() {
	s.mu.Lock()
	s.kv = nil
	s.mu.Unlock()
}
