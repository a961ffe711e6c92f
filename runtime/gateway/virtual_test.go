package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/testenv"
	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/transports"
)

// TestConformanceThroughVirtualServer runs the conformance server suite
// (spec 2025-11-25) against a virtual server that selects every tool,
// prompt and resource of the go-sdk everything-server: it passes as
// directly, 40 passed, 0 failed.
func TestConformanceThroughVirtualServer(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("conformance suite: skipped in -short mode")
	}
	up := testenv.StartEverythingServerHTTP(t)
	url, _ := startGateway(t, fmt.Sprintf(`{"mcpServers": {"everything": {"url": %q}},
		"virtual_servers": {"all": {"path": "/mcp/all", "tools": ["*"], "prompts": ["*"], "resources": ["*"]}}}`, up), Options{})
	passed, failed, out := testenv.RunConformance(t, strings.TrimSuffix(url, "/mcp")+"/mcp/all")
	if passed != 40 || failed != 0 {
		t.Fatalf("conformance through a virtual server: %d passed, %d failed (want 40 passed, 0 failed)\n%s", passed, failed, out)
	}
}

const virtualAliceKey, virtualBobKey = "alice-key-0123456789abcdef", "bob-key-0123456789abcdef"

// startVirtualPair starts a gateway with two virtual servers over one
// everything-server: "a" (alice's) selects two tools, "b" (bob's) the
// tools with progress and logging; /mcp serves everything.
func startVirtualPair(t *testing.T) (base string, g *Gateway) {
	up := testenv.StartEverythingServerHTTP(t)
	url, g := startGateway(t, fmt.Sprintf(`{"mcpServers": {"everything": {"url": %q}},
		"auth": {"mode": "api_key", "api_keys": [{"name": "alice", "key": %q}, {"name": "bob", "key": %q}]},
		"virtual_servers": {
		  "a": {"path": "/mcp/a", "title": "A", "instructions": "Only A.", "tools": ["test_simple_text", "test_error_handling"], "allow": ["alice"]},
		  "b": {"path": "/mcp/b", "tools": ["test_tool_with_progress", "test_tool_with_logging"], "prompts": ["*"], "allow": ["bob"]}}}`,
		up, virtualAliceKey, virtualBobKey), Options{})
	return strings.TrimSuffix(url, "/mcp"), g
}

// TestVirtualServersKeepApart: two virtual servers over the same upstream,
// used at once by different identities, never show or run each other's
// tools; an identity a server's allow list leaves out gets 403, an unknown
// path 404, and /mcp still serves everything.
func TestVirtualServersKeepApart(t *testing.T) {
	t.Parallel()
	base, _ := startVirtualPair(t)
	want := map[string][]string{ // in the upstream's order
		"a": {"test_error_handling", "test_simple_text"},
		"b": {"test_tool_with_logging", "test_tool_with_progress"},
	}
	call := map[string]string{"a": "test_simple_text", "b": "test_tool_with_logging"}
	var wg sync.WaitGroup
	for i := range 8 {
		vs, key, other := "a", virtualAliceKey, "b"
		if i%2 == 1 {
			vs, key, other = "b", virtualBobKey, "a"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs, err := connectAs(t, base+"/mcp/"+vs, bearer(key), nil)
			if err != nil {
				t.Errorf("connecting to %s: %v", vs, err)
				return
			}
			ctx := context.Background()
			for range 5 {
				if got := toolNames(t, cs); !slices.Equal(got, want[vs]) {
					t.Errorf("%s lists %v, want %v", vs, got, want[vs])
				}
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: call[vs], Arguments: map[string]any{}})
				if err != nil || res.IsError {
					t.Errorf("%s: calling %s: %v %v", vs, call[vs], err, res)
				}
				_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: call[other], Arguments: map[string]any{}})
				if err == nil || !strings.Contains(err.Error(), "unknown tool") {
					t.Errorf("%s: calling %s of %s: %v, want unknown tool", vs, call[other], other, err)
				}
			}
		}()
	}
	wg.Wait()
	if _, err := connectAs(t, base+"/mcp/b", bearer(virtualAliceKey), nil); err == nil || !strings.Contains(err.Error(), "403") && !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("alice on bob's virtual server: %v, want 403", err)
	}
	resp := rawPost(t, base+"/mcp/c", bearer(virtualAliceKey), `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown virtual path: %d, want 404", resp.StatusCode)
	}
	cs, err := connectAs(t, base+"/mcp", bearer(virtualAliceKey), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := toolNames(t, cs); len(got) < 10 || !slices.Contains(got, "test_tool_with_progress") {
		t.Errorf("/mcp lists %v, want every tool", got)
	}
}

// TestVirtualServerOwnIdentity: a virtual server's initialize result and
// 2026-07-28 server/discover carry its title and instructions, not the
// gateway's; its 2026 tools/list holds its own tools.
func TestVirtualServerOwnIdentity(t *testing.T) {
	t.Parallel()
	base, _ := startVirtualPair(t)
	cs, err := connectAs(t, base+"/mcp/a", bearer(virtualAliceKey), nil)
	if err != nil {
		t.Fatal(err)
	}
	init := cs.InitializeResult()
	if init.ServerInfo.Title != "A" || init.Instructions != "Only A." {
		t.Errorf("initialize: title %q, instructions %q", init.ServerInfo.Title, init.Instructions)
	}
	auth := map[string]string{"Authorization": "Bearer " + virtualAliceKey}
	status, body := modernHTTP(t, "POST", base+"/mcp/a", withMethod(auth, "server/discover"),
		`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":`+modernMeta("2026-07-28")+`}}`)
	var disc struct {
		Result struct {
			Meta         map[string]json.RawMessage `json:"_meta"`
			Instructions string
		}
	}
	if err := json.Unmarshal(body, &disc); status != 200 || err != nil || disc.Result.Instructions != "Only A." ||
		!strings.Contains(string(disc.Result.Meta["io.modelcontextprotocol/serverInfo"]), `"title":"A"`) {
		t.Errorf("server/discover: %d %s", status, body)
	}
	status, body = modernHTTP(t, "POST", base+"/mcp/a", withMethod(auth, "tools/list"),
		`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":`+modernMeta("2026-07-28")+`}}`)
	var list struct {
		Result struct{ Tools []struct{ Name string } }
	}
	json.Unmarshal(body, &list)
	var names []string
	for _, tl := range list.Result.Tools {
		names = append(names, tl.Name)
	}
	if status != 200 || !slices.Equal(names, []string{"test_error_handling", "test_simple_text"}) {
		t.Errorf("2026 tools/list: %d %v %s", status, names, body)
	}
}

// TestVirtualServerOtherTransports: legacy SSE at PATH/sse and WebSocket
// at PATH/ws serve the virtual server's view, behind its allow list.
func TestVirtualServerOtherTransports(t *testing.T) {
	t.Parallel()
	base, _ := startVirtualPair(t)
	hc := &http.Client{Transport: headerTransport{bearer(virtualAliceKey), http.DefaultClient.Transport}}
	for _, tc := range []struct {
		name string
		tr   mcp.Transport
	}{
		{"sse", &mcp.SSEClientTransport{Endpoint: base + "/mcp/a/sse", HTTPClient: hc}},
		{"websocket", &transports.WebSocketClientTransport{URL: base + "/mcp/a/ws", Header: bearer(virtualAliceKey)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, tc.tr, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if got := toolNames(t, cs); !slices.Equal(got, []string{"test_error_handling", "test_simple_text"}) {
				t.Errorf("tools %v", got)
			}
			if cs.InitializeResult().ServerInfo.Title != "A" {
				t.Errorf("initialize: %+v", cs.InitializeResult().ServerInfo)
			}
		})
	}
	_, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(),
		&transports.WebSocketClientTransport{URL: base + "/mcp/b/ws", Header: bearer(virtualAliceKey)}, nil)
	if err == nil {
		t.Error("alice reached bob's virtual server over WebSocket")
	}
}

func withMethod(h map[string]string, method string) map[string]string {
	out := map[string]string{"Mcp-Method": method}
	for k, v := range h {
		out[k] = v
	}
	return out
}

// TestVirtualServerListChanged: a virtual server's sessions are told of a
// change only when their own view changes. An upstream adding a tool only
// "b" selects notifies b's session, not a's; a reload that changes a's
// tools notifies a's session and leaves b's session working.
func TestVirtualServerListChanged(t *testing.T) {
	t.Parallel()
	base, g := startVirtualPair(t)
	var changedA, changedB = make(chan struct{}, 10), make(chan struct{}, 10)
	opts := func(ch chan struct{}) *mcp.ClientOptions {
		return &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { ch <- struct{}{} }}
	}
	a, err := connectAs(t, base+"/mcp/a", bearer(virtualAliceKey), opts(changedA))
	if err != nil {
		t.Fatal(err)
	}
	toolNames(t, a)
	cfg := g.config()
	next := *cfg
	next.VirtualServers = slices.Clone(cfg.VirtualServers)
	next.VirtualServers[1].Tools = append(slices.Clone(next.VirtualServers[1].Tools), "*transient*")
	reload(t, g, &next)
	b, err := connectAs(t, base+"/mcp/b", bearer(virtualBobKey), opts(changedB))
	if err != nil {
		t.Fatal(err)
	}
	toolNames(t, b)
	root, err := connectAs(t, base+"/mcp", bearer(virtualAliceKey), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.CallTool(context.Background(), &mcp.CallToolParams{Name: "test_trigger_tool_change"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changedB:
	case <-time.After(10 * time.Second):
		t.Fatal("b's session was not told its tools changed")
	}
	if got := toolNames(t, b); !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, "transient") }) {
		t.Errorf("b lists %v after the change", got)
	}
	if err := a.Ping(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if len(changedA) != 0 {
		t.Error("a's session was told of a change to b's view only")
	}
	next2 := next
	next2.VirtualServers = slices.Clone(next.VirtualServers)
	next2.VirtualServers[0].Tools = []string{"test_simple_text"}
	reload(t, g, &next2)
	select {
	case <-changedA:
	case <-time.After(10 * time.Second):
		t.Fatal("a's session was not told the reload changed its tools")
	}
	if got := toolNames(t, a); !slices.Equal(got, []string{"test_simple_text"}) {
		t.Errorf("a lists %v after the reload", got)
	}
	if res, err := b.CallTool(context.Background(), &mcp.CallToolParams{Name: "test_tool_with_logging", Arguments: map[string]any{}}); err != nil || res.IsError {
		t.Errorf("b's session after a reload of a: %v %v", err, res)
	}
}

func reload(t *testing.T, g *Gateway, cfg *config.Config) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := g.Reload(ctx, cfg); err != nil {
		t.Fatal(err)
	}
}

// TestVirtualServerFleetSession: a 2025-11-25 session opened on a virtual
// server's path keeps the server's view on every replica of a fleet that
// adopts it.
func TestVirtualServerFleetSession(t *testing.T) {
	t.Parallel()
	up := testenvEverything(t)
	f := startFleet(t, 3, fmt.Sprintf(`{"mcpServers": {"everything": {"url": %q}},
		"virtual_servers": {"v": {"path": "/mcp/v", "tools": ["test_simple_text"]}}}`, up))
	f.url = strings.TrimSuffix(f.url, "/mcp") + "/mcp/v"
	sid := f.initRaw(t)
	for i := range 6 { // every replica, twice
		code, body := f.raw(t, "POST", sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, 10+i))
		if code != http.StatusOK || !strings.Contains(body, `"test_simple_text"`) || strings.Contains(body, "test_error_handling") {
			t.Fatalf("tools/list #%d: %d %.300s", i, code, body)
		}
	}
}

// TestVirtualServerHidesStateOfOthers: a tool its virtual server does not
// select is "unknown tool" on it even when the tool's server is down,
// where /mcp says the server is unavailable: a virtual server tells
// nothing of what it leaves out.
func TestVirtualServerHidesStateOfOthers(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return toolServer("a", "echo") }, nil))
	t.Cleanup(up.Close)
	keep := serveMCP(t, toolServer("b", "kept"))
	url, g := startGateway(t, fmt.Sprintf(`{"mcpServers": {"a": {"url": %q, "retry_initial": 60, "retry_max": 60, "reconnect_wait": 0.1}, "b": {"url": %q}},
		"virtual_servers": {"v": {"path": "/mcp/v", "tools": ["kept"]}}}`, up.URL, keep),
		Options{Health: HealthOptions{Interval: 20 * time.Millisecond, Timeout: time.Second, Misses: 1}})
	root, v := connect(t, url, nil), connect(t, url+"/v", nil)
	up.CloseClientConnections()
	up.Close()
	u := g.route.upstreams().byName["a"]
	waitFor(t, "the upstream to wait for its next retry", func() bool {
		st, next, _ := u.retryState()
		return st == StateFailed && time.Until(next) > 10*time.Second
	})
	if werr := callErr(t, root, "echo"); errData(t, werr)["reason"] != reasonServerUnavailable {
		t.Fatalf("/mcp: %d %q, want the server unavailable", werr.Code, werr.Message)
	}
	if werr := callErr(t, v, "echo"); werr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(werr.Message, "unknown tool") {
		t.Errorf("the virtual server: %d %q %s, want unknown tool", werr.Code, werr.Message, werr.Data)
	}
}

// TestVirtualServerOpenAIExport: PATH/v1/tools and PATH/v1/tools/call are
// the OpenAI-style API scoped to the virtual server: its tools only, its
// names, its overrides; /v1/tools still has every tool.
func TestVirtualServerOpenAIExport(t *testing.T) {
	t.Parallel()
	base, _ := startVirtualPair(t)
	alice := bearer(virtualAliceKey)
	got := oaTools(t, base+"/mcp/a", alice)
	if len(got) != 2 || got["test_simple_text"] == nil || got["test_error_handling"] == nil {
		t.Errorf("/mcp/a/v1/tools: %v", slices.Collect(maps.Keys(got)))
	}
	if all := oaTools(t, base, alice); len(all) < 10 {
		t.Errorf("/v1/tools: %d tools, want every one", len(all))
	}
	if code, _, res := oaDo(t, "POST", base+"/mcp/a/v1/tools/call", alice, `{"name":"test_simple_text","arguments":{}}`); code != 200 || res["isError"] != false {
		t.Errorf("calling a's tool: %d %v", code, res)
	}
	if code, _, res := oaDo(t, "POST", base+"/mcp/a/v1/tools/call", alice, `{"name":"test_tool_with_logging","arguments":{}}`); code != 404 {
		t.Errorf("calling b's tool on a: %d %v, want 404", code, res)
	}
	req, _ := http.NewRequest("GET", base+"/mcp/b/v1/tools", nil)
	req.Header = alice
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("alice on b's export: %v %v, want 403", resp.Status, err)
	} else {
		resp.Body.Close()
	}
}

// TestVirtualServerToolSearch: with deferred tools, tool_search on a
// virtual server finds only the tools the server selects.
func TestVirtualServerToolSearch(t *testing.T) {
	t.Parallel()
	up := testenv.StartEverythingServerHTTP(t)
	url, _ := startGateway(t, fmt.Sprintf(`{"mcpServers": {"everything": {"url": %q}},
		"tool_rules": [{"tools": ["test_*"], "visibility": "deferred"}],
		"virtual_servers": {"v": {"path": "/mcp/v", "tools": ["test_simple_text"]}}}`, up), Options{})
	root, v := connect(t, url, nil), connect(t, url+"/v", nil)
	if found, _ := toolSearch(t, root, "error handling", 0); !slices.Contains(found, "test_error_handling") {
		t.Fatalf("/mcp: tool_search found %v", found)
	}
	if found, _ := toolSearch(t, v, "error handling", 0); slices.Contains(found, "test_error_handling") {
		t.Errorf("the virtual server's tool_search found %v, a tool it does not select", found)
	}
	if found, _ := toolSearch(t, v, "simple text", 0); !slices.Equal(found, []string{"test_simple_text"}) {
		t.Errorf("the virtual server's tool_search found %v, want [test_simple_text]", found)
	}
}

// TestVirtualServerDeferredTools: deferred_tools leaves a virtual server's
// tools out of its tools list (tool_search and tool_invoke stand for
// them); they are found by search and called by name; /mcp is unchanged.
func TestVirtualServerDeferredTools(t *testing.T) {
	t.Parallel()
	up := testenv.StartEverythingServerHTTP(t)
	url, _ := startGateway(t, fmt.Sprintf(`{"mcpServers": {"everything": {"url": %q}},
		"virtual_servers": {"v": {"path": "/mcp/v", "tools": ["test_simple_text", "test_error_handling"], "deferred_tools": true}}}`, up), Options{})
	root, v := connect(t, url, nil), connect(t, url+"/v", nil)
	if got := toolNames(t, v); slices.Contains(got, "test_simple_text") || !slices.Contains(got, toolSearchName) {
		t.Errorf("the virtual server lists %v", got)
	}
	if found, _ := toolSearch(t, v, "simple text", 0); !slices.Contains(found, "test_simple_text") || slices.Contains(found, "test_tool_with_logging") {
		t.Errorf("tool_search found %v", found)
	}
	if res, err := v.CallTool(context.Background(), &mcp.CallToolParams{Name: "test_simple_text", Arguments: map[string]any{}}); err != nil || res.IsError {
		t.Errorf("calling a deferred tool by name: %v %v", err, res)
	}
	if got := toolNames(t, root); !slices.Contains(got, "test_simple_text") || slices.Contains(got, toolSearchName) {
		t.Errorf("/mcp lists %v", got)
	}
}
