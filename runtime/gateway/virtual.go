package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/metrics"
	"github.com/edge-mcp/edge-mcp/runtime/admin"
	"github.com/edge-mcp/edge-mcp/runtime/virtual"
	"github.com/edge-mcp/edge-mcp/transports"
)

// This file serves the virtual servers (runtime/virtual, which also has
// their HTTP handler): a session opened on one starts from the server's
// view of the catalogue instead of the whole of it. The view is built
// once per catalogue snapshot and shared by the server's sessions; access
// lists, tool rules and policies then apply as on /mcp.

// baseCatalogue is where a session's view starts: the shared catalogue,
// or its virtual server's view of it.
func (s *session) baseCatalogue() *catalogue {
	if s.vs == "" {
		return s.g.route.catalogue()
	}
	return s.g.virtualCatalogue(s.vs, s.g.route.catalogue())
}

// virtualCatalogue is the named virtual server's view of cat, cached; a
// server a reload removed serves nothing.
func (g *Gateway) virtualCatalogue(name string, cat *catalogue) *catalogue {
	vs := g.virt.Load().ByName(name)
	if vs == nil {
		return &catalogue{gen: cat.gen}
	}
	if c, ok := vs.Cached(cat.gen).(*catalogue); ok {
		return c
	}
	c := g.buildVirtual(vs, cat)
	vs.Store(cat.gen, c)
	return c
}

// buildVirtual builds vs's view of cat: the catalogue's items themselves,
// a copy of the few an override rewrites, and no name index of its own
// but those copies' (find resolves the rest through cat's).
func (g *Gateway) buildVirtual(vs *virtual.Server, cat *catalogue) *catalogue {
	var lists [virtual.NumKinds]virtual.List
	for k := range numKinds {
		lists[k] = itemList(cat.lists[k])
	}
	v := vs.Build(lists)
	for _, w := range vs.NewWarnings(v) {
		g.log.Warn("virtual server: "+w, "virtual_server", vs.Name)
	}
	c := &catalogue{gen: cat.gen, virt: &virtualShare{base: cat, sel: v.Selection()}}
	for k := range numKinds {
		c.lists[k] = make([]*item, 0, v.Len(virtual.Kind(k)))
		size := 0
		for _, e := range v.Entries(virtual.Kind(k)) {
			it := cat.lists[k][e.Pos]
			if e.Raw != nil {
				cp := *it
				cp.raw, cp.vt = e.Raw, e.Tool
				if e.Name != "" {
					cp.exposed = e.Name
				}
				it = &cp
				if c.index[k] == nil {
					c.index[k] = make(map[string]*item)
				}
				c.index[k][it.exposed] = it
			}
			c.lists[k] = append(c.lists[k], it)
			size += len(it.raw)
		}
		if size <= virtualPagesMax {
			c.pages[k] = encodePages(k, c.lists[k], g.opts.PageSize)
		}
	}
	return c
}

// virtualShare is what a virtual server's view shares with the catalogue
// it was built from.
type virtualShare struct {
	base *catalogue
	sel  virtual.Selection
}

// find returns c's item named name (exposed name, URI or template), or
// nil. A virtual server's view finds its rewritten items in its own index
// and the rest in the catalogue's, when it selects them.
func (c *catalogue) find(k listKind, name string) *item {
	if it := c.index[k][name]; it != nil || c.virt == nil {
		return it
	}
	if it := c.virt.base.index[k][name]; it != nil && c.virt.sel.Serves(virtual.Kind(k), name) {
		return it
	}
	return nil
}

// virtualPagesMax is the largest view whose lists a virtual server keeps
// encoded; a larger one (a server selecting most of a large catalogue) is
// encoded per list request instead of holding a copy of the catalogue.
const virtualPagesMax = 32 << 10

// sameItems reports whether two lists hold the same definitions.
func sameItems(a, b []*item) bool {
	return slices.EqualFunc(a, b, func(x, y *item) bool { return x == y || x.exposed == y.exposed && bytes.Equal(x.raw, y.raw) })
}

// itemList reads a catalogue list as runtime/virtual does.
type itemList []*item

func (l itemList) Len() int                  { return len(l) }
func (l itemList) Key(i int) string          { return l[i].exposed }
func (l itemList) Raw(i int) json.RawMessage { return l[i].raw }

// ruleName is the name access lists, tool rules and policies know a tool
// by: its catalogue name, also when a virtual server renamed it.
func (it *item) ruleName() string {
	if it.vt != nil {
		return it.vt.Catalogue()
	}
	return it.exposed
}

// listsChanged returns the list_changed methods a session gets when the
// catalogue went from old to next: changed on /mcp, on a virtual server
// those of the lists of its own view that changed.
func (s *session) listsChanged(old, next *catalogue, changed []string) []string {
	if s.vs == "" {
		return changed
	}
	cur := s.g.virtualCatalogue(s.vs, next)
	prev := s.vlast.Swap(cur)
	if vs := s.g.virt.Load().ByName(s.vs); prev == nil && vs != nil && old != nil {
		prev = s.g.buildVirtual(vs, old) // not cached: the server's cache holds next
	}
	var out []string
	for _, k := range []listKind{kindTools, kindPrompts, kindResources} {
		if !sameList(prev, cur, k) || k == kindResources && !sameList(prev, cur, kindTemplates) {
			out = append(out, listKinds[k].changed)
		}
	}
	return out
}

// serverInfo and instructions are what a session's initialize result and
// server/discover say: the gateway's, or its virtual server's.
func (s *session) serverInfo() map[string]any {
	info := serverInfo()
	if vs := s.g.virt.Load().ByName(s.vs); vs != nil && vs.Title != "" {
		info["title"] = vs.Title
	}
	return info
}

func (s *session) instructions() string {
	if s.vs == "" {
		return bridgeOps{s.g}.Instructions()
	}
	if vs := s.g.virt.Load().ByName(s.vs); vs != nil {
		return vs.Instructions
	}
	return ""
}

func (b bridgeSession) ServerInfo() any      { return b.s.serverInfo() }
func (b bridgeSession) Instructions() string { return b.s.instructions() }

// virtualDeferred reports whether the session's virtual server defers all
// its tools (deferred_tools: found by tool_search, called by name).
func (s *session) virtualDeferred() bool {
	vs := s.g.virt.Load().ByName(s.vs)
	return vs != nil && vs.DeferredTools
}

// virtualHidden says why a virtual server's session does not see the
// catalogue's item name, for the log and audit (the client is told
// "unknown").
func (s *session) virtualHidden(k listKind, name string) string {
	if vs := s.g.virt.Load().ByName(s.vs); vs != nil && k == kindTools {
		return vs.Why(itemList(s.g.route.catalogue().lists[kindTools]), name)
	}
	return fmt.Sprintf("virtual server %q does not serve %s %q", s.vs, kindWhat(k), name)
}

// refuseVirtualArgs refuses a call that sends an argument its virtual
// server fixes or hides (-32602, naming it), before validation against
// the server's schema; rewriteVirtualArgs adds the fixed arguments and
// defaults after it, so what the policies, interceptors and upstream see
// is what is sent.
func refuseVirtualArgs(next Handler) Handler {
	return func(tc *toolCall) (json.RawMessage, *jsonrpc.Error) {
		if err := tc.it.vt.Refuse(tc.args); err != nil {
			return nil, tc.failed(metrics.OutcomeInvalidArguments, jsonrpc.CodeInvalidParams, fmt.Sprintf("edge-mcp: tool %q: %v", tc.it.exposed, err))
		}
		return next(tc)
	}
}

func rewriteVirtualArgs(next Handler) Handler {
	return func(tc *toolCall) (json.RawMessage, *jsonrpc.Error) {
		var err error
		if tc.params, tc.args, err = tc.it.vt.Rewrite(tc.params, tc.args); err != nil {
			return nil, tc.failed(metrics.OutcomeInvalidArguments, jsonrpc.CodeInvalidParams, fmt.Sprintf("edge-mcp: tool %q: %v", tc.it.exposed, err))
		}
		return next(tc)
	}
}

// ServeConnVirtual is ServeConn for a session of the named virtual server
// (edge-mcp stdio --virtual NAME).
func (g *Gateway) ServeConnVirtual(conn transports.Connection, name string) error {
	if g.virt.Load().ByName(name) == nil {
		return fmt.Errorf("no virtual server %q in the configuration", name)
	}
	g.ServeConn(peerOnly{conn, &peer{id: anonymous, transport: "stdio", vs: name}})
	return nil
}

// VirtualServers describes the virtual servers and their views now (the
// admin API).
func (o adminOps) VirtualServers() []admin.VirtualServer {
	cat := o.g.route.catalogue()
	var out []admin.VirtualServer
	for _, vs := range o.g.virt.Load().Servers() {
		v := o.g.virtualCatalogue(vs.Name, cat)
		info := admin.VirtualServer{Name: vs.Name, Path: vs.Path, Title: vs.Title, Allow: vs.Allow, Tools: []admin.VirtualTool{}, Prompts: []string{}, Resources: []string{}}
		for _, it := range v.lists[kindTools] {
			info.Tools = append(info.Tools, admin.VirtualTool{Name: it.exposed, Tool: it.ruleName(), Server: it.up.name, Overridden: it.vt != nil})
		}
		for _, it := range v.lists[kindPrompts] {
			info.Prompts = append(info.Prompts, it.exposed)
		}
		for _, it := range append(slices.Clone(v.lists[kindResources]), v.lists[kindTemplates]...) {
			info.Resources = append(info.Resources, it.exposed)
		}
		out = append(out, info)
	}
	return out
}
