package auth

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// gateway is a real HTTP server with the Middleware on /mcp and the
// metadata handler on the well-known paths; its /mcp handler records what
// reached it.
type gateway struct {
	*httptest.Server
	mu       sync.Mutex
	calls    int
	identity Identity
	authHdr  []string // Authorization and X-API-Key as the handler saw them
}

func newGateway(t testing.TB, a func(url string) *Authenticator) *gateway {
	g := &gateway{}
	mux := http.NewServeMux()
	g.Server = httptest.NewServer(mux)
	t.Cleanup(g.Close)
	auth := a(g.URL)
	mux.Handle("/mcp", auth.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := FromContext(r.Context())
		g.mu.Lock()
		defer g.mu.Unlock()
		g.calls++
		if ok {
			g.identity = id
		}
		g.authHdr = append(r.Header.Values("Authorization"), r.Header.Values("X-Api-Key")...)
		io.WriteString(w, "ok")
	})))
	mux.Handle(MetadataPath, auth.MetadataHandler())
	mux.Handle(MetadataPath+"/", auth.MetadataHandler())
	return g
}

// do sends a request to the gateway and returns the response with its body.
func (g *gateway) do(t testing.TB, method, path string, kv ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, g.URL+path, strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Add(kv[i], kv[i+1])
	}
	resp, err := g.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

func jwtGatewayConfig(t testing.TB, resource string) Config {
	cfg := staticJWTConfig(t)
	cfg.JWT.Audience = []string{resource}
	cfg.ResourceMetadata = &ResourceMetadata{
		Resource:             resource,
		AuthorizationServers: []string{testIssuer},
		ScopesSupported:      []string{"tools:read", "tools:call"},
		ResourceName:         "Edge MCP",
	}
	return cfg
}

func TestMiddlewareJWT(t *testing.T) {
	k := keys()
	g := newGateway(t, func(url string) *Authenticator { return newAuth(t, jwtGatewayConfig(t, url+"/mcp"), Options{}) })
	resource := g.URL + "/mcp"
	mdURL := g.URL + MetadataPath + "/mcp"
	claims := func(over map[string]any) jwt.MapClaims {
		c := goodClaims(over)
		if _, ok := over["aud"]; !ok {
			c["aud"] = resource
		}
		return c
	}

	t.Run("success", func(t *testing.T) {
		tok := sign(t, jwt.SigningMethodRS256, k.rsaA, "rsa-a", claims(nil))
		resp, body := g.do(t, http.MethodPost, "/mcp", "Authorization", "Bearer "+tok)
		if resp.StatusCode != http.StatusOK || body != "ok" {
			t.Fatalf("status %d, body %q", resp.StatusCode, body)
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.identity.Name != "alice" || g.identity.Method != ModeJWT || !slices.Equal(g.identity.Scopes, []string{"tools:read", "tools:call"}) {
			t.Fatalf("handler saw identity %+v", g.identity)
		}
		if len(g.authHdr) != 0 {
			t.Fatalf("handler saw credentials %q; they must not travel further", g.authHdr)
		}
	})

	tests := []struct {
		name       string
		token      string // "" sends none
		challenge  string
		bodyError  string
		bodyReason string
	}{
		{"missing", "",
			`Bearer realm="edge-mcp", resource_metadata="` + mdURL + `"`, "unauthorized", "missing credentials"},
		{"expired", sign(t, jwt.SigningMethodRS256, k.rsaA, "rsa-a", claims(map[string]any{"exp": time.Now().Add(-time.Hour).Unix(), "iat": time.Now().Add(-2 * time.Hour).Unix(), "nbf": nil})),
			`Bearer realm="edge-mcp", error="invalid_token", error_description="token expired", resource_metadata="` + mdURL + `"`, "invalid_token", "token expired"},
		{"wrong audience", sign(t, jwt.SigningMethodRS256, k.rsaA, "rsa-a", claims(map[string]any{"aud": "https://elsewhere.example.com"})),
			`Bearer realm="edge-mcp", error="invalid_token", error_description="wrong audience", resource_metadata="` + mdURL + `"`, "invalid_token", "wrong audience"},
		{"bad signature", sign(t, jwt.SigningMethodRS256, k.rsaB, "rsa-a", claims(nil)),
			`Bearer realm="edge-mcp", error="invalid_token", error_description="bad signature", resource_metadata="` + mdURL + `"`, "invalid_token", "bad signature"},
		{"malformed", "not\"a,token=",
			`Bearer realm="edge-mcp", error="invalid_token", error_description="malformed credentials", resource_metadata="` + mdURL + `"`, "invalid_token", "malformed credentials"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g.mu.Lock()
			before := g.calls
			g.mu.Unlock()
			var kv []string
			if tt.token != "" {
				kv = []string{"Authorization", "Bearer " + tt.token}
			}
			resp, body := g.do(t, http.MethodPost, "/mcp", kv...)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", resp.StatusCode)
			}
			if got := resp.Header.Values("WWW-Authenticate"); len(got) != 1 || got[0] != tt.challenge {
				t.Fatalf("WWW-Authenticate = %q\nwant %q", got, tt.challenge)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("Content-Type = %q", ct)
			}
			var b map[string]string
			if err := json.Unmarshal([]byte(body), &b); err != nil {
				t.Fatalf("body %q: %v", body, err)
			}
			if len(b) != 2 || b["error"] != tt.bodyError || b["error_description"] != tt.bodyReason {
				t.Fatalf("body = %v", b)
			}
			if tt.token != "" {
				assertNotEchoed(t, resp, body, tt.token)
			}
			g.mu.Lock()
			defer g.mu.Unlock()
			if g.calls != before {
				t.Fatal("the handler ran for a rejected request")
			}
		})
	}

	// An MCP client follows resource_metadata to the document.
	t.Run("discovery", func(t *testing.T) {
		resp, _ := g.do(t, http.MethodPost, "/mcp")
		m := regexp.MustCompile(`resource_metadata="([^"]+)"`).FindStringSubmatch(resp.Header.Get("WWW-Authenticate"))
		if m == nil {
			t.Fatal("no resource_metadata in the challenge")
		}
		path := strings.TrimPrefix(m[1], g.URL)
		resp, body := g.do(t, http.MethodGet, path)
		var doc map[string]any
		if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &doc) != nil || doc["resource"] != resource {
			t.Fatalf("GET %s: %d %q", m[1], resp.StatusCode, body)
		}
	})
}

// assertNotEchoed fails if tok, or its signature part, appears in the
// response.
func assertNotEchoed(t testing.TB, resp *http.Response, body, tok string) {
	t.Helper()
	needles := []string{tok}
	if i := strings.LastIndexByte(tok, '.'); i >= 0 && len(tok)-i > 8 {
		needles = append(needles, tok[i+1:])
	}
	for _, n := range needles {
		if strings.Contains(body, n) {
			t.Fatalf("response body echoes the token: %q", body)
		}
		for name, vals := range resp.Header {
			for _, v := range vals {
				if strings.Contains(v, n) {
					t.Fatalf("response header %s echoes the token: %q", name, v)
				}
			}
		}
	}
}

func TestMiddlewareAPIKey(t *testing.T) {
	g := newGateway(t, func(string) *Authenticator { return newAuth(t, apiKeyConfig(), Options{}) })
	t.Run("success via X-API-Key", func(t *testing.T) {
		resp, _ := g.do(t, http.MethodPost, "/mcp", "X-API-Key", ciKey)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.identity.Name != "ci" || g.identity.Method != ModeAPIKey || len(g.authHdr) != 0 {
			t.Fatalf("handler saw %+v with credentials %q", g.identity, g.authHdr)
		}
	})
	for _, tt := range []struct{ name, key, challenge string }{
		{"revoked", revokedKey, `Bearer realm="edge-mcp", error="invalid_token", error_description="revoked"`},
		{"unknown", "nope-nope-nope-nope-nope", `Bearer realm="edge-mcp", error="invalid_token", error_description="invalid API key"`},
		{"missing", "", `Bearer realm="edge-mcp"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var kv []string
			if tt.key != "" {
				kv = []string{"Authorization", "Bearer " + tt.key}
			}
			resp, body := g.do(t, http.MethodPost, "/mcp", kv...)
			if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != tt.challenge {
				t.Fatalf("%d %q, want 401 %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), tt.challenge)
			}
			if tt.key != "" {
				assertNotEchoed(t, resp, body, tt.key)
			}
		})
	}
	t.Run("no metadata", func(t *testing.T) {
		if resp, _ := g.do(t, http.MethodGet, MetadataPath); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("status %d, want 404", resp.StatusCode)
		}
	})
}

func TestMiddlewareNone(t *testing.T) {
	g := newGateway(t, func(string) *Authenticator { return newAuth(t, Config{Mode: ModeNone}, Options{}) })
	resp, _ := g.do(t, http.MethodPost, "/mcp", "Authorization", "Bearer upstream-may-need-this")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.identity.Anonymous() || g.identity.Name != AnonymousName {
		t.Fatalf("identity %+v, want anonymous", g.identity)
	}
	if !slices.Equal(g.authHdr, []string{"Bearer upstream-may-need-this"}) {
		t.Fatalf("headers %q: mode none must leave them alone", g.authHdr)
	}
}

func TestMetadataHandler(t *testing.T) {
	g := newGateway(t, func(string) *Authenticator {
		return newAuth(t, jwtGatewayConfig(t, "https://gw.example.com/mcp"), Options{})
	})
	for _, path := range []string{MetadataPath, MetadataPath + "/mcp"} {
		t.Run("GET "+path, func(t *testing.T) {
			resp, body := g.do(t, http.MethodGet, path)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("%d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			if resp.Header.Get("Access-Control-Allow-Origin") != "*" {
				t.Fatal("no CORS header: browser-based MCP clients could not read the document")
			}
			var doc struct {
				Resource               string   `json:"resource"`
				AuthorizationServers   []string `json:"authorization_servers"`
				ScopesSupported        []string `json:"scopes_supported"`
				BearerMethodsSupported []string `json:"bearer_methods_supported"`
				ResourceName           string   `json:"resource_name"`
			}
			if err := json.Unmarshal([]byte(body), &doc); err != nil {
				t.Fatalf("%q: %v", body, err)
			}
			if doc.Resource != "https://gw.example.com/mcp" ||
				!slices.Equal(doc.AuthorizationServers, []string{testIssuer}) ||
				!slices.Equal(doc.ScopesSupported, []string{"tools:read", "tools:call"}) ||
				!slices.Equal(doc.BearerMethodsSupported, []string{"header"}) ||
				doc.ResourceName != "Edge MCP" {
				t.Fatalf("document = %+v", doc)
			}
		})
	}
	for _, tt := range []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, MetadataPath + "/other", http.StatusNotFound},
		{http.MethodPost, MetadataPath, http.StatusMethodNotAllowed},
		{http.MethodHead, MetadataPath, http.StatusOK},
		{http.MethodOptions, MetadataPath, http.StatusNoContent},
	} {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			if resp, _ := g.do(t, tt.method, tt.path); resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.status)
			}
		})
	}
}

func TestMetadataURL(t *testing.T) {
	for _, tt := range []struct{ resource, url string }{
		{"https://gw.example.com/mcp", "https://gw.example.com/.well-known/oauth-protected-resource/mcp"},
		{"https://gw.example.com/", "https://gw.example.com/.well-known/oauth-protected-resource"},
		{"https://gw.example.com", "https://gw.example.com/.well-known/oauth-protected-resource"},
		{"https://gw.example.com:8443/a/b/", "https://gw.example.com:8443/.well-known/oauth-protected-resource/a/b"},
		{"http://127.0.0.1:8080/mcp", "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp"},
	} {
		md, err := newMetadataDoc(ResourceMetadata{Resource: tt.resource, AuthorizationServers: []string{testIssuer}})
		if err != nil {
			t.Fatalf("%s: %v", tt.resource, err)
		}
		if md.url != tt.url {
			t.Errorf("%s: metadata URL %s, want %s", tt.resource, md.url, tt.url)
		}
	}
}
