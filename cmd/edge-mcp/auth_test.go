package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edge-mcp/edge-mcp/internal/testenv"
)

// approver is the operator in front of `edge-mcp auth login`: it reads
// what the command prints and, when the authorization URL appears, opens
// it (the test authorization server approves at once and redirects to the
// callback).
type approver struct {
	t      *testing.T
	mu     sync.Mutex
	out    strings.Builder
	opened bool
	result chan int
}

var authURL = regexp.MustCompile(`http://\S+/authorize\?\S+`)

func (a *approver) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.out.Write(p)
	if u := authURL.FindString(a.out.String()); u != "" && !a.opened {
		a.opened = true
		go func() {
			resp, err := http.Get(u)
			if err != nil {
				a.result <- 0
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			a.result <- resp.StatusCode
		}()
	}
	return len(p), nil
}

func (a *approver) String() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.out.String()
}

func login(t *testing.T, args ...string) string {
	t.Helper()
	a := &approver{t: t, result: make(chan int, 1)}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := run(ctx, append([]string{"auth", "login"}, args...), a, io.Discard)
	if err != nil {
		t.Fatalf("auth login: %v\n%s", err, a)
	}
	a.mu.Lock()
	opened := a.opened
	a.mu.Unlock()
	if !opened {
		t.Fatalf("auth login printed no authorization URL:\n%s", a)
	}
	select {
	case code := <-a.result:
		if code != http.StatusOK {
			t.Fatalf("the callback answered %d", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the callback did not answer")
	}
	return a.String()
}

func writeAuthConfig(t *testing.T, as *testenv.OAuthServer, state string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gw.json")
	js := fmt.Sprintf(`{"mcpServers": {"up": {"url": %q, "oauth": {}}}, "admin": {"state_dir": %q}}`, as.MCPURL, state)
	if err := os.WriteFile(path, []byte(js), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestAuthCommandsWithoutGateway: login on the token store with a loopback
// redirect, status, then a gateway started afterwards connects with the
// stored token; logout forgets it.
func TestAuthCommandsWithoutGateway(t *testing.T) {
	t.Parallel()
	as := testenv.StartOAuthServer(t, testenv.OAuthServerOptions{Refresh: true})
	state := t.TempDir()
	cfg := writeAuthConfig(t, as, state)
	noAdmin := []string{"--config", cfg, "--admin", "http://127.0.0.1:1", "--no-browser"}
	out := login(t, append([]string{"up"}, noAdmin...)...)
	if !strings.Contains(out, `server "up" is authorized`) {
		t.Fatalf("login output:\n%s", out)
	}
	out, err := runCLI(t, "auth", "status", "--config", cfg, "--admin", "http://127.0.0.1:1")
	if err != nil || !regexp.MustCompile(`up\s+\(shared\)\s+authorization_code\s+authorized\s+\S+\s+true`).MatchString(out) {
		t.Fatalf("auth status: %v\n%s", err, out)
	}
	for _, tok := range as.Issued() {
		if strings.Contains(out, tok) {
			t.Error("auth status shows a token")
		}
	}

	url := startServe(t, "--config", cfg, "--listen", "127.0.0.1:0", "--admin", "off")
	base := strings.TrimSuffix(url, "/mcp")
	waitUntil(t, "the gateway to connect with the stored token", func() bool {
		return serverState(t, base) == "connected"
	})

	if out, err := runCLI(t, "auth", "logout", "up", "--config", cfg, "--admin", "http://127.0.0.1:1"); err != nil {
		t.Fatalf("auth logout: %v\n%s", err, out)
	}
	if out, _ := runCLI(t, "auth", "status", "--config", cfg, "--admin", "http://127.0.0.1:1"); !strings.Contains(out, "needs_authorization") {
		t.Fatalf("status after logout:\n%s", out)
	}
}

// TestAuthLoginThroughGateway: the running gateway waits for an operator;
// auth login goes through its admin API, the redirect reaches the
// gateway's /oauth/callback, and the upstream connects.
func TestAuthLoginThroughGateway(t *testing.T) {
	t.Parallel()
	as := testenv.StartOAuthServer(t, testenv.OAuthServerOptions{})
	cfg := writeAuthConfig(t, as, t.TempDir())
	adminAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	url := startServe(t, "--config", cfg, "--listen", "127.0.0.1:0", "--admin", adminAddr)
	base := strings.TrimSuffix(url, "/mcp")
	waitUntil(t, "needs_authorization", func() bool { return serverState(t, base) == "needs_authorization" })
	out := login(t, "up", "--admin", "http://"+adminAddr, "--no-browser")
	if !strings.Contains(out, base+"/oauth/callback") && !strings.Contains(out, "redirect_uri=") {
		t.Errorf("the URL does not redirect to the gateway:\n%s", out)
	}
	waitUntil(t, "the upstream to connect", func() bool { return serverState(t, base) == "connected" })
	out, err := runCLI(t, "auth", "status", "--admin", "http://"+adminAddr)
	if err != nil || !strings.Contains(out, "authorized") {
		t.Fatalf("auth status: %v\n%s", err, out)
	}
	if out, err := runCLI(t, "auth", "logout", "up", "--admin", "http://"+adminAddr); err != nil {
		t.Fatalf("auth logout: %v\n%s", err, out)
	}
	out, err = runCLI(t, "auth", "status", "--admin", "http://"+adminAddr)
	if err != nil || !strings.Contains(out, "needs_authorization") {
		t.Fatalf("auth status after logout: %v\n%s", err, out)
	}
	if out, err := runCLI(t, "auth", "logout", "nosuch", "--admin", "http://"+adminAddr); err == nil || !strings.Contains(out+err.Error(), "no \"oauth\" section") {
		t.Fatalf("logout of an unknown server: %v\n%s", err, out)
	}
}

func serverState(t *testing.T, base string) string {
	resp, err := http.Get(base + "/status")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var doc struct {
		Servers []struct{ State string }
	}
	json.NewDecoder(resp.Body).Decode(&doc)
	if len(doc.Servers) != 1 {
		return ""
	}
	return doc.Servers[0].State
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
