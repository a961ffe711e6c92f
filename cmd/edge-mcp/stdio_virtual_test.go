package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/testenv"
)

// TestStdioVirtual: `edge-mcp stdio --virtual NAME` serves the virtual
// server's view over stdin/stdout (its tools, its title, its overrides);
// a name the configuration does not have is refused before anything
// starts.
func TestStdioVirtual(t *testing.T) {
	t.Parallel()
	up := testenv.StartEverythingServerHTTP(t)
	path := filepath.Join(t.TempDir(), "gw.json")
	os.WriteFile(path, []byte(fmt.Sprintf(`{"mcpServers": {"everything": {"url": %q}},
		"virtual_servers": {"one": {"path": "/mcp/one", "title": "One", "tools": ["test_simple_text"],
		  "overrides": {"test_simple_text": {"name": "simple"}}}}}`, up)), 0o600)
	if err := serveStdio(context.Background(), path, io.NopCloser(strings.NewReader("")), io.Discard, io.Discard, "two"); err == nil || !strings.Contains(err.Error(), "--virtual two") {
		t.Errorf("an unknown virtual server: %v", err)
	}
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- serveStdio(context.Background(), path, stdinR, stdoutW, &lockedWriter{w: &strings.Builder{}}, "one")
		stdoutW.Close()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "1"}, nil).
		Connect(ctx, &mcp.IOTransport{Reader: stdoutR, Writer: stdinW}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	if title := cs.InitializeResult().ServerInfo.Title; title != "One" {
		t.Errorf("title %q", title)
	}
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	if !slices.Equal(names, []string{"simple"}) {
		t.Errorf("tools %v, want [simple]", names)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "simple", Arguments: map[string]any{}}); err != nil || res.IsError {
		t.Errorf("simple: %v %+v", err, res)
	}
	cs.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stdio returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("edge-mcp stdio did not end when its client closed stdin")
	}
}
