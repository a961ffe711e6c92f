package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/edge-mcp/edge-mcp/policy/intercept"
	"github.com/edge-mcp/edge-mcp/transports"
)

// TokenEnv is the environment variable holding an extra admin token (the
// identity "env").
const TokenEnv = "EDGE_MCP_ADMIN_TOKEN"

// Options configure a Server.
type Options struct {
	// Ops carries out the operations; required.
	Ops Operations
	// Tokens returns the admin identities and their tokens (read on every
	// request, so a reload takes effect); nil means none. With no token
	// from here nor from TokenEnv, requests are not authenticated and act
	// as the identity "local".
	Tokens func() map[string]string
	// Audit receives the record of every admin change, accepted or
	// refused; nil drops them.
	Audit func(Record)
	// Log receives internal failures (answered as 500); nil discards them.
	Log *slog.Logger
	// Guard checks Origin and Host before anything else (DNS rebinding,
	// cross-site requests from a browser); nil: loopback names and
	// same-origin requests only.
	Guard *transports.Guard
}

// Server is the admin API.
type Server struct {
	ops    Operations
	tokens func() map[string]string
	audit  func(Record)
	log    *slog.Logger
	guard  *transports.Guard
	mux    *http.ServeMux
	ui     http.Handler // under /ui/; nil: none
}

// New returns the admin API over opts.Ops.
func New(opts Options) *Server {
	s := &Server{ops: opts.Ops, tokens: opts.Tokens, audit: opts.Audit, log: opts.Log, guard: opts.Guard, mux: http.NewServeMux()}
	if s.guard == nil {
		s.guard = transports.NewGuard(transports.GuardOptions{})
	}
	if s.tokens == nil {
		s.tokens = func() map[string]string { return nil }
	}
	if s.audit == nil {
		s.audit = func(Record) {}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.routes()
	return s
}

func (s *Server) routes() {
	for pattern, h := range map[string]http.HandlerFunc{
		"GET /admin/modules":                        s.listModules,
		"GET /admin/modules/{name}":                 s.getModule,
		"PUT /admin/modules/{name}":                 s.putModule,
		"DELETE /admin/modules/{name}":              s.deleteModule,
		"POST /admin/modules/{name}/rollback":       s.rollback,
		"GET /admin/policies":                       s.listPolicies,
		"POST /admin/policies":                      s.attach,
		"DELETE /admin/policies/{name}":             s.detach,
		"PUT /admin/policies/order":                 s.reorder,
		"POST /admin/policies/{name}/promote":       s.promote,
		"POST /admin/reload":                        s.reload,
		"GET /admin/tools/pending":                  s.pendingTools,
		"GET /admin/virtual-servers":                s.virtualServers,
		"GET /admin/virtual-servers/{name}":         s.virtualServer,
		"POST /admin/tools/{server}/{tool}/approve": s.approveTool,
		"POST /admin/tools/{server}/{tool}/reject":  s.rejectTool,
		"GET /admin/oauth":                          s.oauthStatus,
		"GET /admin/interceptors":                   s.interceptors,
		"POST /admin/interceptors/{name}/promote":   s.interceptorMode(intercept.Active),
		"POST /admin/interceptors/{name}/demote":    s.interceptorMode(intercept.Audit),
		"POST /admin/oauth/{server}/login":          s.oauthLogin,
		"DELETE /admin/oauth/{server}":              s.oauthLogout,
	} {
		s.mux.HandleFunc(pattern, h)
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, Errorf(http.StatusNotFound, "not_found", "no admin endpoint %s %s", r.Method, r.URL.Path))
	})
}

// ServeHTTP checks the request's Origin and Host, authenticates it and
// serves it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if status, reason := s.guard.Check(r); status != 0 {
		s.writeError(w, Errorf(status, "forbidden", "%s", reason))
		return
	}
	if s.ui != nil && (r.URL.Path == "/ui" || strings.HasPrefix(r.URL.Path, "/ui/")) {
		// The console authenticates its own way (a session cookie from
		// the login form), with TokenIdentity and Identities.
		s.ui.ServeHTTP(w, r)
		return
	}
	id, challenge, err := s.authenticate(r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", challenge)
		s.writeError(w, err)
		return
	}
	s.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), identityKey{}, id)))
}

type identityKey struct{}

// authenticate returns the admin identity whose token the request bears,
// or the error and the WWW-Authenticate challenge to answer with.
func (s *Server) authenticate(r *http.Request) (id, challenge string, err error) {
	tokens := s.allTokens()
	if len(tokens) == 0 {
		return "local", "", nil
	}
	const realm = `Bearer realm="edge-mcp-admin"`
	tok, ok := bearerToken(r)
	if !ok {
		return "", realm, Errorf(http.StatusUnauthorized, "unauthorized", "this admin API needs Authorization: Bearer <admin token>")
	}
	id = tokenIdentity(tokens, tok)
	if id == "" {
		return "", realm + `, error="invalid_token"`, Errorf(http.StatusUnauthorized, "unauthorized", "the admin token is not valid")
	}
	return id, "", nil
}

// tokenIdentity is the identity whose token tok is; "" when none.
func tokenIdentity(tokens map[string]string, tok string) (id string) {
	presented := sha256.Sum256([]byte(tok))
	for name, want := range tokens {
		w := sha256.Sum256([]byte(want))
		if subtle.ConstantTimeCompare(presented[:], w[:]) == 1 {
			id = name
		}
	}
	return id
}

// MountUI serves h under /ui/, behind the Origin/Host guard but not the
// bearer-token check: h authenticates with [Server.TokenIdentity] and
// [Server.Identities]. Call it before serving.
func (s *Server) MountUI(h http.Handler) { s.ui = h }

// TokenIdentity returns the admin identity whose token tok is, and
// whether there is one.
func (s *Server) TokenIdentity(tok string) (string, bool) {
	id := tokenIdentity(s.allTokens(), tok)
	return id, id != ""
}

// Identities lists the admin identities that have a token now (the
// config's and "env"); none means requests are not authenticated.
func (s *Server) Identities() []string {
	var out []string
	for id := range s.allTokens() {
		out = append(out, id)
	}
	return out
}

// WithIdentity returns ctx carrying the admin identity id, as
// [Identity] reads it.
func WithIdentity(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// allTokens is the configured tokens plus the one of TokenEnv.
func (s *Server) allTokens() map[string]string {
	cfg := s.tokens()
	tokens := make(map[string]string, len(cfg)+1)
	for k, v := range cfg {
		tokens[k] = v
	}
	if v := os.Getenv(TokenEnv); v != "" {
		tokens["env"] = v
	}
	return tokens
}

func bearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if len(h) < 8 || !equalFoldASCII(h[:7], "Bearer ") {
		return "", false
	}
	return h[7:], h[7:] != ""
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if a[i]|0x20 != b[i]|0x20 {
			return false
		}
	}
	return true
}

// identity is the admin identity of an authenticated request.
func identity(r *http.Request) string { return Identity(r.Context()) }

// Identity is the admin identity of the request whose context ctx is
// (or is derived from); "" outside an admin request.
func Identity(ctx context.Context) string {
	id, _ := ctx.Value(identityKey{}).(string)
	return id
}

// record audits an admin change made (or refused) for request r.
func (s *Server) record(r *http.Request, action, target, digest, detail string) {
	s.audit(Record{Time: time.Now().UTC(), Identity: identity(r), Action: action, Target: target, Digest: digest, Detail: detail})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// writeError answers err: its status, code and reason when it is an
// *Error, else 500 (and the error is logged).
func (s *Server) writeError(w http.ResponseWriter, err error) {
	var ae *Error
	if !errors.As(err, &ae) {
		s.log.Error("admin API: operation failed", "err", err)
		ae = Errorf(http.StatusInternalServerError, "internal", "%v", err)
	}
	writeJSON(w, ae.Status, map[string]string{"error": ae.Code, "reason": ae.Reason})
}
