package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/testenv"
)

// browse opens an authorization URL as a person's browser would: the
// authorization server approves at once and redirects to the gateway's
// callback, which must report success.
func browse(ctx context.Context, u string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "is authorized") {
		return fmt.Errorf("callback: HTTP %d %s", resp.StatusCode, body)
	}
	return nil
}

// connectVersion opens a go-sdk client session speaking version, sending
// header on every request.
func connectVersion(t *testing.T, url, version string, header http.Header, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "edge-mcp-test", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hc := &http.Client{Transport: headerTransport{header, http.DefaultClient.Transport}}
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connecting with %s: %v", version, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// startPerClientGateway starts a gateway whose only server is as's MCP
// server with "identity": "per_client", and API-key identities named
// names (their keys returned by name); the operator authorizes the
// catalogue's link and the gateway is connected when it returns.
func startPerClientGateway(t *testing.T, as *testenv.OAuthServer, names ...string) (*oauthGateway, map[string]string) {
	t.Helper()
	keys := make(map[string]string, len(names))
	var entries []string
	for _, n := range names {
		keys[n] = n + "-key-0123456789abcdef"
		entries = append(entries, fmt.Sprintf(`{"name": %q, "key": %q}`, n, keys[n]))
	}
	og := startOAuthGatewayWith(t, fmt.Sprintf(`{"url": %q, "oauth": {}, "identity": "per_client"}`, as.MCPURL), t.TempDir(),
		fmt.Sprintf(`"auth": {"mode": "api_key", "api_keys": [%s]},`, strings.Join(entries, ", ")))
	// /status is behind the client authentication.
	og.statusKey = keys[names[0]]
	og.approvePending(t) // the operator authorizes the catalogue's link
	og.waitState(t, StateConnected)
	return og, keys
}

// TestOAuthPerClientIdentity: with "identity": "per_client", two API-key
// identities call the same upstream at once. Each is asked, on its first
// call, to authorize: alice (2025-11-25) by a URL-mode elicitation while
// her call waits, bob (2026-07-28) by an input_required result his client
// retries. Each then calls with a token of its own, never the other's nor
// the operator's (the catalogue link's), and never its API key.
func TestOAuthPerClientIdentity(t *testing.T) {
	t.Parallel()
	as := testenv.StartOAuthServer(t, testenv.OAuthServerOptions{})
	og, keys := startPerClientGateway(t, as, "alice", "bob")
	operator := testenv.TokenFingerprint(as.Issued()[0])

	versions := map[string]string{"alice": "2025-11-25", "bob": "2026-07-28"}
	var mu sync.Mutex
	seen := map[string][]string{}
	asked := map[string]*atomic.Int32{"alice": {}, "bob": {}}
	var wg sync.WaitGroup
	for name, version := range versions {
		opts := &mcp.ClientOptions{
			Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
			ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked[name].Add(1)
				if req.Params.Mode != "url" || !strings.Contains(req.Params.Message, `"up"`) {
					return nil, fmt.Errorf("unexpected elicitation %+v", req.Params)
				}
				if err := browse(ctx, req.Params.URL); err != nil {
					return nil, err
				}
				return &mcp.ElicitResult{Action: "accept"}, nil
			},
		}
		cs := connectVersion(t, og.base+"/mcp", version, bearer(keys[name]), opts)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2 {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
				cancel()
				if err != nil || res.IsError {
					t.Errorf("%s: whoami: %v %s", name, err, textOf(res))
					return
				}
				mu.Lock()
				seen[name] = append(seen[name], textOf(res))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	a, b := seen["alice"], seen["bob"]
	if len(a) != 2 || len(b) != 2 || a[0] != a[1] || b[0] != b[1] {
		t.Fatalf("each identity should keep its token: alice %v, bob %v", a, b)
	}
	for _, fp := range []string{a[0], b[0]} {
		if fp == operator || fp == testenv.TokenFingerprint(keys["alice"]) || fp == testenv.TokenFingerprint(keys["bob"]) {
			t.Errorf("a call carried the operator's token or an API key (%s)", fp)
		}
	}
	if a[0] == b[0] {
		t.Errorf("alice and bob called with the same upstream token")
	}
	for name, n := range asked {
		if n.Load() != 1 {
			t.Errorf("%s was asked %d times to authorize, want once", name, n.Load())
		}
	}
	ids := map[string]string{}
	for _, st := range og.g.oauth.Status() {
		ids[st.Identity] = st.State
	}
	if ids["alice"] != "authorized" || ids["bob"] != "authorized" || ids[""] != "authorized" {
		t.Errorf("oauth status by identity = %v", ids)
	}

	// Logging one identity out forgets its tokens only.
	if err := (adminOps{og.g}).OAuthLogout("up", "alice"); err != nil {
		t.Fatal(err)
	}
	for _, st := range og.g.oauth.Status() {
		ids[st.Identity] = st.State
	}
	if ids["alice"] != "needs_authorization" || ids["bob"] != "authorized" || ids[""] != "authorized" {
		t.Errorf("oauth status by identity after alice's logout = %v", ids)
	}
}

// TestOAuthPerClientIdentityWithoutElicitation: a client that cannot be
// asked gets a tool error carrying its authorization URL; once its person
// has opened it, the next call goes through with its own token.
func TestOAuthPerClientIdentityWithoutElicitation(t *testing.T) {
	t.Parallel()
	as := testenv.StartOAuthServer(t, testenv.OAuthServerOptions{})
	og, keys := startPerClientGateway(t, as, "carol")
	key := keys["carol"]
	operator := testenv.TokenFingerprint(as.Issued()[0])
	cs := connectVersion(t, og.base+"/mcp", "2025-11-25", bearer(key), nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "whoami"})
	if err != nil || !res.IsError {
		t.Fatalf("first call: %v %s, want a tool error", err, textOf(res))
	}
	text := textOf(res)
	i := strings.Index(text, as.URL+"/authorize?")
	if i < 0 {
		t.Fatalf("the error carries no authorization URL: %s", text)
	}
	u := strings.Fields(text[i:])[0]
	u = strings.TrimRight(u, ",")
	if err := browse(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "whoami"})
	if err != nil || res.IsError {
		t.Fatalf("call after authorizing: %v %s", err, textOf(res))
	}
	if fp := textOf(res); fp == operator || fp == testenv.TokenFingerprint(key) {
		t.Errorf("the call carried the operator's token or the API key")
	}
}

// TestOAuthPerClientIdentityOtherRequests: a request other than tools/call
// (here resources/read) of an identity without a token is answered at
// once with an error carrying its authorization URL (the session is not
// held while its link cannot be dialed); after the person opened it, the
// read goes through with the identity's own token.
func TestOAuthPerClientIdentityOtherRequests(t *testing.T) {
	t.Parallel()
	as := testenv.StartOAuthServer(t, testenv.OAuthServerOptions{})
	og, keys := startPerClientGateway(t, as, "dave")
	key := keys["dave"]
	operator := testenv.TokenFingerprint(as.Issued()[0])
	cs := connectVersion(t, og.base+"/mcp", "2025-11-25", bearer(key), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // well below oauth.pending_wait
	defer cancel()
	_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://whoami"})
	if err == nil || !strings.Contains(err.Error(), as.URL+"/authorize?") {
		t.Fatalf("resources/read of an identity without a token: %v, want an error with the URL", err)
	}
	msg := err.Error()
	u := strings.Fields(msg[strings.Index(msg, as.URL+"/authorize?"):])[0]
	if err := browse(ctx, u); err != nil {
		t.Fatal(err)
	}
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://whoami"})
	if err != nil || len(res.Contents) != 1 {
		t.Fatalf("resources/read after authorizing: %v", err)
	}
	if fp := res.Contents[0].Text; fp == operator || fp == testenv.TokenFingerprint(key) {
		t.Errorf("the read carried the operator's token or the API key")
	}
}

// TestOAuthPerClientAuthorizeOffTheReadLoop: a resources/read of an
// identity without a token starts its authorization, which takes a
// discovery round trip (here a slow authorization server, 2 s); the
// session's other requests meanwhile are answered at once, not after it.
func TestOAuthPerClientAuthorizeOffTheReadLoop(t *testing.T) {
	as := testenv.StartOAuthServer(t, testenv.OAuthServerOptions{})
	og, keys := startPerClientGateway(t, as, "erin")
	key := keys["erin"]
	cs := connectVersion(t, og.base+"/mcp", "2025-11-25", bearer(key), nil)
	const slow = 2 * time.Second
	as.SetMetadataDelay(slow)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	readDone := make(chan error, 1)
	go func() {
		_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://whoami"})
		readDone <- err
	}()
	time.Sleep(200 * time.Millisecond) // the read is in its discovery
	start := time.Now()
	if err := cs.Ping(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > slow/2 {
		t.Errorf("a ping during another request's authorization took %v: it waited for the discovery", d)
	}
	if err := <-readDone; err == nil || !strings.Contains(err.Error(), as.URL+"/authorize?") {
		t.Fatalf("resources/read: %v, want an error with the authorization URL", err)
	}
}
