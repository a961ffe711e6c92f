package policy

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/edge-mcp/edge-mcp/policy/intercept"
	w "github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

// BenchmarkInterceptorBuilds: a tools/call request through the executor
// with the security interceptors as Go builds (wasm-examples/<name>) and
// as C builds (wasm-examples/<name>/c on the C kit): none, one validator
// (the cross-boundary guard) and three interceptors (guard, secretless
// redactor and redact-secrets' tool_call as an ABI 1.0 validator, Go or
// C port), each of the other two alone, and the redactor before the guard
// (a mutator then a validator) and guard and port (two validators, run
// concurrently), to see where the time of three goes; and the
// AssemblyScript build of the redactor alone. Besides ns/op it reports the p50 and p99 of the calls in µs.
// Without clang it skips, and fails under CI.
//
//	go test -run '^$' -bench BenchmarkInterceptorBuilds -benchtime 2s ./policy
func BenchmarkInterceptorBuilds(b *testing.B) {
	ctx := context.Background()
	opts := ModuleOptions{PoolSize: 1, RecycleAfterCalls: -1}
	dir := b.TempDir()
	cGuard, err := w.CExample("cross-boundary-guard", dir)
	w.SkipOrFail(b, err)
	cRedactor, err := w.CExample("secretless-redactor", dir)
	w.SkipOrFail(b, err)
	builds := []struct {
		name                  string
		guard, redactor, port []byte
	}{
		{"go", w.Example(b, "cross-boundary-guard"), w.Example(b, "secretless-redactor"), w.Example(b, "redact-secrets")},
		{"c", cGuard, cRedactor, w.Port(b, "c")},
	}
	payload := json.RawMessage(`{"name":"write_query","arguments":{"query":"INSERT INTO notes (body) VALUES ('hello, world')"}}`)
	ev := intercept.Event{Event: "tools/call", Phase: intercept.Request, Payload: payload, Context: &intercept.Context{SessionID: "s", Server: "db"}}
	b.Run("none", func(b *testing.B) { benchChain(ctx, b, nil, ev) })
	for _, bd := range builds {
		guard := oneInterceptor(ctx, b, loadBytes(b, bd.name+"-guard", bd.guard, opts))
		redactor := oneInterceptor(ctx, b, loadBytes(b, bd.name+"-redactor", bd.redactor, opts))
		port := loadBytes(b, bd.name+"-redact", bd.port, ModuleOptions{}).LegacyInterceptors()[0] // redact/tool_call
		b.Run(bd.name+"/validator=1", func(b *testing.B) { benchChain(ctx, b, guard, ev) })
		b.Run(bd.name+"/redactor=1", func(b *testing.B) { benchChain(ctx, b, redactor, ev) })
		b.Run(bd.name+"/abi10-tool_call=1", func(b *testing.B) { benchChain(ctx, b, []intercept.Interceptor{port}, ev) })
		b.Run(bd.name+"/mutator+validator", func(b *testing.B) {
			benchChain(ctx, b, []intercept.Interceptor{redactor[0], guard[0]}, ev)
		})
		b.Run(bd.name+"/validators=2", func(b *testing.B) {
			benchChain(ctx, b, []intercept.Interceptor{guard[0], port}, ev)
		})
		b.Run(bd.name+"/interceptors=3", func(b *testing.B) {
			benchChain(ctx, b, []intercept.Interceptor{guard[0], redactor[0], port}, ev)
		})
	}
	b.Run("as/redactor=1", func(b *testing.B) {
		wasm, err := w.ASExample("secretless-redactor", dir)
		w.SkipOrFail(b, err)
		benchChain(ctx, b, oneInterceptor(ctx, b, loadBytes(b, "as-redactor", wasm, opts)), ev)
	})
}

func oneInterceptor(ctx context.Context, b *testing.B, m *Module) []intercept.Interceptor {
	b.Helper()
	ics, err := m.Interceptors(ctx)
	if err != nil || len(ics) != 1 {
		b.Fatalf("module %s: %d interceptors, %v", m.Name(), len(ics), err)
	}
	return ics
}

// benchChain runs ev through a chain of ics and reports the p50 and p99
// of the calls besides the mean.
func benchChain(ctx context.Context, b *testing.B, ics []intercept.Interceptor, ev intercept.Event) {
	var ms []intercept.Member
	for _, ic := range ics {
		ms = append(ms, intercept.Member{Interceptor: ic})
	}
	c, err := intercept.NewChain(intercept.Options{}, ms...)
	if err != nil {
		b.Fatal(err)
	}
	durs := make([]time.Duration, 0, 1<<16)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		if _, err := c.Run(ctx, ev); err != nil {
			b.Fatal(err)
		}
		if len(durs) < cap(durs) {
			durs = append(durs, time.Since(start))
		}
	}
	b.StopTimer()
	slices.Sort(durs)
	if n := len(durs); n > 0 {
		b.ReportMetric(float64(durs[n/2].Nanoseconds())/1e3, "p50-µs")
		b.ReportMetric(float64(durs[n*99/100].Nanoseconds())/1e3, "p99-µs")
	}
}
