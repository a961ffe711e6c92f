package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

// realisticText returns about n bytes of tool output: log lines with
// words, paths, URLs, numbers and one live-looking secret near the end.
func realisticText(n int) string {
	lines := []string{
		"2025-11-29T12:04:05Z INFO request served path=/api/v1/items?page=2 status=200 duration_ms=12.4 bytes=5120",
		"Found 17 matching documents in repository edge-mcp/edge-mcp (branch main, commit 4f2a9c1).",
		"The deployment of service checkout-api to cluster eu-west-1 completed; 3 of 3 replicas are ready.",
		"See https://docs.example.com/guides/getting-started#install for installation instructions and FAQ.",
		"order_id=88231 customer=ACME Corp total=149.90 EUR items=[widget, gadget, sprocket] shipped=true",
	}
	var b strings.Builder
	for i := 0; b.Len() < n-80; i++ {
		b.WriteString(lines[i%len(lines)])
		b.WriteByte('\n')
	}
	b.WriteString("token=ghp_0123456789abcdefghijABCDEFGHIJ012345\n")
	return b.String()
}

func percentile(d []time.Duration, p float64) float64 {
	slices.Sort(d)
	return float64(d[int(float64(len(d)-1)*p)].Nanoseconds()) / 1e3
}

// BenchmarkRedactToolResult measures one tool_result hook of redact-secrets
// through the chain, with the deadline enforcement on (50 ms timeout), and
// reports p50/p99 per call.
func BenchmarkRedactToolResult(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			m := load(b, "redact", ModuleOptions{PoolSize: 1, Timeout: 50 * time.Millisecond})
			benchResult(b, m, size)
		})
	}
}

// BenchmarkRedactToolResultCloseOnContextDone is the same with wazero's
// own deadline enforcement (RuntimeConfig.WithCloseOnContextDone), for
// comparison with the default metering.
func BenchmarkRedactToolResultCloseOnContextDone(b *testing.B) {
	ctx := context.Background()
	dir, err := wasmtest.CompileCacheDir()
	if err != nil {
		b.Fatal(err)
	}
	e, err := NewEngine(ctx, EngineConfig{CloseOnContextDone: true, CacheDir: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close(ctx)
	m, err := e.Load(ctx, "redact", guestWasm(b, "redact"), ModuleOptions{PoolSize: 1, Timeout: 50 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	for _, size := range []int{1 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) { benchResult(b, m, size) })
	}
}

func benchResult(b *testing.B, m *Module, size int) {
	c := chainOf(b, OnErrorDeny, m)
	in := ResultInput{Server: "s", Tool: "t", Result: textResult(realisticText(size))}
	ctx := context.Background()
	for range 50 { // warm the instance
		if _, err := c.ToolResult(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
	failures := m.Stats().Failures
	durs := make([]time.Duration, 0, b.N)
	b.SetBytes(int64(len(in.Result)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		out, err := c.ToolResult(ctx, in)
		durs = append(durs, time.Since(start))
		if err != nil || len(out) == 0 {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if strings.Contains(string(must(c.ToolResult(ctx, in))), "ghp_") {
		b.Fatal("secret not redacted")
	}
	if s := m.Stats(); s.Failures != failures {
		b.Fatalf("failures during benchmark: %+v", s)
	}
	b.ReportMetric(percentile(durs, 0.5), "p50-µs")
	b.ReportMetric(percentile(durs, 0.99), "p99-µs")
}

func must(r json.RawMessage, err error) json.RawMessage {
	if err != nil {
		panic(err)
	}
	return r
}

// BenchmarkToolCall measures the tool_call path: a tool with no policy, the
// bare ABI round trip (a hand-assembled module), and redact-secrets on
// small arguments.
func BenchmarkToolCall(b *testing.B) {
	ctx := context.Background()
	args := json.RawMessage(`{"query":"weather in Paris","limit":5,"filters":{"lang":"en"}}`)
	cases := []struct {
		name  string
		chain func(b *testing.B) *Chain
	}{
		{"no-policy", func(b *testing.B) *Chain {
			c, err := NewChain(Attachment{Module: loadBytes(b, "deny-all", denyAllWasm(), ModuleOptions{MemoryMB: 4}), Tools: []string{"other"}})
			if err != nil {
				b.Fatal(err)
			}
			return c
		}},
		{"abi-roundtrip", func(b *testing.B) *Chain {
			return chainOf(b, OnErrorDeny, loadBytes(b, "deny-all", denyAllWasm(), ModuleOptions{MemoryMB: 4, Timeout: 50 * time.Millisecond}))
		}},
		{"go-sdk-trivial", func(b *testing.B) *Chain {
			return chainOf(b, OnErrorDeny, load(b, "gohostile", ModuleOptions{PoolSize: 1, Timeout: 50 * time.Millisecond}))
		}},
		{"redact-args", func(b *testing.B) *Chain {
			return chainOf(b, OnErrorDeny, load(b, "redact", ModuleOptions{PoolSize: 1, Timeout: 50 * time.Millisecond}))
		}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			c := tc.chain(b)
			in := CallInput{Client: Client{ID: "alice"}, Server: "s", Tool: "t", Arguments: args}
			durs := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				if _, err := c.ToolCall(ctx, in); err != nil {
					b.Fatal(err)
				}
				durs = append(durs, time.Since(start))
			}
			b.StopTimer()
			b.ReportMetric(percentile(durs, 0.5), "p50-µs")
		})
	}
}

// BenchmarkLoad compares loading redact-secrets into a fresh engine with a
// cold compile against a warm start from a populated cache directory.
func BenchmarkLoad(b *testing.B) {
	ctx := context.Background()
	wasm := guestWasm(b, "redact")
	warmDir := filepath.Join(b.TempDir(), "cache")
	prime, err := NewEngine(ctx, EngineConfig{CacheDir: warmDir})
	if err != nil {
		b.Fatal(err)
	}
	m, err := prime.Load(ctx, "redact", wasm, ModuleOptions{PoolSize: 1})
	if err != nil {
		b.Fatal(err)
	}
	m.Close()
	prime.Close(ctx)
	for _, tc := range []struct {
		name string
		dir  func() string
	}{
		{"cold", func() string { return "" }},
		{"warm-cache-dir", func() string { return warmDir }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				e, err := NewEngine(ctx, EngineConfig{CacheDir: tc.dir()})
				if err != nil {
					b.Fatal(err)
				}
				m, err := e.Load(ctx, "redact", wasm, ModuleOptions{PoolSize: 1})
				if err != nil {
					b.Fatal(err)
				}
				m.Close()
				e.Close(ctx)
			}
		})
	}
	_ = os.RemoveAll(warmDir)
}
