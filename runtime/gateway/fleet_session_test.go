package gateway

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/natstest"
	"github.com/edge-mcp/edge-mcp/internal/rrproxy"
	"github.com/edge-mcp/edge-mcp/runtime/cluster"
	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// testFleetSecret is the session-token secret of the test fleets.
const testFleetSecret = "fleet-test-secret-0123456789abcdef"

// testFleet is real gateway replicas sharing an in-process NATS, behind a
// strict round-robin proxy.
type testFleet struct {
	nats  *natstest.Server
	gws   []*Gateway
	srvs  []*httptest.Server
	proxy *rrproxy.Proxy
	url   string // the proxy's MCP endpoint

	mu   sync.Mutex
	down map[int]bool // replicas shut down: the proxy skips them
}

// startFleet starts n replicas (r0…) of one fleet with the servers
// section servers, each on its own 127.0.0.1 listener.
func startFleet(t testing.TB, n int, servers string) *testFleet {
	t.Helper()
	f := &testFleet{nats: natstest.Start(t), down: map[int]bool{}}
	var urls []string
	for i := range n {
		g, srv := f.startReplica(t, i, servers)
		f.gws, f.srvs = append(f.gws, g), append(f.srvs, srv)
		urls = append(urls, srv.URL)
	}
	p, err := rrproxy.New(urls...)
	if err != nil {
		t.Fatal(err)
	}
	var next atomic.Uint64
	p.Pick = func(_ *http.Request, n int) int { // round robin over live replicas
		f.mu.Lock()
		defer f.mu.Unlock()
		for {
			if i := int(next.Add(1)-1) % n; !f.down[i] {
				return i
			}
		}
	}
	f.proxy = p
	front := httptest.NewServer(p)
	t.Cleanup(front.Close)
	f.url = front.URL + "/mcp"
	return f
}

func (f *testFleet) startReplica(t testing.TB, i int, servers string) (*Gateway, *httptest.Server) {
	t.Helper()
	js := strings.TrimSuffix(servers, "}") + fmt.Sprintf(`, "cluster": {"nats_url": %q, "name": "tf", "secret": %q, "replica": "r%d"}}`,
		f.nats.ClientURL(), testFleetSecret, i)
	cfg, err := config.Parse("test.json", []byte(js))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	url, g := startGatewayConfig(t, cfg, Options{})
	waitFor(t, "replica joined the fleet", func() bool { return g.fleetSess.Load() != nil && g.fleet.Connected() })
	srv := &httptest.Server{URL: strings.TrimSuffix(url, "/mcp")}
	return g, srv
}

// stop shuts replica i down (listener and gateway) as if it died; the
// proxy no longer sends it anything.
func (f *testFleet) stop(i int) {
	f.mu.Lock()
	f.down[i] = true
	f.mu.Unlock()
	f.gws[i].Close()
}

// raw posts one JSON-RPC message through the proxy with session id sid
// and returns the HTTP status and body.
func (f *testFleet) raw(t testing.TB, method, sid, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, f.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// initRaw opens a session through the proxy and returns its id.
func (f *testFleet) initRaw(t testing.TB) string {
	t.Helper()
	req, _ := http.NewRequest("POST", f.url, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, sid)
	}
	if code, body := f.raw(t, "POST", sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); code != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", code, body)
	}
	return sid
}

// servedBy counts the sessions each replica serves.
func (f *testFleet) servedBy() []int {
	out := make([]int, len(f.gws))
	for i, g := range f.gws {
		out[i] = len(g.route.allSessions())
	}
	return out
}

// TestFleetSessionAcrossReplicas: a go-sdk client's whole session through
// a strict round-robin proxy over three replicas: every request lands on
// another replica than the one before, and each serves it.
func TestFleetSessionAcrossReplicas(t *testing.T) {
	up := testenvEverything(t)
	f := startFleet(t, 3, serversJSON(fmt.Sprintf(`"everything": {"url": %q}`, up)))
	cs := connect(t, f.url, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for round := range 3 {
		if got := toolNames(t, cs); len(got) == 0 {
			t.Fatalf("round %d: no tools", round)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_simple_text"})
		if err != nil || res.IsError {
			t.Fatalf("round %d: call: %v %+v", round, err, res)
		}
		if got := textOf(res); got != "This is a simple text response for testing." {
			t.Fatalf("round %d: tool said %q", round, got)
		}
		if err := cs.Ping(ctx, nil); err != nil {
			t.Fatalf("round %d: ping: %v", round, err)
		}
		if _, err := cs.ListResources(ctx, nil); err != nil {
			t.Fatalf("round %d: resources/list: %v", round, err)
		}
	}
	for i, n := range f.servedBy() {
		if n != 1 {
			t.Fatalf("replica %d serves %d sessions, want 1 each (%v)", i, n, f.servedBy())
		}
	}
	sid := cs.ID()
	if err := cs.Close(); err != nil {
		t.Fatalf("DELETE: %v", err)
	}
	waitFor(t, "every replica closed the deleted session", func() bool {
		return f.servedBy()[0]+f.servedBy()[1]+f.servedBy()[2] == 0
	})
	for i := range 3 {
		if code, body := f.raw(t, "POST", sid, `{"jsonrpc":"2.0","id":9,"method":"ping"}`); code != http.StatusNotFound {
			t.Fatalf("replay %d after DELETE: %d %s", i, code, body)
		}
	}
}

var _ = bytes.NewReader
var _ = cluster.Token
