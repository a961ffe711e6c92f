package gateway

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edge-mcp/edge-mcp/policy/intercept"
	"github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

// BenchmarkCallEchoInterceptors measures what one interceptor costs per
// tools/call: one session calling echo sequentially through a gateway
// without a chain, with one remote validator (an interceptor server on
// 127.0.0.1, streamable HTTP) and with one Wasm validator
// (cross-boundary-guard, ABI 1.1, as a module entry).
func BenchmarkCallEchoInterceptors(b *testing.B) {
	up := serveMCP(b, newBenchServer())
	ics := serveInterceptors(b, icValidator("acme/no-secret", "tools/call", intercept.Request, "SECRET"))
	mod := filepath.Join(b.TempDir(), "guard.wasm")
	if err := os.WriteFile(mod, wasmtest.Example(b, "cross-boundary-guard"), 0o600); err != nil {
		b.Fatal(err)
	}
	cache, err := wasmtest.CompileCacheDir()
	if err != nil {
		b.Fatal(err)
	}
	opts := Options{PageSize: 1000, PolicyCacheDir: cache}
	plain, _ := startGateway(b, serversJSON(fmt.Sprintf(`"up": {"url": %q}`, up)), opts)
	remote, _ := startGateway(b, fmt.Sprintf(`{"mcpServers": {"up": {"url": %q}},
		"interceptorServers": {"acme": {"url": %q}}, "interceptors": [{"server": "acme"}]}`, up, ics), opts)
	wasm, _ := startGateway(b, fmt.Sprintf(`{"mcpServers": {"up": {"url": %q}},
		"policies": [{"name": "guard", "module": %q}], "interceptors": [{"module": "guard"}]}`, up, mod), opts)
	env := benchEnv{urls: map[string]string{"gateway": plain, "gateway+remote": remote, "gateway+wasm": wasm},
		paths: []string{"gateway", "gateway+remote", "gateway+wasm"}}
	benchPair(b, env, []string{"sessions=1"}, func(b *testing.B, url, _ string) figures {
		css := newBenchClient(url).sessions(b, 1)
		if err := callEcho(b.Context(), css[0]); err != nil {
			b.Fatal(err)
		}
		return runOps(b, 1, func(ctx context.Context, w int) error { return callEcho(ctx, css[w]) })
	})
}

// slowValidator passes every tools/call request after d.
func slowValidator(name string, d time.Duration) intercept.Interceptor {
	return &intercept.Func{Desc: intercept.Descriptor{Name: name, Type: intercept.Validation,
		Hooks: []intercept.Hook{{Events: []string{"tools/call"}, Phase: intercept.Request}}},
		Fn: func(ctx context.Context, _ *intercept.Invocation) (*intercept.Result, error) {
			select {
			case <-time.After(d):
				return intercept.Pass(), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}}
}

// BenchmarkCallEchoSlowValidators shows through the gateway that
// validators run concurrently: one session calling echo sequentially
// through a gateway without a chain, with one validator that takes 5 ms
// and with four of them (each an interceptor of a server on 127.0.0.1):
// four add about what one adds, not four times as much.
func BenchmarkCallEchoSlowValidators(b *testing.B) {
	up := serveMCP(b, newBenchServer())
	const d = 5 * time.Millisecond
	one := serveInterceptors(b, slowValidator("slow/a", d))
	four := serveInterceptors(b, slowValidator("slow/a", d), slowValidator("slow/b", d), slowValidator("slow/c", d), slowValidator("slow/d", d))
	opts := Options{PageSize: 1000}
	chain := func(ics string) string {
		return fmt.Sprintf(`{"mcpServers": {"up": {"url": %q}},
		"interceptorServers": {"slow": {"url": %q}}, "interceptors": [{"server": "slow"}]}`, up, ics)
	}
	plain, _ := startGateway(b, serversJSON(fmt.Sprintf(`"up": {"url": %q}`, up)), opts)
	g1, _ := startGateway(b, chain(one), opts)
	g4, _ := startGateway(b, chain(four), opts)
	env := benchEnv{urls: map[string]string{"gateway": plain, "gateway+1x5ms": g1, "gateway+4x5ms": g4},
		paths: []string{"gateway", "gateway+1x5ms", "gateway+4x5ms"}}
	benchPair(b, env, []string{"sessions=1"}, func(b *testing.B, url, _ string) figures {
		css := newBenchClient(url).sessions(b, 1)
		if err := callEcho(b.Context(), css[0]); err != nil {
			b.Fatal(err)
		}
		return runOps(b, 1, func(ctx context.Context, w int) error { return callEcho(ctx, css[w]) })
	})
}
