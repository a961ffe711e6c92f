package gateway

import (
	"encoding/json"
	"fmt"
	"strconv"

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
// Hints an upstream attaches to its own list results are not yet taken
// into account: the catalogue does not record them (see the upstream side).
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
	if gd.auth != nil || gd.access != nil || gd.anyDeferred || s.g.pol.current().hooks().Has(policy.HookToolsList) {
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
