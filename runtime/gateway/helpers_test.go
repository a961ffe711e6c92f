package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/config"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/testenv"
)

// testLogger logs to the test's output when -v is given and the test fails.
func testLogger(t testing.TB) *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("EDGE_MCP_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: level}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// startGateway builds a gateway from the JSON config, serves it on a real
// 127.0.0.1 listener and waits until every upstream connected or failed
// once. It returns the downstream /mcp URL.
func startGateway(t testing.TB, configJSON string, opts Options) (string, *Gateway) {
	t.Helper()
	cfg, err := config.Parse("test.json", []byte(configJSON))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return startGatewayConfig(t, cfg, opts)
}

// startGatewayConfig is startGateway for a parsed configuration.
func startGatewayConfig(t testing.TB, cfg *config.Config, opts Options) (string, *Gateway) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	g, err := New(cfg, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.Start(ctx)
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		g.Close()
		cancel()
	})
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second) // generous: CI runs many tests at once on 2 cores
	defer wcancel()
	if err := g.WaitReady(wctx); err != nil {
		t.Fatalf("gateway not ready: %v", err)
	}
	return srv.URL + "/mcp", g
}

// connect opens a go-sdk client session to url (a real MCP client over
// streamable HTTP).
func connect(t testing.TB, url string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "edge-mcp-test", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connecting to %s: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// serveMCP serves a go-sdk server over streamable HTTP on 127.0.0.1.
func serveMCP(t testing.TB, s *mcp.Server) string {
	t.Helper()
	return serveHandler(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
}

// toolNames lists every tool the session sees, following cursors.
func toolNames(t testing.TB, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatalf("listing tools: %v", err)
		}
		names = append(names, tool.Name)
	}
	return names
}

func textOf(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitForWithin(t, 10*time.Second, what, cond)
}

// waitForWithin is waitFor with its own deadline, for conditions that
// take NATS round trips and OAuth exchanges (slow under the race detector
// with the package's tests running in parallel; a pass is as fast).
func waitForWithin(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func serversJSON(entries ...string) string {
	return fmt.Sprintf(`{"mcpServers": {%s}}`, strings.Join(entries, ","))
}

// testenvEverything starts a go-sdk conformance everything-server over
// streamable HTTP and returns its URL.
func testenvEverything(t testing.TB) string { return testenv.StartEverythingServerHTTP(t) }

// serveHandler serves h on 127.0.0.1 and returns its URL.
func serveHandler(t testing.TB, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv.URL
}
