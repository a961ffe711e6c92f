// Package wasmtest helps tests use policy modules: it builds Go guests
// (wasm-examples, test fixtures) with GOOS=wasip1 once per test binary,
// provides a persistent compilation cache directory so that repeated test
// runs skip wazero's compile step, caches the kit builds (clang, rustc,
// asc) across test processes by a hash of their inputs (KitModule), and
// assembles tiny hand-written modules
// (Assembler) for ABI edge cases no Go guest can produce.
package wasmtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

var (
	rootOnce sync.Once
	rootDir  string
	rootErr  error

	buildMu sync.Mutex
	builds  = map[string]*buildResult{}
)

type buildResult struct {
	once sync.Once
	wasm []byte
	err  error
}

// ModuleRoot returns the directory of the edge-mcp Go module (the one
// holding go.mod), found from the current directory.
func ModuleRoot() (string, error) {
	rootOnce.Do(func() {
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			rootErr = fmt.Errorf("go env GOMOD: %w", err)
			return
		}
		gomod := strings.TrimSpace(string(out))
		if gomod == "" || gomod == os.DevNull {
			rootErr = fmt.Errorf("not inside a Go module")
			return
		}
		rootDir = filepath.Dir(gomod)
	})
	return rootDir, rootErr
}

// CacheDir returns a persistent per-user directory for test artefacts
// ($EDGE_MCP_TEST_CACHE, else <user cache dir>/edge-mcp-test), created with
// mode 0700.
func CacheDir() (string, error) {
	dir := os.Getenv("EDGE_MCP_TEST_CACHE")
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		dir = filepath.Join(base, "edge-mcp-test")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating test cache dir: %w", err)
	}
	return dir, nil
}

// CompileCacheDir returns the persistent directory tests should pass as
// policy.EngineConfig.CacheDir, so that only the first run on a machine
// pays for compiling the Go guests.
func CompileCacheDir() (string, error) {
	dir, err := cacheSubdir("wazero")
	if err != nil {
		return "", err
	}
	return dir, os.Chmod(dir, 0o700)
}

// cacheSubdir returns CacheDir()/name, created with mode 0700.
func cacheSubdir(name string) (string, error) {
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating test cache dir %s: %w", dir, err)
	}
	return dir, nil
}

// BuildPackage builds the Go package in dir (relative to the module root,
// e.g. "wasm-examples/redact-secrets") as a wasip1 reactor and returns the
// module bytes. Each package is built once per process; concurrent callers
// share the build.
func BuildPackage(dir string) ([]byte, error) {
	buildMu.Lock()
	r, ok := builds[dir]
	if !ok {
		r = &buildResult{}
		builds[dir] = r
	}
	buildMu.Unlock()
	r.once.Do(func() { r.wasm, r.err = build(dir) })
	return r.wasm, r.err
}

func build(dir string) ([]byte, error) {
	root, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	outDir, err := cacheSubdir("wasm")
	if err != nil {
		return nil, err
	}
	name := strings.NewReplacer("/", "_", `\`, "_", ".", "_").Replace(dir)
	final := filepath.Join(outDir, name+".wasm")
	// Build to a private file and rename it into place, so parallel test
	// binaries never read a half-written module.
	tmp := filepath.Join(outDir, name+"."+strconv.Itoa(os.Getpid())+".tmp")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-o", tmp, "./"+filepath.ToSlash(dir))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		_ = os.Remove(tmp)
		return nil, fmt.Errorf("building %s for wasip1: %w\n%s", dir, err, stderr.String())
	}
	if err := os.Rename(tmp, final); err != nil {
		_ = os.Remove(tmp)
		return nil, fmt.Errorf("installing %s: %w", final, err)
	}
	wasm, err := os.ReadFile(final)
	if err != nil {
		return nil, fmt.Errorf("reading built module: %w", err)
	}
	return wasm, nil
}

// Build is BuildPackage for tests: it fails tb on error.
func Build(tb testing.TB, dir string) []byte {
	tb.Helper()
	wasm, err := BuildPackage(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return wasm
}

// Example builds wasm-examples/<name>.
func Example(tb testing.TB, name string) []byte {
	tb.Helper()
	return Build(tb, "wasm-examples/"+name)
}
