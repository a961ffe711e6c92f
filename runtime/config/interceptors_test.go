package config

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestParseInterceptors reads interceptor servers in the shape of
// mcpServers (every transport, headers, bearer, OAuth) and the chain's
// entries, with the policies no entry names appended.
func TestParseInterceptors(t *testing.T) {
	t.Setenv("CFG_TEST_PII_TOKEN", "tok")
	in := `{
	  "interceptorServers": {
	    "pii": {"type": "streamable-http", "url": "https://pii.internal/mcp", "bearer_token": "${CFG_TEST_PII_TOKEN}", "timeout": 5},
	    "legacy": {"type": "sse", "url": "https://legacy.internal/sse", "headers": {"X-Team": "sec"}},
	    "ws": {"type": "websocket", "url": "wss://ws.internal/mcp"},
	    "local": {"command": "pii-server", "args": ["--stdio"]},
	    "sso": {"url": "https://sso.internal/mcp", "oauth": {"grant": "client_credentials", "clientId": "edge", "clientSecret": "s"}},
	    "off": {"active": false, "url": "https://off.internal/mcp"}
	  },
	  "policies": [
	    {"name": "redact", "module": "redact.wasm"},
	    {"name": "guard", "module": "/abs/guard.wasm", "tools": ["write_*"], "on_error": "allow", "timeout_ms": 30, "mode": "shadow"},
	    {"name": "audit", "module": "audit.wasm", "servers": ["github"], "on_error": "deny", "timeout_ms": 40}
	  ],
	  "interceptors": [
	    {"server": "pii", "names": ["pii/*"], "tools": ["*"], "servers": ["github"], "mode": "audit", "fail_open": true, "priority": -5, "timeout_ms": 250, "config": {"entities": [ "email" ], "k": "${NOT_EXPANDED}"}},
	    {"module": "redact", "names": ["*redact*"], "mode": "enforce"},
	    {"module": "guard", "tools": ["read_*"]},
	    {"server": "off", "names": ["*"]}
	  ]
	}`
	cfg, err := Parse("/etc/edge/gw.json", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var names, types []string
	for _, s := range cfg.InterceptorServers {
		names, types = append(names, s.Name), append(types, s.Type)
	}
	if want := []string{"pii", "legacy", "ws", "local", "sso"}; !reflect.DeepEqual(names, want) {
		t.Errorf("servers %v, want %v", names, want)
	}
	if want := []string{"streamable-http", "sse", "websocket", "stdio", "streamable-http"}; !reflect.DeepEqual(types, want) {
		t.Errorf("types %v, want %v", types, want)
	}
	pii := cfg.InterceptorServers[0]
	if pii.BearerToken != "tok" || pii.Timeout != 5*time.Second {
		t.Errorf("pii: bearer %q timeout %v", pii.BearerToken, pii.Timeout)
	}
	if cfg.InterceptorServers[1].Headers["X-Team"] != "sec" || cfg.InterceptorServers[3].Args[0] != "--stdio" {
		t.Errorf("legacy headers %v, local args %v", cfg.InterceptorServers[1].Headers, cfg.InterceptorServers[3].Args)
	}
	if o := cfg.InterceptorServers[4].OAuth; o == nil || o.Grant != "client_credentials" {
		t.Errorf("sso oauth %+v", o)
	}
	if len(cfg.Servers) != 0 {
		t.Errorf("interceptor servers leaked into mcpServers: %v", cfg.Servers)
	}
	open, prio := true, -5
	want := []InterceptorEntry{
		{Server: "pii", Names: []string{"pii/*"}, Tools: []string{"*"}, Servers: []string{"github"}, Mode: "audit", FailOpen: &open, Priority: &prio, TimeoutMS: 250,
			Config: json.RawMessage(`{"entities":["email"],"k":"${NOT_EXPANDED}"}`)},
		{Module: "redact", Names: []string{"*redact*"}, Mode: "active"},
		{Module: "guard", Tools: []string{"read_*"}, FailOpen: &open, TimeoutMS: 30, Mode: "audit"},
	}
	if !reflect.DeepEqual(cfg.Interceptors, want) {
		t.Errorf("entries\n got %+v\nwant %+v (the inactive server's entry left out)", cfg.Interceptors, want)
	}
	// guard's entry said tools only: the rest came from the policy. The
	// chain appends the policy no entry names.
	chain := cfg.InterceptorChain()
	if len(chain) != 4 {
		t.Fatalf("chain has %d entries, want the three written and audit: %+v", len(chain), chain)
	}
	a := chain[3]
	if a.Module != "audit" || !a.Implicit || a.FailOpen == nil || *a.FailOpen || a.TimeoutMS != 40 || a.Mode != "" || !reflect.DeepEqual(a.Servers, []string{"github"}) {
		t.Errorf("audit's implicit entry %+v", a)
	}
}

// TestParseInterceptorsRejects: every wrong value names the file, the key
// and the reason.
func TestParseInterceptorsRejects(t *testing.T) {
	const srv = `"interceptorServers": {"pii": {"url": "https://pii/mcp"}}`
	for _, tc := range []struct{ name, in, key, reason string }{
		{"unknown server", `{` + srv + `, "interceptors": [{"server": "pi"}]}`, "interceptors[0].server", `interceptor server "pi" is not defined in interceptorServers`},
		{"mcpServers name is not an interceptor server", `{"mcpServers": {"gh": {"url": "https://gh/mcp"}}, "interceptors": [{"server": "gh"}]}`, "interceptors[0].server", "not defined in interceptorServers"},
		{"unknown module", `{"interceptors": [{"module": "redact"}]}`, "interceptors[0].module", `policy "redact" is not defined in policies`},
		{"both server and module", `{` + srv + `, "interceptors": [{"server": "pii", "module": "m"}]}`, "interceptors[0]", `has both "server" and "module"`},
		{"neither", `{"interceptors": [{"names": ["*"]}]}`, "interceptors[0]", `needs "server"`},
		{"bad mode", `{` + srv + `, "interceptors": [{"server": "pii", "mode": "shadow"}]}`, "interceptors[0].mode", `must be "active", "enforce" or "audit", got "shadow"`},
		{"empty name glob", `{` + srv + `, "interceptors": [{"server": "pii", "names": ["pii/*", ""]}]}`, "interceptors[0].names[1]", "must be a glob of 1 to 512 bytes"},
		{"long tool glob", `{` + srv + `, "interceptors": [{"server": "pii", "tools": ["` + strings.Repeat("x", 513) + `"]}]}`, "interceptors[0].tools[0]", "must be a glob of 1 to 512 bytes"},
		{"servers not a list", `{` + srv + `, "interceptors": [{"server": "pii", "servers": "github"}]}`, "interceptors[0].servers", "must be an array of strings"},
		{"fail_open a string", `{` + srv + `, "interceptors": [{"server": "pii", "fail_open": "yes"}]}`, "interceptors[0].fail_open", "must be true or false"},
		{"priority beyond 32 bits", `{` + srv + `, "interceptors": [{"server": "pii", "priority": 3000000000}]}`, "interceptors[0].priority", "32-bit whole number"},
		{"timeout too long", `{` + srv + `, "interceptors": [{"server": "pii", "timeout_ms": 60001}]}`, "interceptors[0].timeout_ms", "from 0 to 60000"},
		{"unknown entry key", `{` + srv + `, "interceptors": [{"server": "pii", "failOpen": true}]}`, "interceptors[0].failOpen", "unknown key"},
		{"config not an object", `{` + srv + `, "interceptors": [{"server": "pii", "config": [1]}]}`, "interceptors[0].config", "must be an object"},
		{"config bad JSON", `{` + srv + `, "interceptors": [{"server": "pii", "config": {"a" 1}}]}`, "interceptors[0].config", "invalid JSON"},
		{"entries an object", `{"interceptors": {"server": "pii"}}`, "interceptors", "must be an array of objects"},
		{"server without url", `{"interceptorServers": {"pii": {"type": "sse"}}}`, "interceptorServers.pii.url", "is required"},
		{"server with url and command", `{"interceptorServers": {"pii": {"url": "https://p", "command": "p"}}}`, "interceptorServers.pii", `has both "url" and "command"`},
		{"server key of upstreams only", `{"interceptorServers": {"pii": {"url": "https://p", "prefix": "x"}}}`, "interceptorServers.pii.prefix", "unknown key"},
		{"bad server name", `{"interceptorServers": {"p ii": {"url": "https://p"}}}`, "interceptorServers", "interceptor server name"},
		{"bad type", `{"interceptorServers": {"pii": {"type": "grpc", "url": "https://p"}}}`, "interceptorServers.pii.type", `must be "streamable-http"`},
		{"bearer with prefix", `{"interceptorServers": {"pii": {"url": "https://p", "bearer_token": "Bearer x"}}}`, "interceptorServers.pii.bearer_token", "without the \"Bearer \" prefix"},
		{"stdio key on a remote", `{"interceptorServers": {"pii": {"url": "https://p", "args": ["x"]}}}`, "interceptorServers.pii.args", "applies only to stdio servers"},
		{"oauth server named like an upstream", `{"mcpServers": {"pii": {"url": "https://u/mcp"}}, "interceptorServers": {"pii": {"url": "https://p", "oauth": {"grant": "client_credentials", "clientId": "c", "clientSecret": "s"}}}}`, "interceptorServers.pii.oauth", "has the name of an mcpServers server"},
		{"duplicate server", `{"interceptorServers": {"pii": {"url": "https://p"}, "pii": {"url": "https://q"}}}`, "interceptorServers.pii", "duplicate interceptor server name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("gw.json", []byte(tc.in))
			var ce *Error
			if !errors.As(err, &ce) || ce.File != "gw.json" || ce.Key != tc.key || !strings.Contains(ce.Reason, tc.reason) {
				t.Fatalf("got %v, want key %q and a reason with %q", err, tc.key, tc.reason)
			}
		})
	}
}
