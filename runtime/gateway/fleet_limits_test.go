package gateway

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edge-mcp/edge-mcp/internal/natstest"
	"github.com/edge-mcp/edge-mcp/internal/rrproxy"
	"github.com/edge-mcp/edge-mcp/runtime/cluster"
)

// opsSecret is the cluster secret of the fleets in these tests.
const opsSecret = "fleet-ops-test-secret-0123456789abcdef"

// opsReplica is one replica of a test fleet: its own /mcp URL and gateway.
type opsReplica struct {
	url string
	g   *Gateway
}

// startOpsFleet starts n gateway replicas of one fleet on natsURL (each
// with its own listener), configured with servers and extra top-level
// keys, and a strict round-robin proxy in front. It returns the proxy's
// /mcp URL and the replicas.
func startOpsFleet(t testing.TB, n int, natsURL, servers, extra string) (string, []opsReplica) {
	t.Helper()
	var bases []string
	var reps []opsReplica
	for i := range n {
		cfg := fmt.Sprintf(`{"mcpServers": {%s}, %s "cluster": {"allow_anonymous_nats": true, "nats_url": %q, "name": "ops", "secret": %q, "replica": "r%d"}}`,
			servers, extra, natsURL, opsSecret, i)
		url, g := startGateway(t, cfg, Options{})
		bases = append(bases, strings.TrimSuffix(url, "/mcp"))
		reps = append(reps, opsReplica{url: url, g: g})
	}
	p, err := rrproxy.New(bases...)
	if err != nil {
		t.Fatal(err)
	}
	return serveHandler(t, p) + "/mcp", reps
}

// hammerClient keeps a connection per worker to the front.
var hammerClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}

// modernCall is a sessionless 2026-07-28 tools/call of echo: any replica
// serves it.
func fleetEchoCall(hc *http.Client, url, text string) (*http.Response, error) {
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + text + `"},"_meta":` + modernMeta("2026-07-28") + `}}`
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "echo")
	return hc.Do(req)
}

// hammerFleet sends calls from 12 workers for d and counts the answers by
// HTTP status; a call that gets no answer counts as status 0.
func hammerFleet(url string, d time.Duration) map[int]int {
	var mu sync.Mutex
	counts := map[int]int{}
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	var seq atomic.Int64
	for range 12 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				status := 0
				resp, err := fleetEchoCall(hammerClient, url, fmt.Sprint(seq.Add(1)))
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					status = resp.StatusCode
				}
				mu.Lock()
				counts[status]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return counts
}

// TestFleetRateLimits: three replicas on one NATS, a rate limit of 20 rps
// (client_rate, tool_rate, a tool rule's rate), one client hammering
// through a round-robin proxy: about 20 calls a second get through in
// total, not 60. A correctness test of the limit: the window is long and
// the tolerance ±20%.
func TestFleetRateLimits(t *testing.T) {
	const rate = `{"rps": 20, "burst": 4}`
	tests := []struct{ name, limits string }{
		{"client_rate", `"limits": {"client_rate": ` + rate + `},`},
		{"tool_rate", `"limits": {"tool_rate": ` + rate + `},`},
		{"tool_rules rate", `"tool_rules": [{"tools": ["echo"], "rate": ` + rate + `}],`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := natstest.Start(t)
			servers := fmt.Sprintf(`"up": {"url": %q}`, modernUpstream(t))
			front, reps := startOpsFleet(t, 3, s.ClientURL(), servers, tt.limits)
			hammerFleet(front, 500*time.Millisecond) // spend the burst
			const window = 3 * time.Second
			// What is measured is the shared limit: a window in which a
			// replica limited calls locally for want of NATS (the bucket
			// not yet open, or an ask timed out on a loaded machine) is
			// measured again, five times at most.
			var counts map[int]int
			for try := 1; ; try++ {
				before := opsFallbacks(reps)
				counts = hammerFleet(front, window)
				fallbacks := opsFallbacks(reps) - before
				t.Logf("answers in %v: %v; calls limited per replica for want of NATS: %d", window, counts, fallbacks)
				if fallbacks == 0 {
					break
				}
				if try == 5 {
					t.Fatalf("in each of %d windows replicas limited calls locally for want of NATS", try)
				}
			}
			ok, limited := counts[http.StatusOK], counts[http.StatusTooManyRequests]
			// At 30 calls/s or more, a limit of 20 per replica would let
			// 30 or more through, out of the tolerance: the test tells.
			if tried := ok + limited; float64(tried) < 30*window.Seconds() {
				t.Fatalf("only %d calls in %v: the client did not hammer", tried, window)
			}
			if rate := float64(ok) / window.Seconds(); rate < 16 || rate > 24 {
				t.Fatalf("fleet let %.1f calls/s through (%d in %v), want 20 ±20%%", rate, ok, window)
			}
			if n := len(counts) - 2; n > 0 {
				t.Errorf("answers other than 200 and 429: %v", counts)
			}
		})
	}
}

// opsFallbacks counts the calls the replicas limited locally because the
// shared bucket could not be asked in time.
func opsFallbacks(reps []opsReplica) int64 {
	var n int64
	for _, r := range reps {
		gd := r.g.guard.Load()
		for _, l := range gd.Rates() {
			if fl, ok := l.(*cluster.Limiter); ok {
				n += fl.Fallbacks()
			}
		}
	}
	return n
}
