package gateway

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/runtime/toolsearch"
)

// searchBenchQueries are what a model might ask tool_search, in rotation.
var searchBenchQueries = []string{
	"create a github issue", "post a message to a slack channel", "weather forecast", "run a SQL query",
	"invite people to a calendar meeting", "move a jira issue to done", "read a file", "send an email",
	"list customer invoices with status and due date", "files_list_directory",
}

// BenchmarkToolSearch10k measures tool_search over 10,000 deferred tools
// from four upstreams, through a real MCP client session over streamable
// HTTP (budget: p50 under 5 ms), against three baselines in the same run:
// an MCP ping on the same session (the transport's floor), a tools/call of a
// visible tool forwarded to its upstream, and the index's own Search (the
// ranking alone). It reports the memory of the session's view
// and of the search index, and the time of the one index build (the first
// search of a set of deferred tools pays it).
func BenchmarkToolSearch10k(b *testing.B) {
	env := startScaleGateway(b, 2500, "")
	cs := connect(b, env.url, nil)
	ctx := context.Background()

	var m0, m1, m2 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	toolNames(b, cs) // builds the session's view
	runtime.GC()
	runtime.ReadMemStats(&m1)
	deferred := benchDeferred(b, env.g)
	buildStart := time.Now()
	ix := toolsearch.Build(deferredTools(deferred))
	buildMS := float64(time.Since(buildStart).Microseconds()) / 1e3
	runtime.GC()
	runtime.ReadMemStats(&m2)
	viewMiB := float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / (1 << 20)
	indexMiB := float64(int64(m2.HeapAlloc)-int64(m1.HeapAlloc)) / (1 << 20)
	if len(deferred) != env.total-1 {
		b.Fatalf("%d deferred tools, want %d", len(deferred), env.total-1)
	}
	toolSearch(b, cs, "warm up", 1) // the first search looks the index up (or builds it)

	p50 := map[string]time.Duration{}
	run := func(name string, op func(i int)) {
		b.Run(name, func(b *testing.B) {
			ds := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				start := time.Now()
				op(i)
				ds = append(ds, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(ds)
			p50[name] = ds[len(ds)/2]
			b.ReportMetric(µs(ds[len(ds)/2]), "p50-µs")
			b.ReportMetric(µs(ds[len(ds)*99/100]), "p99-µs")
			if name == "tool_search" {
				b.ReportMetric(indexMiB, "index-MiB")
				b.ReportMetric(viewMiB, "view-MiB")
				b.ReportMetric(buildMS, "index-build-ms")
			}
		})
	}
	run("tool_search", func(i int) {
		q := searchBenchQueries[i%len(searchBenchQueries)]
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: toolSearchName, Arguments: map[string]any{"query": q}})
		if err != nil || res.IsError {
			b.Fatalf("tool_search %q: %v %v", q, err, res)
		}
	})
	run("ping", func(int) {
		if err := cs.Ping(ctx, nil); err != nil {
			b.Fatal(err)
		}
	})
	run("call_echo", func(int) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
		if err != nil || res.IsError {
			b.Fatalf("echo: %v %v", err, res)
		}
	})
	run("index", func(i int) {
		if hits := ix.Hits(searchBenchQueries[i%len(searchBenchQueries)], toolsearch.DefaultLimit); len(hits) == 0 {
			b.Fatal("no hits")
		}
	})
	runtime.KeepAlive(ix)
	if s, p, e, x := p50["tool_search"], p50["ping"], p50["call_echo"], p50["index"]; s > 0 && p > 0 && e > 0 && x > 0 {
		verdict := "within"
		if s >= 5*time.Millisecond {
			verdict = "OVER"
		}
		fmt.Printf("ratio tool_search 10k: p50 %.0f µs (ping %.0f µs: %.2fx, +%.0f µs; forwarded echo call %.0f µs: %.2fx; index alone %.1f µs); index %.1f MiB, view %.1f MiB; budget p50 < 5000 µs: %s\n",
			µs(s), µs(p), µs(s)/µs(p), µs(s)-µs(p), µs(e), µs(s)/µs(e), µs(x), indexMiB, viewMiB, verdict)
	}
}

// benchDeferred returns the deferred tools of the gateway's session that
// built a view.
func benchDeferred(b *testing.B, g *Gateway) []*item {
	for _, s := range g.route.allSessions() {
		s.mu.Lock()
		v := s.view
		s.mu.Unlock()
		if v != nil && len(v.cat.Deferred) > 0 {
			return v.cat.Deferred
		}
	}
	b.Fatal("no session view with deferred tools")
	return nil
}
