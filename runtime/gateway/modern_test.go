package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/runtime/bridge"
)

// modernUpstream is a 2025 go-sdk server with one tool, prompt and resource.
func modernUpstream(t *testing.T) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "greet"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello"}}}}, nil
	})
	s.AddResource(&mcp.Resource{URI: "res://x", Name: "x"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "contents of x"}}}, nil
	})
	return serveMCP(t, s)
}

// connectModern connects a go-sdk client pinned to 2026-07-28 to url.
func connectModern(ctx context.Context, t *testing.T, url string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "modern", Version: "1"}, opts)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatalf("connecting with protocol 2026-07-28: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestModernClient drives the gateway with a go-sdk client pinned to
// 2026-07-28: every request is sessionless.
func TestModernClient(t *testing.T) {
	t.Parallel()
	url, _ := startGateway(t, serversJSON(fmt.Sprintf(`"up": {"url": %q}`, modernUpstream(t))), Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs := connectModern(ctx, t, url, nil)
	ir := cs.InitializeResult()
	if ir.ProtocolVersion != "2026-07-28" || ir.ServerInfo == nil || ir.ServerInfo.Name != "edge-mcp" || ir.Capabilities.Tools == nil {
		t.Fatalf("discover: got %+v (server info %+v)", ir, ir.ServerInfo)
	}
	if cs.ID() != "" {
		t.Errorf("session id %q: 2026-07-28 has no sessions", cs.ID())
	}
	t.Run("tools/list", func(t *testing.T) {
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Tools) != 1 || res.Tools[0].Name != "echo" {
			t.Fatalf("tools: %+v", res.Tools)
		}
		if res.TTLMs != bridge.TTLSettled || res.CacheScope != "public" {
			t.Errorf("ttlMs %d cacheScope %q, want %d public", res.TTLMs, res.CacheScope, bridge.TTLSettled)
		}
	})
	t.Run("tools/call", func(t *testing.T) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := textOf(res); got != "echo: hi" {
			t.Errorf("result %q", got)
		}
	})
	t.Run("prompts/get", func(t *testing.T) {
		res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet"})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Messages) != 1 {
			t.Fatalf("messages: %+v", res.Messages)
		}
	})
	t.Run("resources/read", func(t *testing.T) {
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "res://x"})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Contents) != 1 || res.Contents[0].Text != "contents of x" {
			t.Fatalf("contents: %+v", res.Contents)
		}
		// A 2025 upstream gives no hint: immediately stale.
		if res.TTLMs != 0 || res.CacheScope != "public" {
			t.Errorf("ttlMs %d cacheScope %q, want 0 public", res.TTLMs, res.CacheScope)
		}
	})
}

// modernMeta is the per-request _meta of a 2026-07-28 request at version.
func modernMeta(version string) string {
	return fmt.Sprintf(`{"io.modelcontextprotocol/protocolVersion":%q,"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}`, version)
}

// modernHTTP sends one request as a 2026-07-28 client would, with the
// extra headers, and returns the answer's status and body.
func modernHTTP(t *testing.T, method, url string, headers map[string]string, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	return resp.StatusCode, got
}

// TestModernRaw checks the 2026-07-28 errors at the HTTP level.
func TestModernRaw(t *testing.T) {
	t.Parallel()
	url, _ := startGateway(t, serversJSON(fmt.Sprintf(`"up": {"url": %q}`, modernUpstream(t))), Options{})
	meta := modernMeta("2026-07-28")
	tests := []struct {
		name       string
		method     string // HTTP method; POST when empty
		headers    map[string]string
		body       string
		status     int
		code       int64
		wantInBody string
	}{
		{name: "discover", headers: map[string]string{"Mcp-Method": "server/discover"},
			body:   `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":` + meta + `}}`,
			status: 200, wantInBody: `"supportedVersions":["2026-07-28","2025-11-25"`},
		{name: "tools/list has caching hints", headers: map[string]string{"Mcp-Method": "tools/list"},
			body:   `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":` + meta + `}}`,
			status: 200, wantInBody: `"cacheScope":"public"`},
		{name: "method header mismatch", headers: map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "echo"},
			body:   `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":` + meta + `}}`,
			status: 400, code: -32020},
		{name: "name header mismatch", headers: map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "other"},
			body:   `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},"_meta":` + meta + `}}`,
			status: 400, code: -32020},
		{name: "missing name header", headers: map[string]string{"Mcp-Method": "resources/read"},
			body:   `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"res://x","_meta":` + meta + `}}`,
			status: 400, code: -32020},
		{name: "version header mismatch", headers: map[string]string{"Mcp-Method": "tools/list", "Mcp-Protocol-Version": "2025-11-25"},
			body:   `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":` + meta + `}}`,
			status: 400, code: -32020},
		{name: "unknown version", headers: map[string]string{"Mcp-Method": "tools/list", "Mcp-Protocol-Version": "2099-01-01"},
			body:   `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":` + modernMeta("2099-01-01") + `}}`,
			status: 400, code: -32022, wantInBody: `"supported":["2026-07-28","2025-11-25","2025-06-18","2025-03-26","2024-11-05"]`},
		{name: "initialize removed", headers: map[string]string{"Mcp-Method": "initialize"},
			body:   `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2026-07-28","capabilities":{},"clientInfo":{"name":"x","version":"1"},"_meta":` + meta + `}}`,
			status: 404, code: -32601},
		{name: "resources/subscribe removed", headers: map[string]string{"Mcp-Method": "resources/subscribe"},
			body:   `{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"res://x","_meta":` + meta + `}}`,
			status: 404, code: -32601},
		{name: "unknown tool is invalid params", headers: map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "nope"},
			body:   `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope","arguments":{},"_meta":` + meta + `}}`,
			status: 400, code: -32602},
		{name: "missing client capabilities", headers: map[string]string{"Mcp-Method": "tools/list"},
			body:   `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
			status: 400, code: -32602},
		{name: "GET stream removed", method: "GET", status: 405, code: -32601},
		{name: "DELETE removed", method: "DELETE", status: 405, code: -32601},
		{name: "2025 without session still needs initialize", headers: map[string]string{"Mcp-Protocol-Version": "2025-11-25"},
			body:   `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			status: 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := tt.method
			if method == "" {
				method = http.MethodPost
			}
			status, body := modernHTTP(t, method, url, tt.headers, tt.body)
			if status != tt.status {
				t.Fatalf("status %d, want %d; body %s", status, tt.status, body)
			}
			if tt.code != 0 {
				var msg struct {
					Error *struct {
						Code int64 `json:"code"`
					} `json:"error"`
				}
				if err := json.Unmarshal(body, &msg); err != nil || msg.Error == nil || msg.Error.Code != tt.code {
					t.Fatalf("want error %d, got %s", tt.code, body)
				}
			}
			if tt.wantInBody != "" && !bytes.Contains(body, []byte(tt.wantInBody)) {
				t.Errorf("body %s lacks %s", body, tt.wantInBody)
			}
		})
	}
}

// TestModernCacheHints checks the rules of the list results' caching hints.
func TestModernCacheHints(t *testing.T) {
	t.Parallel()
	up := modernUpstream(t)
	tests := []struct {
		name      string
		server    string
		relisting bool
		wantTTL   int64
		wantScope string
	}{
		{name: "settled", server: `"up": {"url": %q}`, wantTTL: bridge.TTLSettled, wantScope: "public"},
		{name: "list_changed in flight", server: `"up": {"url": %q}`, relisting: true, wantTTL: bridge.TTLRelisting, wantScope: "public"},
		{name: "per-client upstream", server: `"up": {"url": %q, "session": "per_client"}`, wantTTL: bridge.TTLSettled, wantScope: "private"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, g := startGateway(t, serversJSON(fmt.Sprintf(tt.server, up)), Options{})
			if tt.relisting {
				g.route.relisting.Add(1)
				defer g.route.relisting.Add(-1)
			}
			s := newSession(g, newAPIConn(&peer{id: anonymous}))
			if got := (bridgeOps{s.g}).Hints(); got.TTLMs != tt.wantTTL || got.Scope != tt.wantScope {
				t.Errorf("hints %+v, want ttlMs %d cacheScope %s", got, tt.wantTTL, tt.wantScope)
			}
		})
	}
}

// TestModernLogLevel checks that a 2026-07-28 request gets log messages
// only at the level its _meta names.
func TestModernLogLevel(t *testing.T) {
	t.Parallel()
	_, g := startGateway(t, serversJSON(fmt.Sprintf(`"up": {"url": %q}`, modernUpstream(t))), Options{})
	tests := []struct {
		name    string
		level   string // _meta logLevel; none when empty
		message string // the level of the log message
		want    bool
	}{
		{name: "no level: nothing", message: "emergency", want: false},
		{name: "below the level", level: "warning", message: "info", want: false},
		{name: "at the level", level: "warning", message: "warning", want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := newAPIConn(&peer{id: anonymous})
			s := newSession(g, conn)
			meta := `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
			if tt.level != "" {
				meta += `,"io.modelcontextprotocol/logLevel":"` + tt.level + `"`
			}
			req := &jsonrpc.Request{ID: intID(1), Method: "tools/list", Params: json.RawMessage(`{"_meta":` + meta + `}}`)}
			if !g.bridge.Begin(bridgeSession{s}, req, "2026-07-28") {
				t.Fatal("the request was answered instead of dispatched")
			}
			s.log(noID, json.RawMessage(`{"level":"`+tt.message+`","data":"x"}`))
			got := false
			select {
			case <-conn.out:
				got = true
			default:
			}
			if got != tt.want {
				t.Errorf("log message delivered: %v, want %v", got, tt.want)
			}
		})
	}
}

// TestModernMissingCapability checks -32021 for a call that needs a client
// capability its request does not declare: approval needs elicitation.
func TestModernMissingCapability(t *testing.T) {
	t.Parallel()
	cfg := fmt.Sprintf(`{"mcpServers": {"up": {"url": %q}}, "tool_rules": [{"tools": ["echo"], "require_approval": true}]}`, modernUpstream(t))
	url, _ := startGateway(t, cfg, Options{})
	tests := []struct {
		name   string
		caps   string
		status int
		want   string
	}{
		{name: "undeclared", caps: `{}`, status: 400, want: `"code":-32021,"message":"edge-mcp: tool \"echo\" needs the client capability \"elicitation\", which the request does not declare","data":{"requiredCapabilities":{"elicitation":{}}}`},
		// Declared: the approval is asked through input_required
		// (approval_modern.go).
		{name: "declared", caps: `{"elicitation":{}}`, status: 200, want: `"resultType":"input_required","inputRequests":{"edge-mcp-approval":{"method":"elicitation/create"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + tt.caps + `}}}`
			status, got := modernHTTP(t, http.MethodPost, url, map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "echo"}, body)
			if status != tt.status || !bytes.Contains(got, []byte(tt.want)) {
				t.Fatalf("status %d body %s; want %d and %s", status, got, tt.status, tt.want)
			}
		})
	}
}

// TestModernSubscriptionsListen checks that a 2026-07-28 client learns of
// an upstream's tools/list_changed through subscriptions/listen.
func TestModernSubscriptionsListen(t *testing.T) {
	t.Parallel()
	up := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	mcp.AddTool(up, &mcp.Tool{Name: "first"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	url, _ := startGateway(t, serversJSON(fmt.Sprintf(`"up": {"url": %q}`, serveMCP(t, up))), Options{})
	changed := make(chan struct{}, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs := connectModern(ctx, t, url, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	mcp.AddTool(up, &mcp.Tool{Name: "second"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("no tools/list_changed through subscriptions/listen")
	}
	if names := toolNames(t, cs); len(names) != 2 {
		t.Errorf("tools after the change: %v", names)
	}
}

// TestProtocol2026Off: with protocol_2026 false, a 2026-07-28 request is
// refused as an unsupported version whose supported list lacks it, and a
// go-sdk client that probes server/discover first falls back to a
// 2025-11-25 session (so an upstream's sampling or elicitation can reach
// it until those are bridged to input_required results).
func TestProtocol2026Off(t *testing.T) {
	t.Parallel()
	url, _ := startGateway(t, fmt.Sprintf(`{"protocol_2026": false, "mcpServers": {"up": {"url": %q}}}`, modernUpstream(t)), Options{})
	status, body := modernHTTP(t, "POST", url, map[string]string{"Mcp-Method": "server/discover"},
		`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":`+modernMeta("2026-07-28")+`}}`)
	if status != http.StatusBadRequest || !strings.Contains(string(body), "-32022") || strings.Contains(string(body), `"supported":["2026-07-28"`) {
		t.Fatalf("a 2026-07-28 request with protocol_2026 off: %d %s, want 400 -32022 without 2026-07-28 in the supported list", status, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// No ProtocolVersion: go-sdk's default probes server/discover first.
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "default", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" || cs.ID() == "" {
		t.Fatalf("a default go-sdk client negotiated %q (session %q), want a 2025-11-25 session", v, cs.ID())
	}
}
