package gateway

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestDrainLetsCallsFinish: Drain refuses new sessions with 503 but waits
// for the call in flight, which is answered; it returns once nothing is in
// flight, and reports the calls left when its context ends first.
func TestDrainLetsCallsFinish(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	s := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "wait"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	url, g := startGateway(t, `{"mcpServers": {"slow": {"url": "`+serveMCP(t, s)+`"}}}`, Options{})
	cs := connect(t, url, nil)
	answer := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "wait", Arguments: map[string]any{}})
		answer <- err
	}()
	<-started

	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := g.Drain(short); err == nil || !strings.Contains(err.Error(), "1 calls still in flight") {
		t.Fatalf("Drain with a call in flight and a short deadline: %v, want 1 call in flight", err)
	}
	resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"late","version":"1"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a new session while draining: %d (Retry-After %q), want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}

	drained := make(chan error, 1)
	go func() { drained <- g.Drain(context.Background()) }()
	select {
	case err := <-drained:
		t.Fatalf("Drain returned (%v) while the call was in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-answer; err != nil {
		t.Fatalf("the call in flight during Drain: %v", err)
	}
	if err := <-drained; err != nil {
		t.Fatalf("Drain after the call was answered: %v", err)
	}
}
