package gateway

import (
	"context"
	"net/http"

	"github.com/edge-mcp/edge-mcp/internal/auth"
	"github.com/edge-mcp/edge-mcp/runtime/admission"
	"github.com/edge-mcp/edge-mcp/runtime/compress"
	"github.com/edge-mcp/edge-mcp/runtime/openaiapi"
	"github.com/edge-mcp/edge-mcp/runtime/statuspage"
	"github.com/edge-mcp/edge-mcp/runtime/virtual"
)

// This file is the listener: every HTTP surface of the gateway and what
// serves it. The MCP transports (/mcp, /sse, /ws) and the OpenAI-style API
// (/v1/) pass the admission stage (admit.go) first; the status document,
// health and readiness probes and metrics are answered here.

// Handler returns the downstream HTTP handler, every path behind the
// gateway's Origin/Host guard: streamable HTTP at /mcp,
// legacy HTTP+SSE at /sse (its POST endpoint too), WebSocket (subprotocol
// mcp) at /ws, the OpenAI-style tool API under /v1/, the status document at
// /status, /healthz, /readyz, Prometheus metrics at /metrics and the OAuth
// protected resource metadata.
func (g *Gateway) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/mcp", g.admit(transportStreamable, g.http))
	mux.Handle("/sse", g.admit("sse", g.sse))
	mux.Handle("/ws", g.admit("websocket", g.ws))
	api := openaiapi.New(openaiapi.Options{Host: openAIHost{g}, Log: g.log, OwnTools: []string{toolSearchName, toolInvokeName}})
	mux.Handle("/v1/", g.admit(openaiapi.Transport, api))
	pages := statusSource{g}
	mux.HandleFunc("GET /{$}", statuspage.Index(pages))
	mux.Handle("/", virtual.Handler(virtual.Endpoint{Servers: g.virt.Load, Admit: g.admit, Log: g.log, // 404 but for their paths
		Identity: func(r *http.Request) string { return identityOf(r).Name },
		Transports: []virtual.Transport{{Name: transportStreamable, Handler: g.http},
			{Suffix: "/sse", Name: "sse", Handler: g.sse}, {Suffix: "/ws", Name: "websocket", Handler: g.ws},
			{Suffix: "/v1/tools", Name: openaiapi.Transport, Handler: api, Strip: true}, {Suffix: "/v1/tools/call", Name: openaiapi.Transport, Handler: api, Strip: true}}}))
	mux.Handle("GET /status", g.authenticated(statuspage.Status(pages)))
	mux.HandleFunc("GET /healthz", statuspage.Healthz)
	mux.HandleFunc("GET /readyz", statuspage.Readyz(pages))
	mux.Handle("GET /oauth/callback", g.oauth.CallbackHandler())
	if g.metrics != nil {
		mux.Handle("GET /metrics", g.metrics.Handler())
	}
	meta := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := g.guard.Load().Auth; a != nil {
			a.MetadataHandler().ServeHTTP(w, r)
			return
		}
		http.NotFound(w, r)
	})
	mux.Handle(auth.MetadataPath, meta)
	mux.Handle(auth.MetadataPath+"/", meta)
	var h http.Handler = mux
	if c := g.config().Observability.Compression; c == nil || *c {
		h = compress.Handler(mux)
	}
	// One Origin/Host guard in front of every surface: a web page must not
	// reach /v1/tools/call, /status or /metrics through a visitor's browser
	// (cross-site requests, DNS rebinding) any more than /mcp.
	return g.door.Wrap(h)
}

// statusSource implements statuspage.Source for a gateway.
type statusSource struct{ g *Gateway }

func (p statusSource) Version() string  { return Version }
func (p statusSource) Degraded() string { return p.g.fleet.Degraded() }

// Missing names the required servers (observability.required_servers)
// not connected.
func (p statusSource) Missing() ([]string, bool) {
	var missing []string
	ups := p.g.route.upstreams()
	for _, name := range p.g.config().Observability.RequiredServers {
		u := ups.byName[name]
		if u == nil || u.current() == nil {
			missing = append(missing, name)
		}
	}
	return missing, p.g.ctx != nil
}

func (p statusSource) Document(ctx context.Context) statuspage.Document {
	g := p.g
	return statuspage.Document{Servers: g.Status(), Policies: g.PolicyStatus(), Fleet: g.fleet.Status(ctx),
		ClientMemory: g.clientMem.Stats(), Interceptors: g.InterceptorStatus()}
}

// ServerStatus is one upstream's entry in the status document.
type ServerStatus = statuspage.Server

// Status reports every upstream, in config order.
func (g *Gateway) Status() []ServerStatus {
	ups, offers := g.route.offers()
	out := make([]ServerStatus, 0, len(ups))
	for i, u := range ups {
		k := u.keep.Status()
		u.mu.Lock()
		st := ServerStatus{Name: u.name, Transport: u.cfg.Type, State: k.State, Retries: k.Retries, LastError: k.LastErr,
			LastHealthCheck: k.LastHealth, NextRetry: k.NextRetry}
		u.mu.Unlock()
		if l := u.current(); l != nil {
			st.ProtocolVersion = l.protocolVersion
		}
		var needs bool
		if st.Authorization, needs = u.authorizationState(); needs {
			st.State = StateNeedsAuthorization
		}
		if o := offers[i]; o != nil {
			st.Tools, st.Prompts, st.Resources, st.Templates = len(o[kindTools]), len(o[kindPrompts]), len(o[kindResources]), len(o[kindTemplates])
		}
		out = append(out, st)
	}
	return out
}

// PolicyStatus is one policy module's entry in the status document.
type PolicyStatus = statuspage.Policy

// PolicyStatus reports every attached policy module, in chain order.
func (g *Gateway) PolicyStatus() []PolicyStatus {
	var out []PolicyStatus
	for _, st := range g.pol.Stats() {
		out = append(out, PolicyStatus{Name: st.Name, Digest: st.Digest, ABIVersion: st.ABIVersion, Healthy: st.Healthy,
			Calls: st.Calls, Failures: st.Failures, Instances: st.Instances, LastError: st.LastError})
	}
	return out
}

// authenticated puts next behind the client authentication of the running
// configuration (as /mcp), when it has one.
func (g *Gateway) authenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := g.guard.Load().Auth
		if a == nil {
			next.ServeHTTP(w, r)
			return
		}
		sw := &admission.StatusWriter{ResponseWriter: w}
		a.Middleware(next).ServeHTTP(sw, r)
		if sw.Status == http.StatusUnauthorized {
			g.metrics.AuthFailure(admission.AuthReason(w.Header().Get("WWW-Authenticate")))
		}
	})
}
