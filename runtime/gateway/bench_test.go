package gateway

// The speed benchmarks of the gateway core. Every benchmark has a "direct"
// and a "gateway" sub-benchmark that run the same client code: a go-sdk
// mcp.Client over mcp.StreamableClientTransport (protocol 2025-11-25),
// talking either to an in-process go-sdk mcp.Server served with
// mcp.NewStreamableHTTPHandler on 127.0.0.1, or to a real Gateway (New +
// Handler) on another 127.0.0.1 listener in front of that same server. The
// parent benchmark prints a ratio line (gateway against direct, measured in
// the same run) and whether the budget of BENCHMARKS.md is met.
//
// Run them with: go tool task bench

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

// benchProtocolVersion is the protocol the benchmark clients pin.
const benchProtocolVersion = "2025-11-25"

// benchResultSize is the size of the text the "blob" tool returns.
const benchResultSize = 1 << 20

// benchPaths are the two ways a benchmark client reaches the upstream.
var benchPaths = []string{"direct", "gateway"}

// benchEnv is an upstream go-sdk server and a gateway in front of it, both
// on real 127.0.0.1 listeners.
type benchEnv struct {
	urls  map[string]string // "direct" / "gateway" → MCP endpoint
	gw    *Gateway
	paths []string // the paths to compare; nil: benchPaths
}

// newBenchEnv serves s over streamable HTTP and starts a gateway whose only
// upstream is s. The gateway's catalogue pages hold at least 1000 items, as
// go-sdk's server pages do by default, so list results are comparable.
//
// The goroutines of each side carry the pprof label "side" ("upstream" or
// "gateway"; goroutines inherit the labels of the one that starts them), so
// a CPU profile splits by side: go tool pprof -tagfocus=side=gateway.
// Unlabelled samples are the benchmark client's.
func newBenchEnv(b *testing.B, s *mcp.Server) benchEnv {
	b.Helper()
	return newBenchEnvOpts(b, s, nil)
}

// newBenchEnvOpts is newBenchEnv with the upstream's handler options
// (Stateless: a 2026-07-28 server, which the gateway's link then speaks).
func newBenchEnvOpts(b *testing.B, s *mcp.Server, opts *mcp.StreamableHTTPOptions) benchEnv {
	b.Helper()
	var (
		up, gw string
		g      *Gateway
	)
	pprof.Do(b.Context(), pprof.Labels("side", "upstream"), func(context.Context) {
		up = serveHandler(b, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, opts))
	})
	pprof.Do(b.Context(), pprof.Labels("side", "gateway"), func(context.Context) {
		gw, g = startGateway(b, serversJSON(fmt.Sprintf(`"up": {"url": %q}`, up)), Options{PageSize: 1000})
	})
	var relay string
	pprof.Do(b.Context(), pprof.Labels("side", "relay"), func(context.Context) {
		relay = serveHandler(b, newBenchRelay(b, up))
	})
	return benchEnv{urls: map[string]string{"direct": up, "gateway": gw, "relay": relay}, gw: g}
}

// newBenchRelay is the floor of any HTTP gateway in this set-up: a
// reverse proxy from the standard library (httputil.ReverseProxy over an
// http.Transport with the same idle pool as the benchmark clients) that
// passes every request to the upstream endpoint and streams the answer
// back, doing no MCP work at all. A benchmark's "relay" path runs the same
// client code through it, so that the extra HTTP hop's own cost on these
// shared cores is measured in the same run as direct and gateway.
func newBenchRelay(b *testing.B, endpoint string) http.Handler {
	u, err := url.Parse(endpoint)
	if err != nil {
		b.Fatal(err)
	}
	return &httputil.ReverseProxy{
		Transport:     newBenchHTTPClient().Transport,
		FlushInterval: -1,
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(u) },
	}
}

// newBenchServer is the upstream of the call benchmarks: "echo" returns its
// text argument, "blob" returns a 1 MiB text.
func newBenchServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Returns its text argument unchanged."},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	blob := benchBlob()
	mcp.AddTool(s, &mcp.Tool{Name: "blob", Description: "Returns 1 MiB of text."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: blob}}}, nil, nil
		})
	return s
}

// benchBlob returns benchResultSize bytes of log-like text (with newlines
// and quotes, so JSON has something to escape).
func benchBlob() string {
	const line = "2026-01-02T03:04:05Z INFO request served path=\"/api/v1/items\" status=200 bytes=5120 duration=1.25ms\n"
	var sb strings.Builder
	sb.Grow(benchResultSize)
	for sb.Len()+len(line) <= benchResultSize {
		sb.WriteString(line)
	}
	sb.WriteString(strings.Repeat("x", benchResultSize-sb.Len()))
	return sb.String()
}

// newBench1000ToolsServer offers 1,000 tools with a description and a small
// input schema each (about 300 bytes per tool in tools/list).
func newBench1000ToolsServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "many-tools", Version: "1"}, nil)
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"query": map[string]any{"type": "string", "description": "what to look for"},
			"limit": map[string]any{"type": "integer", "description": "the largest number of results"},
		},
		"required": []any{"query"},
	}
	handler := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	}
	for i := range 1000 {
		s.AddTool(&mcp.Tool{
			Name:        fmt.Sprintf("tool_%04d", i),
			Description: fmt.Sprintf("Searches collection number %d and returns the matching records, newest first.", i),
			InputSchema: schema,
		}, handler)
	}
	return s
}

// newBenchHTTPClient returns the HTTP client of one benchmark client. Its
// idle pool is large enough for every session's connections, so neither
// path pays for new TCP connections once warm.
func newBenchHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 256
	tr.MaxIdleConnsPerHost = 256
	return &http.Client{Transport: tr}
}

// benchClient is the client side of one sub-benchmark.
type benchClient struct {
	url     string
	client  *mcp.Client
	hc      *http.Client
	version string // the protocol it pins: benchProtocolVersion unless set
}

func newBenchClient(url string) *benchClient {
	return &benchClient{
		url:    url,
		client: mcp.NewClient(&mcp.Implementation{Name: "edge-mcp-bench", Version: "1"}, nil),
		hc:     newBenchHTTPClient(),
	}
}

// connect opens a new client session.
func (c *benchClient) connect(ctx context.Context) (*mcp.ClientSession, error) {
	cs, err := c.client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: c.url, HTTPClient: c.hc},
		&mcp.ClientSessionOptions{ProtocolVersion: cmp.Or(c.version, benchProtocolVersion)})
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", c.url, err)
	}
	return cs, nil
}

// sessions opens n sessions that stay open until the benchmark ends.
func (c *benchClient) sessions(b *testing.B, n int) []*mcp.ClientSession {
	b.Helper()
	css := make([]*mcp.ClientSession, n)
	for i := range css {
		cs, err := c.connect(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		css[i] = cs
	}
	b.Cleanup(func() {
		for _, cs := range css {
			cs.Close()
		}
		c.hc.CloseIdleConnections()
	})
	return css
}

// callEcho calls the echo tool once and checks the answer.
func callEcho(ctx context.Context, cs *mcp.ClientSession) error {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello, edge-mcp"}})
	if err != nil {
		return fmt.Errorf("calling echo: %w", err)
	}
	if got := resultText(res); res.IsError || got != "hello, edge-mcp" {
		return fmt.Errorf("echo answered %q (isError %v)", got, res.IsError)
	}
	return nil
}

// resultText returns the text of a result's only text block ("" if none).
func resultText(res *mcp.CallToolResult) string {
	if len(res.Content) != 1 {
		return ""
	}
	tc, _ := res.Content[0].(*mcp.TextContent)
	if tc == nil {
		return ""
	}
	return tc.Text
}

// figures are the measurements of one sub-benchmark.
type figures struct {
	callsPerSec float64
	p50, p99    time.Duration
	cpuPerOp    float64    // µs of the process's CPU per op
	round       *testing.B // the leaf that measured them
}

// runOps runs op b.N times spread over `workers` goroutines (worker w gets
// its index), timing each op, and reports calls/s, p50 and p99 latency.
func runOps(b *testing.B, workers int, op func(ctx context.Context, worker int) error) figures {
	b.Helper()
	ctx := b.Context()
	lat := make([]time.Duration, b.N)
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	start := 0
	for w := range workers {
		n := b.N / workers
		if w < b.N%workers {
			n++
		}
		mine := lat[start : start+n]
		start += n
		wg.Go(func() {
			for i := range mine {
				t0 := time.Now()
				if err := op(ctx, w); err != nil {
					b.Error(err)
					return
				}
				mine[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	cpu := processCPU() - cpu0
	elapsed := b.Elapsed()
	slices.Sort(lat)
	f := figures{
		callsPerSec: float64(b.N) / elapsed.Seconds(),
		p50:         lat[len(lat)/2],
		p99:         lat[(len(lat)-1)*99/100],
	}
	b.ReportMetric(f.callsPerSec, "calls/s")
	b.ReportMetric(float64(f.p50.Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(f.p99.Nanoseconds())/1e3, "p99-µs")
	f.cpuPerOp = µs(cpu) / float64(b.N)
	b.ReportMetric(f.cpuPerOp, "cpu-µs/op")
	return f
}

// benchPair runs fn as the "direct" and the "gateway" sub-benchmark, each
// with the given sub-sub-benchmarks (none: fn runs directly under the path).
// It returns the figures of those that ran, by sub then path; with -count
// above 1 each figure is the median over the runs.
func benchPair(b *testing.B, env benchEnv, subs []string, fn func(b *testing.B, url, sub string) figures) map[string]map[string]figures {
	if len(subs) == 0 {
		subs = []string{""} // fn runs as the path's own benchmark
	}
	runs := make(map[string]map[string][]figures)
	paths := benchPaths
	if env.paths != nil {
		paths = env.paths
	}
	for _, path := range paths {
		b.Run(path, func(b *testing.B) {
			for _, sub := range subs {
				leaf := func(b *testing.B) {
					f := fn(b, env.urls[path], sub)
					if runs[sub] == nil {
						runs[sub] = make(map[string][]figures)
					}
					// Only the final round of a leaf (the one go test
					// reports) is kept: rounds before it ran fewer ops.
					if n := len(runs[sub][path]); n > 0 && runs[sub][path][n-1].round == b {
						runs[sub][path] = runs[sub][path][:n-1]
					}
					f.round = b
					runs[sub][path] = append(runs[sub][path], f)
				}
				if sub == "" {
					leaf(b)
				} else {
					b.Run(sub, leaf)
				}
			}
		})
	}
	got := make(map[string]map[string]figures)
	for sub, paths := range runs {
		got[sub] = make(map[string]figures)
		for path, fs := range paths {
			got[sub][path] = medianFigures(fs)
		}
	}
	return got
}

// medianFigures returns the median of each figure over several runs.
func medianFigures(fs []figures) figures {
	median := func(m func(figures) float64) float64 {
		v := make([]float64, len(fs))
		for i, f := range fs {
			v[i] = m(f)
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return figures{
		callsPerSec: median(func(f figures) float64 { return f.callsPerSec }),
		p50:         time.Duration(median(func(f figures) float64 { return float64(f.p50) })),
		p99:         time.Duration(median(func(f figures) float64 { return float64(f.p99) })),
		cpuPerOp:    median(func(f figures) float64 { return f.cpuPerOp }),
		round:       fs[len(fs)-1].round,
	}
}

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "MISSED"
}

func µs(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// logRatios prints one line to the benchmark output comparing the gateway
// with the direct path, each figure as direct → gateway (gateway/direct),
// and the budget verdict. benchstat ignores such lines.
func logRatios(name string, got map[string]figures, budget func(d, g figures) string) {
	d, okD := got["direct"]
	g, okG := got["gateway"]
	if !okD || !okG {
		return
	}
	line := fmt.Sprintf("ratio %s: calls/s %.0f → %.0f (%.2fx); p50 %.0f → %.0f µs (%.2fx, %+.0f µs); p99 %.0f → %.0f µs (%.2fx)",
		name, d.callsPerSec, g.callsPerSec, g.callsPerSec/d.callsPerSec,
		µs(d.p50), µs(g.p50), µs(g.p50)/µs(d.p50), µs(g.p50)-µs(d.p50),
		µs(d.p99), µs(g.p99), µs(g.p99)/µs(d.p99))
	if budget != nil {
		line += "; budget: " + budget(d, g)
	}
	if r, ok := got["relay"]; ok {
		// The bare relay's hop, and the gateway against it.
		line += fmt.Sprintf("; relay (a do-nothing HTTP hop) calls/s %.0f (%.2fx of direct), p50 %.0f µs (%+.0f µs); gateway/relay calls/s %.2fx",
			r.callsPerSec, r.callsPerSec/d.callsPerSec, µs(r.p50), µs(r.p50)-µs(d.p50), g.callsPerSec/r.callsPerSec)
	}
	fmt.Fprintln(os.Stdout, line)
}

// BenchmarkCallEcho measures a small tools/call: one session calling
// sequentially (latency), and 8 sessions calling concurrently (throughput).
func BenchmarkCallEcho(b *testing.B) {
	benchCallEcho(b, "CallEcho", newBenchEnv(b, newBenchServer()), "")
}

// BenchmarkCallEcho2026 is BenchmarkCallEcho at 2026-07-28: the client pins
// that revision and the upstream is a stateless go-sdk server, so the
// gateway's link to it speaks 2026-07-28 too. Every call is a POST of its
// own, served without a session on both sides.
func BenchmarkCallEcho2026(b *testing.B) {
	env := newBenchEnvOpts(b, newBenchServer(), &mcp.StreamableHTTPOptions{Stateless: true})
	if st := env.gw.Status()[0]; st.ProtocolVersion != benchProtocolVersion2026 {
		b.Fatalf("the gateway's link speaks %q, want %s", st.ProtocolVersion, benchProtocolVersion2026)
	}
	benchCallEcho(b, "CallEcho2026", env, benchProtocolVersion2026)
}

// benchProtocolVersion2026 is the sessionless revision BenchmarkCallEcho2026
// pins.
const benchProtocolVersion2026 = "2026-07-28"

// benchCallEcho runs the echo calls of env's direct and gateway paths from
// clients pinned to version ("": benchProtocolVersion) and prints the
// ratio lines under name with the budgets of BENCHMARKS.md: CallEcho's, or
// for 2026-07-28 calls/s ≥ 0.9x of direct.
func benchCallEcho(b *testing.B, name string, env benchEnv, version string) {
	sessions := map[string]int{"sessions=1": 1, "sessions=8": 8}
	env.paths = []string{"direct", "relay", "gateway"}
	got := benchPair(b, env, []string{"sessions=1", "sessions=8"}, func(b *testing.B, url, sub string) figures {
		n := sessions[sub]
		c := newBenchClient(url)
		c.version = version
		css := c.sessions(b, n)
		for _, cs := range css { // warm every connection
			if err := callEcho(b.Context(), cs); err != nil {
				b.Fatal(err)
			}
		}
		return runOps(b, n, func(ctx context.Context, w int) error { return callEcho(ctx, css[w]) })
	})
	ratioBudget := func(min float64) func(d, g figures) string {
		return func(d, g figures) string {
			r := g.callsPerSec / d.callsPerSec
			return fmt.Sprintf("calls/s %.0f%% of direct ≥ %.0f%%: %s", 100*r, 100*min, verdict(r >= min))
		}
	}
	if version == benchProtocolVersion2026 {
		logRatios(name+" sessions=1", got["sessions=1"], ratioBudget(0.9))
		logRatios(name+" sessions=8", got["sessions=8"], ratioBudget(0.9))
		return
	}
	logRatios(name+" sessions=1", got["sessions=1"], func(d, g figures) string {
		added := µs(g.p50) - µs(d.p50)
		return fmt.Sprintf("added p50 %.0f µs ≤ 150 µs: %s", added, verdict(added <= 150))
	})
	logRatios(name+" sessions=8", got["sessions=8"], ratioBudget(0.8))
}

// BenchmarkToolsList1000 measures one tools/list request against an
// upstream with 1,000 tools; both paths answer with all of them in one page
// (the gateway from its catalogue snapshot).
func BenchmarkToolsList1000(b *testing.B) {
	env := newBenchEnv(b, newBench1000ToolsServer())
	list := func(ctx context.Context, cs *mcp.ClientSession) error {
		res, err := cs.ListTools(ctx, &mcp.ListToolsParams{})
		if err != nil {
			return fmt.Errorf("listing tools: %w", err)
		}
		if len(res.Tools) != 1000 || res.NextCursor != "" {
			return fmt.Errorf("tools/list returned %d tools, next cursor %q; want 1000 in one page", len(res.Tools), res.NextCursor)
		}
		return nil
	}
	got := benchPair(b, env, nil, func(b *testing.B, url, _ string) figures {
		cs := newBenchClient(url).sessions(b, 1)[0]
		if err := list(b.Context(), cs); err != nil {
			b.Fatal(err)
		}
		return runOps(b, 1, func(ctx context.Context, _ int) error { return list(ctx, cs) })
	})
	logRatios("ToolsList1000", got[""], func(d, g figures) string {
		r := µs(g.p50) / µs(d.p50)
		return fmt.Sprintf("p50 %.2fx of direct ≤ 1.00x: %s", r, verdict(r <= 1))
	})
}

// BenchmarkNewSessionFirstResult measures what a new client waits for its
// first answer: connect (initialize, initialized), call echo once, close.
func BenchmarkNewSessionFirstResult(b *testing.B) {
	env := newBenchEnv(b, newBenchServer())
	got := benchPair(b, env, nil, func(b *testing.B, url, _ string) figures {
		c := newBenchClient(url)
		b.Cleanup(c.hc.CloseIdleConnections)
		op := func(ctx context.Context, _ int) error {
			cs, err := c.connect(ctx)
			if err != nil {
				return err
			}
			err = callEcho(ctx, cs)
			if cerr := cs.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("closing the session: %w", cerr)
			}
			return err
		}
		if err := op(b.Context(), 0); err != nil { // warm the connection pool
			b.Fatal(err)
		}
		return runOps(b, 1, op)
	})
	// Closed client sessions must not linger in the gateway (a leak would
	// also flatter its figures).
	waitFor(b, "the gateway to drop closed sessions", func() bool {
		return len(env.gw.route.allSessions()) == 0
	})
	logRatios("NewSessionFirstResult", got[""], nil)
}

// BenchmarkResult1MiB measures a tools/call whose result is 1 MiB of text.
func BenchmarkResult1MiB(b *testing.B) {
	env := newBenchEnv(b, newBenchServer())
	blob := func(ctx context.Context, cs *mcp.ClientSession) error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "blob", Arguments: map[string]any{}})
		if err != nil {
			return fmt.Errorf("calling blob: %w", err)
		}
		if n := len(resultText(res)); res.IsError || n != benchResultSize {
			return fmt.Errorf("blob answered %d bytes of text (isError %v), want %d", n, res.IsError, benchResultSize)
		}
		return nil
	}
	got := benchPair(b, env, nil, func(b *testing.B, url, _ string) figures {
		cs := newBenchClient(url).sessions(b, 1)[0]
		if err := blob(b.Context(), cs); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(benchResultSize)
		return runOps(b, 1, func(ctx context.Context, _ int) error { return blob(ctx, cs) })
	})
	logRatios("Result1MiB", got[""], func(d, g figures) string {
		r := µs(g.p50) / µs(d.p50)
		return fmt.Sprintf("p50 %.2fx of direct ≤ 1.25x: %s", r, verdict(r <= 1.25))
	})
}

// BenchmarkCallVirtual measures what a virtual server costs on the hot
// path: one session calling echo on /mcp with its text, and one calling it
// through a virtual server that fixes the text (the gateway adds it to the
// arguments, and the schema check and routing go through the server's
// view). The budget (issue #30): at most 10 µs more CPU per call.
func BenchmarkCallVirtual(b *testing.B) {
	up := serveMCP(b, newBenchServer())
	root, _ := startGateway(b, fmt.Sprintf(`{"mcpServers": {"up": {"url": %q}},
		"virtual_servers": {"v": {"path": "/mcp/v", "tools": ["echo"],
		  "overrides": {"echo": {"arguments": {"text": {"fixed": "hello, edge-mcp"}}}}}}}`, up), Options{PageSize: 1000})
	env := benchEnv{urls: map[string]string{"gateway": root, "gateway+virtual": root + "/v"}, paths: []string{"gateway", "gateway+virtual"}}
	got := benchPair(b, env, []string{"sessions=1"}, func(b *testing.B, url, _ string) figures {
		cs := newBenchClient(url).sessions(b, 1)[0]
		call := func(ctx context.Context, _ int) error { return callEcho(ctx, cs) }
		if strings.HasSuffix(url, "/v") {
			call = func(ctx context.Context, _ int) error {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}})
				if err != nil || res.IsError || resultText(res) != "hello, edge-mcp" {
					return fmt.Errorf("echo through the virtual server: %v %v", err, res)
				}
				return nil
			}
		}
		if err := call(b.Context(), 0); err != nil {
			b.Fatal(err)
		}
		return runOps(b, 1, call)
	})
	g, v := got["sessions=1"]["gateway"], got["sessions=1"]["gateway+virtual"]
	if g.callsPerSec > 0 && v.callsPerSec > 0 {
		d := v.cpuPerOp - g.cpuPerOp
		fmt.Fprintf(os.Stdout, "ratio CallVirtual sessions=1: cpu-µs/op %.1f → %.1f (%+.1f µs); p50 %.0f → %.0f µs; budget: ≤ +10 µs of CPU per call: %s\n",
			g.cpuPerOp, v.cpuPerOp, d, µs(g.p50), µs(v.p50), verdict(d <= 10))
	}
}

// BenchmarkCallEchoRedact measures what a policy module costs on the hot
// path: 8 sessions calling echo through a gateway without policies and
// through one where the redact-secrets example module inspects every call's
// arguments and every result (deadline enforcement on).
func BenchmarkCallEchoRedact(b *testing.B) {
	up := serveMCP(b, newBenchServer())
	mod := filepath.Join(b.TempDir(), "redact.wasm")
	if err := os.WriteFile(mod, wasmtest.Example(b, "redact-secrets"), 0o600); err != nil {
		b.Fatal(err)
	}
	cache, err := wasmtest.CompileCacheDir()
	if err != nil {
		b.Fatal(err)
	}
	plain, _ := startGateway(b, serversJSON(fmt.Sprintf(`"up": {"url": %q}`, up)), Options{PageSize: 1000})
	redact, _ := startGateway(b, fmt.Sprintf(`{"mcpServers": {"up": {"url": %q}},
		"policies": [{"name": "redact", "module": %q, "tools": ["*"]}]}`, up, mod), Options{PageSize: 1000, PolicyCacheDir: cache})
	env := benchEnv{urls: map[string]string{"gateway": plain, "gateway+redact": redact}, paths: []string{"gateway", "gateway+redact"}}
	got := benchPair(b, env, []string{"sessions=8"}, func(b *testing.B, url, _ string) figures {
		css := newBenchClient(url).sessions(b, 8)
		for _, cs := range css {
			if err := callEcho(b.Context(), cs); err != nil {
				b.Fatal(err)
			}
		}
		return runOps(b, 8, func(ctx context.Context, w int) error { return callEcho(ctx, css[w]) })
	})
	g, r := got["sessions=8"]["gateway"], got["sessions=8"]["gateway+redact"]
	if g.callsPerSec > 0 && r.callsPerSec > 0 {
		ratio := r.callsPerSec / g.callsPerSec
		fmt.Fprintf(os.Stdout, "ratio CallEchoRedact sessions=8: calls/s %.0f → %.0f (%.2fx); p50 %.0f → %.0f µs; budget: calls/s with redact-secrets %.0f%% of without ≥ 70%%: %s\n",
			g.callsPerSec, r.callsPerSec, ratio, µs(g.p50), µs(r.p50), 100*ratio, verdict(ratio >= 0.7))
	}
}
