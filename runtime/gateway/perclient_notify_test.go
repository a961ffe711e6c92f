package gateway

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/testenv"
)

// TestPerClientSetLevel: a session's logging/setLevel reaches its own
// per-client upstream session (a go-sdk everything-server over stdio sends
// no log line until its client set a level), whether the session set the
// level before its link opened or after; a session that set none gets no
// log lines from its own upstream session. The sessions run together.
func TestPerClientSetLevel(t *testing.T) {
	t.Parallel()
	bin := testenv.EverythingServer(t)
	url, g := startGateway(t, serversJSON(fmt.Sprintf(`"e": {"command": %q, "session": "per_client"}`, bin)), Options{})
	ctx := context.Background()
	type client struct {
		name  string
		level string // "" sets none
		early bool   // set the level before the first call opens the link
		logs  atomic.Int32
	}
	clients := []*client{{name: "early", level: "info", early: true}, {name: "late", level: "info"}, {name: "silent"}}
	var wg sync.WaitGroup
	for _, c := range clients {
		cs := connect(t, url, &mcp.ClientOptions{LoggingMessageHandler: func(context.Context, *mcp.LoggingMessageRequest) { c.logs.Add(1) }})
		wg.Add(1)
		go func() {
			defer wg.Done()
			call := func() {
				if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_tool_with_logging"}); err != nil {
					t.Errorf("%s: %v", c.name, err)
				}
			}
			if c.level != "" && c.early {
				if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: mcp.LoggingLevel(c.level)}); err != nil {
					t.Errorf("%s: setLevel: %v", c.name, err)
				}
			}
			call() // opens the session's own upstream session
			if c.level != "" && !c.early {
				if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: mcp.LoggingLevel(c.level)}); err != nil {
					t.Errorf("%s: setLevel: %v", c.name, err)
				}
				c.logs.Store(0)
			}
			call()
		}()
	}
	wg.Wait()
	if n := g.route.upstreams().byName["e"].clients.Count(); n != len(clients) {
		t.Fatalf("%d per-client upstream sessions, want %d", n, len(clients))
	}
	for _, c := range clients {
		if c.level == "" {
			if n := c.logs.Load(); n != 0 {
				t.Errorf("%s set no level but got %d log lines", c.name, n)
			}
			continue
		}
		waitFor(t, c.name+"'s log lines (its level reached its own upstream session)", func() bool { return c.logs.Load() >= 3 })
	}
}

// TestPerClientRootsListChanged: a session's notifications/roots/list_changed
// reaches its own per-client upstream session: the TypeScript
// server-everything over stdio fetches the roots again on it and its
// get-roots-list tool shows the new root, for each of several sessions
// at once, each its own roots only.
func TestPerClientRootsListChanged(t *testing.T) {
	t.Parallel()
	node, script := testenv.Node(t), testenv.ServerEverything(t)
	script, _ = filepath.EvalSymlinks(script)
	url, _ := startGateway(t, serversJSON(
		fmt.Sprintf(`"ts": {"command": %q, "args": [%q, "stdio"], "session": "per_client"}`, node, script)), Options{})
	ctx := context.Background()
	var wg sync.WaitGroup
	for _, name := range []string{"alpha", "beta", "gamma"} {
		client := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, nil)
		client.AddRoots(&mcp.Root{URI: "file:///" + name + "/first", Name: name + "-first"})
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		roots := func() string {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get-roots-list"})
			if err != nil {
				t.Errorf("%s: get-roots-list: %v", name, err)
				return ""
			}
			return textOf(res)
		}
		waitFor(t, "tool get-roots-list", func() bool { return strings.Contains(roots(), name+"/first") })
		wg.Add(1)
		go func() {
			defer wg.Done()
			client.AddRoots(&mcp.Root{URI: "file:///" + name + "/second", Name: name + "-second"})
			ok := poll(func() bool {
				got := roots()
				for _, other := range []string{"alpha", "beta", "gamma"} {
					if other != name && strings.Contains(got, other+"/") {
						t.Errorf("%s sees the roots of %s: %s", name, other, got)
						return true
					}
				}
				return strings.Contains(got, name+"/second")
			})
			if !ok {
				t.Errorf("%s: its new root never reached its own upstream session", name)
			}
		}()
	}
	wg.Wait()
}

// poll is waitFor for other goroutines than the test's: it reports whether
// cond held within 10 s.
func poll(cond func() bool) bool {
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}
