package intercept

import (
	"container/list"
	"context"
	"encoding/json"
	"fmt"
	"sync"
)

// MaxState caps one interceptor's state in one session (64 KiB): a
// larger update is the interceptor's failure and is not kept.
const MaxState = 64 << 10

// SessionStore keeps the per-session state of the interceptors that ask
// for it (Descriptor.SessionState), by MCP session and interceptor name,
// outside the interceptor: a Wasm instance recycled, or a session whose
// next request lands on another replica (a store shared by the fleet),
// keeps its state. Load returns nil for none.
type SessionStore interface {
	Load(ctx context.Context, session, interceptor string) (json.RawMessage, error)
	Store(ctx context.Context, session, interceptor string, state json.RawMessage) error
}

// MemoryStore is a SessionStore in this process, bounded: past
// MaxSessions sessions, the least recently used one is forgotten.
type MemoryStore struct {
	MaxSessions int // 4096 when 0

	mu       sync.Mutex
	sessions map[string]*list.Element // of *memSession
	lru      list.List                // front: most recent
}

type memSession struct {
	id    string
	state map[string]json.RawMessage
}

// Load returns the session's state of interceptor, or nil.
func (m *MemoryStore) Load(_ context.Context, session, interceptor string) (json.RawMessage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.sessions[session]; e != nil {
		m.lru.MoveToFront(e)
		return e.Value.(*memSession).state[interceptor], nil
	}
	return nil, nil
}

// Store keeps state as the session's state of interceptor.
func (m *MemoryStore) Store(_ context.Context, session, interceptor string, state json.RawMessage) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sessions == nil {
		m.sessions = map[string]*list.Element{}
	}
	e := m.sessions[session]
	if e == nil {
		if max := m.MaxSessions; len(m.sessions) >= max && max > 0 || max == 0 && len(m.sessions) >= 4096 {
			old := m.lru.Back()
			m.lru.Remove(old)
			delete(m.sessions, old.Value.(*memSession).id)
		}
		e = m.lru.PushFront(&memSession{id: session, state: map[string]json.RawMessage{}})
		m.sessions[session] = e
	}
	m.lru.MoveToFront(e)
	e.Value.(*memSession).state[interceptor] = append(json.RawMessage(nil), state...)
	return nil
}

// Sessions returns how many sessions m holds.
func (m *MemoryStore) Sessions() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sessions)
}

// withState returns inv with its context carrying m's state in the
// session (a copy of the context; {} when none yet), when m asks for
// state and the chain has a store and the event a session.
func (c *Chain) withState(ctx context.Context, m *member, inv *Invocation) (stateful bool, ferr *FailError) {
	if !m.desc.SessionState || c.state == nil || inv.Context == nil || inv.Context.SessionID == "" {
		return false, nil
	}
	st, err := c.state.Load(ctx, inv.Context.SessionID, m.desc.Name)
	if err != nil {
		return false, &FailError{Interceptor: m.desc.Name, Kind: ErrFailed, Err: fmt.Errorf("loading its session state: %w", err)}
	}
	if len(st) == 0 {
		st = json.RawMessage("{}")
	}
	cc := *inv.Context
	cc.InterceptorState = st
	inv.Context = &cc
	return true, nil
}

// keepState stores a result's new state.
func (c *Chain) keepState(ctx context.Context, m *member, inv *Invocation, res *Result) *FailError {
	if res.State == nil {
		return nil
	}
	if len(res.State) > MaxState || !json.Valid(res.State) {
		return &FailError{Interceptor: m.desc.Name, Kind: ErrBadResult, Err: fmt.Errorf("session state: %d bytes of JSON at most %d", len(res.State), MaxState)}
	}
	if err := c.state.Store(ctx, inv.Context.SessionID, m.desc.Name, res.State); err != nil {
		return &FailError{Interceptor: m.desc.Name, Kind: ErrFailed, Err: fmt.Errorf("storing its session state: %w", err)}
	}
	return nil
}
