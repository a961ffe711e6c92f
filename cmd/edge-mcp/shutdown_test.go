package main

import (
	"bytes"
	"net/http"

	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	w "github.com/edge-mcp/edge-mcp/policy/wasmtest"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSIGTERMStopsGracefully runs the real binary fronting a real stdio
// child (edge-mcp itself, serving its demo over stdio) and stops it with
// SIGTERM while a client session is open: the process exits 0 within the
// grace period, the client's session is over, and the child process is
// gone (killed and reaped, not left behind).
func TestSIGTERMStopsGracefully(t *testing.T) {
	t.Parallel()
	bin := releaseBinary(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gw.json")
	os.WriteFile(cfg, []byte(`{"mcpServers": {"child": {"command": "`+bin+`", "args": ["stdio"]}},
		"limits": {"shutdown_grace": 3}}`), 0o600)
	p := startBinary(t, "serve", "--config", cfg, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--state-dir", dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := waitConnected(ctx, p.base, 1); err != nil {
		t.Fatalf("%v\n%s", err, p.stderr)
	}
	child := childPID(t, p.cmd.Process.Pid)

	c := mcp.NewClient(&mcp.Implementation{Name: "sigterm-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: p.base + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tools, err := cs.ListTools(ctx, nil); err != nil || len(tools.Tools) == 0 {
		t.Fatalf("tools through the stdio child: %v %v", tools, err)
	}

	t.Logf("stopped %v after SIGTERM", p.sigterm(t, 15*time.Second).Round(time.Millisecond))
	if !strings.Contains(p.stderr.String(), "stopped") {
		t.Errorf("no log line saying it stopped:\n%s", p.stderr)
	}
	// A call, not a list: a 2026-07-28 client may answer a list from its
	// cache for the list's ttlMs.
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}); err == nil {
		t.Error("the client's session still answers after the gateway stopped")
	}
	if alive(child) {
		t.Errorf("the stdio child %d outlived the gateway", child)
	}
}

// childPID finds the one child process of pid (children are listed per
// thread, so every thread is read).
func childPID(t *testing.T, pid int) int {
	t.Helper()
	tasks, err := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	if err != nil || len(tasks) == 0 {
		t.Skipf("cannot read the children of a process here: %v", err)
	}
	var f []string
	for _, task := range tasks {
		b, _ := os.ReadFile(task)
		f = append(f, strings.Fields(string(b))...)
	}
	if len(f) != 1 {
		t.Fatalf("edge-mcp has children %v, want the one stdio server", f)
	}
	child, _ := strconv.Atoi(f[0])
	return child
}

// alive reports whether pid runs (a zombie does not count: it has ended).
func alive(pid int) bool {
	for range 50 { // the child's own exit may take a moment after its group is killed
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if errors.Is(err, os.ErrNotExist) {
			return false
		}
		if _, rest, ok := strings.Cut(string(b), ") "); ok && strings.HasPrefix(rest, "Z") {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// TestHostileUploadThenSIGTERM: a module whose start section loops forever
// is refused by the admin API of the real binary within its start
// deadline (before issue 15 the upload never returned under fuel
// metering), and SIGTERM afterwards still stops the process.
func TestHostileUploadThenSIGTERM(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := startBinary(t, "serve", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--state-dir", dir)
	admin := p.admin
	if admin == "" {
		t.Fatalf("no admin address printed\n%s", p.stderr)
	}

	spin := []byte{w.OpLoop, w.OpBlockTypeVoid, w.OpBr, 0, w.OpEnd}
	a := w.PolicyModule(1<<16, map[string][]byte{"edge_hook_tool_call": w.Packed(0, 0)})
	a.Funcs = append(a.Funcs, w.Func{Body: spin})
	a.Start, a.HasStart = uint32(len(a.Funcs)-1), true
	req, _ := http.NewRequest("PUT", admin+"/admin/modules/spinner", bytes.NewReader(a.Bytes()))
	req.Header.Set("Content-Type", "application/wasm")
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("upload of a module that loops in its start section: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(body), "start_timeout") {
		t.Fatalf("upload: %d %s, want 422 start_timeout", resp.StatusCode, body)
	}

	p.sigterm(t, 15*time.Second)
}
