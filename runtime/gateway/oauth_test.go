package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/testenv"
	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// oauthGateway is a gateway fronting a protected upstream, with its logs
// and audit log captured so that tests can look for tokens in them.
type oauthGateway struct {
	base  string // http://127.0.0.1:PORT
	g     *Gateway
	logs  *syncLog
	audit string
	stop  func()
	// statusKey is the client credential /status needs when the gateway
	// authenticates its clients (sent as a Bearer token).
	statusKey string
}

type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startOAuthGateway serves a gateway whose one upstream "up" is server
// entry (JSON), with the state folder dir, on a listener opened first so
// that the callback URL is known to the config.
func startOAuthGateway(t *testing.T, entry, dir string) *oauthGateway {
	t.Helper()
	return startOAuthGatewayWith(t, entry, dir, "")
}

// startOAuthGatewayWith is startOAuthGateway with more top-level keys
// (JSON members, each followed by a comma).
func startOAuthGatewayWith(t *testing.T, entry, dir, extra string) *oauthGateway {
	t.Helper()
	return startOAuthGatewayWait(t, entry, dir, extra, 5)
}

// startOAuthGatewayWait is startOAuthGatewayWith with oauth.pending_wait
// set to wait seconds (how long a pending authorization lasts).
func startOAuthGatewayWait(t *testing.T, entry, dir, extra string, wait int) *oauthGateway {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	js := fmt.Sprintf(`{%s "mcpServers": {"up": %s}, "admin": {"state_dir": %q}, "audit": {"path": %q},
		"oauth": {"pending_wait": %d, "redirect_url": %q}}`, extra, entry, dir, audit, wait, base+"/oauth/callback")
	return serveOAuthGateway(t, ln, base, audit, js)
}

// status returns the /status entry of "up" and the whole document.
func (og *oauthGateway) status(t *testing.T) (ServerStatus, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, og.base+"/status", nil)
	if og.statusKey != "" {
		req.Header.Set("Authorization", "Bearer "+og.statusKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var doc struct{ Servers []ServerStatus }
	if err := json.Unmarshal(raw, &doc); err != nil || len(doc.Servers) != 1 {
		t.Fatalf("status %s: %v", raw, err)
	}
	return doc.Servers[0], string(raw)
}

// approvePending waits for a pending authorization (pendingURL) and plays
// the operator: opens its URL, follows the redirect to the gateway's
// callback, and expects success.
func (og *oauthGateway) approvePending(t *testing.T) {
	t.Helper()
	pending := og.pendingURL(t)
	resp, err := http.Get(pending)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "is authorized") {
		t.Fatalf("callback: HTTP %d %s", resp.StatusCode, body)
	}
}

func (og *oauthGateway) waitState(t *testing.T, want State) {
	t.Helper()
	waitForWithin(t, 30*time.Second, "state "+string(want), func() bool {
		st, _ := og.status(t)
		return st.State == want
	})
}

// noTokens fails when any token the authorization server issued shows in
// the logs, the audit log, /status or the token store's files.
func (og *oauthGateway) noTokens(t *testing.T, as *testenv.OAuthServer, dir string) {
	t.Helper()
	_, status := og.status(t)
	audit, _ := os.ReadFile(og.audit)
	files, _ := filepath.Glob(filepath.Join(dir, "oauth", "*.tok"))
	if len(files) == 0 {
		t.Error("no token file in the state folder")
	}
	var stored []byte
	for _, f := range files {
		b, _ := os.ReadFile(f)
		stored = append(stored, b...)
	}
	tokens := as.Issued()
	if len(tokens) == 0 {
		t.Fatal("no token was issued")
	}
	for _, tok := range tokens {
		for where, text := range map[string]string{"log": og.logs.String(), "audit log": string(audit), "/status": status, "token store": string(stored)} {
			if strings.Contains(text, tok) {
				t.Errorf("token %s… appears in the %s", tok[:6], where)
			}
		}
	}
}

func TestOAuthUpstreamLoginCallRestart(t *testing.T) {
	t.Parallel()
	as := testenv.StartOAuthServer(t, testenv.OAuthServerOptions{Refresh: true, StepUpTool: "admin_op", StepUpScope: "admin"})
	dir := t.TempDir()
	entry := fmt.Sprintf(`{"url": %q, "oauth": {}}`, as.MCPURL)
	og := startOAuthGateway(t, entry, dir)

	// No token: the server waits for an operator, with the URL in /status.
	og.waitState(t, StateNeedsAuthorization)
	og.approvePending(t)
	og.waitState(t, StateConnected)

	cs := connect(t, og.base+"/mcp", nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "through"}})
	if err != nil || res.IsError || textOf(res) != "through" {
		t.Fatalf("echo through the gateway: %v %+v", err, res)
	}

	// Step-up: the upstream answers 403 insufficient_scope; a new
	// authorization with the larger scope is approved while the call waits.
	done := make(chan struct{})
	go func() {
		defer close(done)
		og.approvePending(t)
	}()
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "admin_op", Arguments: map[string]any{"text": "stepped up"}})
	<-done
	if err != nil || res.IsError || textOf(res) != "stepped up" {
		t.Fatalf("admin_op after step-up: %v %+v", err, res)
	}
	st, _ := og.status(t)
	if st.Authorization == nil || !strings.Contains(strings.Join(st.Authorization.Scopes, " "), "admin") {
		t.Errorf("scopes after step-up: %+v", st.Authorization)
	}
	og.noTokens(t, as, dir)
	cs.Close()

	// A restart keeps the tokens: connected without a new login.
	og.stop()
	og2 := startOAuthGateway(t, entry, dir)
	og2.waitState(t, StateConnected)
	cs2 := connect(t, og2.base+"/mcp", nil)
	defer cs2.Close()
	if res, err := cs2.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "again"}}); err != nil || res.IsError {
		t.Fatalf("after a restart: %v %+v", err, res)
	}
	og2.noTokens(t, as, dir)
}

func TestOAuthUpstreamExpiredTokenNeedsAuthorization(t *testing.T) {
	t.Parallel()
	as := testenv.StartOAuthServer(t, testenv.OAuthServerOptions{TokenTTL: 2 * time.Second})
	dir := t.TempDir()
	og := startOAuthGateway(t, fmt.Sprintf(`{"url": %q, "oauth": {}, "health_interval": 3600}`, as.MCPURL), dir)
	og.approvePending(t)
	og.waitState(t, StateConnected)
	cs := connect(t, og.base+"/mcp", nil)
	defer cs.Close()
	if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}); err != nil || res.IsError {
		t.Fatalf("echo: %v %+v", err, res)
	}
	// The token expires; there is no refresh token.
	og.waitState(t, StateNeedsAuthorization)
	st, _ := og.status(t)
	if st.Authorization == nil || st.Authorization.State != "needs_authorization" {
		t.Errorf("status: %+v", st)
	}
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}})
	if err == nil || !strings.Contains(err.Error(), `server "up" needs authorization`) || !strings.Contains(err.Error(), "edge-mcp auth login up") || strings.Contains(err.Error(), "unknown tool") {
		t.Fatalf("call after expiry: %v; want an error naming the server and `edge-mcp auth login up`", err)
	}
	metrics := get(t, og.base+"/metrics")
	if !strings.Contains(metrics, `upstream_needs_authorization{server="up"} 1`) {
		waitFor(t, "the needs_authorization metric", func() bool {
			return strings.Contains(get(t, og.base+"/metrics"), `upstream_needs_authorization{server="up"} 1`)
		})
	}
	og.noTokens(t, as, dir)
}

func TestOAuthChallengeWithoutOAuthSection(t *testing.T) {
	t.Parallel()
	as := testenv.StartOAuthServer(t, testenv.OAuthServerOptions{})
	og := startOAuthGateway(t, fmt.Sprintf(`{"url": %q}`, as.MCPURL), t.TempDir())
	waitFor(t, "needs_authorization saying what to configure", func() bool {
		st, _ := og.status(t)
		return st.State == StateNeedsAuthorization && strings.Contains(st.LastError, `add "oauth": {}`) && strings.Contains(st.LastError, "edge-mcp auth login up")
	})
	// Issue #27 item 6: the server answered (401); it is not "unreachable".
	if st, _ := og.status(t); strings.Contains(st.LastError, "unreachable") {
		t.Errorf("a 401 reported as unreachable: %s", st.LastError)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestOAuthLegacySSEUpstream: the same flow over legacy HTTP+SSE, whose
// HTTP client is wrapped with the handler.
func TestOAuthLegacySSEUpstream(t *testing.T) {
	t.Parallel()
	as := testenv.StartOAuthServer(t, testenv.OAuthServerOptions{})
	dir := t.TempDir()
	og := startOAuthGateway(t, fmt.Sprintf(`{"type": "sse", "url": %q, "oauth": {}}`, as.SSEURL), dir)
	og.approvePending(t)
	og.waitState(t, StateConnected)
	cs := connect(t, og.base+"/mcp", nil)
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "over sse"}})
	if err != nil || res.IsError || textOf(res) != "over sse" {
		t.Fatalf("echo over SSE: %v %+v", err, res)
	}
	og.noTokens(t, as, dir)
}

// TestOAuthWebSocketUpstream: a WebSocket upstream behind the bearer
// check (a reverse proxy to a gateway serving /ws): the handshake gets
// 401, the handler authorizes, the handshake is tried again with the token.
func TestOAuthWebSocketUpstream(t *testing.T) {
	t.Parallel()
	as := testenv.StartOAuthServer(t, testenv.OAuthServerOptions{})
	front, _ := startGateway(t, serversJSON(fmt.Sprintf(`"e": {"url": %q}`, testenvEverything(t))), Options{})
	target, err := neturl.Parse(strings.TrimSuffix(front, "/mcp"))
	if err != nil {
		t.Fatal(err)
	}
	wsURL := "ws" + strings.TrimPrefix(as.Mount("/ws", httputil.NewSingleHostReverseProxy(target)), "http")
	dir := t.TempDir()
	og := startOAuthGateway(t, fmt.Sprintf(`{"type": "websocket", "url": %q, "oauth": {}}`, wsURL), dir)
	og.approvePending(t)
	og.waitState(t, StateConnected)
	cs := connect(t, og.base+"/mcp", nil)
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "test_simple_text"})
	if err != nil || res.IsError {
		t.Fatalf("a tool over the protected WebSocket: %v %+v", err, res)
	}
	og.noTokens(t, as, dir)
}

// TestOAuthClientCredentialsUpstream: no person: the first request gets
// 401, the client's own credentials fetch a token, the upstream connects;
// neither the token nor the client secret shows anywhere.
func TestOAuthClientCredentialsUpstream(t *testing.T) {
	const secret = "cc-secret-0123456789"
	as := testenv.StartOAuthServer(t, testenv.OAuthServerOptions{Clients: map[string]string{"svc": secret}})
	dir := t.TempDir()
	t.Setenv("EDGE_MCP_TEST_CC_SECRET", secret)
	og := startOAuthGateway(t, fmt.Sprintf(`{"url": %q, "oauth": {"grant": "client_credentials", "clientId": "svc", "clientSecret": "${EDGE_MCP_TEST_CC_SECRET}"}}`, as.MCPURL), dir)
	og.waitState(t, StateConnected)
	cs := connect(t, og.base+"/mcp", nil)
	defer cs.Close()
	if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "cc"}}); err != nil || res.IsError {
		t.Fatalf("echo: %v %+v", err, res)
	}
	if as.Grants("client_credentials") == 0 {
		t.Fatal("no client credentials grant")
	}
	_, status := og.status(t)
	for where, text := range map[string]string{"log": og.logs.String(), "/status": status} {
		if strings.Contains(text, secret) {
			t.Errorf("the client secret appears in the %s", where)
		}
		for _, tok := range as.Issued() {
			if strings.Contains(text, tok) {
				t.Errorf("a token appears in the %s", where)
			}
		}
	}
}

// TestOAuthRevokedTokenReauthorizedDuringACall: the authorization server
// forgets the tokens; the next call meets a 401, the server shows
// needs_authorization with a pending URL, and the call completes once an
// operator approves within oauth.pending_wait.
func TestOAuthRevokedTokenReauthorizedDuringACall(t *testing.T) {
	t.Parallel()
	as := testenv.StartOAuthServer(t, testenv.OAuthServerOptions{Refresh: true})
	dir := t.TempDir()
	og := startOAuthGateway(t, fmt.Sprintf(`{"url": %q, "oauth": {}, "health_interval": 3600}`, as.MCPURL), dir)
	og.approvePending(t)
	og.waitState(t, StateConnected)
	cs := connect(t, og.base+"/mcp", nil)
	defer cs.Close()
	as.Revoke()
	done := make(chan struct{})
	go func() {
		defer close(done)
		waitFor(t, "needs_authorization after the revocation", func() bool {
			st, _ := og.status(t)
			return st.State == StateNeedsAuthorization
		})
		og.approvePending(t)
	}()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "re-authorized"}})
	<-done
	if err != nil || res.IsError || textOf(res) != "re-authorized" {
		t.Fatalf("call after the revocation: %v %+v", err, res)
	}
	og.waitState(t, StateConnected)
}

// serveOAuthGateway starts a gateway of config js on ln (its address is
// base), with its log captured, and stops it when the test ends.
func serveOAuthGateway(t *testing.T, ln net.Listener, base, audit, js string) *oauthGateway {
	t.Helper()
	cfg, err := config.Parse("test.json", []byte(js))
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncLog{}
	g, err := New(cfg, Options{Logger: slog.New(slog.NewTextHandler(io.MultiWriter(logs, tWriter{t}), &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.Start(ctx)
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: g.Handler()}}
	srv.Start()
	og := &oauthGateway{base: base, g: g, logs: logs, audit: audit}
	var once sync.Once
	og.stop = func() {
		once.Do(func() {
			srv.CloseClientConnections()
			srv.Close()
			g.Close()
			cancel()
		})
	}
	t.Cleanup(og.stop)
	return og
}
