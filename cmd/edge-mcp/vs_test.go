package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/edge-mcp/edge-mcp/internal/testenv"
)

// TestVsCommands: edge-mcp vs ls and vs show read a running gateway's
// virtual servers through the admin API: what each serves now, renamed
// tools with the catalogue's name and server; an unknown name is a 404
// that names the servers there are.
func TestVsCommands(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("EDGE_MCP_ADMIN_TOKEN", "vs-admin-token-0123456789")
	up := testenv.StartEverythingServerHTTP(t)
	cfgPath := filepath.Join(dir, "gw.json")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf(`{"mcpServers": {"everything": {"url": %q}}, "admin": {"watch_config": false},
		"virtual_servers": {
		  "triage": {"path": "/mcp/triage", "title": "Bug triage", "tools": ["test_simple_text", "test_error_handling"], "prompts": ["test_simple_prompt"],
		    "overrides": {"test_simple_text": {"name": "simple", "description": "Simple."}}, "allow": ["alice"]},
		  "empty": {"path": "/mcp/empty"}}}`, up)), 0o600)
	adminURL := fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t))
	startServe(t, "--config", cfgPath, "--listen", "127.0.0.1:0", "--admin", strings.TrimPrefix(adminURL, "http://"), "--state-dir", filepath.Join(dir, "state"))
	a := []string{"--admin", adminURL}
	out := cliUntil(t, `(?m)^triage\s+/mcp/triage\s+Bug triage\s+2\s+1\s+0\s+alice$`, append([]string{"vs", "ls"}, a...)...)
	if !regexp.MustCompile(`(?m)^empty\s+/mcp/empty\s+0\s+0\s+0\s+everyone$`).MatchString(out) {
		t.Errorf("vs ls:\n%s", out)
	}
	out, err := runCLI(t, append([]string{"vs", "show", "triage"}, a...)...)
	if err != nil || !regexp.MustCompile(`(?m)^simple\s+test_simple_text\s+everything\s+yes$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^test_error_handling\s+test_error_handling\s+everything\s*$`).MatchString(out) ||
		!strings.Contains(out, "prompts: test_simple_prompt") {
		t.Errorf("vs show triage: %v\n%s", err, out)
	}
	if out, err := runCLI(t, append([]string{"vs", "show", "nope"}, a...)...); err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "triage (/mcp/triage)") {
		t.Errorf("vs show nope: %v\n%s", err, out)
	}
}
