package wasmwarm

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

// guests are the Go guests the tests load (wasmtest.Example and Build).
var guests = []string{
	"wasm-examples/redact-secrets",
	"wasm-examples/tool-router",
	"wasm-examples/content-normalizer",
	"wasm-examples/cross-boundary-guard",
	"wasm-examples/secretless-redactor",
	"policy/testdata/hostile/gohostile",
	"policy/testdata/sessioncounter",
}

// TestWarmCompileCache builds every Go guest the tests load and compiles
// it into wasmtest.CompileCacheDir; a guest that does not build or load
// fails it.
func TestWarmCompileCache(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and compiles the Go guests")
	}
	start := time.Now()
	if err := warm(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d Go guests compiled into the test cache in %v", len(guests), time.Since(start).Round(time.Millisecond))
}

func warm(ctx context.Context) error {
	dir, err := wasmtest.CompileCacheDir()
	if err != nil {
		return err
	}
	eng, err := policy.NewEngine(ctx, policy.EngineConfig{CacheDir: dir})
	if err != nil {
		return err
	}
	defer eng.Close(ctx)
	errs := make([]error, len(guests))
	var wg sync.WaitGroup
	for i, g := range guests {
		wg.Go(func() { errs[i] = load(ctx, eng, g) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// load builds the guest as the tests do and loads it (compiling it into
// the cache), then closes it.
func load(ctx context.Context, eng *policy.Engine, dir string) error {
	wasm, err := wasmtest.BuildPackage(dir)
	if err != nil {
		return err
	}
	m, err := eng.Load(ctx, dir, wasm, policy.ModuleOptions{PoolSize: 1})
	if err != nil {
		return fmt.Errorf("loading %s: %w", dir, err)
	}
	return m.Close()
}
