package gateway

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/natstest"
	"github.com/edge-mcp/edge-mcp/internal/rrproxy"
)

// sub2025 is the sub-benchmark of one 2025-11-25 session.
const sub2025 = "session2025/sessions=1"

// fleetBenchLimits is a client rate limit that never refuses the
// benchmark but is asked on every call: locally on the single replica,
// through leases of the shared bucket in the fleet.
const fleetBenchLimits = `"limits": {"client_rate": {"rps": 1000000, "burst": 1000000}},`

// BenchmarkFleetCallEcho compares, in the same run, small tools/calls
// through one replica without a cluster section ("single") with the same
// calls through three replicas of one fleet (one in-process NATS server)
// behind the strict round-robin proxy ("fleet"): every call lands on a
// replica other than the previous one. A third path, one replica without
// a cluster behind the same proxy ("proxied"), separates the cost of the
// proxy's hop (which any load balancer adds) from the fleet's own. The client speaks 2026-07-28
// (sessionless, so any replica serves any call; the upstream is a
// stateless go-sdk server). Both paths carry a client_rate limit, shared
// by leases in the fleet. Budget (BENCHMARKS.md): fleet calls/s ≥ 0.9x of
// single.
//
// The sub-benchmark session2025/sessions=1 is one 2025-11-25 session (the
// sealed session token of the fleet; its GET stream open) calling echo on
// every path: in the fleet every call lands on a replica other than the
// one before, so two calls in three are served by a replica that did not
// create the session (each replica adopted it during the warm-up).
// Budget: fleet p50 at most 1 ms above proxied (the same session through
// the same proxy over one replica, which always created it).
func BenchmarkFleetCallEcho(b *testing.B) {
	nats := natstest.Start(b)
	srv := newBenchServer()
	up := serveHandler(b, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	servers := fmt.Sprintf(`"up": {"url": %q}`, up)
	single, _ := startGateway(b, fmt.Sprintf(`{"mcpServers": {%s}, %s "listen": "127.0.0.1:0"}`, servers, fleetBenchLimits), Options{PageSize: 1000})
	front, reps := startOpsFleet(b, 3, nats.ClientURL(), servers, fleetBenchLimits)
	proxy, err := rrproxy.New(strings.TrimSuffix(single, "/mcp"))
	if err != nil {
		b.Fatal(err)
	}
	proxied := serveHandler(b, proxy) + "/mcp"
	env := benchEnv{urls: map[string]string{"single": single, "proxied": proxied, "fleet": front},
		paths: []string{"single", "proxied", "fleet"}}
	sessions := map[string]int{"sessions=1": 1, "sessions=8": 8, sub2025: 1}
	// CPU per call of the whole process (client, proxy, replicas, NATS,
	// upstream): unlike calls/s it does not depend on how much of the
	// machine other processes take.
	var mu sync.Mutex
	cpu := map[string]time.Duration{}
	subs := []string{"sessions=1", "sessions=8", sub2025}
	got := benchPair(b, env, subs, func(b *testing.B, url, sub string) figures {
		n := sessions[sub]
		c := newBenchClient(url)
		c.version = benchProtocolVersion2026
		if sub == sub2025 {
			c.version = benchProtocolVersion
		}
		css := c.sessions(b, n)
		for _, cs := range css {
			for range 3 { // warm a connection to every replica
				if err := callEcho(b.Context(), cs); err != nil {
					b.Fatal(err)
				}
			}
		}
		if sub == sub2025 && url == front {
			// The session's warm-up calls went to every replica: each
			// adopted it, so the measured calls are served by replicas
			// that did not create it two times in three.
			for i, r := range reps {
				if len(r.g.route.allSessions()) == 0 {
					b.Fatalf("replica %d does not serve the 2025-11-25 session after the warm-up", i)
				}
			}
		}
		cpu0 := processCPU()
		f := runOps(b, n, func(ctx context.Context, w int) error { return callEcho(ctx, css[w]) })
		perCall := (processCPU() - cpu0) / time.Duration(b.N)
		b.ReportMetric(µs(perCall), "cpu-µs/op")
		mu.Lock()
		cpu[sub+"/"+url] = perCall // the final round of the leaf wins
		mu.Unlock()
		return f
	})
	for _, sub := range subs {
		f := got[sub]
		if len(f) < 3 {
			continue
		}
		logRatios("FleetCallEcho "+sub+" (one replica → 3 behind round robin)",
			map[string]figures{"direct": f["single"], "gateway": f["fleet"]}, func(d, g figures) string {
				r := g.callsPerSec / d.callsPerSec
				return fmt.Sprintf("calls/s %.0f%% of one replica ≥ 90%%: %s", 100*r, verdict(r >= 0.9))
			})
		var adopted func(d, g figures) string
		if sub == sub2025 {
			adopted = func(d, g figures) string {
				diff := g.p50 - d.p50
				return fmt.Sprintf("p50 %+.0f µs served by replicas that did not create the session ≤ +1 ms: %s", µs(diff), verdict(diff <= time.Millisecond))
			}
		}
		logRatios("FleetCallEcho "+sub+" (one replica behind the proxy → 3 behind it)",
			map[string]figures{"direct": f["proxied"], "gateway": f["fleet"]}, adopted)
		c := func(path string) float64 { return µs(cpu[sub+"/"+env.urls[path]]) }
		fmt.Printf("ratio FleetCallEcho %s CPU per call (whole process): single %.0f µs, proxied %.0f µs, fleet %.0f µs (fleet/single %.2fx, fleet/proxied %.2fx)\n",
			sub, c("single"), c("proxied"), c("fleet"), c("fleet")/c("single"), c("fleet")/c("proxied"))
	}
}
