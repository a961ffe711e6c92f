package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/natstest"
	"github.com/edge-mcp/edge-mcp/internal/rrproxy"
	"github.com/edge-mcp/edge-mcp/internal/testenv"
)

// procFleetSecret is the cluster secret every replica of the test fleet
// shares.
const procFleetSecret = "fleet-process-test-secret-0123456789abcdef"

// TestFleetProcessSurvivesSIGKILL runs three release binaries as one fleet
// (an in-process NATS server, each replica its own listen, admin and
// state_dir, the same cluster secret, all fronting the go-sdk
// everything-server) behind the strict round-robin proxy, which skips a
// backend that refuses connections. A go-sdk client opens a 2025-11-25
// session through the proxy; then one replica is killed with SIGKILL: the
// one that created the session, or the one holding its GET stream. Every
// request after the kill (list, call, ping, on the survivors) succeeds, in
// the same session, and the GET stream comes back on a survivor.
func TestFleetProcessSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	up := testenv.StartEverythingServerHTTP(t)
	for _, tc := range []struct {
		name   string
		victim func(t *testing.T, l *proxyLog) int
	}{
		{"session creator", func(t *testing.T, l *proxyLog) int { return l.backendOf(t, "initialize") }},
		{"GET stream holder", func(t *testing.T, l *proxyLog) int { return l.backendOf(t, "GET") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reps, front, log := startProcessFleet(t, 3, natstest.Start(t).ClientURL(), up)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "fleet-process-test", Version: "1"}, nil).Connect(ctx,
				&mcp.StreamableClientTransport{Endpoint: front + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			sid := cs.ID()
			for i := range 2 {
				if err := sessionRound(ctx, cs); err != nil {
					t.Fatalf("round %d before the kill: %v", i, err)
				}
			}
			log.waitGET(t, -1)
			victim := tc.victim(t, log)
			reps[victim].sigkill(t)
			mark := log.len()
			for i := range 4 {
				if err := sessionRound(ctx, cs); err != nil {
					t.Fatalf("round %d after SIGKILL of replica %d: %v", i, victim, err)
				}
			}
			if cs.ID() != sid {
				t.Fatalf("session id changed from %q to %q", sid, cs.ID())
			}
			after := log.since(mark)
			for _, e := range after {
				if e.backend == victim || e.method == "initialize" || e.status >= 400 {
					t.Fatalf("after the kill: %+v (victim %d)\n%v", e, victim, after)
				}
			}
			log.waitGET(t, victim)
		})
	}
}

// sessionRound is one list, call and ping of the everything-server's
// tools.
func sessionRound(ctx context.Context, cs *mcp.ClientSession) error {
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		return fmt.Errorf("tools/list: %w", err)
	}
	if len(tools.Tools) == 0 {
		return fmt.Errorf("tools/list: no tools")
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_simple_text"})
	if err != nil {
		return fmt.Errorf("tools/call: %w", err)
	}
	if tc, _ := res.Content[0].(*mcp.TextContent); res.IsError || tc == nil || tc.Text != "This is a simple text response for testing." {
		return fmt.Errorf("tools/call answered %+v", res)
	}
	if err := cs.Ping(ctx, nil); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	return nil
}

// startProcessFleet starts n replicas of the release binary sharing the
// NATS server at natsURL, each fronting the MCP server at up, and a
// round-robin proxy (SkipDown) in front of them, whose requests are logged.
func startProcessFleet(t *testing.T, n int, natsURL, up string) ([]*process, string, *proxyLog) {
	t.Helper()
	var reps []*process
	var bases []string
	for i := range n {
		dir := t.TempDir()
		cfg := filepath.Join(dir, "edge-mcp.json")
		doc := fmt.Sprintf(`{"log_level": "warn", "mcpServers": {"everything": {"url": %q}},
			"cluster": {"allow_anonymous_nats": true, "nats_url": %q, "name": "proc", "secret": %q, "replica": "r%d"}}`, up, natsURL, procFleetSecret, i)
		if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		p := startBinary(t, "serve", "--config", cfg, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--state-dir", filepath.Join(dir, "state"))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := waitConnected(ctx, p.base, 1)
		if err == nil {
			err = waitReady(ctx, p.base)
		}
		cancel()
		if err != nil {
			t.Fatalf("replica %d: %v\n%s", i, err, p.stderr)
		}
		reps = append(reps, p)
		bases = append(bases, p.base)
	}
	proxy, err := rrproxy.New(bases...)
	if err != nil {
		t.Fatal(err)
	}
	proxy.SkipDown = true
	l := &proxyLog{}
	front := httptest.NewServer(l.wrap(proxy))
	t.Cleanup(func() {
		front.CloseClientConnections()
		front.Close()
		if t.Failed() {
			for i, p := range reps {
				t.Logf("replica %d stderr:\n%s", i, p.stderr)
			}
		}
	})
	return reps, front.URL, l
}

// waitReady polls base/readyz until it answers "ready" (not "degraded":
// the replica is connected to NATS).
func waitReady(ctx context.Context, base string) error {
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var doc struct{ Status string }
			if json.Unmarshal(b, &doc) == nil && doc.Status == "ready" {
				return nil
			}
			last = string(b)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for /readyz (last: %s): %w", last, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// sigkill kills the process with SIGKILL and waits until it is gone.
func (p *process) sigkill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL: %v", err)
	}
	select {
	case err := <-p.exited:
		p.exited <- err
	case <-time.After(10 * time.Second):
		t.Fatal("still running 10s after SIGKILL")
	}
}

// proxyEntry is one request through the proxy: its HTTP method (GET,
// DELETE) or JSON-RPC method, the backend that answered and the status.
type proxyEntry struct {
	method  string
	backend int
	status  int
}

// proxyLog records every request through the proxy when its response
// headers are written (a GET stream is recorded as it opens).
type proxyLog struct {
	mu      sync.Mutex
	entries []proxyEntry
}

func (l *proxyLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method := r.Method
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct{ Method string }
			json.Unmarshal(body, &msg)
			method = msg.Method
			if method == "" {
				method = "response"
			}
		}
		h.ServeHTTP(&loggedWriter{ResponseWriter: w, log: l, method: method}, r)
	})
}

func (l *proxyLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries)
}

func (l *proxyLog) since(i int) []proxyEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]proxyEntry(nil), l.entries[i:]...)
}

// backendOf is the backend that answered the last request of method.
func (l *proxyLog) backendOf(t *testing.T, method string) int {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.entries) - 1; i >= 0; i-- {
		if e := l.entries[i]; e.method == method && e.status == http.StatusOK {
			return e.backend
		}
	}
	t.Fatalf("no %s through the proxy: %v", method, l.entries)
	return -1
}

// waitGET waits until the last GET through the proxy opened a stream (200)
// on a backend other than not.
func (l *proxyLog) waitGET(t *testing.T, not int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		l.mu.Lock()
		for i := len(l.entries) - 1; i >= 0; i-- {
			if e := l.entries[i]; e.method == http.MethodGet {
				if e.status == http.StatusOK && e.backend != not {
					l.mu.Unlock()
					return
				}
				break
			}
		}
		l.mu.Unlock()
	}
	t.Fatalf("no GET stream open on a replica other than %d: %v", not, l.since(0))
}

// loggedWriter records its request when the response headers are written.
type loggedWriter struct {
	http.ResponseWriter
	log    *proxyLog
	method string
	once   sync.Once
}

func (w *loggedWriter) WriteHeader(code int) {
	w.record(code)
	w.ResponseWriter.WriteHeader(code)
}

func (w *loggedWriter) Write(p []byte) (int, error) {
	w.record(http.StatusOK)
	return w.ResponseWriter.Write(p)
}

func (w *loggedWriter) record(code int) {
	w.once.Do(func() {
		b, _ := strconv.Atoi(strings.TrimSpace(w.Header().Get("X-Edge-Backend")))
		w.log.mu.Lock()
		w.log.entries = append(w.log.entries, proxyEntry{method: w.method, backend: b, status: code})
		w.log.mu.Unlock()
	})
}

func (w *loggedWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *loggedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
