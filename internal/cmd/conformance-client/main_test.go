package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestParse(t *testing.T) {
	full := env(map[string]string{"EDGE_MCP": "/bin/edge-mcp", "EVERYTHING_CLIENT": "/bin/client"})
	d, err := parse([]string{"--flag", "x", "http://127.0.0.1:4000/mcp"}, full)
	if err != nil {
		t.Fatal(err)
	}
	want := driver{edgeMCP: "/bin/edge-mcp", client: "/bin/client", upstreamURL: "http://127.0.0.1:4000/mcp"}
	if d != want {
		t.Errorf("parse = %+v, want %+v", d, want)
	}

	for _, tc := range []struct {
		name string
		args []string
		env  func(string) string
		want string
	}{
		{"no arguments", nil, full, "usage"},
		{"not a URL last", []string{"http://127.0.0.1:4000/mcp", "extra"}, full, "not an http(s) URL"},
		{"no EDGE_MCP", []string{"http://h/mcp"}, env(map[string]string{"EVERYTHING_CLIENT": "c"}), "EDGE_MCP"},
		{"no EVERYTHING_CLIENT", []string{"http://h/mcp"}, env(map[string]string{"EDGE_MCP": "e"}), "EVERYTHING_CLIENT"},
	} {
		_, err := parse(tc.args, tc.env)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.json")
	if err := writeConfig(path, "http://127.0.0.1:4000/mcp?x=\"y\"", nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("config is not JSON: %v\n%s", err, b)
	}
	want := map[string]any{"mcpServers": map[string]any{
		"scenario": map[string]any{"type": "streamable-http", "url": "http://127.0.0.1:4000/mcp?x=\"y\""},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("config = %s", b)
	}
}

func TestListenRE(t *testing.T) {
	m := listenRE.FindStringSubmatch("edge-mcp v1.2.3 listening on http://127.0.0.1:41234/mcp")
	if m == nil || m[1] != "http://127.0.0.1:41234/mcp" {
		t.Fatalf("match = %q", m)
	}
	g := &gateway{url: m[1]}
	if got := g.statusURL(); got != "http://127.0.0.1:41234/status" {
		t.Errorf("statusURL = %q", got)
	}
	a := adminRE.FindStringSubmatch("  admin API: http://127.0.0.1:40001/admin/modules")
	if a == nil || a[1] != "http://127.0.0.1:40001" {
		t.Fatalf("admin match = %q", a)
	}
	g.admin = a[1]
	if got := g.adminOAuthURL(); got != "http://127.0.0.1:40001/admin/oauth" {
		t.Errorf("adminOAuthURL = %q", got)
	}
}

func TestConfigOAuth(t *testing.T) {
	b, err := config("http://h/mcp", map[string]any{"clientId": "c"})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"mcpServers": map[string]any{
		"scenario": map[string]any{"type": "streamable-http", "url": "http://h/mcp", "oauth": map[string]any{"clientId": "c"}},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("config = %s", b)
	}
}
