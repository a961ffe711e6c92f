package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestDefaultServesDemoTools runs the command as a newcomer does, with no
// config: a client must see the demo servers' tools aggregated at once.
func TestDefaultServesDemoTools(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"--listen", "127.0.0.1:0"}, pw, io.Discard); pw.Close() }()

	url := ""
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		if m := regexp.MustCompile(`listening on (http://\S+/mcp)`).FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
			break
		}
	}
	go io.Copy(io.Discard, pr)
	if url == "" {
		t.Fatal("edge-mcp did not print where it listens")
	}

	c := mcp.NewClient(&mcp.Implementation{Name: "newcomer", Version: "1"}, nil)
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	defer ccancel()
	cs, err := c.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for tool, err := range cs.Tools(cctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	want := []string{"add", "echo", "text_upper", "text_word_count", "time"}
	if !slices.Equal(names, want) {
		t.Errorf("demo tools = %v, want %v", names, want)
	}
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "text_upper", Arguments: map[string]any{"text": "edge"}})
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "EDGE" {
		t.Fatalf("text_upper: %v %+v", err, res)
	}
	cs.Close()

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run returned %v after shutdown", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("edge-mcp did not shut down")
	}
}

func TestBadConfigNamesFileKeyAndReason(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "gw.json")
	if err := os.WriteFile(path, []byte(`{"mcpServers": {"weather": {"url": "http://127.0.0.1:1/mcp", "timeout": "fast"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), []string{"serve", "--config", path}, io.Discard, io.Discard)
	if err == nil {
		t.Fatal("a bad config was accepted")
	}
	for _, want := range []string{"gw.json", "mcpServers.weather.timeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

// TestStdioServesOneClient runs `edge-mcp stdio` with the demo and talks to
// it over its stdin/stdout with a real go-sdk client; every line on stdout
// must be JSON-RPC (logs go to stderr).
func TestStdioServesOneClient(t *testing.T) {
	t.Parallel()
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	stderr := &lockedWriter{w: &strings.Builder{}}
	done := make(chan error, 1)
	go func() {
		done <- serveStdio(context.Background(), "", stdinR, stdoutW, stderr, "")
		stdoutW.Close()
	}()

	// Tee stdout so the test can check every line the client saw.
	linesR, linesW := io.Pipe()
	var lines []string
	linesDone := make(chan struct{})
	go func() {
		defer close(linesDone)
		sc := bufio.NewScanner(io.TeeReader(stdoutR, linesW))
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		linesW.Close()
	}()

	c := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: linesR, Writer: stdinW}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "over stdio"}})
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "over stdio" {
		t.Fatalf("echo over stdio: %v %+v", err, res)
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
	<-linesDone
	for _, l := range lines {
		if !strings.HasPrefix(l, `{"jsonrpc":"2.0"`) {
			t.Errorf("stdout carried a line that is not JSON-RPC: %q", l)
		}
	}
	if logs := stderr.String(); !strings.Contains(logs, "server_connected") {
		t.Errorf("logs did not reach stderr: %q", logs)
	}
}

// lockedWriter collects what goroutines of the gateway log, safely.
type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestStatusTable reads /status of a running gateway and prints the table.
func TestStatusTable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"--listen", "127.0.0.1:0"}, pw, io.Discard); pw.Close() }()
	base := ""
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		if m := regexp.MustCompile(`listening on (http://\S+)/mcp`).FindStringSubmatch(sc.Text()); m != nil {
			base = m[1]
			break
		}
	}
	go io.Copy(io.Discard, pr)
	var out strings.Builder
	if err := run(ctx, []string{"status", "--url", base}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"SERVER", "demo-math", "demo-text", "connected", "2/2 connected"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status table lacks %q:\n%s", want, out.String())
		}
	}
	cancel()
	<-done
}
