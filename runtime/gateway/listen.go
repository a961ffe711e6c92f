package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/edge-mcp/edge-mcp/internal/auth"
	"github.com/edge-mcp/edge-mcp/internal/budget"
	"github.com/edge-mcp/edge-mcp/runtime/admission"
	"github.com/edge-mcp/edge-mcp/runtime/fleet"
	"github.com/edge-mcp/edge-mcp/runtime/oauth"
	"github.com/edge-mcp/edge-mcp/runtime/openaiapi"
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
	mux.Handle("/v1/", g.admit(openaiapi.Transport, openaiapi.New(openaiapi.Options{Host: openAIHost{g}, Log: g.log, OwnTools: []string{toolSearchName, toolInvokeName}})))
	mux.HandleFunc("GET /{$}", g.serveIndex)
	mux.Handle("GET /status", g.authenticated(http.HandlerFunc(g.serveStatus)))
	mux.HandleFunc("GET /healthz", g.serveHealthz)
	mux.HandleFunc("GET /readyz", g.serveReadyz)
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
		h = compressed(mux)
	}
	// One Origin/Host guard in front of every surface: a web page must not
	// reach /v1/tools/call, /status or /metrics through a visitor's browser
	// (cross-site requests, DNS rebinding) any more than /mcp.
	return g.door.Wrap(h)
}

// serveIndex says, to someone who opens the listener's address in a
// browser or with curl, what this is and where to go.
func (g *Gateway) serveIndex(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	fmt.Fprintf(w, `edge-mcp %s: an MCP gateway, one MCP endpoint in front of many MCP servers.

Connect an MCP client (streamable HTTP) to /mcp on this address, e.g.
  claude mcp add --transport http edge http://%s/mcp
Other transports: /sse (legacy HTTP+SSE), /ws (WebSocket, subprotocol mcp).

  /status      the upstream servers and their state (JSON)
  /v1/tools    the tools as OpenAI function definitions; POST /v1/tools/call calls one
  /healthz     alive; /readyz: ready
  /metrics     Prometheus metrics

Documentation: https://github.com/edge-mcp/edge-mcp#readme
`, Version, r.Host)
}

// serveHealthz answers while the process serves.
func (g *Gateway) serveHealthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{"status":"ok"}` + "\n"))
}

// serveReadyz answers 200 once the configuration is loaded and every
// required upstream (observability.required_servers) is connected, else 503
// naming what is missing. A fleet replica whose NATS is away answers 200
// "degraded" with the reason: it serves with what it has.
func (g *Gateway) serveReadyz(w http.ResponseWriter, r *http.Request) {
	var missing []string
	ups := g.route.upstreams()
	for _, name := range g.config().Observability.RequiredServers {
		u := ups.byName[name]
		if u == nil || u.current() == nil {
			missing = append(missing, name)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if g.ctx == nil || len(missing) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(map[string]any{"status": "not ready", "missing": missing})
		return
	}
	if reason := g.fleet.Degraded(); reason != "" {
		// Still 200: every replica loses the same NATS at once, and a load
		// balancer must not drain the whole fleet for it.
		json.NewEncoder(w).Encode(map[string]any{"status": "degraded", "reason": reason})
		return
	}
	json.NewEncoder(w).Encode(map[string]any{"status": "ready"})
}

// ServerStatus is one upstream's entry in the status document.
type ServerStatus struct {
	Name            string    `json:"name"`
	Transport       string    `json:"transport"`
	State           State     `json:"state"`
	ProtocolVersion string    `json:"protocol_version,omitempty"`
	Tools           int       `json:"tools"`
	Prompts         int       `json:"prompts"`
	Resources       int       `json:"resources"`
	Templates       int       `json:"resource_templates"`
	LastHealthCheck time.Time `json:"last_health_check,omitzero"`
	Retries         int       `json:"retries"`
	NextRetry       time.Time `json:"next_retry,omitzero"`
	LastError       string    `json:"last_error,omitempty"`
	// Authorization is the upstream OAuth state of a server with an
	// "oauth" section (no token: the state, validity, scopes, and the URL
	// of a pending authorization, which the /status document leaves out).
	Authorization *oauth.Status `json:"authorization,omitempty"`
}

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
type PolicyStatus struct {
	Name       string `json:"name"`
	Digest     string `json:"digest"`
	ABIVersion string `json:"abi_version"`
	Healthy    bool   `json:"healthy"`
	Calls      uint64 `json:"calls"`
	Failures   uint64 `json:"failures"`
	Instances  int64  `json:"instances"`
	LastError  string `json:"last_error,omitempty"`
}

// PolicyStatus reports every attached policy module, in chain order.
func (g *Gateway) PolicyStatus() []PolicyStatus {
	var out []PolicyStatus
	for _, st := range g.pol.Stats() {
		out = append(out, PolicyStatus{Name: st.Name, Digest: st.Digest, ABIVersion: st.ABIVersion, Healthy: st.Healthy,
			Calls: st.Calls, Failures: st.Failures, Instances: st.Instances, LastError: st.LastError})
	}
	return out
}

// serveStatus answers the status document of the public listener. It
// carries no live secret: a pending authorization's URL holds the OAuth
// state that completes the login (whoever opens it binds the upstream to
// their own account) or cancels it, so it is left out here; the admin
// API, `edge-mcp auth status` and the gateway's OAuthStatus show it.
func (g *Gateway) serveStatus(w http.ResponseWriter, r *http.Request) {
	servers := g.Status()
	for i, st := range servers {
		if a := st.Authorization; a != nil && a.PendingURL != "" {
			public := *a
			public.PendingURL = ""
			servers[i].Authorization = &public
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(struct {
		Servers      []ServerStatus     `json:"servers"`
		Policies     []PolicyStatus     `json:"policies,omitempty"`
		Fleet        *fleet.Status      `json:"fleet,omitempty"`
		ClientMemory *budget.Stats      `json:"client_memory,omitempty"`
		Interceptors *InterceptorStatus `json:"interceptors,omitempty"`
	}{servers, g.PolicyStatus(), g.fleet.Status(r.Context()), g.clientMem.Stats(), g.InterceptorStatus()})
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
