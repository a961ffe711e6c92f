package admission

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/runtime/virtual"
)

func newGuard(t *testing.T, cfg *config.Config) *Guard {
	t.Helper()
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	gd, err := New(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gd.Close)
	return gd
}

// TestAccess: access rules decide per identity, server and tool, deny
// globs win, and no rules let everyone use everything.
func TestAccess(t *testing.T) {
	gd := newGuard(t, &config.Config{Access: []config.AccessRule{
		{Identities: []string{"alice"}, Servers: []string{"git*"}, Tools: []string{"gh_*"}, DenyTools: []string{"gh_delete*"}},
	}})
	for _, c := range []struct {
		who, server, tool string
		server_, tool_    bool
	}{
		{"alice", "github", "gh_list", true, true},
		{"alice", "github", "gh_delete_repo", true, false},
		{"alice", "files", "read", false, false},
		{"bob", "github", "gh_list", false, false},
	} {
		t.Run(c.who+"/"+c.server+"/"+c.tool, func(t *testing.T) {
			if got := gd.ServerAllowed(c.who, c.server); got != c.server_ {
				t.Errorf("server allowed %v, want %v", got, c.server_)
			}
			if got := gd.ToolAllowed(c.who, c.server, c.tool); got != c.tool_ {
				t.Errorf("tool allowed %v, want %v", got, c.tool_)
			}
		})
	}
	if open := newGuard(t, &config.Config{}); !open.ToolAllowed("anyone", "s", "t") {
		t.Error("no access rules: a tool was refused")
	}
}

// TestSettings: later tool rules override earlier ones, per field.
func TestSettings(t *testing.T) {
	yes, no := true, false
	gd := newGuard(t, &config.Config{ToolRules: []config.ToolRule{
		{Tools: []string{"*"}, Visibility: "deferred", Timeout: 5},
		{Servers: []string{"ops"}, RequireApproval: &yes, ValidateArguments: &no},
		{Tools: []string{"ping"}, Visibility: "visible"},
	}})
	ts := gd.Settings("ops", "wipe")
	if !ts.Deferred || !ts.Approval || ts.Validate || ts.Timeout != 5*time.Second {
		t.Errorf("ops/wipe: %+v", *ts)
	}
	if ts := gd.Settings("ops", "ping"); ts.Deferred || !ts.Approval {
		t.Errorf("ops/ping: %+v", *ts)
	}
	if gd.Settings("ops", "wipe") != ts {
		t.Error("settings are not memoized")
	}
	if !gd.AnyDeferred {
		t.Error("a deferring rule did not set AnyDeferred")
	}
}

// TestRateLimits: the client's limit, then the tool's, each answered with
// its scope and a retry delay of at least a second.
func TestRateLimits(t *testing.T) {
	gd := newGuard(t, &config.Config{Limits: config.Limits{ClientRate: &config.Rate{RPS: 0.001, Burst: 2}, ToolRate: &config.Rate{RPS: 0.001, Burst: 1}}})
	if !gd.Limited() {
		t.Fatal("limits configured, Limited false")
	}
	if rl := gd.AllowCall("", "alice", "s", "t"); rl != nil {
		t.Fatalf("first call limited: %v", rl)
	}
	rl := gd.AllowCall("", "alice", "s", "t")
	if rl == nil || rl.Scope != "tool" || RetryAfterSeconds(rl.RetryAfter) < 1 || !strings.Contains(rl.Error(), "rate limit (tool)") {
		t.Fatalf("second call of the tool: %v", rl)
	}
	if rl := gd.AllowCall("", "alice", "s", "u"); rl == nil || rl.Scope != "client" {
		t.Fatalf("third call: %v, want the client's limit", rl)
	}
	vs := newGuard(t, &config.Config{VirtualServers: []virtual.Config{{Name: "v", RateLimit: &config.Rate{RPS: 0.001, Burst: 1}}}})
	if !vs.Limited() || vs.AllowCall("v", "alice", "s", "t") != nil || vs.AllowCall("", "alice", "s", "t") != nil {
		t.Fatal("a virtual server's limit: not Limited, or its first call or a call off it limited")
	}
	if rl := vs.AllowCall("v", "alice", "s", "t"); rl == nil || rl.Scope != "virtual_server" {
		t.Fatalf("second call through the virtual server: %v, want its limit", rl)
	}
	if newGuard(t, &config.Config{}).Limited() {
		t.Error("no limits configured, Limited true")
	}
}

// TestNew refuses what would be unsafe or cannot match.
func TestNew(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  config.Config
		err  string
	}{
		{"no auth on a public listener", config.Config{Listen: "0.0.0.0:8080"}, "auth.mode"},
		{"bad tool rule glob", config.Config{Listen: "127.0.0.1:0", ToolRules: []config.ToolRule{{Tools: []string{"["}}}}, "tool_rules[0]"},
		{"bad access glob", config.Config{Listen: "127.0.0.1:0", Access: []config.AccessRule{{Identities: []string{"["}}}}, "access[0]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := New(context.Background(), &c.cfg, nil); err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("err %v, want %q", err, c.err)
			}
		})
	}
}
