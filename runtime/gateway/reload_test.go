package gateway

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/config"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

// startGatewayFile starts a gateway from a config file (so it can be
// reloaded) and returns the /mcp URL.
func startGatewayFile(t *testing.T, path string, opts Options) (string, *Gateway) {
	t.Helper()
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return startGatewayConfig(t, cfg, opts)
}

// TestReloadUnderLoad: while sessions call an untouched upstream without
// pause, a reload adds an upstream, removes one and changes a policy. No
// call to the untouched upstream fails, its connection is kept, the added
// server's tools appear, the removed one's go, and the new policy applies.
func TestReloadUnderLoad(t *testing.T) {
	t.Parallel()
	stay := vaultServer(t, "stay", make(chan string, 1))
	gone := vaultServer(t, "gone", make(chan string, 1))
	fresh := vaultServer(t, "fresh", make(chan string, 1))
	mod := writeModule(t, wasmtest.Example(t, "redact-secrets"))
	dir := t.TempDir()
	path := filepath.Join(dir, "edge-mcp.json")
	write := func(servers, replacement string) {
		cfg := fmt.Sprintf(`{"mcpServers": {%s}, "policies": [{"name": "redact", "module": %q, "tools": ["*leak"], "config": {"replacement": %q}}]}`,
			servers, mod, replacement)
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(fmt.Sprintf(`"stay": {"url": %q, "prefix": "stay"}, "gone": {"url": %q, "prefix": "gone"}`, stay, gone), "[V1]")
	url, g := startGatewayFile(t, path, policyOptions(t))
	watcher := connect(t, url, &mcp.ClientOptions{})
	before := g.route.upstreams().byName["stay"].current()

	var (
		stop     atomic.Bool
		calls    atomic.Int64
		failures atomic.Int64
		wg       sync.WaitGroup
	)
	for range 8 {
		cs := connect(t, url, nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "stay_echo", Arguments: map[string]any{"text": "x"}})
				calls.Add(1)
				if err != nil || res.IsError || textOf(res) != "stay:x" {
					failures.Add(1)
					t.Errorf("call to the untouched upstream: %v %v", err, res)
				}
			}
		}()
	}
	// A t.Fatal below ends the test: the callers stop first, instead of
	// failing it after it completed (a panic that ends the whole run).
	defer func() { stop.Store(true); wg.Wait() }()
	waitFor(t, "calls", func() bool { return calls.Load() > 50 })
	write(fmt.Sprintf(`"stay": {"url": %q, "prefix": "stay"}, "fresh": {"url": %q, "prefix": "fresh"}`, stay, fresh), "[V2]")
	res, err := g.ReloadFile(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Added, []string{"fresh"}) || !slices.Equal(res.Removed, []string{"gone"}) || !slices.Equal(res.Kept, []string{"stay"}) || !res.Policies {
		t.Errorf("reload result %+v", res)
	}
	waitFor(t, "the fresh server's tools", func() bool {
		names := toolNames(t, watcher)
		return slices.Contains(names, "fresh_echo") && !slices.Contains(names, "gone_echo")
	})
	n := calls.Load()
	waitFor(t, "calls after the reload", func() bool { return calls.Load() > n+50 })
	stop.Store(true)
	wg.Wait()
	if failures.Load() > 0 {
		t.Fatalf("%d of %d calls to the untouched upstream failed", failures.Load(), calls.Load())
	}
	if g.route.upstreams().byName["stay"].current() != before {
		t.Error("the untouched upstream was reconnected")
	}
	if txt, _ := callText(t, watcher, "fresh_leak", nil); !strings.Contains(txt, "[V2]") {
		t.Errorf("policy after reload: %q", txt)
	}
	if _, err := watcher.CallTool(context.Background(), &mcp.CallToolParams{Name: "gone_echo"}); err == nil {
		t.Error("a removed server's tool could still be called")
	}
	waitFor(t, "the removed upstream to close", func() bool {
		for _, st := range g.Status() {
			if st.Name == "gone" {
				return false
			}
		}
		return true
	})
}

// TestReloadRemovesAfterInFlightCalls: a call in flight on a removed
// upstream finishes before the upstream is disconnected.
func TestReloadRemovesAfterInFlightCalls(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	s := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "slow"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "finished"}}}, nil, nil
	})
	slow := serveMCP(t, s)
	dir := t.TempDir()
	path := filepath.Join(dir, "c.json")
	os.WriteFile(path, []byte(serversJSON(fmt.Sprintf(`"slow": {"url": %q}`, slow))), 0o600)
	url, g := startGatewayFile(t, path, Options{})
	cs := connect(t, url, nil)
	done := make(chan string, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "slow"})
		if err != nil {
			done <- err.Error()
			return
		}
		done <- textOf(res)
	}()
	waitFor(t, "the call to be in flight", func() bool {
		l := g.route.upstreams().byName["slow"].current()
		return l != nil && l.forwarded() == 1
	})
	os.WriteFile(path, []byte(`{"mcpServers": {}}`), 0o600)
	if _, err := g.ReloadFile(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the drain must not cut the call
	close(release)
	if got := <-done; got != "finished" {
		t.Fatalf("in-flight call on a removed upstream: %q", got)
	}
}

// TestReloadRejectsInvalidConfig: a bad file (or a policy that does not
// load) is rejected with file, key and reason; the running config stays.
func TestReloadRejectsInvalidConfig(t *testing.T) {
	t.Parallel()
	up := vaultServer(t, "vault", make(chan string, 1))
	dir := t.TempDir()
	path := filepath.Join(dir, "edge-mcp.json")
	good := serversJSON(fmt.Sprintf(`"vault": {"url": %q}`, up))
	os.WriteFile(path, []byte(good), 0o600)
	url, g := startGatewayFile(t, path, policyOptions(t))
	cs := connect(t, url, nil)
	for _, tc := range []struct{ name, body, key string }{
		{"syntax", `{"mcpServers": {`, ""},
		{"bad value", `{"mcpServers": {"vault": {"url": "ftp://x"}}}`, "mcpServers.vault.url"},
		{"unknown key", `{"mcpServers": {}, "listne": "x"}`, "listne"},
		{"module that does not exist", fmt.Sprintf(`{"mcpServers": {"vault": {"url": %q}}, "policies": [{"name": "p", "module": "/nonexistent.wasm"}]}`, up), "policies"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.WriteFile(path, []byte(tc.body), 0o600)
			_, err := g.ReloadFile(context.Background())
			var ce *config.Error
			if !errors.As(err, &ce) || ce.File != path || (tc.key != "" && ce.Key != tc.key) || ce.Reason == "" {
				t.Fatalf("got %v (%#v), want a config.Error for %s key %q", err, ce, path, tc.key)
			}
			if txt, _ := callText(t, cs, "echo", map[string]any{"text": "still"}); txt != "vault:still" {
				t.Errorf("after a rejected reload: %q", txt)
			}
		})
	}
}

// TestWatchConfigReloads: writing the file (as editors do: a temporary
// file renamed over it) reloads it.
func TestWatchConfigReloads(t *testing.T) {
	t.Parallel()
	a := vaultServer(t, "a", make(chan string, 1))
	b := vaultServer(t, "b", make(chan string, 1))
	dir := t.TempDir()
	path := filepath.Join(dir, "edge-mcp.json")
	os.WriteFile(path, []byte(serversJSON(fmt.Sprintf(`"a": {"url": %q, "prefix": "a"}`, a))), 0o600)
	url, g := startGatewayFile(t, path, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := g.WatchConfig(ctx); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, url, &mcp.ClientOptions{})
	tmp := filepath.Join(dir, ".edge-mcp.json.tmp")
	os.WriteFile(tmp, []byte(serversJSON(fmt.Sprintf(`"a": {"url": %q, "prefix": "a"}, "b": {"url": %q, "prefix": "b"}`, a, b))), 0o600)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b's tools after the file changed", func() bool { return slices.Contains(toolNames(t, cs), "b_echo") })
}
