package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// OAuthServerOptions shape an OAuthServer.
type OAuthServerOptions struct {
	// TokenTTL is the access tokens' lifetime (0: one hour).
	TokenTTL time.Duration
	// Refresh issues refresh tokens, rotated at each refresh.
	Refresh bool
	// WrongIss makes the authorization response carry another issuer.
	WrongIss bool
	// Scopes are the scopes of the 401 challenge and the metadata (nil:
	// "read").
	Scopes []string
	// StepUpTool, when set, is a tool whose calls need StepUpScope too: a
	// token without it gets 403 insufficient_scope.
	StepUpTool, StepUpScope string
	// Clients are pre-registered clients: id → secret.
	Clients map[string]string
}

// OAuthServer is a real authorization server and, behind a bearer check,
// an MCP server (go-sdk) at MCPURL, on one 127.0.0.1 listener: protected
// resource metadata (RFC 9728), authorization server metadata (RFC 8414,
// with iss in the response, RFC 9207), dynamic registration (RFC 7591),
// an authorize endpoint that approves at once with a redirect, and a
// token endpoint (authorization code with PKCE S256, refresh, client
// credentials). Its tools: echo, and StepUpTool when set.
type OAuthServer struct {
	URL, MCPURL string
	// SSEURL is the same MCP server over legacy HTTP+SSE, behind the same
	// bearer check (its resource is SSEURL).
	SSEURL string
	opts   OAuthServerOptions
	mux    *http.ServeMux
	// metaDelay holds the authorization server metadata back (see
	// SetMetadataDelay), in nanoseconds.
	metaDelay atomic.Int64

	mu      sync.Mutex
	clients map[string]oauthClient
	codes   map[string]oauthCode
	access  map[string]oauthGrant
	refresh map[string]oauthGrant
	issued  []string
	grants  map[string]int
}

type oauthClient struct {
	secret    string
	redirects []string
}

type oauthCode struct {
	challenge, scope, client, redirect string
}

type oauthGrant struct {
	scopes []string
	client string
	expiry time.Time
}

// StartOAuthServer starts an OAuthServer closed at the test's end.
func StartOAuthServer(t testing.TB, opts OAuthServerOptions) *OAuthServer {
	t.Helper()
	if opts.TokenTTL == 0 {
		opts.TokenTTL = time.Hour
	}
	if opts.Scopes == nil {
		opts.Scopes = []string{"read"}
	}
	s := &OAuthServer{opts: opts, clients: map[string]oauthClient{}, codes: map[string]oauthCode{},
		access: map[string]oauthGrant{}, refresh: map[string]oauthGrant{}, grants: map[string]int{}}
	for id, secret := range opts.Clients {
		s.clients[id] = oauthClient{secret: secret}
	}
	mux := http.NewServeMux()
	s.mux = mux
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", s.serveResourceMeta)
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", s.serveAuthMeta)
	mux.HandleFunc("POST /register", s.serveRegister)
	mux.HandleFunc("GET /authorize", s.serveAuthorize)
	mux.HandleFunc("POST /token", s.serveToken)
	mux.Handle("/mcp", s.protect(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcpServer() }, nil)))
	mux.Handle("GET /.well-known/oauth-protected-resource/sse", http.HandlerFunc(s.serveResourceMeta))
	mux.Handle("/sse", s.protect(mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return s.mcpServer() }, nil)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s.URL, s.MCPURL, s.SSEURL = srv.URL, srv.URL+"/mcp", srv.URL+"/sse"
	return s
}

func (s *OAuthServer) mcpServer() *mcp.Server {
	server := mcp.NewServer(&mcp.Implementation{Name: "protected", Version: "1"}, nil)
	type args struct {
		Text string `json:"text"`
	}
	echo := func(_ context.Context, _ *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil, nil
	}
	mcp.AddTool(server, &mcp.Tool{Name: "echo", Description: "echoes text"}, echo)
	whoami := func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		var tok string
		if req.Extra != nil {
			tok = strings.TrimPrefix(req.Extra.Header.Get("Authorization"), "Bearer ")
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: TokenFingerprint(tok)}}}, nil, nil
	}
	mcp.AddTool(server, &mcp.Tool{Name: "whoami", Description: "the fingerprint of the token the call carried"}, whoami)
	server.AddResource(&mcp.Resource{URI: "test://whoami", Name: "whoami"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		var tok string
		if req.Extra != nil {
			tok = strings.TrimPrefix(req.Extra.Header.Get("Authorization"), "Bearer ")
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://whoami", Text: TokenFingerprint(tok)}}}, nil
	})
	if s.opts.StepUpTool != "" {
		mcp.AddTool(server, &mcp.Tool{Name: s.opts.StepUpTool, Description: "needs " + s.opts.StepUpScope}, echo)
	}
	return server
}

// TokenFingerprint is what the whoami tool answers for a token: the first
// 8 bytes of its SHA-256, in hex (the token itself never shows).
func TokenFingerprint(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(sum[:8])
}

// Mount serves h at path behind the same bearer check, with its own
// protected resource metadata, and returns its URL (for example a
// WebSocket endpoint through httputil.ReverseProxy).
func (s *OAuthServer) Mount(path string, h http.Handler) string {
	s.mux.Handle("GET /.well-known/oauth-protected-resource"+path, http.HandlerFunc(s.serveResourceMeta))
	s.mux.Handle(path, s.protect(h))
	return s.URL + path
}

// Revoke forgets every access and refresh token issued so far.
func (s *OAuthServer) Revoke() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.access)
	clear(s.refresh)
}

// Issued returns every access and refresh token issued so far.
func (s *OAuthServer) Issued() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.issued)
}

// Grants returns how many token requests of grantType succeeded.
func (s *OAuthServer) Grants(grantType string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.grants[grantType]
}

// RefreshValid reports whether tok is a refresh token still accepted.
func (s *OAuthServer) RefreshValid(tok string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.refresh[tok]
	return ok
}

func (s *OAuthServer) serveResourceMeta(w http.ResponseWriter, r *http.Request) {
	resource := s.URL + strings.TrimPrefix(r.URL.Path, "/.well-known/oauth-protected-resource")
	writeJSON(w, http.StatusOK, &oauthex.ProtectedResourceMetadata{Resource: resource,
		AuthorizationServers: []string{s.URL}, ScopesSupported: s.opts.Scopes})
}

// SetMetadataDelay makes the authorization server metadata answer d late
// from now on (a slow discovery).
func (s *OAuthServer) SetMetadataDelay(d time.Duration) { s.metaDelay.Store(int64(d)) }

func (s *OAuthServer) serveAuthMeta(w http.ResponseWriter, r *http.Request) {
	if d := time.Duration(s.metaDelay.Load()); d > 0 {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
	}
	writeJSON(w, http.StatusOK, &oauthex.AuthServerMeta{
		Issuer: s.URL, AuthorizationEndpoint: s.URL + "/authorize", TokenEndpoint: s.URL + "/token",
		RegistrationEndpoint: s.URL + "/register", ScopesSupported: append(slices.Clone(s.opts.Scopes), "offline_access"),
		ResponseTypesSupported: []string{"code"}, CodeChallengeMethodsSupported: []string{"S256"},
		GrantTypesSupported:                        []string{"authorization_code", "refresh_token", "client_credentials"},
		TokenEndpointAuthMethodsSupported:          []string{"client_secret_post", "client_secret_basic"},
		AuthorizationResponseIssParameterSupported: true,
	})
}

func (s *OAuthServer) serveRegister(w http.ResponseWriter, r *http.Request) {
	var md oauthex.ClientRegistrationMetadata
	if err := json.NewDecoder(r.Body).Decode(&md); err != nil || len(md.RedirectURIs) == 0 {
		http.Error(w, "bad registration", http.StatusBadRequest)
		return
	}
	id, secret := "client-"+rand.Text(), rand.Text()
	s.mu.Lock()
	s.clients[id] = oauthClient{secret: secret, redirects: md.RedirectURIs}
	s.mu.Unlock()
	md.TokenEndpointAuthMethod = "client_secret_basic"
	writeJSON(w, http.StatusCreated, &oauthex.ClientRegistrationResponse{ClientID: id, ClientSecret: secret, ClientRegistrationMetadata: md})
}

func (s *OAuthServer) serveAuthorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	c, ok := s.clients[q.Get("client_id")]
	s.mu.Unlock()
	redirect := q.Get("redirect_uri")
	switch {
	case !ok:
		http.Error(w, "unknown client_id", http.StatusBadRequest)
		return
	case c.redirects != nil && !slices.Contains(c.redirects, redirect), redirect == "":
		http.Error(w, "invalid redirect_uri", http.StatusBadRequest)
		return
	case q.Get("code_challenge") == "" || q.Get("code_challenge_method") != "S256":
		http.Error(w, "PKCE S256 required", http.StatusBadRequest)
		return
	case !strings.HasPrefix(q.Get("resource"), s.URL+"/"):
		http.Error(w, "resource must be one of "+s.URL, http.StatusBadRequest)
		return
	}
	code := rand.Text()
	s.mu.Lock()
	s.codes[code] = oauthCode{challenge: q.Get("code_challenge"), scope: q.Get("scope"), client: q.Get("client_id"), redirect: redirect}
	s.mu.Unlock()
	iss := s.URL
	if s.opts.WrongIss {
		iss = "https://evil.example.com"
	}
	v := url.Values{"code": {code}, "state": {q.Get("state")}, "iss": {iss}}
	http.Redirect(w, r, redirect+"?"+v.Encode(), http.StatusFound)
}

func (s *OAuthServer) serveToken(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	client, ok := s.authenticate(r)
	if !ok {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		return
	}
	gt := r.Form.Get("grant_type")
	var scopes []string
	s.mu.Lock()
	defer s.mu.Unlock()
	switch gt {
	case "authorization_code":
		c, ok := s.codes[r.Form.Get("code")]
		delete(s.codes, r.Form.Get("code"))
		sum := sha256.Sum256([]byte(r.Form.Get("code_verifier")))
		if !ok || c.client != client || base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge || r.Form.Get("redirect_uri") != c.redirect {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant"})
			return
		}
		scopes = strings.Fields(c.scope)
	case "refresh_token":
		g, ok := s.refresh[r.Form.Get("refresh_token")]
		if !ok || g.client != client {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant"})
			return
		}
		delete(s.refresh, r.Form.Get("refresh_token")) // rotated
		scopes = g.scopes
	case "client_credentials":
		scopes = strings.Fields(r.Form.Get("scope"))
	default:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	s.grants[gt]++
	writeJSON(w, http.StatusOK, s.issueLocked(client, scopes, gt != "client_credentials"))
}

// issueLocked mints an access token (and a refresh token when enabled).
func (s *OAuthServer) issueLocked(client string, scopes []string, refreshable bool) map[string]any {
	g := oauthGrant{scopes: scopes, client: client, expiry: time.Now().Add(s.opts.TokenTTL)}
	at := "at-" + rand.Text()
	s.access[at] = g
	s.issued = append(s.issued, at)
	out := map[string]any{"access_token": at, "token_type": "Bearer", "expires_in": int(s.opts.TokenTTL / time.Second), "scope": strings.Join(scopes, " ")}
	if s.opts.TokenTTL < time.Second {
		out["expires_in"] = 1
	}
	if s.opts.Refresh && refreshable {
		rt := "rt-" + rand.Text()
		s.refresh[rt] = g
		s.issued = append(s.issued, rt)
		out["refresh_token"] = rt
	}
	return out
}

// authenticate returns the client of a token request (basic or post).
func (s *OAuthServer) authenticate(r *http.Request) (string, bool) {
	id, secret, ok := r.BasicAuth()
	if ok {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.Form.Get("client_id"), r.Form.Get("client_secret")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, known := s.clients[id]
	return id, known && c.secret == secret
}

// protect answers 401 with the challenge to a request without a valid
// token, and 403 insufficient_scope to a call of StepUpTool without
// StepUpScope.
func (s *OAuthServer) protect(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		meta := s.URL + "/.well-known/oauth-protected-resource" + r.URL.Path
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		s.mu.Lock()
		g, ok := s.access[tok]
		s.mu.Unlock()
		if !ok || time.Now().After(g.expiry) {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer resource_metadata=%q, scope=%q`, meta, strings.Join(s.opts.Scopes, " ")))
			http.Error(w, "invalid or missing token", http.StatusUnauthorized)
			return
		}
		if s.opts.StepUpTool != "" && r.Method == http.MethodPost && !slices.Contains(g.scopes, s.opts.StepUpScope) {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"name":"`+s.opts.StepUpTool+`"`)) {
				want := strings.Join(append(slices.Clone(s.opts.Scopes), s.opts.StepUpScope), " ")
				w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="insufficient_scope", scope=%q, resource_metadata=%q`, want, meta))
				http.Error(w, "insufficient scope", http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
