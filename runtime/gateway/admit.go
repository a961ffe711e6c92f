package gateway

import (
	"context"
	"net/http"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/cluster"
	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/transports"

	"github.com/edge-mcp/edge-mcp/internal/audit"
	"github.com/edge-mcp/edge-mcp/internal/auth"
	"github.com/edge-mcp/edge-mcp/runtime/admission"
	"github.com/edge-mcp/edge-mcp/runtime/virtual"
)

// This file is the admission stage of the request chain: the identity of
// each HTTP request, its rate limits before the transport reads it, and
// the session it may use. What a configuration admits (authentication,
// access lists, rate and concurrency limits, tool rules) is a guard
// (runtime/admission), built from one configuration and swapped whole on
// reload.

// The admission settings of one configuration generation (runtime/admission).
type (
	guard        = admission.Guard
	rateLimited  = admission.RateLimited
	toolSettings = admission.ToolSettings
)

// peer is who opened a downstream connection, as the HTTP chain saw it.
type peer struct {
	id        auth.Identity
	transport string // "streamable-http", "sse", "websocket"
	vs        string // the virtual server ("": none)
	// adopted is the token of a fleet session another replica opened.
	adopted *cluster.SessionClaims
}

// anonymous is the identity of clients when authentication is off.
var anonymous = admission.Anonymous

// newGuard builds the admission settings of cfg.
func newGuard(ctx context.Context, cfg *config.Config, opts Options) (*guard, error) {
	return admission.New(ctx, cfg, opts.Logger)
}

// identityOf returns the identity an HTTP request was authenticated as.
func identityOf(r *http.Request) auth.Identity { return admission.IdentityOf(r) }

// admit authenticates a request for transport and hands it on with its
// peer (identity and transport) for the session it opens.
func (g *Gateway) admit(transport string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gd := g.guard.Load()
		if gd.Auth == nil {
			g.admitted(gd, transport, w, r, next)
			return
		}
		inner := http.HandlerFunc(func(w http.ResponseWriter, ar *http.Request) {
			if id := identityOf(ar); id.Method == auth.ModeJWT {
				// The identity's newest validated JWT (ar no longer has
				// it), for token exchange: memory only, never sent
				// upstream, logged or shown.
				g.oauth.SetSubject(id.Name, admission.BearerToken(r))
			}
			g.admitted(gd, transport, w, ar, next)
		})
		sw := &admission.StatusWriter{ResponseWriter: w}
		gd.Auth.Middleware(inner).ServeHTTP(sw, r)
		if sw.Status == http.StatusUnauthorized {
			g.metrics.AuthFailure(admission.AuthReason(w.Header().Get("WWW-Authenticate")))
		}
	})
}

// admitted runs after authentication.
func (g *Gateway) admitted(gd *guard, transport string, w http.ResponseWriter, r *http.Request, next http.Handler) {
	id := identityOf(r)
	sid := r.Header.Get("Mcp-Session-Id")
	if transport == "sse" {
		sid = r.URL.Query().Get("sessionId")
	}
	if sid != "" {
		if v, ok := g.owners.Load(sid); ok {
			owner := v.(*sessionOwner)
			if owner.name != id.Name {
				// Another identity's session: as if it did not exist.
				http.Error(w, "session not found", http.StatusNotFound)
				return
			}
			if owner.expires != 0 && g.now().Unix() >= owner.expires {
				// As any other replica answers it (its token expired):
				// the session ends here too.
				g.owners.Delete(sid)
				owner.s.conn.Close()
				http.Error(w, "session expired (cluster.session_ttl)", http.StatusNotFound)
				return
			}
		} else if exp := g.fleet.TokenExpiry(sid); exp != 0 && g.now().Unix() >= exp {
			http.Error(w, "session expired (cluster.session_ttl)", http.StatusNotFound)
			return
		}
	}
	if transport == transportStreamable && r.Method == http.MethodPost && gd.Limited() {
		if !g.admitRate(gd, id, w, r) {
			return
		}
	}
	if opensSession(transport, r) {
		if g.draining.Load() {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "edge-mcp is shutting down", http.StatusServiceUnavailable)
			return
		}
		r = r.WithContext(transports.WithPeer(r.Context(), &peer{id: id, transport: transport, vs: virtual.NameOf(r)}))
	}
	next.ServeHTTP(w, r)
}

// sessionOwner is who opened a downstream session, and until when its
// fleet session token is valid.
type sessionOwner struct {
	name    string   // the identity
	expires int64    // Unix seconds; 0: no token (outside a fleet)
	s       *session // the session, to end it when its token expired
}

// now is the clock session token expiry is checked against.
func (g *Gateway) now() time.Time { return time.Now().Add(time.Duration(g.skew.Load())) }

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
	body, name, ok := admission.ToolCall(r, g.config().MaxBodyBytes)
	if !ok {
		return true // not a tools/call, or the transport answers (400, 413)
	}
	server, tool, cat, vs := "", name, g.route.catalogue(), virtual.NameOf(r)
	if vs != "" {
		cat = g.virtualCatalogue(vs, cat)
	}
	if it := cat.Find(kindTools, name); it != nil && it.Up != nil {
		server, tool = it.Up.name, it.RuleName()
	}
	rl := gd.AllowCall(vs, id.Name, server, tool)
	if rl == nil {
		return true
	}
	g.metrics.RateLimited(rl.Scope)
	g.metrics.ToolCall(server, name, metricsRateLimited, 0)
	g.tailCall(id.Name, server, name, metricsRateLimited, time.Now(), 0, rl.Error())
	if g.auditLog != nil {
		g.auditLog.ToolCall(audit.ToolCall{Time: time.Now().UTC(), Identity: id.Name, Server: server, Tool: name,
			Outcome: metricsRateLimited, Error: rl.Error(), SessionID: r.Header.Get("Mcp-Session-Id")})
	}
	admission.WriteRateLimited(w, body, rl, codeRateLimited)
	return false
}
