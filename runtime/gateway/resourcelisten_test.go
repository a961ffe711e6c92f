package gateway

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// legacyFeaturesUpstream is a stateless (2026-07-28) go-sdk server with a
// subscribable resource res://watched, a tool "touch" that reports it
// updated, and a tool "log" that logs at info and at warning and answers
// with the logLevel its request's _meta named.
func legacyFeaturesUpstream(t *testing.T) string {
	t.Helper()
	var s *mcp.Server
	s = mcp.NewServer(&mcp.Implementation{Name: "modern-up", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	s.AddResource(&mcp.Resource{URI: "res://watched", Name: "watched"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "v"}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "touch", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		err := s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "res://watched"})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(err)}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "log", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		for _, level := range []mcp.LoggingLevel{"info", "warning"} {
			req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: level, Data: string(level) + " message"}) //nolint:errcheck
		}
		level, _ := req.Params.GetMeta()[metaLogLevel].(string)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: level}}}, nil
	})
	return serveHandler(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
}

// TestLegacyClientModernUpstream: a 2025 client's resources/subscribe and
// logging/setLevel work against a 2026-07-28 upstream, which has neither:
// the subscription becomes a subscriptions/listen upstream whose
// notifications/resources/updated reach the client's session, and the
// level is stamped into the _meta of the session's forwarded requests.
func TestLegacyClientModernUpstream(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, extra string }{
		{"shared link", ""},
		{"per_client links", `, "session": "per_client"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, g := startGateway(t, serversJSON(fmt.Sprintf(`"up": {"url": %q%s}`, legacyFeaturesUpstream(t), tc.extra)), Options{})
			if st := g.Status()[0]; st.ProtocolVersion != protocolVersion2026 {
				t.Fatalf("upstream link speaks %q, want %s", st.ProtocolVersion, protocolVersion2026)
			}
			legacyClientModernUpstream(t, url)
		})
	}
}

func legacyClientModernUpstream(t *testing.T, url string) {
	updated := make(chan string, 10)
	var (
		mu   sync.Mutex
		logs []string
	)
	cs := connect(t, url, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			if _, leaked := r.Params.GetMeta()["io.modelcontextprotocol/subscriptionId"]; leaked {
				updated <- "the upstream's subscriptionId leaked"
				return
			}
			updated <- r.Params.URI
		},
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			mu.Lock()
			logs = append(logs, fmt.Sprint(r.Params.Data))
			mu.Unlock()
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	t.Run("resources/subscribe", func(t *testing.T) {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "res://watched"}); err != nil {
			t.Fatalf("subscribe: %v", err)
		}
		if txt, isErr := callText(t, cs, "touch", map[string]any{}); isErr || txt != "<nil>" {
			t.Fatalf("touch: %q", txt)
		}
		select {
		case uri := <-updated:
			if uri != "res://watched" {
				t.Errorf("updated %q", uri)
			}
		case <-ctx.Done():
			t.Fatal("no notifications/resources/updated through the gateway")
		}
		if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "res://watched"}); err != nil {
			t.Fatalf("unsubscribe: %v", err)
		}
	})

	t.Run("logging/setLevel", func(t *testing.T) {
		if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "warning"}); err != nil {
			t.Fatalf("setLevel: %v", err)
		}
		if txt, isErr := callText(t, cs, "log", map[string]any{}); isErr || txt != "warning" {
			t.Fatalf("the upstream saw logLevel %q in _meta, want warning", txt)
		}
		waitFor(t, "the warning log message", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(logs) > 0
		})
		mu.Lock()
		defer mu.Unlock()
		if len(logs) != 1 || logs[0] != "warning message" {
			t.Errorf("log messages %q, want only the warning", logs)
		}
	})
}
