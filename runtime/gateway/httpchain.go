package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/audit"
	"github.com/edge-mcp/edge-mcp/internal/auth"
	"github.com/edge-mcp/edge-mcp/internal/compress"
	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/transports"
)

// This file is the HTTP edge of the request chain: which endpoints exist,
// and what a request passes before a transport reads it: authentication
// (the client's credentials stop here and never go upstream), the check
// that a session is used by the identity that opened it, and, for
// streamable HTTP, the rate limits (answered with 429 and Retry-After).

// Handler returns the downstream HTTP handler: streamable HTTP at /mcp,
// legacy HTTP+SSE at /sse (its POST endpoint too), WebSocket (subprotocol
// mcp) at /ws, the OpenAI-style tool API under /v1/, the status document at
// /status, /healthz, /readyz, Prometheus metrics at /metrics and the OAuth
// protected resource metadata.
func (g *Gateway) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/mcp", g.admit(transportStreamable, g.http))
	mux.Handle("/sse", g.admit("sse", g.sse))
	mux.Handle("/ws", g.admit("websocket", g.ws))
	mux.Handle("/v1/", g.admit("openai", g.openAIHandler()))
	mux.HandleFunc("GET /status", g.serveStatus)
	mux.HandleFunc("GET /healthz", g.serveHealthz)
	mux.HandleFunc("GET /readyz", g.serveReadyz)
	if g.metrics != nil {
		mux.Handle("GET /metrics", g.metrics.Handler())
	}
	meta := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := g.guard.Load().auth; a != nil {
			a.MetadataHandler().ServeHTTP(w, r)
			return
		}
		http.NotFound(w, r)
	})
	mux.Handle(auth.MetadataPath, meta)
	mux.Handle(auth.MetadataPath+"/", meta)
	if c := g.config().Observability.Compression; c == nil || *c {
		return compress.Middleware(mux, compress.Options{})
	}
	return mux
}

// admit authenticates a request for transport and hands it on with its
// peer (identity and transport) for the session it opens.
func (g *Gateway) admit(transport string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gd := g.guard.Load()
		if gd.auth == nil {
			g.admitted(gd, transport, w, r, next)
			return
		}
		inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { g.admitted(gd, transport, w, r, next) })
		sw := &statusWriter{ResponseWriter: w}
		gd.auth.Middleware(inner).ServeHTTP(sw, r)
		if sw.status == http.StatusUnauthorized {
			g.metrics.AuthFailure(authReason(w.Header().Get("WWW-Authenticate")))
		}
	})
}

func authReason(challenge string) string {
	if bytes.Contains([]byte(challenge), []byte("invalid_token")) {
		return "invalid_token"
	}
	return "missing_credentials"
}

// statusWriter remembers the status code of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// admitted runs after authentication.
func (g *Gateway) admitted(gd *guard, transport string, w http.ResponseWriter, r *http.Request, next http.Handler) {
	id := identityOf(r)
	sid := r.Header.Get("Mcp-Session-Id")
	if transport == "sse" {
		sid = r.URL.Query().Get("sessionId")
	}
	if sid != "" {
		if owner, ok := g.owners.Load(sid); ok && owner.(string) != id.Name {
			// Another identity's session: as if it did not exist.
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
	}
	if transport == transportStreamable && r.Method == http.MethodPost && gd.limited() {
		if !g.admitRate(gd, id, w, r) {
			return
		}
	}
	if opensSession(transport, r) {
		r = r.WithContext(transports.WithPeer(r.Context(), &peer{id: id, transport: transport}))
	}
	next.ServeHTTP(w, r)
}

// opensSession reports whether r may open a downstream session, the only
// time a transport reads the peer: the hot path of calls on an existing
// session allocates nothing for it.
func opensSession(transport string, r *http.Request) bool {
	switch transport {
	case transportStreamable:
		return r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == ""
	case "sse":
		return r.Method == http.MethodGet
	}
	return true
}

// admitRate checks the rate limits of a tools/call POST before the
// transport reads it, so that the answer can be HTTP 429 with Retry-After.
// The body is read (within the body limit) and put back.
func (g *Gateway) admitRate(gd *guard, id auth.Identity, w http.ResponseWriter, r *http.Request) bool {
	limit := g.config().MaxBodyBytes
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil || int64(len(body)) > limit {
		return true // the transport answers (400, 413)
	}
	if m, _ := wire.String(body, "method"); m != "tools/call" {
		return true
	}
	params, _, _ := wire.Field(body, "params")
	name, _ := wire.String(params, "name")
	server := ""
	if it := g.catalogue().index[kindTools][name]; it != nil && it.up != nil {
		server = it.up.name
	}
	rl := gd.allowCall(id.Name, server, name)
	if rl == nil {
		return true
	}
	g.metrics.RateLimited(rl.scope)
	g.metrics.ToolCall(server, name, metricsRateLimited, 0)
	if g.auditLog != nil {
		g.auditLog.ToolCall(audit.ToolCall{Time: time.Now().UTC(), Identity: id.Name, Server: server, Tool: name,
			Outcome: metricsRateLimited, Error: rl.Error(), SessionID: r.Header.Get("Mcp-Session-Id")})
	}
	rawID, _, _ := wire.Field(body, "id")
	if len(rawID) == 0 {
		rawID = json.RawMessage("null")
	}
	data, _ := json.Marshal(map[string]any{"retryAfter": retryAfterSeconds(rl.retryAfter), "scope": rl.scope})
	resp, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jsonrpc.Error   `json:"error"`
	}{"2.0", rawID, jsonrpc.Error{Code: codeRateLimited, Message: rl.Error(), Data: data}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", retryAfterHeader(rl.retryAfter))
	w.WriteHeader(http.StatusTooManyRequests)
	w.Write(resp)
	return false
}

// serveHealthz answers while the process serves.
func (g *Gateway) serveHealthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{"status":"ok"}` + "\n"))
}

// serveReadyz answers 200 once the configuration is loaded and every
// required upstream (observability.required_servers) is connected, else 503
// naming what is missing.
func (g *Gateway) serveReadyz(w http.ResponseWriter, r *http.Request) {
	var missing []string
	ups := g.upstreams()
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
	json.NewEncoder(w).Encode(map[string]any{"status": "ready"})
}
