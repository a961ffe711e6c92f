package main

import (
	"bufio"
	"bytes"
	"net/http"

	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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
	bin := releaseBinary(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gw.json")
	os.WriteFile(cfg, []byte(`{"mcpServers": {"child": {"command": "`+bin+`", "args": ["stdio"]}},
		"limits": {"shutdown_grace": 3}}`), 0o600)
	cmd := exec.Command(bin, "serve", "--config", cfg, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--state-dir", dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	base, err := listenURL(stdout)
	if err != nil {
		t.Fatalf("no listen address: %v\n%s", err, stderr.String())
	}
	go io.Copy(io.Discard, stdout)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := waitConnected(ctx, base, 1); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	child := childPID(t, cmd.Process.Pid)

	c := mcp.NewClient(&mcp.Implementation{Name: "sigterm-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tools, err := cs.ListTools(ctx, nil); err != nil || len(tools.Tools) == 0 {
		t.Fatalf("tools through the stdio child: %v %v", tools, err)
	}

	start := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("still running 15 s after SIGTERM\n%s", stderr.String())
	}
	t.Logf("stopped %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(stderr.String(), "stopped") {
		t.Errorf("no log line saying it stopped:\n%s", stderr.String())
	}
	if _, err := cs.ListTools(ctx, nil); err == nil {
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
	bin := releaseBinary(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--state-dir", dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	admin := ""
	sc := bufio.NewScanner(stdout)
	for admin == "" && sc.Scan() {
		if _, rest, ok := strings.Cut(sc.Text(), "admin API: "); ok {
			admin = strings.TrimSuffix(strings.TrimSpace(rest), "/admin/modules")
		}
	}
	if admin == "" {
		t.Fatalf("no admin address printed\n%s", stderr.String())
	}
	go io.Copy(io.Discard, stdout)

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

	cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("still running 15 s after SIGTERM\n%s", stderr.String())
	}
}
