package policy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

// redactBuild returns the redact-secrets module in lang: the Go example or
// a port built with its kit (wasm-examples/redact-secrets/<lang>).
func redactBuild(b *testing.B, lang string) []byte {
	b.Helper()
	if lang == "go" {
		return guestWasm(b, "redact")
	}
	return wasmtest.Port(b, lang)
}

// BenchmarkRedactLanguages measures the same policy, redact-secrets, as
// a Go, Rust, C and AssemblyScript module and an Extism plugin (BENCHMARKS.md, "Modules in
// other languages"): cold load (compile + one instance) with the file size,
// instantiation of a compiled module, memory per instance, and the
// latency of hook calls on the vectors and on 1 KiB and 64 KiB results.
// Run: go test -run '^$' -bench BenchmarkRedactLanguages -benchtime 2s ./policy
func BenchmarkRedactLanguages(b *testing.B) {
	raw, err := os.ReadFile(filepath.Join("..", "wasm-examples", "redact-secrets", "vectors.json"))
	if err != nil {
		b.Fatal(err)
	}
	vectors, err := ParseTestVectors(raw)
	if err != nil {
		b.Fatal(err)
	}
	for _, lang := range append([]string{"go"}, wasmtest.PortLangs...) {
		b.Run("lang="+lang, func(b *testing.B) {
			wasm := redactBuild(b, lang)
			b.Run("load-cold", func(b *testing.B) { benchLoadCold(b, wasm) })
			pin := loadBytes(b, "redact-"+lang, wasm, ModuleOptions{PoolSize: 1})
			if err := pin.RunVectors(context.Background(), vectors); err != nil {
				b.Fatal(err)
			}
			b.Run("instantiate", func(b *testing.B) { benchInstantiate(b, wasm) })
			b.Run("vectors", func(b *testing.B) { benchVectors(b, pin, vectors) })
			for _, size := range []int{1 << 10, 64 << 10} {
				b.Run(fmt.Sprintf("result-%dKiB", size>>10), func(b *testing.B) { benchResult(b, pin, size) })
			}
		})
	}
}

// benchLoadCold: a fresh engine without a cache directory compiles the
// module and starts one instance.
func benchLoadCold(b *testing.B, wasm []byte) {
	ctx := context.Background()
	b.ReportMetric(float64(len(wasm)), "file-bytes")
	for range b.N {
		e, err := NewEngine(ctx, EngineConfig{})
		if err != nil {
			b.Fatal(err)
		}
		m, err := e.Load(ctx, "cold", wasm, ModuleOptions{PoolSize: 1})
		if err != nil {
			b.Fatal(err)
		}
		m.Close()
		e.Close(ctx)
	}
}

// benchInstantiate loads the module again while a pinned copy keeps it
// compiled, eight instances at a time: instantiation, _initialize, the ABI
// reads and edge_configure. It reports the linear memory and the host heap
// each instance holds.
func benchInstantiate(b *testing.B, wasm []byte) {
	ctx := context.Background()
	const pool = 8
	var linear, heap uint64
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		m, err := testEngine.Load(ctx, "inst", wasm, ModuleOptions{PoolSize: pool, Timeout: 5 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		for m.Stats().Instances < pool { // the pool fills in the background
			time.Sleep(100 * time.Microsecond)
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		linear = m.Stats().Memory / pool
		heap = (after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc)) / pool
		m.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/pool, "µs/instance")
	b.ReportMetric(float64(linear)/1024, "linear-KiB/instance")
	b.ReportMetric(float64(heap)/1024, "heap-KiB/instance")
}

// benchVectors calls the guest on each vector's input in turn (the raw
// hook call: input encoded once, output not decoded) and reports p50/p99.
func benchVectors(b *testing.B, m *Module, vs []TestVector) {
	ctx := context.Background()
	ins := make([]*hookInput, len(vs))
	for i := range vs {
		_, in, err := vs[i].check()
		if err != nil {
			b.Fatal(err)
		}
		ins[i] = in
	}
	durs := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		in := ins[i%len(ins)]
		start := time.Now()
		_, err := m.doCall(ctx, in.base.hook, in.encoded)
		durs = append(durs, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(percentile(durs, 0.5), "p50-µs")
	b.ReportMetric(percentile(durs, 0.99), "p99-µs")
}
