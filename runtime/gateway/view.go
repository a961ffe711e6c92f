package gateway

import (
	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/runtime/catalog"
	"github.com/edge-mcp/edge-mcp/runtime/policyset"
	"github.com/edge-mcp/edge-mcp/runtime/view"
)

// What one session sees of the catalogue is runtime/view's: the items its
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
	good view.Good
}

// catalogue returns the session's view of the current catalogue.
func (s *session) catalogue() *catalogue {
	cat := virtualSide{s}.base()
	gd := s.g.guard.Load()
	pg := s.g.pol.Current()
	if gd.Access == nil && !gd.AnyDeferred && !(virtualSide{s}).deferred() && !pg.Hooks().Has(policy.HookToolsList) {
		return cat
	}
	s.mu.Lock()
	v := s.view
	s.mu.Unlock()
	if v != nil && v.gen == cat.Gen && v.pol == pg && v.gd == gd {
		return v.cat
	}
	var good view.Good
	if v != nil {
		good = v.good
	}
	vc, good, ok := viewOf(s, gd).Build(cat, good)
	if !ok {
		return vc // a tools_list policy failed: not cached, the next request tries again
	}
	s.mu.Lock()
	s.view = &sessionView{gen: cat.Gen, pol: pg, gd: gd, cat: vc, good: good}
	s.mu.Unlock()
	return vc
}

// viewOf is the builder of s's view under the guard gd.
func viewOf(s *session, gd *guard) view.Builder[*upstream, localCall] {
	return view.Builder[*upstream, localCall]{Ctx: s.ctx, Client: s.client, Pol: &s.g.pol, Metrics: s.g.metrics,
		Log: s.g.log, PageSize: s.g.opts.PageSize, Server: upstreamName, Access: viewAccess{s, gd}}
}

// viewAccess implements view.Access for a session under a guard.
type viewAccess struct {
	s  *session
	gd *guard
}

func (a viewAccess) Allowed(k catalog.Kind, it *item) bool {
	if k == kindTools {
		return a.gd.ToolAllowed(a.s.id.Name, it.Up.name, it.RuleName())
	}
	return a.gd.ServerAllowed(a.s.id.Name, it.Up.name)
}

func (a viewAccess) Deferred(it *item) bool {
	return a.gd.AnyDeferred && a.gd.Settings(it.Up.name, it.RuleName()).Deferred || virtualSide{a.s}.deferred()
}

func (a viewAccess) Meta(deferred []*item) []*item { return metaTools(deferred) }
