package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/runtime/cluster"
	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/transports"

	"github.com/edge-mcp/edge-mcp/internal/audit"
	"github.com/edge-mcp/edge-mcp/internal/auth"
	"github.com/edge-mcp/edge-mcp/internal/limits"
	"github.com/edge-mcp/edge-mcp/internal/wire"
)

// This file is the admission stage of the request chain: who is calling
// (authentication), what they may see and call (access lists, enforced
// before any policy module), how much (rate and concurrency limits), and
// the per-tool rules (timeouts, visibility, approval, argument checks). A
// guard is built from one configuration and swapped whole on reload.

// guard holds the admission settings of one configuration generation.
type guard struct {
	auth       *auth.Authenticator // nil: no authentication (mode none)
	access     []config.AccessRule // nil: everyone may use everything
	rules      []config.ToolRule
	clientRate rateLimiter   // nil: none
	toolRate   rateLimiter   // nil: none
	ruleRates  []rateLimiter // by rule index; nil: none
	concLimit  int
	concQueue  int
	// anyDeferred is set when a rule defers tools.
	anyDeferred bool

	concMu sync.Mutex
	conc   map[string]*limits.Concurrency // by upstream name

	resolved sync.Map // toolKey → *toolSettings
}

// toolKey names a tool of a server by its exposed name.
type toolKey struct{ server, tool string }

// toolSettings are the tool rules resolved for one tool.
type toolSettings struct {
	deferred bool
	approval bool
	validate bool
	timeout  time.Duration
	rate     rateLimiter
}

// peer is who opened a downstream connection, as the HTTP chain saw it.
type peer struct {
	id        auth.Identity
	transport string // "streamable-http", "sse", "websocket"
	// adopted is the token of a fleet session another replica opened.
	adopted *cluster.SessionClaims
}

// anonymous is the identity of clients when authentication is off.
var anonymous = auth.Identity{Name: auth.AnonymousName, Method: auth.ModeNone}

// newGuard builds the admission settings of cfg.
func newGuard(ctx context.Context, cfg *config.Config, opts Options) (*guard, error) {
	gd := &guard{access: cfg.Access, rules: cfg.ToolRules, conc: map[string]*limits.Concurrency{}}
	if a := cfg.Auth; a.Mode != "" && a.Mode != "none" {
		ac, err := authConfig(cfg)
		if err != nil {
			return nil, err
		}
		if gd.auth, err = auth.New(ctx, ac, auth.Options{Logger: opts.Logger}); err != nil {
			return nil, &config.Error{File: cfg.Path, Key: "auth", Reason: err.Error()}
		}
	} else if !config.LoopbackAddr(cfg.Listen) && !a.AllowUnauthenticated {
		return nil, &config.Error{File: cfg.Path, Key: "auth.mode",
			Reason: fmt.Sprintf(`is "none" but the listener %s is not loopback: anyone who reaches it could call every tool; set "auth" (api_key or jwt), or auth.allow_unauthenticated: true if something in front authenticates`, cfg.Listen)}
	}
	gd.clientRate = localRate(cfg.Limits.ClientRate)
	gd.toolRate = localRate(cfg.Limits.ToolRate)
	gd.ruleRates = make([]rateLimiter, len(cfg.ToolRules))
	for i, r := range cfg.ToolRules {
		if r.Visibility == "deferred" {
			gd.anyDeferred = true
		}
		gd.ruleRates[i] = localRate(r.Rate)
		for _, p := range append(append([]string{}, r.Servers...), r.Tools...) {
			if _, err := path.Match(p, ""); err != nil {
				return nil, &config.Error{File: cfg.Path, Key: fmt.Sprintf("tool_rules[%d]", i), Reason: fmt.Sprintf("bad glob %q", p)}
			}
		}
	}
	for i, r := range cfg.Access {
		for _, p := range append(append(append(append([]string{}, r.Identities...), r.Servers...), r.Tools...), r.DenyTools...) {
			if _, err := path.Match(p, ""); err != nil {
				return nil, &config.Error{File: cfg.Path, Key: fmt.Sprintf("access[%d]", i), Reason: fmt.Sprintf("bad glob %q", p)}
			}
		}
	}
	gd.concLimit = cfg.Limits.UpstreamConcurrency
	gd.concQueue = 2 * gd.concLimit
	if q := cfg.Limits.UpstreamQueue; q != nil {
		gd.concQueue = *q
	}
	return gd, nil
}

// authConfig translates the auth section, reading key files.
func authConfig(cfg *config.Config) (auth.Config, error) {
	a := cfg.Auth
	ac := auth.Config{Mode: a.Mode}
	for _, k := range a.APIKeys {
		ac.APIKeys = append(ac.APIKeys, auth.APIKey{Name: k.Name, Key: k.Key, SHA256: k.SHA256, Revoked: k.Revoked})
	}
	if j := a.JWT; j != nil {
		jc := auth.JWTConfig{Issuer: j.Issuer, Audience: j.Audience, Algorithms: j.Algorithms, JWKSURL: j.JWKSURL,
			JWKSRefresh: seconds(j.JWKSRefresh), Leeway: seconds(j.Leeway), IdentityClaim: j.IdentityClaim}
		if j.HMACSecret != "" {
			jc.HMACSecret = []byte(j.HMACSecret)
		}
		read := func(key, file string) ([]byte, error) {
			b, err := os.ReadFile(file)
			if err != nil {
				return nil, &config.Error{File: cfg.Path, Key: key, Reason: fmt.Sprintf("reading %s: %v", file, errors.Unwrap(err))}
			}
			return b, nil
		}
		var err error
		if j.HMACSecretFile != "" {
			if jc.HMACSecret, err = read("auth.jwt.hmac_secret_file", j.HMACSecretFile); err != nil {
				return ac, err
			}
			jc.HMACSecret = []byte(strings.TrimSpace(string(jc.HMACSecret)))
		}
		if j.PublicKeysFile != "" {
			if jc.PublicKeysPEM, err = read("auth.jwt.public_keys_file", j.PublicKeysFile); err != nil {
				return ac, err
			}
		}
		ac.JWT = jc
	}
	if m := a.ResourceMetadata; m != nil {
		ac.ResourceMetadata = &auth.ResourceMetadata{Resource: m.Resource, AuthorizationServers: m.AuthorizationServers,
			ScopesSupported: m.ScopesSupported, BearerMethodsSupported: m.BearerMethodsSupported, ResourceName: m.ResourceName}
	}
	return ac, nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// close releases what the guard holds (the JWKS refresher).
func (gd *guard) close() {
	if gd != nil && gd.auth != nil {
		gd.auth.Close()
	}
}

func matchAny(patterns []string, s string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, s); ok {
			return true
		}
	}
	return false
}

// matchAll is matchAny, where no patterns match everything.
func matchAll(patterns []string, s string) bool { return len(patterns) == 0 || matchAny(patterns, s) }

// serverAllowed reports whether identity may use anything of server.
func (gd *guard) serverAllowed(identity, server string) bool {
	if gd.access == nil {
		return true
	}
	for _, r := range gd.access {
		if matchAny(r.Identities, identity) && matchAll(r.Servers, server) {
			return true
		}
	}
	return false
}

// toolAllowed reports whether identity may see and call a server's tool
// (by its exposed name).
func (gd *guard) toolAllowed(identity, server, tool string) bool {
	if gd.access == nil {
		return true
	}
	for _, r := range gd.access {
		if matchAny(r.Identities, identity) && matchAll(r.Servers, server) && matchAll(r.Tools, tool) && !matchAny(r.DenyTools, tool) {
			return true
		}
	}
	return false
}

// settings resolves the tool rules for one tool, memoized.
func (gd *guard) settings(server, tool string) *toolSettings {
	k := toolKey{server, tool}
	if v, ok := gd.resolved.Load(k); ok {
		return v.(*toolSettings)
	}
	ts := &toolSettings{validate: true}
	for i, r := range gd.rules {
		if !matchAll(r.Servers, server) || !matchAll(r.Tools, tool) {
			continue
		}
		switch r.Visibility {
		case "deferred":
			ts.deferred = true
		case "visible":
			ts.deferred = false
		}
		if r.RequireApproval != nil {
			ts.approval = *r.RequireApproval
		}
		if r.ValidateArguments != nil {
			ts.validate = *r.ValidateArguments
		}
		if r.Timeout > 0 {
			ts.timeout = seconds(r.Timeout)
		}
		if gd.ruleRates[i] != nil {
			ts.rate = gd.ruleRates[i]
		}
	}
	v, _ := gd.resolved.LoadOrStore(k, ts)
	return v.(*toolSettings)
}

// concurrency returns the limiter of an upstream, or nil when unlimited.
func (gd *guard) concurrency(server string) *limits.Concurrency {
	if gd.concLimit <= 0 {
		return nil
	}
	gd.concMu.Lock()
	defer gd.concMu.Unlock()
	c := gd.conc[server]
	if c == nil {
		c = limits.NewConcurrency(gd.concLimit, gd.concQueue)
		gd.conc[server] = c
	}
	return c
}

// rateLimited is the answer to a call over a rate limit.
type rateLimited struct {
	scope      string // "client" or "tool"
	retryAfter time.Duration
}

func (r *rateLimited) Error() string {
	return fmt.Sprintf("edge-mcp: rate limit (%s) exceeded; retry after %d s", r.scope, retryAfterSeconds(r.retryAfter))
}

func retryAfterSeconds(d time.Duration) int { return int(math.Ceil(max(d, time.Second).Seconds())) }

// allowCall takes a token from every rate limit that applies to identity
// calling a server's tool; nil means go ahead.
func (gd *guard) allowCall(identity, server, tool string) *rateLimited {
	if ok, after := allow(gd.clientRate, identity); !ok {
		return &rateLimited{"client", after}
	}
	return gd.allowTool(identity, server, tool)
}

// allowTool takes a token from the per-tool rate limits of identity
// calling a server's tool; nil means go ahead.
func (gd *guard) allowTool(identity, server, tool string) *rateLimited {
	key := identity + "\x00" + server + "\x00" + tool
	if ok, after := allow(gd.toolRate, key); !ok {
		return &rateLimited{"tool", after}
	}
	if ts := gd.settings(server, tool); ts.rate != nil {
		if ok, after := ts.rate.Allow(key); !ok {
			return &rateLimited{"tool", after}
		}
	}
	return nil
}

// limited reports whether any rate limit is configured.
func (gd *guard) limited() bool {
	if gd.clientRate != nil || gd.toolRate != nil {
		return true
	}
	for _, r := range gd.ruleRates {
		if r != nil {
			return true
		}
	}
	return false
}

// identityOf returns the identity an HTTP request was authenticated as.
func identityOf(r *http.Request) auth.Identity {
	if id, ok := auth.FromContext(r.Context()); ok {
		return id
	}
	return anonymous
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
		inner := http.HandlerFunc(func(w http.ResponseWriter, ar *http.Request) {
			if id := identityOf(ar); id.Method == auth.ModeJWT {
				// The identity's newest validated JWT (ar no longer has
				// it), for token exchange: memory only, never sent
				// upstream, logged or shown.
				g.oauth.SetSubject(id.Name, bearerToken(r))
			}
			g.admitted(gd, transport, w, ar, next)
		})
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
	if transport == transportStreamable && r.Method == http.MethodPost && gd.limited() {
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
		r = r.WithContext(transports.WithPeer(r.Context(), &peer{id: id, transport: transport}))
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

// bearerToken is the token of r's Authorization header.
func bearerToken(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "Bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
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
	if it := g.route.catalogue().index[kindTools][name]; it != nil && it.up != nil {
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
