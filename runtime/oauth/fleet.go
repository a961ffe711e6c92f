package oauth

import (
	"context"
	"errors"
	"net/url"
	"time"

	"golang.org/x/oauth2"
)

// A fleet's upstream OAuth: the gateway gives the Manager the fleet's
// token store (KVStore) and a Relay, and calls Changed for every record
// the bucket's watch reports. Without a fleet none of this runs.
//
// Refresh by one replica: a replica about to refresh first reads the
// store: another replica may have refreshed already, and its token is
// taken instead. A refreshed token is written with compare-and-set on the
// version read; when two replicas refreshed at once, the one whose write
// loses re-reads the store and uses the winner's token (with the winner's
// rotated refresh token). A refresh refused because another replica spent
// the refresh token is answered the same way.

// Relay carries authorization redirects between replicas: the person's
// browser may come back to any replica, and the flight (with its PKCE
// verifier) lives on the one that started it.
type Relay interface {
	// Own answers the redirects of state forwarded by other replicas with
	// complete until release is called.
	Own(state string, complete func(ctx context.Context, q url.Values) (int, string)) (release func(), err error)
	// Forward hands a redirect whose state this replica does not own to
	// the replica that does, and returns the page it answered; ok is false
	// when no replica owns state.
	Forward(ctx context.Context, state string, q url.Values) (code int, msg string, ok bool)
}

// UseFleet makes store the token store and relay the carrier of
// redirects between replicas. Handlers read the store again at their next
// use.
func (m *Manager) UseFleet(store Store, relay Relay) {
	m.st.Store(&store)
	if relay != nil {
		m.relay.Store(&relay)
	}
	m.mu.Lock()
	hs := make([]*Handler, 0, len(m.handlers))
	for _, h := range m.handlers {
		hs = append(hs, h)
	}
	m.mu.Unlock()
	for _, h := range hs {
		h.mu.Lock()
		h.loaded = false
		h.mu.Unlock()
	}
}

func (m *Manager) store() Store { return *m.st.Load() }

// loadRecord reads a record with its version (0 when the store has none).
func (m *Manager) loadRecord(server, identity string) (*Record, uint64, error) {
	if v, ok := m.store().(Versioned); ok {
		return v.LoadVersion(server, identity)
	}
	rec, err := m.store().Load(server, identity)
	return rec, 0, err
}

// Changed is called when the record of server and identity changed in
// the fleet's store (a login, refresh or logout on any replica): the
// handler, if there is one, takes the stored record or, when there is
// none, forgets its token.
func (m *Manager) Changed(server, identity string) {
	m.mu.Lock()
	h := m.handlers[handlerKey{server, identity}]
	m.mu.Unlock()
	if h == nil || h.cc {
		return
	}
	rec, rev, err := m.loadRecord(server, identity)
	if err != nil {
		return // logged by the store; the token in memory stays in use
	}
	var idle *flight // a first login this replica waits for, made moot
	defer func() {
		if idle != nil {
			idle.moot.Store(true)
			idle.cancel()
		}
	}()
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case rec == nil:
		if h.rec != nil || h.ts != nil {
			h.ts, h.rec, h.needs, h.lastErr, h.loaded = nil, nil, true, "logged out", true
			m.log.Info("upstream token forgotten: logged out in the fleet", "server_name", server, "identity", identity)
		}
	case h.rec != nil && h.ts != nil && sameToken(h.rec.Token, rec.Token):
		h.setVersionLocked(rev)
	default:
		h.adoptLocked(rec)
		h.setVersionLocked(rev)
		h.loaded = true
		if h.ts != nil {
			h.needs, h.lastErr = false, ""
			if h.flight != nil && !h.stepping {
				idle = h.flight
			}
			close(h.authorized)
			h.authorized = make(chan struct{})
			m.log.Debug("upstream token taken from the fleet", "server_name", server, "identity", identity)
		}
	}
}

func sameToken(a, b *oauth2.Token) bool {
	return a.AccessToken == b.AccessToken && a.RefreshToken == b.RefreshToken
}

// setVersionLocked records the store's version of the current token.
func (h *Handler) setVersionLocked(rev uint64) {
	if s, ok := h.ts.(*savingSource); ok {
		s.rev.Store(rev)
	}
}

// own subscribes to the redirects of state forwarded by other replicas.
func (m *Manager) own(state string) {
	r := m.relay.Load()
	if r == nil || state == "" {
		return
	}
	release, err := (*r).Own(state, func(ctx context.Context, q url.Values) (int, string) {
		return m.complete(ctx, q, false)
	})
	if err != nil {
		m.log.Warn("the fleet cannot forward this authorization's redirect: it must come back to this replica", "err", err)
		return
	}
	m.mu.Lock()
	if m.pending[state] == nil { // taken meanwhile
		m.mu.Unlock()
		release()
		return
	}
	m.owned[state] = release
	m.mu.Unlock()
}

func (m *Manager) disownLocked(state string) {
	if release := m.owned[state]; release != nil {
		delete(m.owned, state)
		release()
	}
}

// fresh reports whether tok is good for longer than earlyRefresh.
func fresh(tok *oauth2.Token) bool {
	return tok.AccessToken != "" && (tok.Expiry.IsZero() || time.Until(tok.Expiry) > earlyRefresh)
}

// fleetToken is Token with a versioned (fleet) store; s.mu is held.
func (s *savingSource) fleetToken(v Versioned) (*oauth2.Token, error) {
	if fresh(s.rec.Token) {
		return s.rec.Token, nil
	}
	h := s.h
	// Another replica may have refreshed already.
	if s.takeStored(v) && fresh(s.rec.Token) {
		return s.rec.Token, nil
	}
	if s.rec.Token.RefreshToken == "" {
		if unexpired(s.rec.Token) {
			return s.rec.Token, nil
		}
		return nil, h.refreshFailed(s, errors.New("no refresh token"))
	}
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, h.m.opts.HTTPClient)
	tok, err := s.rec.config().TokenSource(ctx, &oauth2.Token{RefreshToken: s.rec.Token.RefreshToken}).Token()
	if err != nil {
		// Spent by another replica's refresh? Its token is in the store
		// (or soon will be: it may be storing it now).
		if s.awaitStored(v) && unexpired(s.rec.Token) {
			return s.rec.Token, nil
		}
		if unexpired(s.rec.Token) {
			h.m.log.Warn("refreshing the upstream token failed; using it until it expires", "server_name", h.server, "err", describe(err))
			return s.rec.Token, nil
		}
		return nil, h.refreshFailed(s, err)
	}
	rec := *s.rec
	if tok.RefreshToken == "" {
		tok.RefreshToken = s.rec.Token.RefreshToken
	}
	rec.Token, rec.Saved = tok, time.Now()
	if sc, ok := tok.Extra("scope").(string); ok && sc != "" {
		rec.Scopes = splitScopes(sc)
	}
	rev, err := v.SaveVersion(h.server, h.identity, &rec, s.rev.Load())
	switch {
	case errors.Is(err, ErrStale):
		// Another replica refreshed at the same time and stored first:
		// the fleet keeps its token; this one is dropped.
		if s.takeStored(v) {
			if unexpired(s.rec.Token) {
				h.m.log.Info("upstream token refreshed by another replica meanwhile; using the fleet's", "server_name", h.server)
				return s.rec.Token, nil
			}
		} else if rev, err = v.SaveVersion(h.server, h.identity, &rec, s.rev.Load()); err != nil {
			// The store holds this source's token at a newer version (a
			// kept write landed): stored on that version now, or kept.
			rev = s.rev.Load()
		}
	case err != nil:
		// Kept by the store and retried against the version it was based
		// on, which stays this source's until a write lands.
		h.m.log.Warn("storing the refreshed upstream token in the fleet", "server_name", h.server, "err", err)
		rev = s.rev.Load()
	}
	s.set(&rec, rev)
	h.m.log.Debug("upstream token refreshed", "server_name", h.server, "valid_until", tok.Expiry)
	return tok, nil
}

// takeStored reads the store and, when it holds another token than s,
// makes it s's; it reports whether it did. Either way s learns the
// stored version.
func (s *savingSource) takeStored(v Versioned) bool {
	rec, rev, err := v.LoadVersion(s.h.server, s.h.identity)
	if err != nil || rec == nil {
		return false
	}
	if sameToken(rec.Token, s.rec.Token) {
		s.rev.Store(rev)
		return false
	}
	s.set(rec, rev)
	return true
}

// awaitStored is takeStored, tried for up to storedWait while the store
// still holds the token s has.
func (s *savingSource) awaitStored(v Versioned) bool {
	deadline := time.Now().Add(storedWait)
	for {
		if s.takeStored(v) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(storedWait / 10)
	}
}

// storedWait bounds how long a replica whose refresh was refused waits
// for the replica that spent the refresh token to store the new one.
const storedWait = time.Second

// set makes rec (at version rev) the source's record.
func (s *savingSource) set(rec *Record, rev uint64) {
	s.rec = rec
	s.rev.Store(rev)
	s.h.mu.Lock()
	if s.h.ts == s {
		s.h.rec = rec
	}
	s.h.mu.Unlock()
}
