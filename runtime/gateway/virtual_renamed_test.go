package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/runtime/virtual"
)

// TestVirtualRenamedToolRateLimit: a tool's rate limit (tool_rules, by its
// catalogue name and server) applies to calls of it under the name a
// virtual server gave it (streamable HTTP: admission answers 429), and
// shares the tool's bucket on /mcp.
func TestVirtualRenamedToolRateLimit(t *testing.T) {
	t.Parallel()
	up := vaultServer(t, "vault", make(chan string, 1))
	url, _ := startGateway(t, fmt.Sprintf(`{"mcpServers": {"vault": {"url": %q}},
		"tool_rules": [{"servers": ["vault"], "tools": ["echo"], "rate": {"rps": 0.001, "burst": 1}}],
		"virtual_servers": {"v": {"path": "/mcp/v", "tools": ["*"], "overrides": {"echo": {"name": "say"}}}}}`, up), Options{})
	cs := connect(t, url+"/v", nil)
	args := map[string]any{"text": "x"}
	if txt, isErr := callText(t, cs, "say", args); isErr || txt != "vault:x" {
		t.Fatalf("first call of say: %q", txt)
	}
	if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "say", Arguments: args}); err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
		t.Errorf("second call of say (echo's burst is 1): %v %+v, want HTTP 429 from admission", err, res)
	}
	if res, err := connect(t, url, nil).CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: args}); err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
		t.Errorf("echo on /mcp after say: %v %+v, want the same bucket, empty", err, res)
	}
}

// TestVirtualRenamedToolServerDown: a renamed tool whose server is down is
// "server unavailable" on its virtual server, as the tool is on /mcp,
// not "unknown tool".
func TestVirtualRenamedToolServerDown(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return toolServer("a", "echo") }, nil))
	t.Cleanup(up.Close)
	keep := serveMCP(t, toolServer("b", "kept"))
	url, g := startGateway(t, fmt.Sprintf(`{"mcpServers": {"a": {"url": %q, "retry_initial": 60, "retry_max": 60, "reconnect_wait": 0.1}, "b": {"url": %q}},
		"virtual_servers": {"v": {"path": "/mcp/v", "tools": ["*"], "overrides": {"echo": {"name": "say"}}}}}`, up.URL, keep),
		Options{Health: HealthOptions{Interval: 20 * time.Millisecond, Timeout: time.Second, Misses: 1}})
	v := connect(t, url+"/v", nil)
	up.CloseClientConnections()
	up.Close()
	u := g.route.upstreams().byName["a"]
	waitFor(t, "the upstream to wait for its next retry", func() bool {
		st, next, _ := u.retryState()
		return st == StateFailed && time.Until(next) > 10*time.Second
	})
	if werr := callErr(t, v, "say"); errData(t, werr)["reason"] != reasonServerUnavailable {
		t.Errorf("say on the virtual server: %d %q %s, want the server unavailable", werr.Code, werr.Message, werr.Data)
	}
	if werr := callErr(t, v, "echo"); !strings.Contains(werr.Message, "unknown tool") {
		t.Errorf("echo (renamed away) on the virtual server: %d %q, want unknown tool", werr.Code, werr.Message)
	}
}

// TestVirtualViewFind: a virtual server's view resolves names as its lists
// hold them without an index of its own: selected tools by catalogue
// name, a renamed one by its new name only, a shadowed one as the renamed
// tool, an unselected one not at all.
func TestVirtualViewFind(t *testing.T) {
	t.Parallel()
	set, err := virtual.NewSet([]virtual.Config{{Name: "v", Path: "/mcp/v", Tools: []string{"s1.*", "s2.tool005"},
		Overrides: []virtual.Override{{Tool: "s1.tool001", Name: "s1.tool002"}, {Tool: "s1.tool003", Description: "Shorter."}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := &Gateway{log: slog.New(slog.DiscardHandler), opts: Options{PageSize: 1000}}
	v := g.buildVirtual(set.ByName("v"), benchCatalogue(1, ""))
	for _, tc := range []struct{ name, want string }{
		{"s1.tool000", "s1.tool000"},
		{"s1.tool001", ""},           // renamed
		{"s1.tool002", "s1.tool001"}, // the renamed tool, shadowing the catalogue's
		{"s1.tool003", "s1.tool003"},
		{"s2.tool005", "s2.tool005"},
		{"s2.tool006", ""}, // not selected
		{"nope", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it := v.Find(kindTools, tc.name)
			switch {
			case tc.want == "" && it != nil:
				t.Errorf("found %q (%q), want nothing", it.Exposed, it.RuleName())
			case tc.want != "" && (it == nil || it.RuleName() != tc.want || it.Exposed != tc.name):
				t.Errorf("found %+v, want catalogue tool %q", it, tc.want)
			}
		})
	}
	if it := v.Find(kindTools, "s1.tool003"); it == nil || !strings.Contains(string(it.Raw), "Shorter.") {
		t.Error("the overridden description is not what find returns")
	}
	for _, it := range v.Lists[kindTools] {
		if v.Find(kindTools, it.Exposed) != it {
			t.Errorf("listed %q is not what find returns", it.Exposed)
		}
	}
}
