package view

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/edge-mcp/edge-mcp/internal/metrics"
	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/runtime/catalog"
	"github.com/edge-mcp/edge-mcp/runtime/policyset"
)

// Key names a tool by its server and upstream name.
type Key struct{ Server, Tool string }

// Listed is a tool as the tools_list policies left it.
type Listed struct {
	Exposed string
	Raw     json.RawMessage
}

// Good is what the tools_list policies made of each tool the last time
// they all ran without failing (nil: never).
type Good map[Key]Listed

// Access is what one session may see; the gateway implements it.
type Access[U comparable, L any] interface {
	// Allowed reports whether the session may see it (the access lists:
	// a tool by its server and name, anything else by its server).
	Allowed(k catalog.Kind, it *catalog.Item[U, L]) bool
	// Deferred reports whether the tool it is left out of the tools list.
	Deferred(it *catalog.Item[U, L]) bool
	// Meta are the gateway's own tools for the deferred tools (nil when
	// there are none).
	Meta(deferred []*catalog.Item[U, L]) []*catalog.Item[U, L]
}

// Builder builds one session's view.
type Builder[U comparable, L any] struct {
	Ctx      context.Context // the session's
	Client   policy.Client   // who is calling, as policy modules see it
	Pol      *policyset.Set
	Metrics  *metrics.Metrics // nil: metrics off
	Log      *slog.Logger
	PageSize int
	Server   func(U) string // an upstream's name
	Access   Access[U, L]
}

type item[U comparable, L any] = catalog.Item[U, L]

// Build filters cat for the session. good is the last good outcome of
// the tools_list policies; Build returns the new one, and ok false when a
// tools_list policy failed (the view must not be cached).
func (b Builder[U, L]) Build(cat *catalog.Catalogue[U, L], good Good) (_ *catalog.Catalogue[U, L], _ Good, ok bool) {
	vc := &catalog.Catalogue[U, L]{Gen: cat.Gen}
	for k := range catalog.NumKinds {
		vc.Index[k] = make(map[string]*item[U, L], len(cat.Lists[k]))
		for _, it := range cat.Lists[k] {
			if b.Access.Allowed(k, it) {
				vc.Lists[k] = append(vc.Lists[k], it)
				vc.Index[k][it.Exposed] = it
			}
		}
	}
	tools := catalog.Tools
	vc.Lists[tools], good, ok = b.policyTools(vc.Lists[tools], good)
	vc.Index[tools] = make(map[string]*item[U, L], len(vc.Lists[tools]))
	var listed, deferred []*item[U, L]
	for _, it := range vc.Lists[tools] {
		if _, dup := vc.Index[tools][it.Exposed]; dup {
			continue
		}
		vc.Index[tools][it.Exposed] = it
		if b.Access.Deferred(it) {
			deferred = append(deferred, it)
		} else {
			listed = append(listed, it)
		}
	}
	for _, it := range b.Access.Meta(deferred) {
		if _, taken := vc.Index[tools][it.Exposed]; !taken {
			vc.Index[tools][it.Exposed] = it
			listed = append(listed, it)
		}
	}
	vc.Lists[tools] = listed
	vc.Deferred = deferred
	for k := range catalog.NumKinds {
		vc.Pages[k] = catalog.EncodePages(k, vc.Lists[k], b.PageSize)
	}
	return vc, good, ok
}

// policyTools runs the tools_list policies over a session's tools. good is
// their last good outcome for the session; policyTools returns the new one.
//
// When a module fails (ok false), the session keeps its last good view:
// each tool gets what the policies made of it then, and tools they have not
// seen succeed on stay hidden. A session with no good run yet gets what
// each failing module's on_error says (deny: the tools it governs are
// hidden; allow: they pass unfiltered by it). A failure never empties the
// rest of the list.
func (b Builder[U, L]) policyTools(tools []*item[U, L], good Good) (_ []*item[U, L], _ Good, ok bool) {
	if !b.Pol.Hooks().Has(policy.HookToolsList) {
		return tools, good, true
	}
	pg := b.Pol.Acquire()
	if pg == nil {
		return tools, good, true
	}
	defer b.Pol.Release(pg)
	out, failed, err := b.RunToolsList(pg, tools)
	if err == nil && !failed {
		next := make(Good, len(out))
		for _, it := range out {
			next[Key{b.Server(it.Up), it.Name}] = Listed{Exposed: it.Exposed, Raw: it.Raw}
		}
		return out, next, true
	}
	if b.Ctx.Err() != nil {
		return nil, good, false // the session is ending
	}
	if good != nil {
		b.Metrics.ToolsListFailure(metrics.ToolsListKeptLastGood)
		b.Log.Debug("a tools_list policy failed; the session keeps its last good tools list", "identity", b.Client.ID, "err", err)
		return b.lastGood(tools, good), good, false
	}
	b.Metrics.ToolsListFailure(metrics.ToolsListOnError)
	b.Log.Debug("a tools_list policy failed; its on_error decides", "identity", b.Client.ID, "err", err)
	if err != nil {
		return nil, good, false // the chain could not finish: nothing it governs can be shown
	}
	return out, good, false
}

// lastGood applies a session's last good tools_list outcome to tools.
func (b Builder[U, L]) lastGood(tools []*item[U, L], good Good) []*item[U, L] {
	out := make([]*item[U, L], 0, len(tools))
	for _, it := range tools {
		if e, ok := good[Key{b.Server(it.Up), it.Name}]; ok {
			out = append(out, &item[U, L]{Up: it.Up, Name: it.Name, Exposed: e.Exposed, Raw: e.Raw})
		}
	}
	return out
}

// RunToolsList runs the tools_list chain of pg over tools. failed reports
// whether a module failed during the run (its on_error was applied).
func (b Builder[U, L]) RunToolsList(pg *policyset.Gen, tools []*item[U, L]) (_ []*item[U, L], failed bool, _ error) {
	before := toolsListFailures(pg.Chain())
	entries := make([]policy.ToolEntry, len(tools))
	for i, it := range tools {
		entries[i] = policy.ToolEntry{Server: b.Server(it.Up), Name: it.Name, Tool: it.Raw}
	}
	filtered, err := pg.Chain().ToolsList(b.Ctx, b.Client, entries)
	if err != nil {
		return nil, true, fmt.Errorf("running the tools_list policies: %w", err)
	}
	failed = toolsListFailures(pg.Chain()) != before
	byUpstream := make(map[Key]*item[U, L], len(tools))
	for _, it := range tools {
		byUpstream[Key{b.Server(it.Up), it.Name}] = it
	}
	out := make([]*item[U, L], 0, len(filtered))
	for _, e := range filtered {
		orig := byUpstream[Key{e.Server, e.Name}]
		if orig == nil {
			continue
		}
		it := &item[U, L]{Up: orig.Up, Name: orig.Name, Exposed: orig.Exposed, Raw: e.Tool}
		if e.Exposed != "" {
			it.Exposed = e.Exposed
		}
		out = append(out, it)
	}
	return out, failed, nil
}

// toolsListFailures counts the failures of the enforcing tools_list modules
// of ch. A change across a run means a module failed during it (or, rarely,
// in another session's run at the same time: that session's view then
// keeps its last good list once more, which is safe).
func toolsListFailures(ch *policy.Chain) uint64 {
	var n uint64
	for _, st := range ch.Stats() {
		if !st.Shadow && st.Hooks.Has(policy.HookToolsList) {
			n += st.Failures
		}
	}
	return n
}
