// Command interceptors-conformance replays the SEP-2624 interceptor
// conformance fixtures (testdata/interceptors-conformance, copied from
// modelcontextprotocol/experimental-ext-interceptors) through edge-mcp's
// interceptor chain (policy/intercept) with real interceptors: the
// fixture vocabulary's validators and mutators in Go, the security
// behaviors as the shipped Wasm modules (wasm-examples/cross-boundary-guard
// and secretless-redactor; -build c picks their C builds, wasm-examples/*/c,
// instead of the Go ones; -build as the AssemblyScript build of
// secretless-redactor, wasm-examples/secretless-redactor/as, beside the C
// build of cross-boundary-guard). With -remote the interceptors are hosted by an
// interceptor server over streamable HTTP on 127.0.0.1 and reached through
// runtime/interceptors. It prints one line per fixture and, last,
// "N passed, M failed"; the exit status is 1 when a fixture failed.
//
//	go tool task interceptors-conformance
package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/edge-mcp/edge-mcp/policy/intercept/conformance"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

func main() {
	dir := flag.String("dir", "", "the conformance directory (default: testdata/interceptors-conformance of the module)")
	remote := flag.Bool("remote", false, "host the interceptors out of process, behind an interceptor server over streamable HTTP")
	build := flag.String("build", "go", "the build of the security modules: go (wasm-examples/<name>), c (wasm-examples/<name>/c, needs clang) or as (secretless-redactor/as, needs asc, and the C guard)")
	flag.Parse()
	if err := run(context.Background(), *dir, *remote, *build); err != nil {
		fmt.Fprintln(os.Stderr, "interceptors-conformance:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dir string, remote bool, build string) error {
	r, err := replayFixtures(ctx, dir, remote, build, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	for _, l := range r.Lines {
		fmt.Println(l)
	}
	if r.Failed > 0 {
		return fmt.Errorf("%d fixtures failed", r.Failed)
	}
	return nil
}

// replayFixtures replays every fixture under dir in process or remotely,
// with the security modules' build named by build ("go", "c" or "as").
func replayFixtures(ctx context.Context, dir string, remote bool, build string, log *slog.Logger) (conformance.Report, error) {
	if dir == "" {
		root, err := wasmtest.ModuleRoot()
		if err != nil {
			return conformance.Report{}, err
		}
		dir = filepath.Join(root, "testdata", "interceptors-conformance")
	}
	fixtures, err := conformance.Load(dir)
	if err != nil {
		return conformance.Report{}, err
	}
	mods, err := loadModules(ctx, build)
	if err != nil {
		return conformance.Report{}, err
	}
	defer mods.eng.Close(ctx)
	var h conformance.Host = &local{mods: mods, log: log}
	if remote {
		rh, err := newRemote(ctx, mods, log)
		if err != nil {
			return conformance.Report{}, err
		}
		defer rh.close()
		h = rh
	}
	return conformance.ReplayAll(ctx, h, fixtures), nil
}

// loadModules builds the security modules and starts an engine.
func loadModules(ctx context.Context, build string) (*modules, error) {
	guard, redac, err := buildModules(build)
	if err != nil {
		return nil, err
	}
	cache, err := wasmtest.CompileCacheDir()
	if err != nil {
		return nil, err
	}
	eng, err := policy.NewEngine(ctx, policy.EngineConfig{CacheDir: cache})
	if err != nil {
		return nil, err
	}
	return &modules{eng: eng, guard: guard, redac: redac}, nil
}

// buildModules builds cross-boundary-guard and secretless-redactor: the Go
// packages, or their C builds (into a temporary directory), or the C guard
// and the AssemblyScript redactor.
func buildModules(build string) (guard, redac []byte, err error) {
	switch build {
	case "go", "":
		if guard, err = wasmtest.BuildPackage("wasm-examples/cross-boundary-guard"); err != nil {
			return nil, nil, err
		}
		redac, err = wasmtest.BuildPackage("wasm-examples/secretless-redactor")
		return guard, redac, err
	case "c", "as":
		dir, err := os.MkdirTemp("", "interceptors-conformance-")
		if err != nil {
			return nil, nil, fmt.Errorf("building the %s modules: %w", build, err)
		}
		defer os.RemoveAll(dir)
		if guard, err = wasmtest.CExample("cross-boundary-guard", dir); err != nil {
			return nil, nil, err
		}
		if build == "as" {
			redac, err = wasmtest.ASExample("secretless-redactor", dir)
		} else {
			redac, err = wasmtest.CExample("secretless-redactor", dir)
		}
		return guard, redac, err
	}
	return nil, nil, fmt.Errorf("unknown build %q (go, c, as)", build)
}
