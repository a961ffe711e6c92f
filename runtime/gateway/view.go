package gateway

import (
	"github.com/edge-mcp/edge-mcp/policy"
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
	pol *policyGen
	gd  *guard
	cat *catalogue
}

// catalogue returns the session's view of the current catalogue.
func (s *session) catalogue() *catalogue {
	cat := s.g.route.catalogue()
	gd := s.g.guard.Load()
	pg := s.g.pol.current()
	if gd.access == nil && !gd.anyDeferred && !pg.hooks().Has(policy.HookToolsList) {
		return cat
	}
	s.mu.Lock()
	v := s.view
	s.mu.Unlock()
	if v != nil && v.gen == cat.gen && v.pol == pg && v.gd == gd {
		return v.cat
	}
	vc := s.buildView(cat, gd)
	s.mu.Lock()
	s.view = &sessionView{gen: cat.gen, pol: pg, gd: gd, cat: vc}
	s.mu.Unlock()
	return vc
}

// buildView filters cat for the session.
func (s *session) buildView(cat *catalogue, gd *guard) *catalogue {
	who := s.id.Name
	vc := &catalogue{gen: cat.gen}
	for k := range numKinds {
		vc.index[k] = make(map[string]*item, len(cat.lists[k]))
		for _, it := range cat.lists[k] {
			allowed := gd.serverAllowed(who, it.up.name)
			if k == kindTools {
				allowed = gd.toolAllowed(who, it.up.name, it.exposed)
			}
			if allowed {
				vc.lists[k] = append(vc.lists[k], it)
				vc.index[k][it.exposed] = it
			}
		}
	}
	vc.lists[kindTools] = s.policyTools(vc.lists[kindTools])
	vc.index[kindTools] = make(map[string]*item, len(vc.lists[kindTools]))
	var listed, deferred []*item
	for _, it := range vc.lists[kindTools] {
		if _, dup := vc.index[kindTools][it.exposed]; dup {
			continue
		}
		vc.index[kindTools][it.exposed] = it
		if gd.anyDeferred && gd.settings(it.up.name, it.exposed).deferred {
			deferred = append(deferred, it)
		} else {
			listed = append(listed, it)
		}
	}
	for _, it := range s.g.metaTools(s, deferred) {
		if _, taken := vc.index[kindTools][it.exposed]; !taken {
			vc.index[kindTools][it.exposed] = it
			listed = append(listed, it)
		}
	}
	vc.lists[kindTools] = listed
	vc.deferred = deferred
	for k := range numKinds {
		vc.pages[k] = encodePages(k, vc.lists[k], s.g.opts.PageSize)
	}
	return vc
}

// policyTools runs the tools_list policies over a session's tools.
func (s *session) policyTools(tools []*item) []*item {
	if !s.g.pol.hooks().Has(policy.HookToolsList) {
		return tools
	}
	pg := s.g.pol.acquire()
	if pg == nil {
		return tools
	}
	defer s.g.pol.release(pg)
	entries := make([]policy.ToolEntry, len(tools))
	for i, it := range tools {
		entries[i] = policy.ToolEntry{Server: it.up.name, Name: it.name, Tool: it.raw}
	}
	filtered, err := pg.chain.ToolsList(s.ctx, s.client, entries)
	if err != nil {
		return nil // the session is ending, or the modules fail closed
	}
	type key struct{ server, name string }
	byUpstream := make(map[key]*item, len(tools))
	for _, it := range tools {
		byUpstream[key{it.up.name, it.name}] = it
	}
	out := make([]*item, 0, len(filtered))
	for _, e := range filtered {
		orig := byUpstream[key{e.Server, e.Name}]
		if orig == nil {
			continue
		}
		it := &item{up: orig.up, name: orig.name, exposed: orig.exposed, raw: e.Tool}
		if e.Exposed != "" {
			it.exposed = e.Exposed
		}
		out = append(out, it)
	}
	return out
}
