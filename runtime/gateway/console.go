package gateway

import (
	"context"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/auth"

	"github.com/edge-mcp/edge-mcp/runtime/console"
	"github.com/edge-mcp/edge-mcp/runtime/fleet"
)

// consoleSource is what the operator console (package console) reads of
// the gateway beyond the admin operations.
type consoleSource struct{ g *Gateway }

func (c consoleSource) Upstreams() []console.Upstream {
	st := c.g.Status()
	out := make([]console.Upstream, len(st))
	for i, s := range st {
		out[i] = console.Upstream{Name: s.Name, Transport: s.Transport, State: string(s.State), Protocol: s.ProtocolVersion,
			Tools: s.Tools, Prompts: s.Prompts, Resources: s.Resources, Retries: s.Retries,
			LastHealthCheck: s.LastHealthCheck, NextRetry: s.NextRetry, LastError: s.LastError}
	}
	return out
}

// Tools lists every upstream's tools (console.Source).
func (c consoleSource) Tools() []console.Tool { return c.Offers("tools") }

// consoleKinds are the kinds of the console's catalogue.
var consoleKinds = map[string]listKind{"tools": kindTools, "prompts": kindPrompts, "resources": kindResources, "resourceTemplates": kindTemplates}

// Offers lists what every upstream offers now (withheld tools included:
// the console shows the catalogue as upstreams send it), with the names
// clients see.
func (c consoleSource) Offers(kind string) []console.Tool {
	k, ok := consoleKinds[kind]
	if !ok {
		return nil
	}
	ups, offers := c.g.route.offers()
	var out []console.Tool
	for i, u := range ups {
		if offers[i] == nil {
			continue
		}
		for _, it := range offers[i][k] {
			name := it.Exposed
			if name == "" {
				name = it.Name
			}
			out = append(out, console.NewTool(u.name, name, it.Raw))
		}
	}
	return out
}

// VirtualServers lists the virtual servers in config order.
func (c consoleSource) VirtualServers() []console.VirtualServer {
	var out []console.VirtualServer
	for _, vs := range c.g.virt.Load().Servers() {
		out = append(out, console.VirtualServer{Name: vs.Name, Path: vs.Path, Title: vs.Title})
	}
	return out
}

// VirtualOffers lists the virtual server's view of the catalogue now: what
// its sessions list, with the catalogue's name of each tool it renamed.
func (c consoleSource) VirtualOffers(name, kind string) ([]console.Tool, bool) {
	k, ok := consoleKinds[kind]
	if !ok || c.g.virt.Load().ByName(name) == nil {
		return nil, false
	}
	v := c.g.virtualCatalogue(name, c.g.route.catalogue())
	out := make([]console.Tool, 0, len(v.Lists[k]))
	for _, it := range v.Lists[k] {
		t := console.NewTool("", it.Exposed, it.Raw)
		t.Overridden = it.Virtual != nil
		if it.Up != nil {
			t.Server = it.Up.name
		}
		if rn := it.RuleName(); rn != it.Exposed {
			t.Catalogue = rn
		}
		out = append(out, t)
	}
	return out, true
}

func (c consoleSource) Sessions() int { return len(c.g.route.allSessions()) }

func (c consoleSource) Fleet(ctx context.Context) *fleet.Status { return c.g.fleet.Status(ctx) }

// ClientIdentities: the API keys' names (revoked ones left out),
// "anonymous" without authentication; with JWT any name.
func (c consoleSource) ClientIdentities() ([]string, bool) {
	a := c.g.config().Auth
	switch a.Mode {
	case auth.ModeJWT:
		return nil, true
	case auth.ModeAPIKey:
		var names []string
		for _, k := range a.APIKeys {
			if !k.Revoked && !slices.Contains(names, k.Name) {
				names = append(names, k.Name)
			}
		}
		return names, false
	}
	return []string{anonymous.Name}, false
}

// ServeAs serves conn as a session of identity over transport "console".
func (c consoleSource) ServeAs(identity string, conn mcp.Connection) {
	method := c.g.config().Auth.Mode
	if method == "" {
		method = auth.ModeNone
	}
	c.g.ServeConn(peerConn{conn, &peer{id: auth.Identity{Name: identity, Method: method}, transport: "console"}})
}

// peerConn gives a connection its peer (transports.Peer).
type peerConn struct {
	mcp.Connection
	p *peer
}

func (c peerConn) PeerInfo() any { return c.p }

// tailCall hands a tool call's audit record to the console's live tail.
func (g *Gateway) tailCall(identity, server, tool, outcome string, start time.Time, d time.Duration, errMsg string) {
	g.tail.Publish(console.Entry{Time: start, Kind: console.KindCall, Identity: identity, Server: server, Tool: tool,
		Outcome: outcome, Duration: d, Text: errMsg})
}

// tailAdmin hands an admin change's audit record to the console's live tail.
func (g *Gateway) tailAdmin(rec AuditAdmin) {
	text := rec.Target
	if rec.Detail != "" {
		text += " — " + rec.Detail
	}
	g.tail.Publish(console.Entry{Time: rec.Time, Kind: console.KindAdmin, Identity: rec.Identity, Outcome: rec.Action, Text: text})
}

// Interceptors lists the interceptor chain's members with their counts.
func (c consoleSource) Interceptors() []console.Interceptor {
	st := c.g.InterceptorStatus()
	if st == nil {
		return nil
	}
	out := make([]console.Interceptor, len(st.Interceptors))
	for i, m := range st.Interceptors {
		out[i] = console.Interceptor{Name: m.Name, Type: m.Type, Calls: m.Calls, Denials: m.Denials, Failures: m.Failures, Audits: m.Audits}
	}
	return out
}
