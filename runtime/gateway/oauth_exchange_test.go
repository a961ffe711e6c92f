package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// exchangeServer is an authorization server doing RFC 8693 token
// exchange (and client credentials for the catalogue's link) in front of
// a protected MCP server whose whoami tool answers the subject its token
// was issued for. It records every Authorization header the MCP server
// sees and every subject token it exchanged.
type exchangeServer struct {
	secret []byte
	url    string

	mu       sync.Mutex
	tokens   map[string]string // access token -> subject ("" for the client's own)
	headers  []string
	subjects []string
	n        int
}

const exClient, exSecret = "edge-gw", "edge-gw-secret-0123456789"

func startExchangeServer(t *testing.T, secret []byte) *exchangeServer {
	es := &exchangeServer{secret: secret, tokens: map[string]string{}}
	server := mcp.NewServer(&mcp.Implementation{Name: "protected", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "whoami"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		tok := strings.TrimPrefix(req.Extra.Header.Get("Authorization"), "Bearer ")
		es.mu.Lock()
		sub := es.tokens[tok]
		es.mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "subject=" + sub}}}, nil, nil
	})
	mh := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /token", es.serveToken)
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Get("Authorization")
		es.mu.Lock()
		es.headers = append(es.headers, h)
		_, ok := es.tokens[strings.TrimPrefix(h, "Bearer ")]
		es.mu.Unlock()
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mh.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	es.url = srv.URL
	return es
}

func (es *exchangeServer) serveToken(w http.ResponseWriter, r *http.Request) {
	fail := func(code int, e string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"error": %q}`, e)
	}
	if id, secret, ok := r.BasicAuth(); !ok || id != exClient || secret != exSecret {
		fail(http.StatusUnauthorized, "invalid_client")
		return
	}
	r.ParseForm()
	sub := ""
	switch r.PostForm.Get("grant_type") {
	case "client_credentials":
	case "urn:ietf:params:oauth:grant-type:token-exchange":
		f := r.PostForm
		if f.Get("subject_token_type") != "urn:ietf:params:oauth:token-type:jwt" || f.Get("requested_token_type") != "urn:ietf:params:oauth:token-type:access_token" ||
			f.Get("audience") != "upstream-api" || f.Get("resource") != "https://upstream.example.com/mcp" || f.Get("scope") != "tools" {
			fail(http.StatusBadRequest, "invalid_request")
			return
		}
		tok, err := jwt.Parse(f.Get("subject_token"), func(*jwt.Token) (any, error) { return es.secret, nil }, jwt.WithValidMethods([]string{"HS256"}))
		if err != nil {
			fail(http.StatusBadRequest, "invalid_grant")
			return
		}
		sub, _ = tok.Claims.GetSubject()
		if sub == "mallory" {
			fail(http.StatusBadRequest, "invalid_grant")
			return
		}
		es.mu.Lock()
		es.subjects = append(es.subjects, f.Get("subject_token"))
		es.mu.Unlock()
	default:
		fail(http.StatusBadRequest, "unsupported_grant_type")
		return
	}
	es.mu.Lock()
	es.n++
	access := fmt.Sprintf("upstream-%s-%d", sub, es.n)
	es.tokens[access] = sub
	es.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": 3600,
		"issued_token_type": "urn:ietf:params:oauth:token-type:access_token"})
}

// TestOAuthTokenExchange: "grant": "token_exchange" with two JWT
// identities calling at once: each call carries an upstream token the
// token endpoint issued for that identity's own subject (its validated
// downstream JWT, exchanged with the client's credentials); the MCP
// server never sees a downstream JWT. A subject the token endpoint
// refuses gets a call error naming the server and holding no token.
func TestOAuthTokenExchange(t *testing.T) {
	t.Parallel()
	secret := []byte("downstream-hmac-secret-0123456789abcdef")
	es := startExchangeServer(t, secret)
	const iss, aud = "https://idp.example.com", "https://gw.example.com/mcp"
	entry := fmt.Sprintf(`{"url": %q, "identity": "per_client", "oauth": {"grant": "token_exchange", "token_url": %q,
		"audience": "upstream-api", "resource": "https://upstream.example.com/mcp", "scopes": ["tools"], "clientId": %q, "clientSecret": %q}}`,
		es.url+"/mcp", es.url+"/token", exClient, exSecret)
	og := startOAuthGatewayWith(t, entry, t.TempDir(), fmt.Sprintf(`"auth": {"mode": "jwt", "jwt": {"issuer": %q, "audience": [%q], "algorithms": ["HS256"], "hmac_secret": %q}},`,
		iss, aud, secret))
	mint := func(sub string) string {
		now := time.Now()
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"iss": iss, "aud": aud, "sub": sub,
			"exp": now.Add(time.Hour).Unix(), "iat": now.Unix()}).SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	og.statusKey = mint("operator") // /status is behind the client authentication
	og.waitState(t, StateConnected) // the catalogue's link: the client's own token
	jwts := map[string]string{"alice": mint("alice"), "bob": mint("bob")}
	var wg sync.WaitGroup
	for name, tok := range jwts {
		cs := connectVersion(t, og.base+"/mcp", "2025-11-25", bearer(tok), nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2 {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
				cancel()
				if err != nil {
					t.Errorf("%s: whoami: %v", name, err)
					return
				}
				if got := textOf(res); res.IsError || got != "subject="+name {
					t.Errorf("%s called upstream as %q", name, got)
				}
			}
		}()
	}
	wg.Wait()

	cs := connectVersion(t, og.base+"/mcp", "2025-11-25", bearer(mint("mallory")), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
	cancel()
	msg := ""
	if err != nil {
		msg = err.Error()
	} else {
		msg = textOf(res)
	}
	if (err == nil && !res.IsError) || !strings.Contains(msg, `"up"`) || !strings.Contains(msg, "token exchange") ||
		!strings.Contains(msg, "invalid_grant") || strings.Contains(msg, "upstream-") || strings.Contains(msg, "eyJ") {
		t.Errorf("a refused exchange: err %v, result %q; want a call error naming the server, without tokens", err, msg)
	}

	es.mu.Lock()
	defer es.mu.Unlock()
	for _, h := range es.headers {
		for name, tok := range jwts {
			if strings.Contains(h, tok) {
				t.Errorf("the MCP server received %s's downstream JWT", name)
			}
		}
	}
	exchanged := map[string]int{}
	for _, s := range es.subjects {
		exchanged[s]++
	}
	if exchanged[jwts["alice"]] != 1 || exchanged[jwts["bob"]] != 1 {
		t.Errorf("want one exchange of each identity's JWT (the token is kept for its second call), got alice %d, bob %d",
			exchanged[jwts["alice"]], exchanged[jwts["bob"]])
	}
	if _, status := og.status(t); strings.Contains(status, "eyJ") || strings.Contains(status, "upstream-") {
		t.Errorf("/status shows a token: %s", status)
	}
	if logs := og.logs.String(); strings.Contains(logs, jwts["alice"]) || strings.Contains(logs, "upstream-alice") {
		t.Errorf("the logs show a token")
	}
}
