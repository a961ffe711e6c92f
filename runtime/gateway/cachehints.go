package gateway

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/policy"
)

// Caching hints of 2026-07-28 results (ttlMs, cacheScope). The gateway
// answers lists from its catalogue, so the hints describe the catalogue:
//
//   - ttlMs is ttlRelisting (1 s) while an upstream's list_changed is being
//     re-listed (the catalogue is about to change), ttlIncomplete (5 s)
//     while a configured upstream is not connected (its lists will appear
//     when it reconnects), and ttlSettled (60 s) otherwise.
//   - cacheScope is "private" when what a client sees depends on who it
//     is: authentication is on, access lists apply, a policy module or
//     deferred tools filter the session's view, or an upstream runs one
//     session per client; "public" otherwise.
//
// A resources/read result is forwarded from its upstream: its ttlMs is the
// upstream's, or 0 (immediately stale) when the upstream gives none, as a
// 2025 upstream never does; its cacheScope is "private" when the upstream
// or the rules above say so, "public" otherwise.
//
// The hints a 2026-07-28 upstream attaches to its own list results bound
// the gateway's for the lists that hold its items (tools/list: the
// upstreams offering tools; resources/list and resources/templates/list
// each their own):
//
//   - ttlMs is at most what is left of each such upstream's ttlMs, counted
//     from when the gateway listed it (a list of several pages takes the
//     smallest page TTL); once an upstream's positive TTL has run out the
//     gateway re-lists that upstream in the background (at most one
//     re-listing per upstream at a time) and says 0 until it has. An
//     upstream's 0 (go-sdk's default: "immediately stale") makes the
//     gateway's 0 too, without re-listing on every request: the gateway
//     follows such an upstream's list_changed notifications instead.
//   - cacheScope is "private" when any such upstream said "private".
//
// A 2025 link gives no hints and does not bound anything (go-sdk servers
// write "ttlMs": 0 on 2025 links too; it is ignored there).
const (
	ttlRelisting  = 1000
	ttlIncomplete = 5000
	ttlSettled    = 60000
)

type cacheHints struct {
	ttlMs int64
	scope string
}

// cacheHints are the hints of the session's view of the catalogue now.
func (s *session) cacheHints() cacheHints {
	h := cacheHints{ttlMs: ttlSettled, scope: "public"}
	ups := s.g.route.upstreams().list
	for _, u := range ups {
		if u.current() == nil {
			h.ttlMs = ttlIncomplete
		}
		if u.perClient() {
			h.scope = "private"
		}
	}
	if s.g.route.relisting.Load() > 0 {
		h.ttlMs = ttlRelisting
	}
	gd := s.g.guard.Load()
	if gd.Auth != nil || gd.Access != nil || gd.AnyDeferred || s.g.pol.Current().Hooks().Has(policy.HookToolsList) {
		h.scope = "private"
	}
	return h
}

// apply adds ttlMs and cacheScope to a list result.
func (h cacheHints) apply(result json.RawMessage) (json.RawMessage, error) {
	out, err := wire.SetField(result, "ttlMs", strconv.AppendInt(nil, h.ttlMs, 10))
	if err != nil {
		return nil, err
	}
	return wire.SetField(out, "cacheScope", wire.AppendString(nil, h.scope))
}

// applyRead adds the hints to a resources/read result from an upstream,
// keeping the upstream's TTL and the stricter of the two scopes.
func (h cacheHints) applyRead(result json.RawMessage) (json.RawMessage, error) {
	h.ttlMs = 0
	if ttl, ok, _ := wire.Field(result, "ttlMs"); ok {
		n, err := strconv.ParseInt(string(ttl), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("upstream ttlMs %s: %w", ttl, err)
		}
		h.ttlMs = n
	}
	if scope, _ := wire.String(result, "cacheScope"); scope == "private" {
		h.scope = "private"
	}
	return h.apply(result)
}

// listHint is what an upstream's list result said about caching: the
// smallest ttlMs of its pages, whether any was private, and when it was
// listed.
type listHint struct {
	has     bool
	ttlMs   int64
	private bool
	at      time.Time
}

// add takes one page's hints into h.
func (h *listHint) add(result json.RawMessage) {
	if ttl, ok, _ := wire.Field(result, "ttlMs"); ok {
		if n, err := strconv.ParseInt(string(ttl), 10, 64); err == nil && n >= 0 && (!h.has || n < h.ttlMs) {
			h.has, h.ttlMs = true, n
		}
	}
	if scope, _ := wire.String(result, "cacheScope"); scope == "private" {
		h.private = true
	}
}

// recordHint keeps the hint of kind k's list as the shared link's upstream
// gave it just now (per-client links' lists do not make the catalogue).
func (l *link) recordHint(k listKind, h listHint) {
	if l.owner != nil {
		return
	}
	if !l.v2026.Load() || (!h.has && !h.private) {
		// Before 2026-07-28 there are no caching hints (a go-sdk server
		// writes ttlMs 0 into every list result, whatever the revision).
		l.u.hints[k].Store(nil)
		return
	}
	h.at = time.Now()
	l.u.hints[k].Store(&h)
}

// cacheHintsFor are the session's hints for the list of kind k: the
// catalogue's (cacheHints) bounded by the upstreams' own for that list.
func (s *session) cacheHintsFor(k listKind) cacheHints {
	h := s.cacheHints()
	now := time.Now()
	for _, u := range s.g.route.upstreams().list {
		lh := u.hints[k].Load()
		if lh == nil {
			continue
		}
		if lh.private {
			h.scope = "private"
		}
		if !lh.has {
			continue
		}
		left := lh.ttlMs - now.Sub(lh.at).Milliseconds()
		if left <= 0 {
			left = 0
			if lh.ttlMs > 0 {
				u.refreshExpired(k)
			}
		}
		h.ttlMs = min(h.ttlMs, left)
	}
	return h
}

// refreshExpired re-lists kind k of u in the background when its positive
// TTL has run out, unless a refresh for that is already running.
func (u *upstream) refreshExpired(k listKind) {
	l := u.current()
	if l == nil || !u.hintRefresh.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer u.hintRefresh.Store(false)
		u.g.route.relisting.Add(1)
		defer u.g.route.relisting.Add(-1)
		u.refresh(l, []listKind{k}, false)
	}()
}
