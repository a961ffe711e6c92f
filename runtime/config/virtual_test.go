package config

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/edge-mcp/edge-mcp/runtime/virtual"
)

// TestParseVirtualServers shows the triage example decoded in file
// order, argument values kept as written.
func TestParseVirtualServers(t *testing.T) {
	cfg, err := Parse("gw.json", []byte(`{"virtual_servers": {
	  "triage": {"path": "/mcp/triage", "title": "Bug triage", "instructions": "File bugs.",
	    "tools": ["github.*", "jira.search"], "prompts": ["github.*"], "resources": ["jira://*"],
	    "overrides": {"github.create_issue": {"name": "file_bug", "description": "File a bug in acme/app",
	      "arguments": {"repo": {"fixed": "acme/app"}, "labels": {"default": [ "bug" ]}, "assignee": {"hidden": true}}}},
	    "allow": ["alice", "triage-bot"]},
	  "all": {"path": "/mcp/all", "tools": ["*"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []virtual.Config{{Name: "triage", Path: "/mcp/triage", Title: "Bug triage", Instructions: "File bugs.",
		Tools: []string{"github.*", "jira.search"}, Prompts: []string{"github.*"}, Resources: []string{"jira://*"},
		Overrides: []virtual.Override{{Tool: "github.create_issue", Name: "file_bug", Description: "File a bug in acme/app", Arguments: []virtual.Argument{
			{Name: "repo", Fixed: json.RawMessage(`"acme/app"`)}, {Name: "labels", Default: json.RawMessage(`[ "bug" ]`)}, {Name: "assignee", Hidden: true}}}},
		Allow: []string{"alice", "triage-bot"}},
		{Name: "all", Path: "/mcp/all", Tools: []string{"*"}}}
	if !reflect.DeepEqual(cfg.VirtualServers, want) {
		t.Errorf("got  %+v\nwant %+v", cfg.VirtualServers, want)
	}
}

// TestParseVirtualServersRejects: each mistake names the file, the key
// path and why.
func TestParseVirtualServersRejects(t *testing.T) {
	for _, tc := range []struct{ name, in, key, reason string }{
		{"no path", `{"virtual_servers": {"t": {"tools": ["*"]}}}`, "virtual_servers.t.path", "must be an absolute URL path"},
		{"bad name", `{"virtual_servers": {"a b": {"path": "/x"}}}`, "virtual_servers", "must be 1 to 64 characters"},
		{"unknown key", `{"virtual_servers": {"t": {"path": "/x", "tool": ["*"]}}}`, "virtual_servers.t.tool", "valid keys here are path, title"},
		{"gateway path", `{"virtual_servers": {"t": {"path": "/mcp"}}}`, "virtual_servers.t.path", "the gateway's own path"},
		{"below /v1/", `{"virtual_servers": {"t": {"path": "/v1/x"}}}`, "virtual_servers.t.path", "below the gateway's own /v1/"},
		{"same path twice", `{"virtual_servers": {"a": {"path": "/mcp/x"}, "b": {"path": "/mcp/x"}}}`, "virtual_servers.b.path", `virtual server "a"'s path too`},
		{"path of another's SSE", `{"virtual_servers": {"a": {"path": "/mcp/x"}, "b": {"path": "/mcp/x/sse"}}}`, "virtual_servers.b.path", "would share the /sse endpoint"},
		{"duplicate name", `{"virtual_servers": {"t": {"path": "/x", "tools": ["*"], "overrides": {"a": {"name": "c"}, "b": {"name": "c"}}}}}`,
			"virtual_servers.t.overrides.b.name", `gives the name "c", which overrides.a already has`},
		{"override not selected", `{"virtual_servers": {"t": {"path": "/x", "tools": ["a.*"], "overrides": {"b": {"description": "d"}}}}}`,
			"virtual_servers.t.overrides.b", "no pattern"},
		{"fixed and hidden", `{"virtual_servers": {"t": {"path": "/x", "tools": ["*"], "overrides": {"a": {"arguments": {"r": {"fixed": 1, "hidden": true}}}}}}}`,
			"virtual_servers.t.overrides.a.arguments.r", "fixed excludes default and hidden"},
		{"unknown argument key", `{"virtual_servers": {"t": {"path": "/x", "tools": ["*"], "overrides": {"a": {"arguments": {"r": {"fix": 1}}}}}}}`,
			"virtual_servers.t.overrides.a.arguments.r.fix", "unknown key"},
		{"hidden a string", `{"virtual_servers": {"t": {"path": "/x", "tools": ["*"], "overrides": {"a": {"arguments": {"r": {"hidden": "yes"}}}}}}}`,
			"virtual_servers.t.overrides.a.arguments.r.hidden", "must be true or false"},
		{"duplicate override", `{"virtual_servers": {"t": {"path": "/x", "tools": ["*"], "overrides": {"a": {}, "a": {}}}}}`,
			"virtual_servers.t.overrides.a", "duplicate tool"},
		{"rate limit without rps", `{"virtual_servers": {"t": {"path": "/x", "rate_limit": {"burst": 3}}}}`,
			"virtual_servers.t.rate_limit.rps", "must be a positive number"},
		{"unknown interceptor", `{"interceptorServers": {"acme": {"url": "http://127.0.0.1:1/mcp"}}, "interceptors": [{"server": "acme"}],
		  "virtual_servers": {"t": {"path": "/x", "interceptors": ["acme", "redact"]}}}`,
			"virtual_servers.t.interceptors[1]", `"redact" is neither a policy nor an interceptor server`},
		{"interceptor server no entry names", `{"interceptorServers": {"acme": {"url": "http://127.0.0.1:1/mcp"}},
		  "virtual_servers": {"t": {"path": "/x", "interceptors": ["acme"]}}}`,
			"virtual_servers.t.interceptors[0]", `"acme" is neither`},
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
