package intercept

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// MaxState caps one interceptor's state in one session (64 KiB): a
// larger update is the interceptor's failure and is not kept.
const MaxState = 64 << 10

// SessionStore keeps the per-session state of the interceptors that ask
// for it (Descriptor.SessionState), by MCP session and interceptor name,
// outside the interceptor: a Wasm instance recycled, or a session whose
// next request lands on another replica (a store shared by the fleet),
// keeps its state.
//
// Update is one read-invoke-write, atomic per session and interceptor:
// it calls fn with the current state (nil for none) and keeps what fn
// returns (nil: unchanged), so that two calls of one session at once
// do not lose either's change (a guard would miss a read). A store
// serializes the updates of one state in its process, waiting at most
// wait for the one before, and without holding up other sessions or
// interceptors; a store shared by processes also calls fn again with the
// newer state when another process wrote it meanwhile. An error of fn
// is returned as it is.
type SessionStore interface {
	Update(ctx context.Context, session, interceptor string, wait time.Duration, fn func(state json.RawMessage) (json.RawMessage, error)) error
}

// ErrStateBusy says an update of a session state waited longer than its
// interceptor's deadline for the update before it.
var ErrStateBusy = errors.New("waiting for another call's update of this session state")

// StateLocks serialize updates by key, each lock held by one caller at a
// time; a key's lock exists only while someone holds or waits for it.
type StateLocks struct {
	mu sync.Mutex
	m  map[string]*stateLock
}

type stateLock struct {
	ch   chan struct{} // holds a token while locked
	refs int           // holders and waiters
}

// Lock locks key, waiting at most wait (and until ctx ends), and returns
// its unlock.
func (l *StateLocks) Lock(ctx context.Context, key string, wait time.Duration) (unlock func(), err error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*stateLock{}
	}
	k := l.m[key]
	if k == nil {
		k = &stateLock{ch: make(chan struct{}, 1)}
		l.m[key] = k
	}
	k.refs++
	l.mu.Unlock()
	release := func() {
		l.mu.Lock()
		if k.refs--; k.refs == 0 {
			delete(l.m, key)
		}
		l.mu.Unlock()
	}
	select {
	case k.ch <- struct{}{}:
		return func() { <-k.ch; release() }, nil
	default:
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case k.ch <- struct{}{}:
		return func() { <-k.ch; release() }, nil
	case <-t.C:
		err = fmt.Errorf("%w (%v)", ErrStateBusy, wait)
	case <-ctx.Done():
		err = ctx.Err()
	}
	release()
	return nil, err
}

// held is how many keys are locked or waited for.
func (l *StateLocks) held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}

// MemoryStore is a SessionStore in this process, bounded: past
// MaxSessions sessions, the least recently used one is forgotten.
type MemoryStore struct {
	MaxSessions int // 4096 when 0

	locks    StateLocks
	mu       sync.Mutex
	sessions map[string]*list.Element // of *memSession
	lru      list.List                // front: most recent
}

type memSession struct {
	id    string
	state map[string]json.RawMessage
}

// Update runs fn on the session's state of interceptor and keeps its
// result, one update of a state at a time.
func (m *MemoryStore) Update(ctx context.Context, session, interceptor string, wait time.Duration, fn func(json.RawMessage) (json.RawMessage, error)) error {
	unlock, err := m.locks.Lock(ctx, session+"\x00"+interceptor, wait)
	if err != nil {
		return err
	}
	defer unlock()
	next, err := fn(m.Load(session, interceptor))
	if err != nil || next == nil {
		return err
	}
	m.Store(session, interceptor, next)
	return nil
}

// Load returns the session's state of interceptor, or nil.
func (m *MemoryStore) Load(session, interceptor string) json.RawMessage {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.sessions[session]; e != nil {
		m.lru.MoveToFront(e)
		return e.Value.(*memSession).state[interceptor]
	}
	return nil
}

// Store keeps state as the session's state of interceptor (outside
// Update: not serialized with it).
func (m *MemoryStore) Store(session, interceptor string, state json.RawMessage) {
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
}

// Sessions returns how many sessions m holds.
func (m *MemoryStore) Sessions() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sessions)
}

// invokeStateful calls a stateful interceptor inside its store's Update:
// with the session's state in its invocation context ({} when none yet),
// keeping the state its result returns. An update waits at most the
// interceptor's deadline for the one before it.
func (c *Chain) invokeStateful(ctx context.Context, m *member, inv *Invocation) (*Result, *FailError) {
	base := *inv.Context
	var res *Result
	err := c.state.Update(ctx, base.SessionID, m.desc.Name, m.timeout, func(st json.RawMessage) (json.RawMessage, error) {
		if len(st) == 0 {
			st = json.RawMessage("{}")
		}
		cc := base
		cc.InterceptorState = st
		inv.Context = &cc
		r, ferr := c.call(ctx, m, inv)
		if ferr != nil {
			return nil, ferr
		}
		res = r
		if r.State == nil {
			return nil, nil
		}
		if len(r.State) > MaxState || !json.Valid(r.State) {
			return nil, &FailError{Interceptor: m.desc.Name, Kind: ErrBadResult, Err: fmt.Errorf("session state: %d bytes of JSON at most %d", len(r.State), MaxState)}
		}
		return r.State, nil
	})
	var ferr *FailError
	switch {
	case errors.As(err, &ferr):
		return nil, ferr
	case errors.Is(err, ErrStateBusy):
		return nil, &FailError{Interceptor: m.desc.Name, Kind: ErrTimeout, Err: err}
	case err != nil:
		return nil, &FailError{Interceptor: m.desc.Name, Kind: ErrFailed, Err: fmt.Errorf("session state: %w", err)}
	}
	return res, nil
}
