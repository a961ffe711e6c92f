package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	w "github.com/edge-mcp/edge-mcp/policy/wasmtest"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestHostileSlowClients attacks the release binary as issue 15 did: a
// few thousand connections from one address, each announcing a 4 MB POST
// body and sending it one byte at a time (and reconnecting when cut). Before the limits every one
// was held open and RSS grew by about 30 KiB each (303 MB for 10,000);
// now the header and body timeouts cut them, one address holds at most a
// quarter of the slots, and meanwhile an ordinary client from another
// address is served, with the process's peak RSS under 64 MiB.
func TestHostileSlowClients(t *testing.T) {
	t.Parallel()
	const attackers = 4000
	bin := releaseBinary(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gw.json")
	os.WriteFile(cfg, []byte(`{"mcpServers": {"child": {"command": "`+bin+`", "args": ["stdio"]}},
		"limits": {"read_header_timeout": 2, "body_read_timeout": 2, "max_connections": 2000}}`), 0o600)
	p := startBinary(t, "serve", "--config", cfg, "--listen", "127.0.0.1:0", "--admin", "off", "--state-dir", dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := waitConnected(ctx, p.base, 1); err != nil {
		t.Fatalf("%v\n%s", err, p.stderr)
	}
	addr := strings.TrimPrefix(p.base, "http://")

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var held, cut atomic.Int64
	dialer := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 2 * time.Second}
	for range attackers {
		wg.Go(func() { trickle(dialer, addr, stop, &held, &cut) })
	}
	time.Sleep(3 * time.Second) // the attack is on: slots held, timeouts cutting

	start := time.Now()
	c := mcp.NewClient(&mcp.Implementation{Name: "ordinary", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: p.base + "/mcp"}, nil)
	if err != nil {
		t.Fatalf("an ordinary client could not connect during the attack: %v", err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "still here"}})
	if err != nil || res.IsError || len(res.Content) == 0 || res.Content[0].(*mcp.TextContent).Text != "still here" {
		t.Fatalf("an ordinary tools/call during the attack: %v %+v", err, res)
	}
	t.Logf("ordinary call served in %v during an attack of %d connections (%d cut so far)",
		time.Since(start).Round(time.Millisecond), attackers, cut.Load())
	cs.Close()
	close(stop)
	wg.Wait()
	if cut.Load() == 0 {
		t.Error("no attacking connection was ever cut")
	}
	if peak := p.peakRSS(t); peak > 64<<20 {
		t.Errorf("peak RSS %.1f MiB under the attack, want under 64 MiB", float64(peak)/(1<<20))
	} else {
		t.Logf("peak RSS %.1f MiB", float64(peak)/(1<<20))
	}
}

// trickle keeps one slow POST going against addr until stop: headers, then
// one byte of body every 200 ms; a connection the server cuts is counted
// and replaced.
func trickle(d net.Dialer, addr string, stop <-chan struct{}, held, cut *atomic.Int64) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		conn, err := d.Dial("tcp", addr)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		held.Add(1)
		fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 4000000\r\n\r\n", addr)
		for {
			select {
			case <-stop:
				conn.Close()
				return
			case <-time.After(200 * time.Millisecond):
			}
			if _, err := conn.Write([]byte(" ")); err != nil {
				break
			}
		}
		conn.Close()
		cut.Add(1)
		select { // an attacker reconnects at once; a little pause keeps the test's own CPU for the gateway
		case <-stop:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestHostileBigAnswers: an upstream answers ten calls at once with 24 MiB
// each, to a gateway on a small host (limits.memory_mb 128, so the budget
// of upstream bytes in flight is a quarter of it, 32 MiB). Before the
// budget every answer was read whole at once (10 concurrent 1 GB answers
// took the process to 1.2 GB); now the calls over the budget get an error
// naming it, none hangs, and the process stays within its memory limit
// plus a margin.
func TestHostileBigAnswers(t *testing.T) {
	t.Parallel()
	const calls, size, memoryMB = 10, 24 << 20, 128
	up := bigUpstream(t, size)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gw.json")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`{"mcpServers": {"big": {"url": %q, "timeout": 120}}, "limits": {"memory_mb": %d}}`, up+"/mcp", memoryMB)), 0o600)
	p := startBinary(t, "serve", "--config", cfg, "--listen", "127.0.0.1:0", "--admin", "off", "--state-dir", dir)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if err := waitConnected(ctx, p.base, 1); err != nil {
		t.Fatalf("%v\n%s", err, p.stderr)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "greedy", Version: "1"}, nil)
	var ok, over atomic.Int64
	var wg sync.WaitGroup
	for range calls {
		wg.Go(func() {
			cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: p.base + "/mcp"}, nil)
			if err != nil {
				t.Errorf("connect: %v", err)
				return
			}
			defer cs.Close()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "big"})
			switch {
			case err != nil && strings.Contains(err.Error(), "budget"):
				over.Add(1)
			case err != nil:
				t.Errorf("a call failed for another reason: %v", err)
			case len(res.Content) == 1 && len(res.Content[0].(*mcp.TextContent).Text) == size:
				ok.Add(1)
			default:
				t.Errorf("a call got a wrong answer")
			}
		})
	}
	wg.Wait()
	t.Logf("%d answered whole, %d refused over the budget", ok.Load(), over.Load())
	if ok.Load() == 0 || over.Load() == 0 {
		t.Errorf("want some calls answered and some refused over budget, got %d and %d", ok.Load(), over.Load())
	}
	// The budget covers the answers being read and relayed; the Go memory
	// limit makes the collector return the rest in time. The margin is the
	// runtime's own and the copies of one answer being written.
	if peak := p.peakRSS(t); peak > (memoryMB+48)<<20 {
		t.Errorf("peak RSS %.0f MiB, want at most the memory limit + 48 MiB = %d MiB", float64(peak)/(1<<20), memoryMB+48)
	} else {
		t.Logf("peak RSS %.0f MiB", float64(peak)/(1<<20))
	}
}

// bigUpstream is a minimal streamable HTTP MCP server whose one tool, big,
// answers with size bytes of text encoded once, up front: the test process
// (race-instrumented, on a loaded machine) must not spend minutes encoding
// 24 MiB answers, which would time the calls out before the gateway's
// budget is what is tested.
func bigUpstream(t *testing.T, size int) string {
	big := []byte(`{"content":[{"type":"text","text":"` + strings.Repeat("x", size) + `"}]}`)
	results := map[string][]byte{
		"initialize": []byte(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"big","version":"1"}}`),
		"tools/list": []byte(`{"tools":[{"name":"big","inputSchema":{"type":"object"}}]}`),
		"tools/call": big,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.NewDecoder(r.Body).Decode(&req) != nil || req.ID == nil {
			w.WriteHeader(http.StatusAccepted) // a notification
			return
		}
		result, ok := results[req.Method]
		if !ok {
			result = []byte(`{}`) // ping and the like
		}
		head := []byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":`)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Mcp-Session-Id", "big")
		w.Header().Set("Content-Length", strconv.Itoa(len(head)+len(result)+1))
		w.Write(head)
		w.Write(result)
		w.Write([]byte("}"))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestHostileModuleMemory attaches, in the release binary, a policy module
// whose tool_call hook grows its memory a page at a time until memory.grow
// is refused, then traps; four instances (pool_size 4) share memory_mb 32.
// Eight sessions call through it concurrently (on_error allow: the calls
// go on). The module's memory, all instances together, stays within 32
// MiB (its budget refuses the rest; policy tests check the accounting),
// and with limits.memory_mb set to idle + twice the module's limit the
// process's peak RSS stays within that plus 48 MiB (the collector races the growing modules on a loaded machine): the buffers an instance
// outgrew and the instances discarded after a trap are garbage until the
// collector runs, and the memory limit makes it run in time (the
// documented margin; without a limit they can pile up to several times the
// module's budget between collections).
func TestHostileModuleMemory(t *testing.T) {
	t.Parallel()
	const memoryMB, processMB = 32, 16 + 2*32 + 16
	bin := releaseBinary(t)
	dir := t.TempDir()
	grow := w.Seq([]byte{w.OpLoop, w.OpBlockTypeVoid}, w.I32Const(1),
		[]byte{w.OpMemoryGrow, 0}, w.I32Const(1), []byte{w.OpI32Add, w.OpBrIf, 0, w.OpEnd, w.OpUnreachable})
	mod := filepath.Join(dir, "hog.wasm")
	os.WriteFile(mod, w.PolicyModule(1<<16, map[string][]byte{"edge_hook_tool_call": grow}).Bytes(), 0o600)
	cfg := filepath.Join(dir, "gw.json")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`{"mcpServers": {"child": {"command": %q, "args": ["stdio"]}},
		"limits": {"memory_mb": %d},
		"policies": [{"name": "hog", "module": %q, "tools": ["*"], "memory_mb": %d, "pool_size": 4, "timeout_ms": 2000, "on_error": "allow"}]}`,
		bin, processMB, mod, memoryMB)), 0o600)
	p := startBinary(t, "serve", "--config", cfg, "--listen", "127.0.0.1:0", "--admin", "off", "--state-dir", dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := waitConnected(ctx, p.base, 1); err != nil {
		t.Fatalf("%v\n%s", err, p.stderr)
	}
	idle := p.peakRSS(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			c := mcp.NewClient(&mcp.Implementation{Name: "caller", Version: "1"}, nil)
			cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: p.base + "/mcp"}, nil)
			if err != nil {
				t.Errorf("connect: %v", err)
				return
			}
			defer cs.Close()
			for range 5 {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}})
				if err != nil || res.IsError {
					t.Errorf("a call through the failing module (on_error allow): %v %+v", err, res)
					return
				}
			}
		})
	}
	wg.Wait()
	peak := p.peakRSS(t)
	t.Logf("idle %.0f MiB, peak %.0f MiB with a module of memory_mb %d growing in 4 instances", float64(idle)/(1<<20), float64(peak)/(1<<20), memoryMB)
	if limit := int64(processMB+48) << 20; peak > limit {
		t.Errorf("peak RSS %.0f MiB, want at most limits.memory_mb + 48 MiB = %.0f MiB", float64(peak)/(1<<20), float64(limit)/(1<<20))
	}
	st, err := http.Get(p.base + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Body.Close()
	var doc struct {
		Policies []struct {
			Name     string `json:"name"`
			Failures uint64 `json:"failures"`
		} `json:"policies"`
	}
	json.NewDecoder(st.Body).Decode(&doc)
	if len(doc.Policies) != 1 || doc.Policies[0].Failures == 0 {
		t.Errorf("status %+v: want the hog module with failures counted (its grows were refused)", doc.Policies)
	}
}
