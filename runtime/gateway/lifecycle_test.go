package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/transports"
)

// pingServer is a hand-written MCP server whose answer to ping is delayed
// by the value in delay (negative: never answered). Other methods are
// refused at once: unanswered, the gateway's server/discover probe would
// wait out its 10 s budget before falling back to initialize.
func pingServer(t *testing.T, delay *atomic.Int64) string {
	t.Helper()
	srv := transports.NewStreamableServer(func(conn transports.Connection) {
		go func() {
			for {
				msg, err := conn.Read(context.Background())
				if err != nil {
					return
				}
				req, ok := msg.(*jsonrpc.Request)
				if !ok || !req.IsCall() {
					continue
				}
				switch req.Method {
				case "initialize":
					conn.Write(context.Background(), &jsonrpc.Response{ID: req.ID, Result: json.RawMessage(
						`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"ping","version":"1"}}`)})
				case "tools/list":
					conn.Write(context.Background(), &jsonrpc.Response{ID: req.ID, Result: json.RawMessage(`{"tools":[{"name":"p","inputSchema":{"type":"object"}}]}`)})
				case "ping":
					d := time.Duration(delay.Load())
					if d < 0 {
						continue
					}
					go func() {
						time.Sleep(d)
						conn.Write(context.Background(), &jsonrpc.Response{ID: req.ID, Result: json.RawMessage(`{}`)})
					}()
				default: // server/discover among them: a 2025-11-25 server refuses it
					conn.Write(context.Background(), &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found"}})
				}
			}
		}()
	}, transports.StreamableServerOptions{})
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Close(); hs.Close() })
	return hs.URL
}

// TestHealthChecks: a server that answers pings slowly (but within the
// timeout) stays connected; one that stops answering is failed after the
// configured number of misses, and its tools leave the catalogue.
func TestHealthChecks(t *testing.T) {
	t.Parallel()
	var delay atomic.Int64
	delay.Store(int64(60 * time.Millisecond))
	up := pingServer(t, &delay)
	url, g := startGateway(t, serversJSON(fmt.Sprintf(
		`"p": {"url": %q, "health_interval": 0.05, "health_timeout": 0.2, "health_misses": 3}`, up)), Options{})
	cs := connect(t, url, nil)

	time.Sleep(600 * time.Millisecond) // several slow pings
	if st := g.Status()[0]; st.State != StateConnected || st.LastHealthCheck.IsZero() {
		t.Fatalf("slow but answering server: status %+v, want connected with a recent health check", st)
	}

	delay.Store(-1) // now it never answers
	waitFor(t, "the unresponsive server to be failed", func() bool { return g.Status()[0].State != StateConnected })
	if st := g.Status()[0]; !strings.Contains(st.LastError, "3 pings in a row") {
		t.Errorf("last error %q does not say why", st.LastError)
	}
	if names := toolNames(t, cs); len(names) != 0 {
		t.Errorf("tools of the failed server still listed: %v", names)
	}
}

// TestSessionExpiredReinitializes: the upstream forgets every session (a
// restart behind the same URL answers 404): the gateway initializes anew
// at once, without waiting for a backoff, and the tools come back.
func TestSessionExpiredReinitializes(t *testing.T) {
	t.Parallel()
	var handler atomic.Pointer[http.Handler]
	newHandler := func() {
		s := newDemoMathServer()
		var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
		handler.Store(&h)
	}
	newHandler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*handler.Load()).ServeHTTP(w, r) }))
	t.Cleanup(hs.Close)

	url, g := startGateway(t, serversJSON(fmt.Sprintf(`"m": {"url": %q, "retry_initial": 30}`, hs.URL)), Options{})
	events, stop := g.events.Subscribe(32)
	defer stop()
	cs := connect(t, url, nil)
	call := func() error {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}})
		return err
	}
	if err := call(); err != nil {
		t.Fatal(err)
	}
	newHandler() // the old session ids are unknown now
	if err := call(); err == nil {
		t.Log("the first call after the restart succeeded (the gateway noticed before it)")
	}
	// retry_initial is 30 s: only the immediate re-initialize can bring it
	// back within the wait.
	waitFor(t, "the server to come back", func() bool { return call() == nil })
	var seen []string
	for len(seen) < 2 {
		select {
		case ev := <-events:
			if ev.Type != EventToolExecuted {
				seen = append(seen, ev.Type)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("events seen %v, want a disconnect and a connect", seen)
		}
	}
	if !slices.Equal(seen[:2], []string{EventServerDisconnected, EventServerConnected}) {
		t.Errorf("events %v", seen)
	}
}

// TestLegacySSEFallback: a URL without a type that speaks only HTTP+SSE
// (2024-11-05) is reached through the fallback.
func TestLegacySSEFallback(t *testing.T) {
	t.Parallel()
	s := newDemoMathServer()
	hs := httptest.NewServer(mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(func() { hs.CloseClientConnections(); hs.Close() })
	url, g := startGateway(t, serversJSON(fmt.Sprintf(`"legacy": {"url": %q}`, hs.URL)), Options{})
	cs := connect(t, url, nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "via sse"}})
	if err != nil || textOf(res) != "via sse" {
		t.Fatalf("call through the SSE fallback: %v", err)
	}
	if st := g.Status()[0]; st.Transport != "sse" || st.State != StateConnected {
		t.Errorf("status %+v, want a connected sse server", st)
	}
}

// TestToolExecutedEvents checks the fields of tool_executed events, and
// that arguments never appear in them.
func TestToolExecutedEvents(t *testing.T) {
	t.Parallel()
	a := testenvEverything(t)
	url, g := startGateway(t, serversJSON(fmt.Sprintf(`"a": {"url": %q}`, a)), Options{})
	events, stop := g.events.Subscribe(16)
	defer stop()
	cs := connect(t, url, nil)
	for _, name := range []string{"test_simple_text", "test_error_handling"} {
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"secret": "hunter2"}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []struct {
		tool    string
		success bool
	}{{"test_simple_text", true}, {"test_error_handling", false}} {
		select {
		case ev := <-events:
			if ev.Type != EventToolExecuted || ev.Server != "a" || ev.Tool != want.tool || ev.Success != want.success ||
				ev.Duration <= 0 || ev.ContentLength == 0 || (want.success != (ev.ErrorMessage == "")) {
				t.Errorf("event %+v, want tool_executed of %s success=%v", ev, want.tool, want.success)
			}
			if b, _ := json.Marshal(ev); strings.Contains(string(b), "hunter2") {
				t.Errorf("arguments leaked into the event: %s", b)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no tool_executed event for %s", want.tool)
		}
	}
}

// TestSSEReadTimeout: a legacy SSE stream that stays silent longer than
// sse_read_timeout is cut, and the upstream reconnects.
func TestSSEReadTimeout(t *testing.T) {
	t.Parallel()
	s := newDemoMathServer()
	hs := httptest.NewServer(mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(func() { hs.CloseClientConnections(); hs.Close() })
	_, g := startGateway(t, serversJSON(fmt.Sprintf(`"legacy": {"type": "sse", "url": %q, "sse_read_timeout": 0.3, "retry_initial": 0.05}`, hs.URL)), Options{})
	events, stop := g.events.Subscribe(16)
	defer stop()
	var seen []Event
	deadline := time.After(10 * time.Second)
	for len(seen) < 2 {
		select {
		case ev := <-events:
			seen = append(seen, ev)
		case <-deadline:
			t.Fatalf("events %+v: want the silent stream cut and the server back", seen)
		}
	}
	if seen[0].Type != EventServerDisconnected || seen[1].Type != EventServerConnected {
		t.Errorf("events %+v, want a disconnect then a reconnect", seen)
	}
}
