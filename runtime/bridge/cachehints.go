package bridge

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/edge-mcp/edge-mcp/internal/wire"
)

// Caching hints of 2026-07-28 results (ttlMs, cacheScope). The gateway
// answers lists from its catalogue, so the hints describe the catalogue
// (the gateway computes them: [Gateway.Hints]):
//
//   - ttlMs is TTLRelisting (1 s) while an upstream's list_changed is being
//     re-listed (the catalogue is about to change), TTLIncomplete (5 s)
//     while a configured upstream is not connected (its lists will appear
//     when it reconnects), and TTLSettled (60 s) otherwise.
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
	TTLRelisting  = 1000
	TTLIncomplete = 5000
	TTLSettled    = 60000
)

// Hints are the caching hints of a result.
type Hints struct {
	TTLMs int64
	Scope string // "public" or "private"
}

// Apply adds ttlMs and cacheScope to a list result.
func (h Hints) Apply(result json.RawMessage) (json.RawMessage, error) {
	out, err := wire.SetField(result, "ttlMs", strconv.AppendInt(nil, h.TTLMs, 10))
	if err != nil {
		return nil, err
	}
	return wire.SetField(out, "cacheScope", wire.AppendString(nil, h.Scope))
}

// ApplyRead adds the hints to a resources/read result from an upstream,
// keeping the upstream's TTL and the stricter of the two scopes.
func (h Hints) ApplyRead(result json.RawMessage) (json.RawMessage, error) {
	h.TTLMs = 0
	if ttl, ok, _ := wire.Field(result, "ttlMs"); ok {
		n, err := strconv.ParseInt(string(ttl), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("upstream ttlMs %s: %w", ttl, err)
		}
		h.TTLMs = n
	}
	if scope, _ := wire.String(result, "cacheScope"); scope == "private" {
		h.Scope = "private"
	}
	return h.Apply(result)
}

// Bound bounds h by an upstream's hint lh of the same list at now, and
// reports whether lh's positive TTL has run out (the upstream is to be
// listed again).
func (h Hints) Bound(lh *ListHint, now time.Time) (Hints, bool) {
	if lh.private {
		h.Scope = "private"
	}
	if !lh.has {
		return h, false
	}
	expired := false
	left := lh.ttlMs - now.Sub(lh.at).Milliseconds()
	if left <= 0 {
		left = 0
		expired = lh.ttlMs > 0
	}
	h.TTLMs = min(h.TTLMs, left)
	return h, expired
}

// ListHint is what an upstream's list result said about caching: the
// smallest ttlMs of its pages, whether any was private, and when it was
// listed. Immutable once [ListHint.Listed] stamped it.
type ListHint struct {
	has     bool
	ttlMs   int64
	private bool
	at      time.Time
}

// Add takes one page's hints into h.
func (h *ListHint) Add(result json.RawMessage) {
	if ttl, ok, _ := wire.Field(result, "ttlMs"); ok {
		if n, err := strconv.ParseInt(string(ttl), 10, 64); err == nil && n >= 0 && (!h.has || n < h.ttlMs) {
			h.has, h.ttlMs = true, n
		}
	}
	if scope, _ := wire.String(result, "cacheScope"); scope == "private" {
		h.private = true
	}
}

// Listed returns h as listed now, or nil when it says nothing (before
// 2026-07-28 there are no caching hints: a go-sdk server writes ttlMs 0
// into every list result, whatever the revision).
func (h ListHint) Listed(v2026 bool) *ListHint {
	if !v2026 || (!h.has && !h.private) {
		return nil
	}
	h.at = time.Now()
	return &h
}
