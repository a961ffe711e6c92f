package gateway

import (
	"encoding/json"
	"fmt"

	"github.com/edge-mcp/edge-mcp/internal/metrics"
	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/runtime/catalog"
	"github.com/edge-mcp/edge-mcp/runtime/policyset"
)

// This file builds what one session sees of the catalogue: the items its
// identity may use (access lists, before any policy), the tools list as
// tools_list policies leave it, deferred tools moved out of the list (they
// stay callable and searchable), and the gateway's own tools. A session
// without any of those sees the shared snapshot itself.

// sessionView caches a session's view of one catalogue snapshot, policy
// generation and guard.
type sessionView struct {
	gen uint64
	pol *policyset.Gen
	gd  *guard
	cat *catalogue
	// good is what the tools_list policies made of each tool the last
	// time they all ran without failing (nil: never), by server and
	// upstream name.
	good map[toolKey]listedTool
}

// listedTool is a tool as the tools_list policies left it.
type listedTool struct {
	exposed string
	raw     json.RawMessage
}

// catalogue returns the session's view of the current catalogue.
func (s *session) catalogue() *catalogue {
	cat := s.g.route.catalogue()
	gd := s.g.guard.Load()
	pg := s.g.pol.Current()
	if gd.Access == nil && !gd.AnyDeferred && !pg.Hooks().Has(policy.HookToolsList) {
		return cat
	}
	s.mu.Lock()
	v := s.view
	s.mu.Unlock()
	if v != nil && v.gen == cat.Gen && v.pol == pg && v.gd == gd {
		return v.cat
	}
	var good map[toolKey]listedTool
	if v != nil {
		good = v.good
	}
	vc, good, ok := viewBuilder{s}.build(cat, gd, good)
	if !ok {
		return vc // a tools_list policy failed: not cached, the next request tries again
	}
	s.mu.Lock()
	s.view = &sessionView{gen: cat.Gen, pol: pg, gd: gd, cat: vc, good: good}
	s.mu.Unlock()
	return vc
}

// viewBuilder builds a session's view of a catalogue snapshot; the
// session caches what it built (session.view).
type viewBuilder struct{ *session }

// build filters cat for the session. good is the last good outcome of
// the tools_list policies; build returns the new one, and ok false when
// a tools_list policy failed (the view must not be cached).
func (s viewBuilder) build(cat *catalogue, gd *guard, good map[toolKey]listedTool) (_ *catalogue, _ map[toolKey]listedTool, ok bool) {
	who := s.id.Name
	vc := &catalogue{Gen: cat.Gen}
	for k := range numKinds {
		vc.Index[k] = make(map[string]*item, len(cat.Lists[k]))
		for _, it := range cat.Lists[k] {
			allowed := gd.ServerAllowed(who, it.Up.name)
			if k == kindTools {
				allowed = gd.ToolAllowed(who, it.Up.name, it.Exposed)
			}
			if allowed {
				vc.Lists[k] = append(vc.Lists[k], it)
				vc.Index[k][it.Exposed] = it
			}
		}
	}
	vc.Lists[kindTools], good, ok = s.policyTools(vc.Lists[kindTools], good)
	vc.Index[kindTools] = make(map[string]*item, len(vc.Lists[kindTools]))
	var listed, deferred []*item
	for _, it := range vc.Lists[kindTools] {
		if _, dup := vc.Index[kindTools][it.Exposed]; dup {
			continue
		}
		vc.Index[kindTools][it.Exposed] = it
		if gd.AnyDeferred && gd.Settings(it.Up.name, it.Exposed).Deferred {
			deferred = append(deferred, it)
		} else {
			listed = append(listed, it)
		}
	}
	for _, it := range metaTools(deferred) {
		if _, taken := vc.Index[kindTools][it.Exposed]; !taken {
			vc.Index[kindTools][it.Exposed] = it
			listed = append(listed, it)
		}
	}
	vc.Lists[kindTools] = listed
	vc.Deferred = deferred
	for k := range numKinds {
		vc.Pages[k] = catalog.EncodePages(k, vc.Lists[k], s.g.opts.PageSize)
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
func (s viewBuilder) policyTools(tools []*item, good map[toolKey]listedTool) (_ []*item, _ map[toolKey]listedTool, ok bool) {
	if !s.g.pol.Hooks().Has(policy.HookToolsList) {
		return tools, good, true
	}
	pg := s.g.pol.Acquire()
	if pg == nil {
		return tools, good, true
	}
	defer s.g.pol.Release(pg)
	out, failed, err := s.runToolsList(pg, tools)
	if err == nil && !failed {
		next := make(map[toolKey]listedTool, len(out))
		for _, it := range out {
			next[toolKey{it.Up.name, it.Name}] = listedTool{exposed: it.Exposed, raw: it.Raw}
		}
		return out, next, true
	}
	if s.ctx.Err() != nil {
		return nil, good, false // the session is ending
	}
	if good != nil {
		s.g.metrics.ToolsListFailure(metrics.ToolsListKeptLastGood)
		s.g.log.Debug("a tools_list policy failed; the session keeps its last good tools list", "identity", s.id.Name, "err", err)
		return lastGood(tools, good), good, false
	}
	s.g.metrics.ToolsListFailure(metrics.ToolsListOnError)
	s.g.log.Debug("a tools_list policy failed; its on_error decides", "identity", s.id.Name, "err", err)
	if err != nil {
		return nil, good, false // the chain could not finish: nothing it governs can be shown
	}
	return out, good, false
}

// lastGood applies a session's last good tools_list outcome to tools.
func lastGood(tools []*item, good map[toolKey]listedTool) []*item {
	out := make([]*item, 0, len(tools))
	for _, it := range tools {
		if e, ok := good[toolKey{it.Up.name, it.Name}]; ok {
			out = append(out, &item{Up: it.Up, Name: it.Name, Exposed: e.exposed, Raw: e.raw})
		}
	}
	return out
}

// runToolsList runs the tools_list chain of pg over tools. failed reports
// whether a module failed during the run (its on_error was applied).
func (s viewBuilder) runToolsList(pg *policyset.Gen, tools []*item) (_ []*item, failed bool, _ error) {
	before := toolsListFailures(pg.Chain())
	entries := make([]policy.ToolEntry, len(tools))
	for i, it := range tools {
		entries[i] = policy.ToolEntry{Server: it.Up.name, Name: it.Name, Tool: it.Raw}
	}
	filtered, err := pg.Chain().ToolsList(s.ctx, s.client, entries)
	if err != nil {
		return nil, true, fmt.Errorf("running the tools_list policies: %w", err)
	}
	failed = toolsListFailures(pg.Chain()) != before
	type key struct{ server, name string }
	byUpstream := make(map[key]*item, len(tools))
	for _, it := range tools {
		byUpstream[key{it.Up.name, it.Name}] = it
	}
	out := make([]*item, 0, len(filtered))
	for _, e := range filtered {
		orig := byUpstream[key{e.Server, e.Name}]
		if orig == nil {
			continue
		}
		it := &item{Up: orig.Up, Name: orig.Name, Exposed: orig.Exposed, Raw: e.Tool}
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
