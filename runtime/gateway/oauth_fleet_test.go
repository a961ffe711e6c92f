package gateway

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edge-mcp/edge-mcp/internal/natstest"
	"github.com/edge-mcp/edge-mcp/internal/testenv"
	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/runtime/oauth"
)

// fleetOAuthKey is the oauth.key every replica of the test fleet shares.
var fleetOAuthKey = bytes.Repeat([]byte{0x5a}, 32)

// startOAuthReplica is startOAuthGateway as a replica of the fleet
// "oafleet" on natsURL, with the shared oauth.key.
func startOAuthReplica(t *testing.T, entry, natsURL, replica string) *oauthGateway {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	js := fmt.Sprintf(`{"mcpServers": {"up": %s}, "admin": {"state_dir": %q}, "audit": {"path": %q},
		"oauth": {"pending_wait": 5, "redirect_url": %q, "key": %q},
		"cluster": {"allow_anonymous_nats": true, "nats_url": %q, "name": "oafleet", "secret": "fleet-secret-fleet-secret-fleet-secret", "replica": %q}}`,
		entry, t.TempDir(), audit, base+"/oauth/callback", hex.EncodeToString(fleetOAuthKey), natsURL, replica)
	return serveOAuthGateway(t, ln, base, audit, js)
}

// pendingURL waits for the authorization URL of og's shared login, as
// the admin API and `edge-mcp auth status` show it (/status does not).
func (og *oauthGateway) pendingURL(t *testing.T) string {
	t.Helper()
	var pending string
	waitFor(t, "a pending authorization in the admin status", func() bool {
		for _, st := range og.g.oauth.Status() {
			if st.Server == "up" && st.Identity == "" && st.PendingURL != "" {
				pending = st.PendingURL
			}
		}
		return pending != ""
	})
	return pending
}

// approveVia plays the operator on the authorization URL of one replica
// whose redirect the load balancer sends to another (base): it returns
// the callback page's status and text.
func approveVia(t *testing.T, pending, base string) (int, string) {
	t.Helper()
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(pending)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := neturl.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusFound && resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("authorize: HTTP %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	callback := base + loc.Path + "?" + loc.RawQuery
	resp, err = http.Get(callback)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// fleetTokenBucket opens the test fleet's token bucket directly, as any
// NATS client of the fleet could.
func fleetTokenBucket(t *testing.T, natsURL string) jetstream.KeyValue {
	t.Helper()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, "oafleet_oauth")
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// storedRecord unseals the fleet's record of "up" with the keys of
// replica og.
func storedRecord(t *testing.T, og *oauthGateway, kv jetstream.KeyValue) *oauth.Record {
	t.Helper()
	rec, err := readStoredRecord(og, kv)
	if err != nil {
		t.Fatalf("the fleet holds no token of up: %v", err)
	}
	return rec
}

// upKey is the bucket key of the fleet's record of "up".
func upKey(og *oauthGateway) string {
	return oauth.NewNATSSeal(og.g.fleet.Node(), fleetOAuthKey).Key("up", "")
}

func readStoredRecord(og *oauthGateway, kv jetstream.KeyValue) (*oauth.Record, error) {
	fs := oauth.NewNATSSeal(og.g.fleet.Node(), fleetOAuthKey)
	key := fs.Key("up", "")
	e, err := kv.Get(context.Background(), key)
	if err != nil {
		return nil, err
	}
	body, err := fs.Open(key, e.Value())
	if err != nil {
		return nil, err
	}
	var fr struct {
		Server   string `json:"s"`
		Identity string `json:"i"`
		Sealed   []byte `json:"r"`
	}
	if err := json.Unmarshal(body, &fr); err != nil || fr.Server != "up" || fr.Identity != "" {
		return nil, fmt.Errorf("record %+v: %v", fr, err)
	}
	s, _ := oauth.NewSealer(fleetOAuthKey)
	return s.Open("up", "", fr.Sealed)
}

// noFleetTokens fails when a token the authorization server issued shows
// in the raw values of the fleet's bucket, the replicas' logs or /status.
func noFleetTokens(t *testing.T, as *testenv.OAuthServer, kv jetstream.KeyValue, reps ...*oauthGateway) {
	t.Helper()
	keys, err := kv.Keys(context.Background())
	if err != nil || len(keys) == 0 {
		t.Fatalf("no keys in the token bucket: %v", err)
	}
	var raw []byte
	for _, k := range keys {
		if k == oauth.KVKey("up", "") {
			t.Errorf("the key %q names the server and identity (a subject anyone on NATS sees)", k)
		}
		e, err := kv.Get(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		raw = append(append(raw, k...), e.Value()...)
	}
	texts := map[string]string{"NATS": string(raw)}
	for i, og := range reps {
		_, status := og.status(t)
		texts[fmt.Sprintf("log of replica %d", i)] = og.logs.String()
		texts[fmt.Sprintf("/status of replica %d", i)] = status
	}
	tokens := as.Issued()
	if len(tokens) == 0 {
		t.Fatal("no token was issued")
	}
	for _, tok := range tokens {
		for where, text := range texts {
			if strings.Contains(text, tok) {
				t.Errorf("token %s… appears in %s", tok[:6], where)
			}
		}
	}
}

func echoVia(t *testing.T, og *oauthGateway, text string) {
	t.Helper()
	cs := connect(t, og.base+"/mcp", nil)
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
	if err != nil || res.IsError || textOf(res) != text {
		t.Fatalf("echo through %s: %v %+v", og.base, err, res)
	}
}

// TestOAuthFleetLoginCallbackLogout: a login started on replica A is
// completed by a redirect that reaches replica B (forwarded to A, which
// holds the PKCE verifier); B then calls the server with no login of its
// own; a logout on B makes A need authorization. No token shows in NATS,
// the logs or /status.
func TestOAuthFleetLoginCallbackLogout(t *testing.T) {
	t.Parallel()
	as := testenv.StartOAuthServer(t, testenv.OAuthServerOptions{Refresh: true})
	srv := natstest.Start(t)
	entry := fmt.Sprintf(`{"url": %q, "oauth": {}}`, as.MCPURL)
	a := startOAuthReplica(t, entry, srv.ClientURL(), "a")
	b := startOAuthReplica(t, entry, srv.ClientURL(), "b")
	a.waitState(t, StateNeedsAuthorization)
	b.waitState(t, StateNeedsAuthorization)

	code, page := approveVia(t, a.pendingURL(t), b.base)
	if code != http.StatusOK || !strings.Contains(page, "is authorized") {
		t.Fatalf("callback on B for A's login: HTTP %d %s", code, page)
	}
	a.waitState(t, StateConnected)
	// B never logged in: it takes the fleet's token (its watch) and connects.
	b.waitState(t, StateConnected)
	echoVia(t, b, "through b")
	echoVia(t, a, "through a")
	if st, _ := b.status(t); st.Authorization == nil || st.Authorization.PendingURL != "" || st.Authorization.State != oauth.StateAuthorized {
		t.Errorf("B after the fleet's login: %+v", st.Authorization)
	}

	kv := fleetTokenBucket(t, srv.ClientURL())
	noFleetTokens(t, as, kv, a, b)

	if err := b.g.oauth.Logout("up", ""); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "A to need authorization after the logout on B", func() bool {
		st, _ := a.status(t)
		return st.Authorization != nil && st.Authorization.State == oauth.StateNeedsAuthorization
	})
	if _, err := kv.Get(context.Background(), upKey(b)); err == nil {
		t.Error("the fleet still holds the token after logout")
	}
}

// TestOAuthFleetCallbackSingleUse: a redirect whose state no replica owns
// (replayed, or forged) is refused by every replica, and a redirect used
// once through B cannot be used again through A.
func TestOAuthFleetCallbackSingleUse(t *testing.T) {
	t.Parallel()
	as := testenv.StartOAuthServer(t, testenv.OAuthServerOptions{})
	srv := natstest.Start(t)
	entry := fmt.Sprintf(`{"url": %q, "oauth": {}}`, as.MCPURL)
	a := startOAuthReplica(t, entry, srv.ClientURL(), "a")
	b := startOAuthReplica(t, entry, srv.ClientURL(), "b")
	pending := a.pendingURL(t)
	for _, forged := range []string{"forged", "a.b.>", "*"} {
		resp, err := http.Get(b.base + "/oauth/callback?code=x&state=" + neturl.QueryEscape(forged))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("forged state %q: HTTP %d", forged, resp.StatusCode)
		}
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(pending)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := neturl.Parse(resp.Header.Get("Location"))
	for i, base := range []string{b.base, a.base, b.base} {
		resp, err := http.Get(base + loc.Path + "?" + loc.RawQuery)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := http.StatusBadRequest
		if i == 0 {
			want = http.StatusOK
		}
		if resp.StatusCode != want {
			t.Errorf("redirect use %d: HTTP %d %s, want %d", i+1, resp.StatusCode, body, want)
		}
	}
}

// TestOAuthFleetRefreshRotation: access tokens live 1 s and every refresh
// rotates the refresh token (the spent one is refused). Each round lets
// the token expire, then calls through both replicas at the same moment:
// both refresh with the same refresh token, one wins, the other re-reads
// the fleet's store and uses the winner's token. No call fails, and the
// fleet ends up holding a refresh token the server still honours.
func TestOAuthFleetRefreshRotation(t *testing.T) {
	t.Parallel()
	as := testenv.StartOAuthServer(t, testenv.OAuthServerOptions{Refresh: true, TokenTTL: time.Second})
	srv := natstest.Start(t)
	entry := fmt.Sprintf(`{"url": %q, "oauth": {}, "health_interval": 3600}`, as.MCPURL)
	a := startOAuthReplica(t, entry, srv.ClientURL(), "a")
	b := startOAuthReplica(t, entry, srv.ClientURL(), "b")
	if code, page := approveVia(t, a.pendingURL(t), a.base); code != http.StatusOK {
		t.Fatalf("login: HTTP %d %s", code, page)
	}
	a.waitState(t, StateConnected)
	b.waitState(t, StateConnected)
	sessions := map[*oauthGateway]*mcp.ClientSession{}
	for _, og := range []*oauthGateway{a, b} {
		sessions[og] = connect(t, og.base+"/mcp", nil)
		defer sessions[og].Close()
	}
	for round := range 4 {
		time.Sleep(1200 * time.Millisecond) // the token expired on both
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for og, cs := range sessions {
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "r"}})
					if err != nil || res.IsError {
						errs <- fmt.Errorf("round %d through %s: %v %+v", round, og.base, err, res)
					}
				}()
			}
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
	if n := as.Grants("refresh_token"); n < 4 {
		t.Errorf("%d refreshes; the test wants the replicas to refresh", n)
	}
	kv := fleetTokenBucket(t, srv.ClientURL())
	rec := storedRecord(t, a, kv)
	if !as.RefreshValid(rec.Token.RefreshToken) {
		t.Error("the fleet holds a spent refresh token: a newer one was lost")
	}
	noFleetTokens(t, as, kv, a, b)
}

// TestOAuthFleetNeedsSharedKey: a fleet replica with an OAuth server and
// no oauth.key refuses to start, naming the key.
func TestOAuthFleetNeedsSharedKey(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse("test.json", []byte(`{"mcpServers": {"up": {"url": "http://127.0.0.1:1/mcp", "oauth": {}}},
		"cluster": {"allow_anonymous_nats": true, "nats_url": "nats://127.0.0.1:1", "secret": "fleet-secret-fleet-secret-fleet-secret"}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(cfg, Options{})
	if err == nil || !strings.Contains(err.Error(), "oauth.key") || !strings.Contains(err.Error(), "test.json") {
		t.Fatalf("New: %v; want a config error naming oauth.key", err)
	}

	// Started without OAuth servers, a reload adding one is refused too.
	plain, err := config.Parse("test.json", []byte(`{"mcpServers": {},
		"cluster": {"allow_anonymous_nats": true, "nats_url": "nats://127.0.0.1:1", "secret": "fleet-secret-fleet-secret-fleet-secret"}}`))
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(plain, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := g.Reload(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "oauth.key") {
		t.Fatalf("reload: %v; want a config error naming oauth.key", err)
	}
}

// TestOAuthFleetNATSDown: with NATS down a replica keeps calling with the
// token it holds, refreshing it; the rotated refresh token reaches the
// fleet's bucket when NATS is back.
func TestOAuthFleetNATSDown(t *testing.T) {
	t.Parallel()
	as := testenv.StartOAuthServer(t, testenv.OAuthServerOptions{Refresh: true, TokenTTL: time.Second})
	srv := natstest.Start(t)
	entry := fmt.Sprintf(`{"url": %q, "oauth": {}, "health_interval": 3600}`, as.MCPURL)
	a := startOAuthReplica(t, entry, srv.ClientURL(), "a")
	b := startOAuthReplica(t, entry, srv.ClientURL(), "b")
	if code, page := approveVia(t, a.pendingURL(t), b.base); code != http.StatusOK {
		t.Fatalf("login: HTTP %d %s", code, page)
	}
	b.waitState(t, StateConnected)
	cs := connect(t, b.base+"/mcp", nil)
	defer cs.Close()
	// Only B calls while NATS is down: two replicas refreshing a rotating
	// refresh token without NATS cannot agree (README), one would lose it.
	a.stop()

	srv.Shutdown()
	srv.WaitForShutdown()
	for i := range 3 {
		time.Sleep(1100 * time.Millisecond) // expired: the next call refreshes
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "down"}})
		if err != nil || res.IsError {
			t.Fatalf("call %d with NATS down: %v %+v", i, err, res)
		}
	}
	srv.Restart(t)
	kv := fleetTokenBucket(t, srv.ClientURL())
	waitFor(t, "the refresh made while NATS was down to reach the bucket", func() bool {
		rec, err := readStoredRecord(b, kv)
		return err == nil && as.RefreshValid(rec.Token.RefreshToken)
	})
	noFleetTokens(t, as, kv, b)
}
