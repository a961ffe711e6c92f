package oauth

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edge-mcp/edge-mcp/internal/testenv"
	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// lockedBuffer collects log output from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type rig struct {
	m     *Manager
	as    *testenv.OAuthServer
	dir   string
	key   []byte
	logs  *lockedBuffer
	store *FileStore
}

// newRig starts an authorization server and a Manager whose callback is
// served on a loopback listener of its own.
func newRig(t *testing.T, opts testenv.OAuthServerOptions, o *config.OAuth, dir string, key []byte) *rig {
	t.Helper()
	r := &rig{as: testenv.StartOAuthServer(t, opts), dir: dir, key: key, logs: &lockedBuffer{}}
	if r.key == nil {
		r.key = bytes.Repeat([]byte{7}, 32)
	}
	sealer, err := NewSealer(r.key)
	if err != nil {
		t.Fatal(err)
	}
	if r.store, err = NewFileStore(dir, sealer); err != nil {
		t.Fatal(err)
	}
	cb := httptest.NewServer(nil)
	t.Cleanup(cb.Close)
	r.m = New(Options{Logger: slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Store: r.store, PendingWait: 5 * time.Second, RedirectURL: cb.URL + "/oauth/callback"})
	cb.Config.Handler = r.m.CallbackHandler()
	t.Cleanup(r.m.Close)
	if o == nil {
		o = &config.OAuth{Grant: "authorization_code", DynamicRegistration: true}
	}
	r.m.Configure([]config.Server{{Name: "up", Type: "streamable-http", URL: r.as.MCPURL, Active: true, OAuth: o}})
	return r
}

// approve plays the person: it opens the authorization URL and follows
// the redirects to the callback, returning the callback's status.
func approve(t *testing.T, pendingURL string) (int, string) {
	t.Helper()
	resp, err := http.Get(pendingURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func (r *rig) login(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := r.m.Login(ctx, "up", "")
	if err != nil || st.PendingURL == "" {
		t.Fatalf("Login = %+v, %v; want a pending URL", st, err)
	}
	if code, body := approve(t, st.PendingURL); code != http.StatusOK {
		t.Fatalf("callback answered %d: %s", code, body)
	}
	if err := r.m.Handler("up", "").Await(ctx); err != nil {
		t.Fatal(err)
	}
}

// call sends an MCP ping to the protected server with the handler's token.
func (r *rig) call(t *testing.T) int {
	t.Helper()
	ts, _ := r.m.Handler("up", "").TokenSource(context.Background())
	req, _ := http.NewRequest(http.MethodPost, r.as.MCPURL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if ts != nil {
		tok, err := ts.Token()
		if err == nil {
			tok.SetAuthHeader(req)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestLoginStoresSealedTokensThatSurviveARestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := newRig(t, testenv.OAuthServerOptions{Refresh: true}, nil, dir, nil)
	if got := r.call(t); got != http.StatusUnauthorized {
		t.Fatalf("before login: HTTP %d, want 401", got)
	}
	r.login(t)
	if got := r.call(t); got != http.StatusOK {
		t.Fatalf("after login: HTTP %d, want 200", got)
	}
	st := r.m.Handler("up", "").Status()
	if st.State != StateAuthorized || !st.Refreshable || st.ValidUntil.IsZero() || st.PendingURL != "" {
		t.Errorf("status after login = %+v", st)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.tok"))
	if len(files) != 1 {
		t.Fatalf("token files: %v", files)
	}
	data, _ := os.ReadFile(files[0])
	for _, tok := range r.as.Issued() {
		if bytes.Contains(data, []byte(tok)) || strings.Contains(r.logs.String(), tok) {
			t.Errorf("token %s… in plaintext on disk or in the log", tok[:6])
		}
	}
	// A restart: a new manager over the same folder and key, no login.
	sealer, _ := NewSealer(r.key)
	store, _ := NewFileStore(dir, sealer)
	m2 := New(Options{Store: store})
	defer m2.Close()
	m2.Configure([]config.Server{{Name: "up", Type: "streamable-http", URL: r.as.MCPURL, OAuth: &config.OAuth{Grant: "authorization_code", DynamicRegistration: true}}})
	r.m = m2
	if !m2.Handler("up", "").Ready() {
		t.Fatal("after a restart the stored token is not used")
	}
	if got := r.call(t); got != http.StatusOK {
		t.Fatalf("after a restart: HTTP %d, want 200", got)
	}
	// Another key does not open it; nor does another server's name.
	other, _ := NewSealer(bytes.Repeat([]byte{8}, 32))
	if _, err := other.Open("up", "", data); err == nil {
		t.Error("a record opened with another key")
	}
	if _, err := sealer.Open("other", "", data); err == nil {
		t.Error("a record opened under another server's name")
	}
}

func TestRefreshStoresTheRotatedRefreshToken(t *testing.T) {
	t.Parallel()
	// A 20 s token is inside the 30 s early-refresh margin: every use
	// refreshes it, so no test waits for a clock.
	r := newRig(t, testenv.OAuthServerOptions{Refresh: true, TokenTTL: 20 * time.Second}, nil, t.TempDir(), nil)
	r.login(t)
	before := r.as.Grants("refresh_token")
	if got := r.call(t); got != http.StatusOK {
		t.Fatalf("HTTP %d, want 200", got)
	}
	if r.as.Grants("refresh_token") <= before {
		t.Fatal("the token was not refreshed before its expiry")
	}
	rec, err := r.store.Load("up", "")
	if err != nil || rec == nil {
		t.Fatal(rec, err)
	}
	if !r.as.RefreshValid(rec.Token.RefreshToken) {
		t.Error("the stored refresh token is not the rotated one")
	}
}

func TestExpiredWithoutRefreshNeedsAuthorization(t *testing.T) {
	t.Parallel()
	r := newRig(t, testenv.OAuthServerOptions{TokenTTL: time.Second}, nil, t.TempDir(), nil)
	r.login(t)
	h := r.m.Handler("up", "")
	deadline := time.Now().Add(10 * time.Second)
	for h.Status().State != StateNeedsAuthorization {
		if time.Now().After(deadline) {
			t.Fatalf("status after expiry: %+v", h.Status())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := r.call(t); got != http.StatusUnauthorized {
		t.Errorf("expired token: HTTP %d, want 401", got)
	}
	if h.Ready() {
		t.Error("Ready with an expired token and no refresh token")
	}
}

func TestCallbackRefusesTamperedStateAndWrongIssuer(t *testing.T) {
	t.Parallel()
	t.Run("tampered state", func(t *testing.T) {
		r := newRig(t, testenv.OAuthServerOptions{}, nil, t.TempDir(), nil)
		st, err := r.m.Login(context.Background(), "up", "")
		if err != nil {
			t.Fatal(err)
		}
		// The authorization server's redirect, with the state changed.
		resp, err := http.Get(strings.Replace(r.m.opts.RedirectURL+"?code=x&state=forged", "forged", "forged-"+st.PendingURL[len(st.PendingURL)-4:], 1))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("forged state: HTTP %d, want 400", resp.StatusCode)
		}
		if r.m.Handler("up", "").Status().PendingURL == "" {
			t.Fatal("a forged callback cancelled the real authorization")
		}
		if code, body := approve(t, st.PendingURL); code != http.StatusOK {
			t.Fatalf("the real authorization then failed: %d %s", code, body)
		}
	})
	t.Run("wrong iss", func(t *testing.T) {
		r := newRig(t, testenv.OAuthServerOptions{WrongIss: true}, nil, t.TempDir(), nil)
		st, err := r.m.Login(context.Background(), "up", "")
		if err != nil {
			t.Fatal(err)
		}
		code, body := approve(t, st.PendingURL)
		if code != http.StatusBadRequest || !strings.Contains(body, "issuer") {
			t.Fatalf("wrong iss: HTTP %d %s, want 400 naming the issuer", code, body)
		}
		if rec, _ := r.store.Load("up", ""); rec != nil {
			t.Error("a token was stored despite the wrong issuer")
		}
		if st := r.m.Handler("up", "").Status(); st.State != StateNeedsAuthorization || !strings.Contains(st.LastError, "issuer") {
			t.Errorf("status = %+v", st)
		}
	})
}

func TestPreregisteredClientAndClientCredentials(t *testing.T) {
	t.Parallel()
	t.Run("pre-registered, loopback callbackPort", func(t *testing.T) {
		port := testenv.FreePort(t)
		r := newRig(t, testenv.OAuthServerOptions{Clients: map[string]string{"gw": "s3cret"}},
			&config.OAuth{Grant: "authorization_code", ClientID: "gw", ClientSecret: "s3cret", CallbackPort: port}, t.TempDir(), nil)
		st, err := r.m.Login(context.Background(), "up", "")
		if err != nil || !strings.Contains(st.PendingURL, "client_id=gw") {
			t.Fatalf("Login = %+v, %v", st, err)
		}
		if code, body := approve(t, st.PendingURL); code != http.StatusOK {
			t.Fatalf("callback on the loopback port: %d %s", code, body)
		}
		if got := r.call(t); got != http.StatusOK {
			t.Fatalf("HTTP %d, want 200", got)
		}
	})
	t.Run("client credentials", func(t *testing.T) {
		r := newRig(t, testenv.OAuthServerOptions{Clients: map[string]string{"svc": "s3cret"}},
			&config.OAuth{Grant: "client_credentials", ClientID: "svc", ClientSecret: "s3cret"}, t.TempDir(), nil)
		if !r.m.Handler("up", "").Ready() {
			t.Fatal("a client-credentials server needs no person")
		}
		st, err := r.m.Login(context.Background(), "up", "")
		if err != nil || st.State != StateAuthorized || st.PendingURL != "" {
			t.Fatalf("Login = %+v, %v", st, err)
		}
		if got := r.call(t); got != http.StatusOK {
			t.Fatalf("HTTP %d, want 200", got)
		}
	})
}
