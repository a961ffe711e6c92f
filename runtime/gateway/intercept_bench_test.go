package gateway

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

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
