package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// The hostile tests of the client-memory budget's fixed-size items: the
// upstream sessions opened for an identity on a per_client server, and
// the downstream streams an identity holds open.

// perClientCost and streamCost are the gateway's charges
// (runtime/gateway/clients.go, transports/stream_budget.go).
const (
	perClientCost = 128 << 10
	streamCost    = 64 << 10
)

// rssKiB returns the resident memory of process p in KiB (0 when unknown),
// for the test's log: it shows what the charges stand for.
func rssKiB(p *process) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// TestHostilePerClientBudget: one identity opens session after session on
// a per_client server whose session counts allow 32 of them, each calling
// it so that an upstream session is opened for it. Its upstream sessions
// are charged to its client-memory share (3 fit), the fourth is refused
// naming the budget, what is held stays under the configured total, and a
// second identity is still served.
func TestHostilePerClientBudget(t *testing.T) {
	t.Parallel()
	const share, tries = 3*perClientCost + perClientCost/2, 8
	p := startBudgetGateway(t, `, "session": "per_client", "max_client_sessions": 32, "max_client_sessions_per_identity": 32`,
		fmt.Sprintf(`"client_memory": %d, "client_memory_per_identity": %d, "resume_events": -1`, 4*share, share))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	call := func(key string) (string, error) {
		c := &rawMCP{base: p.base, key: key}
		if err := c.open(ctx); err != nil {
			return "", err
		}
		res, msg, err := c.rpc(ctx, "tools/call", `{"name":"hello"}`)
		if err == nil && msg == "" && !strings.Contains(string(res), "hello") {
			err = fmt.Errorf("result %s", res)
		}
		return msg, err
	}
	before := rssKiB(p)
	served, refused := 0, 0
	for range tries {
		switch msg, err := call(malloryKey); {
		case err != nil:
			t.Fatalf("mallory's call: %v", err)
		case msg == "":
			served++
		case strings.Contains(msg, "client memory budget"):
			refused++
		default:
			t.Fatalf("mallory's call: %s", msg)
		}
	}
	st := clientMemory(t, p.base)
	held := st.store("per_client_sessions")
	t.Logf("mallory: %d served, %d refused; %d bytes held for per_client sessions (share %d, total %d); RSS %d KiB → %d KiB",
		served, refused, held.Used, st.PerIdentity, st.Limit, before, rssKiB(p))
	if served != 3 || refused != tries-3 {
		t.Errorf("mallory: %d served, %d refused; want 3 and %d\n%s", served, refused, tries-3, p.stderr)
	}
	if held.Used > share || st.Used > st.Limit || held.Refused != int64(refused) {
		t.Errorf("held %d bytes (share %d), %d of the total %d, %d refused", held.Used, share, st.Used, st.Limit, held.Refused)
	}
	if msg, err := call(aliceKey); err != nil || msg != "" {
		t.Errorf("alice's call after mallory's sessions: %v %s", err, msg)
	}
}

// TestHostileStreams: one identity opens streamable HTTP GET streams,
// legacy SSE sessions and WebSockets and holds them open. Each is charged
// to its share (6 fit); the rest are refused with 429 naming the budget,
// what is held stays under the configured total, and a second identity
// still opens a stream of each kind.
func TestHostileStreams(t *testing.T) {
	t.Parallel()
	const share, perKind = 6*streamCost + streamCost/2, 4
	p := startBudgetGateway(t, "", fmt.Sprintf(`"client_memory": %d, "client_memory_per_identity": %d, "resume_events": -1`, 4*share, share))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	before := rssKiB(p)
	served, refused := 0, 0
	open := func(kind, key string) (int, string) {
		status, body := openStream(ctx, t, p.base, kind, key)
		if status == http.StatusTooManyRequests && !strings.Contains(body, "client memory budget") {
			t.Errorf("%s refused without naming the budget: %s", kind, body)
		}
		return status, body
	}
	for _, kind := range []string{"get", "sse", "ws"} {
		for range perKind {
			switch status, body := open(kind, malloryKey); status {
			case http.StatusOK, http.StatusSwitchingProtocols:
				served++
			case http.StatusTooManyRequests:
				refused++
			default:
				t.Fatalf("mallory's %s stream: HTTP %d %s", kind, status, body)
			}
		}
	}
	st := clientMemory(t, p.base)
	held := st.store("streams")
	t.Logf("mallory: %d streams open, %d refused; %d bytes held for streams (share %d, total %d); RSS %d KiB → %d KiB",
		served, refused, held.Used, st.PerIdentity, st.Limit, before, rssKiB(p))
	if served != 6 || refused != 3*perKind-6 {
		t.Errorf("mallory: %d streams open, %d refused; want 6 and %d", served, refused, 3*perKind-6)
	}
	if held.Used > share || st.Used > st.Limit {
		t.Errorf("held %d bytes for streams (share %d), %d of the total %d", held.Used, share, st.Used, st.Limit)
	}
	for _, kind := range []string{"get", "sse", "ws"} {
		if status, body := open(kind, aliceKey); status != http.StatusOK && status != http.StatusSwitchingProtocols {
			t.Errorf("alice's %s stream after mallory's: HTTP %d %s", kind, status, body)
		}
	}
}

// openStream opens one stream of kind (get: a streamable HTTP session's
// GET stream, sse: a legacy SSE session, ws: a WebSocket) with key and
// leaves it open until the test ends; it returns the HTTP status and,
// when refused, the body.
func openStream(ctx context.Context, t *testing.T, base, kind, key string) (int, string) {
	t.Helper()
	if kind == "ws" {
		c, resp, err := websocket.Dial(ctx, strings.Replace(base, "http", "ws", 1)+"/ws", &websocket.DialOptions{
			Subprotocols: []string{"mcp"}, HTTPHeader: http.Header{"Authorization": {"Bearer " + key}}})
		if err != nil {
			if resp == nil {
				t.Fatalf("websocket: %v", err)
			}
			return resp.StatusCode, err.Error() + readBody(resp)
		}
		t.Cleanup(func() { c.CloseNow() })
		return resp.StatusCode, ""
	}
	sctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	var req *http.Request
	if kind == "get" {
		c := &rawMCP{base: base, key: key}
		if err := c.open(ctx); err != nil {
			t.Fatal(err)
		}
		req, _ = http.NewRequestWithContext(sctx, http.MethodGet, base+"/mcp", nil)
		req.Header.Set("Mcp-Session-Id", c.sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	} else {
		req, _ = http.NewRequestWithContext(sctx, http.MethodGet, base+"/sse", nil)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s stream: %v", kind, err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, readBody(resp)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp.StatusCode, ""
}

// readBody reads and closes a refused response's body.
func readBody(resp *http.Response) string {
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		b.WriteString(sc.Text())
	}
	return b.String()
}
