package gateway

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/metrics"
	"github.com/edge-mcp/edge-mcp/runtime/admin"
	"github.com/edge-mcp/edge-mcp/runtime/catalog"
	"github.com/edge-mcp/edge-mcp/runtime/virtual"
	"github.com/edge-mcp/edge-mcp/transports"
)

// This file serves the virtual servers (runtime/virtual, which also has
// their HTTP handler): a session opened on one starts from the server's
// view of the catalogue instead of the whole of it. The view is built
// once per catalogue snapshot and shared by the server's sessions; access
// lists, tool rules and policies then apply as on /mcp.

// virtualSide is a session's side of its virtual server (s.vs; none for
// a session on /mcp): the catalogue its view starts from, its
// list_changed, what its initialize result says, and why it is not shown
// a name.
type virtualSide struct{ *session }

// base is where a session's view starts: the shared catalogue, or its
// virtual server's view of it.
func (s virtualSide) base() *catalogue {
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
		return &catalogue{Gen: cat.Gen}
	}
	if c, ok := vs.Cached(cat.Gen).(*catalogue); ok {
		return c
	}
	c := g.buildVirtual(vs, cat)
	vs.Store(cat.Gen, c)
	return c
}

// buildVirtual builds vs's view of cat (runtime/catalog), logging what
// the server names that no upstream offers once.
func (g *Gateway) buildVirtual(vs *virtual.Server, cat *catalogue) *catalogue {
	c, warnings := catalog.Virtual(vs, cat, g.opts.PageSize)
	for _, w := range warnings {
		g.log.Warn("virtual server: "+w, "virtual_server", vs.Name)
	}
	return c
}

// listsChanged returns the list_changed methods a session gets when the
// catalogue went from old to next: changed on /mcp, on a virtual server
// those of the lists of its own view that changed.
func (s virtualSide) listsChanged(old, next *catalogue, changed []string) []string {
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
		if !catalog.Same(prev, cur, k) || k == kindResources && !catalog.Same(prev, cur, kindTemplates) {
			out = append(out, listKinds[k].Changed)
		}
	}
	return out
}

// serverInfo and instructions are what a session's initialize result and
// server/discover say: the gateway's, or its virtual server's.
func (s virtualSide) serverInfo() map[string]any {
	info := serverInfo()
	if vs := s.g.virt.Load().ByName(s.vs); vs != nil && vs.Title != "" {
		info["title"] = vs.Title
	}
	return info
}

func (s virtualSide) instructions() string {
	if s.vs == "" {
		return bridgeOps{s.g}.Instructions()
	}
	if vs := s.g.virt.Load().ByName(s.vs); vs != nil {
		return vs.Instructions
	}
	return ""
}

func (b bridgeSession) ServerInfo() any      { return virtualSide{b.s}.serverInfo() }
func (b bridgeSession) Instructions() string { return virtualSide{b.s}.instructions() }

// deferred reports whether the session's virtual server defers all its
// tools (deferred_tools: found by tool_search, called by name).
func (s virtualSide) deferred() bool {
	vs := s.g.virt.Load().ByName(s.vs)
	return vs != nil && vs.DeferredTools
}

// hidden says why a virtual server's session does not see the
// catalogue's item name, for the log and audit (the client is told
// "unknown").
func (s virtualSide) hidden(k listKind, name string) string {
	if vs := s.g.virt.Load().ByName(s.vs); vs != nil && k == kindTools {
		return vs.Why(catalog.List[*upstream, localCall](s.g.route.catalogue().Lists[kindTools]), name)
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
		if err := tc.it.Virtual.Refuse(tc.args); err != nil {
			return nil, tc.failed(metrics.OutcomeInvalidArguments, jsonrpc.CodeInvalidParams, fmt.Sprintf("edge-mcp: tool %q: %v", tc.it.Exposed, err))
		}
		return next(tc)
	}
}

func rewriteVirtualArgs(next Handler) Handler {
	return func(tc *toolCall) (json.RawMessage, *jsonrpc.Error) {
		var err error
		if tc.params, tc.args, err = tc.it.Virtual.Rewrite(tc.params, tc.args); err != nil {
			return nil, tc.failed(metrics.OutcomeInvalidArguments, jsonrpc.CodeInvalidParams, fmt.Sprintf("edge-mcp: tool %q: %v", tc.it.Exposed, err))
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
		for _, it := range v.Lists[kindTools] {
			info.Tools = append(info.Tools, admin.VirtualTool{Name: it.Exposed, Tool: it.RuleName(), Server: it.Up.name, Overridden: it.Virtual != nil})
		}
		for _, it := range v.Lists[kindPrompts] {
			info.Prompts = append(info.Prompts, it.Exposed)
		}
		for _, it := range append(slices.Clone(v.Lists[kindResources]), v.Lists[kindTemplates]...) {
			info.Resources = append(info.Resources, it.Exposed)
		}
		out = append(out, info)
	}
	return out
}
